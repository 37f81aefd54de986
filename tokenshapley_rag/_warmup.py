"""Compile the library's kernels ahead of the first real attribution.

The games, the candidate scan and the search are numba kernels compiled on first call and
cached on disk (``cache=True``: next to the package, or in ``NUMBA_CACHE_DIR``). Without a
warm-up the first attribution after an install pays that compilation (seconds). ``warm_up``
runs the pipeline once on the bundled demo passages, attributing a fixed answer and
streaming it, so every kernel an ordinary attribution calls is compiled and cached; the next
process loads them from the cache. ``tokenshapley warmup`` (run by ``make demo``) calls it.

Kernels that only run above a size threshold (the multi-threaded scan from about 2^20
query-entry cells, e.g. a 64-token answer over 16k context tokens) compile on their first
such call. The device search's host kernel is the exception: with the encoder on CUDA the
warm-up also searches the demo passages on the device, whose short context would not.
The engine's question embedder (loaded on the first bare answer to a question that names
nothing) is loaded and run too, so a service's first such answer does not pay for it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tokenshapley_rag._sources import demo_passages

__all__ = ["WarmupReport", "warm_up"]

# Numbers, a date, names, copied and invented words, two sentences: every branch of the
# support rule and the verbatim search runs.
WARMUP_ANSWER = (
    "The Eiffel Tower was completed on 31 March 1889 and is 330 metres tall. "
    "Big Ben was designed by Pierre Zorblat in 1860."
)


@dataclass(frozen=True)
class WarmupReport:
    """What :func:`warm_up` ran: seconds for the attribution and for the stream (each
    includes compiling whatever was not cached yet), the citations it produced, and seconds
    to load and run the question embedder (0 without one)."""

    attribute_seconds: float
    stream_seconds: float
    n_citations: int
    embedder_seconds: float = 0.0


def warm_up(ts: Any) -> WarmupReport:
    """Attribute and stream a fixed answer over the bundled demo passages with ``ts``.
    Run it before ``ts`` serves anything: the engine's size limits are lifted while it
    runs (the demo passages may be longer than they allow), and put back after.

    Examples
    --------
    >>> from tokenshapley_rag import TokenShapley  # doctest: +SKIP
    >>> warm_up(TokenShapley()).n_citations  # doctest: +SKIP
    9
    """
    question, sources = demo_passages()
    with _limits_lifted(ts):
        t0 = time.perf_counter()
        result = ts.attribute(query=question, sources=sources, response=WARMUP_ANSWER)
        t1 = time.perf_counter()
        stream = ts.stream(question, sources)
        for start in range(0, len(WARMUP_ANSWER), 24):
            stream.feed(WARMUP_ANSWER[start : start + 24])
        stream.finish()
        if ts.pipeline.builder.search_device is not None:
            _warm_device_search(ts, sources)
        t2 = time.perf_counter()
        embedder_seconds = 0.0
        if ts.pipeline.question_embedder is not None:
            ts.pipeline.question_embedder([question])
            embedder_seconds = time.perf_counter() - t2
    return WarmupReport(t1 - t0, t2 - t1, len(result.citations), embedder_seconds)


@contextmanager
def _limits_lifted(ts: Any) -> Iterator[None]:
    """``ts`` without its size limits for the warm-up: an engine configured to refuse
    sources longer than the demo passages (``tokenshapley serve --max-source-chars 10``)
    must still warm up, not fail to start. Put back after, whatever happens."""
    limits = ts.max_source_chars, ts.max_context_chars
    ts.max_source_chars = ts.max_context_chars = None
    try:
        yield
    finally:
        ts.max_source_chars, ts.max_context_chars = limits


def _warm_device_search(ts: Any, sources: Any) -> None:
    """One candidate search of the demo passages on the encoder's device (their context is
    below ``DEVICE_SEARCH_ABOVE``, so attributing them searches on the host), which
    compiles the device search's host kernel (``measure_kept_rows``)."""
    import numpy as np

    builder = ts.pipeline.builder
    threshold = builder.device_search_above
    builder.device_search_above = 0
    try:
        store = ts.build_datastore(sources)
    finally:
        builder.device_search_above = threshold
    m = min(ts.m, store.size)
    store.game_candidates(np.zeros((2, store.keys_width), np.float32), np.zeros(2, np.int64), m, m // 2)
