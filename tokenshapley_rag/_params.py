"""Declarative validation of the method's parameters (as scikit-learn's ``_param_validation``).

Each parameter lists the constraints it may satisfy; a value that satisfies none is refused
with a message naming what was expected and what was given. A value of a type no constraint
takes is an :class:`InvalidInputTypeError` (a ``TypeError``); a value of the right type outside
every range or set is an :class:`InvalidInputError` (a ``ValueError``).

>>> validate_params({"k": [Interval(int, 1, None)]}, {"k": 3})
>>> validate_params({"k": [Interval(int, 1, None)]}, {"k": 0})
Traceback (most recent call last):
...
tokenshapley_rag.errors.InvalidInputError: k must be an int in [1, inf), got 0
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, Literal

from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError

__all__ = ["Interval", "Options", "Boolean", "CallableObject", "NONE", "validate_params"]


@dataclass(frozen=True)
class Interval:
    """Numbers of ``kind`` (``int`` or ``float``; a float interval takes ints too, never a
    bool, never NaN) between ``low`` and ``high`` (None: unbounded), ``closed`` at the ends
    it names."""

    kind: type
    low: float | None
    high: float | None
    closed: Literal["both", "left", "right", "neither"] = "both"

    def takes_type(self, value: Any) -> bool:
        if isinstance(value, bool):
            return False
        return isinstance(value, Integral) if self.kind is int else isinstance(value, Real)

    def accepts(self, value: Any) -> bool:
        if not self.takes_type(value) or (self.kind is not int and not math.isfinite(float(value))):
            return False
        if self.low is not None and (value < self.low or (value == self.low and self.closed in ("right", "neither"))):
            return False
        return self.high is None or not (value > self.high or (value == self.high and self.closed in ("left", "neither")))

    def describe(self) -> str:
        left = "[" if self.closed in ("both", "left") and self.low is not None else "("
        right = "]" if self.closed in ("both", "right") and self.high is not None else ")"
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        noun = "an int" if self.kind is int else "a finite number"
        return f"{noun} in {left}{low}, {high}{right}"


@dataclass(frozen=True)
class Options:
    """One of ``values`` (compared with ``==``; of their type)."""

    values: tuple[Any, ...]

    def takes_type(self, value: Any) -> bool:
        return any(type(value) is type(v) for v in self.values)

    def accepts(self, value: Any) -> bool:
        return self.takes_type(value) and value in self.values

    def describe(self) -> str:
        return f"one of {', '.join(repr(v) for v in self.values)}"


@dataclass(frozen=True)
class Boolean:
    """``True`` or ``False`` (not 0 or 1)."""

    def takes_type(self, value: Any) -> bool:
        return isinstance(value, bool)

    accepts = takes_type

    def describe(self) -> str:
        return "a bool"


@dataclass(frozen=True)
class CallableObject:
    """A function or an object with ``__call__`` (not a class: pass an instance)."""

    def takes_type(self, value: Any) -> bool:
        return callable(value) and not isinstance(value, type)

    accepts = takes_type

    def describe(self) -> str:
        return "a callable"


@dataclass(frozen=True)
class _NoneConstraint:
    def takes_type(self, value: Any) -> bool:
        return value is None

    accepts = takes_type

    def describe(self) -> str:
        return "None"


#: The constraint "None is allowed".
NONE = _NoneConstraint()


def validate_params(constraints: Mapping[str, Sequence[Any]], params: Mapping[str, Any]) -> None:
    """Check every ``params[name]`` against ``constraints[name]`` (names without constraints
    are not checked).

    Raises
    ------
    InvalidInputTypeError
        A value whose type no constraint of its parameter takes.
    InvalidInputError
        A value of the right type that no constraint accepts.
    """
    for name, value in params.items():
        options = constraints.get(name)
        if options is None or any(c.accepts(value) for c in options):
            continue
        expected = " or ".join(c.describe() for c in options)
        error = InvalidInputError if any(c.takes_type(value) for c in options) else InvalidInputTypeError
        raise error(f"{name} must be {expected}, got {value!r}")
