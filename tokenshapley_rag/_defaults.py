"""The method's default parameters, importable without torch or numba (the CLI's help and
argument parsing read them before any model is needed)."""

from __future__ import annotations

__all__ = ["DEFAULT_APPROXIMATE_ABOVE", "DEFAULT_LAYER"]

# The hidden layer whose states are the datastore's keys and queries (docs/method.md §7).
DEFAULT_LAYER = 8

# Context tokens above which the candidate search probes the quantiser's lists instead of
# scanning every entry (docs/method.md §3; measured in docs/reports/performance.md).
DEFAULT_APPROXIMATE_ABOVE = 32_768
