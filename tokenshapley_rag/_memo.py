"""A small thread-safe least-recently-used memo (what TokenShapley remembers between calls)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

__all__ = ["LRUMemo"]


class LRUMemo:
    """A thread-safe least-recently-used dict of at most ``size`` items (what
    TokenShapley remembers between calls: datastores, source splits, sentence classes)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Any, Any] = OrderedDict()
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

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def values(self) -> list[Any]:
        with self._lock:
            return list(self._items.values())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
