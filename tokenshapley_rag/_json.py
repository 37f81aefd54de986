"""Plain JSON types out of result objects (shared by the evaluation reports)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["jsonable"]


def jsonable(x: Any) -> Any:
    """``x`` with mappings, lists, tuples and numpy scalars turned into JSON types, NaN into
    None (JSON has no NaN) and any other object into its ``str`` (paths, for instance).

    >>> jsonable({"a": np.float32(0.5), 1: (np.int64(2), float("nan"))})
    {'a': 0.5, '1': [2, None]}
    """
    if isinstance(x, Mapping):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)
