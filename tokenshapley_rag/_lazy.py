"""Module attributes imported on first use (PEP 562), for packages whose names pull in
heavy modules (torch, numba, the benchmark's protocols) that most callers never touch."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(namespace: dict[str, Any], names: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's ``__getattr__`` and ``__dir__`` for ``names`` (attribute -> module that
    defines it). The first access imports the module and stores the value in
    ``namespace`` (the module's ``globals()``), so later lookups skip ``__getattr__``.

    >>> ns = {"__name__": "demo"}
    >>> getattr_, dir_ = lazy_attributes(ns, {"sqrt": "math"})
    >>> getattr_("sqrt")(9.0), "sqrt" in ns, dir_()
    (3.0, True, ['__name__', 'sqrt'])
    """

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
