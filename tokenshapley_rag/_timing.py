"""Step timings of an attribution, recorded only when asked for.

The pipeline marks its steps with ``with step("encode_context"): ...``. Outside
:func:`record_steps` a step costs one context-variable lookup; inside, its wall time is added
to the recorder. Benchmarks read the steps instead of patching the library's functions, so
a renamed function cannot silently drop out of a timing table.

The recorder lives in a :class:`contextvars.ContextVar`: each thread and each asyncio task
sees its own (a stream fed from a worker thread records there only if the recording was
started in that thread).

>>> from tokenshapley_rag._timing import record_steps, step
>>> with record_steps() as steps:
...     with step("encode_answer"):
...         pass
>>> steps.calls["encode_answer"], steps.seconds["encode_answer"] >= 0.0
(1, True)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

__all__ = ["StepTimes", "record_steps", "step", "STEPS"]

#: The steps the pipeline marks, in pipeline order (the last eight inside ``assemble``). A
#: memoised datastore (the same sources again) skips the first five; ``question_game`` runs
#: only when an answer sentence says nothing but numbers, dates and names.
STEPS = (
    "segment",  # split the sources into sentences, look their keys up in the sentence cache
    "encode_context",  # encode the sentences the cache did not hold
    "store_keys",  # write their keys to the sentence cache
    "sentence_classes",  # the match class of every context token
    "index",  # build the datastore (keys, norms, class groups)
    "encode_answer",  # the query + answer pass (streaming: the new tokens)
    "answer_classes",  # the match class of every answer token
    "candidates",  # each answer token's players, by exact distance
    "distance_product",  # inside "candidates": the float32 matrix product that pre-selects them
    "games",  # the exact Shapley values of the token games, per sentence
    "assemble",  # keywords, support statuses, citations, verdicts; inside it:
    "sentence_facts",  # the datastore sentences' facts for the match rule (remembered per text)
    "holding",  # the keywords' facts and the sentences holding each (the match rule)
    "verbatim",  # the sentences holding each keyword word for word (token classes, text)
    "context_games",  # each keyword's context game per sentence
    "statuses",  # the predicate game and each keyword's status; inside it:
    "question_game",  # a bare answer sentence's predicate: the question's token games
    "citations",  # cited sources ranked, citation objects, sentence verdicts
    "scores",  # sentence and source scores, the result object
)


@dataclass
class StepTimes:
    """Wall seconds and calls per step label."""

    seconds: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def add(self, label: str, seconds: float) -> None:
        self.seconds[label] = self.seconds.get(label, 0.0) + seconds
        self.calls[label] = self.calls.get(label, 0) + 1


_RECORDER: ContextVar[StepTimes | None] = ContextVar("tokenshapley_step_times", default=None)


@contextmanager
def step(label: str) -> Iterator[None]:
    """Time the enclosed block as ``label`` when a recording is active."""
    recorder = _RECORDER.get()
    if recorder is None:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        recorder.add(label, time.perf_counter() - start)


@contextmanager
def record_steps() -> Iterator[StepTimes]:
    """Record the steps run inside the block (nested recordings each see their own)."""
    recorder = StepTimes()
    token = _RECORDER.set(recorder)
    try:
        yield recorder
    finally:
        _RECORDER.reset(token)
