"""A small thread-safe least-recently-used memo (what TokenShapley remembers between calls)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

__all__ = ["LRUMemo"]


class LRUMemo:
    """A thread-safe least-recently-used dict of at most ``size`` items (what
    TokenShapley remembers between calls: datastores, source splits, sentence classes),
    and, with ``max_weight``, of at most that total weight (each item's weight given to
    :meth:`put`, e.g. its tokens): the least recently used items go first.

    >>> memo = LRUMemo(8, max_weight=10)
    >>> memo.put("a", 1, weight=6); memo.put("b", 2, weight=6); memo.get("a"), memo.get("b")
    (None, 2)
    """

    def __init__(self, size: int, *, max_weight: int | None = None) -> None:
        self.size = size
        self.max_weight = max_weight
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._weights: dict[Any, int] = {}
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def get_many(self, keys: list[Any]) -> list[Any]:
        """:meth:`get` of each key (None where missing), under one lock: a long context
        looks up thousands of sentences per call, and the lock dominated each lookup."""
        items = self._items
        with self._lock:
            values = [items.get(key) for key in keys]
            for key, value in zip(keys, values):
                if value is not None:
                    items.move_to_end(key)
        return values

    def put(self, key: Any, value: Any, *, weight: int = 1) -> None:
        """Remember ``value`` under ``key``; an item heavier than ``max_weight`` on its own
        is not kept."""
        with self._lock:
            self._weight -= self._weights.pop(key, 0)
            self._items.pop(key, None)
            if self.max_weight is not None and weight > self.max_weight:
                return
            self._items[key] = value
            self._weights[key] = weight
            self._weight += weight
            while len(self._items) > self.size or (self.max_weight is not None and self._weight > self.max_weight):
                old, _ = self._items.popitem(last=False)
                self._weight -= self._weights.pop(old)

    def values(self) -> list[Any]:
        with self._lock:
            return list(self._items.values())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._weights.clear()
            self._weight = 0

    def __len__(self) -> int:
        return len(self._items)
