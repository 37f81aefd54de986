"""Span attributors for evaluation: TokenShapley itself, and the factory the CLI uses."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from tokenshapley_rag._attribution import TokenShapley
from tokenshapley_rag._baselines import BASELINE_NAMES, SpanAttributor, make_baseline
from tokenshapley_rag.errors import InvalidInputError
from tokenshapley_rag.eval._data import AttributionExample

__all__ = ["TokenShapleyAttributor", "make_attributor", "METHOD_NAMES"]

METHOD_NAMES: tuple[str, ...] = ("tokenshapley", *BASELINE_NAMES)


class TokenShapleyAttributor:
    """Scores each gold span by the summed Shapley values of the answer tokens that overlap
    it, per source (:meth:`AttributionResult.span_scores`).

    The whole gold answer is attributed once (teacher-forced, as the paper's protocol);
    the datastore of repeated sources comes from the sentence cache.
    """

    name = "tokenshapley"

    def __init__(self, ts: TokenShapley) -> None:
        self.ts = ts

    @property
    def config(self) -> dict[str, Any]:
        return self.ts.config

    def score_spans(self, example: AttributionExample) -> np.ndarray:
        res = self.ts.attribute(query=example.question, sources=example.sources, response=example.answer)
        ids = [s.id for s in example.sources]
        rows = []
        for span in example.spans:
            per_source = res.span_scores(span.start, span.end)
            rows.append([per_source[i] for i in ids])
        return np.asarray(rows, dtype=np.float64).reshape(len(example.spans), len(ids))


def make_attributor(name: str, args: argparse.Namespace | Any) -> SpanAttributor:
    """Build the method named on the command line (``--method``)."""
    if name in BASELINE_NAMES:
        return make_baseline(name)
    if name == "tokenshapley":
        # Only the options given on the command line; TokenShapley's own defaults otherwise.
        options = {
            key: getattr(args, key)
            for key in ("model", "layer", "k", "m", "candidates", "match", "context_weight", "context_scale", "cache_dir")
            if getattr(args, key, None) is not None
        }
        ts = TokenShapley(**options)
        return TokenShapleyAttributor(ts)
    raise InvalidInputError(f"unknown method {name!r}; choose one of {', '.join(METHOD_NAMES)}")
