"""Span-accuracy evaluation of a :class:`~tokenshapley_rag.benchmark._baselines.SpanAttributor`.

:func:`run_span_eval` scores every gold span of every example (original source order and,
with order control, the permutations of :data:`SOURCE_PERMUTATION_SEEDS`), writes one JSON
line per finished example to an optional *partial* file so a killed run can resume, and
returns an :class:`EvalReport`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm.auto import tqdm

from tokenshapley_rag._json import jsonable
from tokenshapley_rag.benchmark._data import (
    SPAN_CHECKS,
    SPAN_DATASETS,
    AttributionExample,
    DatasetFormatError,
)
from tokenshapley_rag.benchmark._metrics import (
    SOURCE_PERMUTATION_SEEDS,
    SPAN_CLASSES,
    best_source,
    permute_example,
    span_class,
)
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError

if TYPE_CHECKING:  # _baselines imports _data, which this package imports first
    from tokenshapley_rag.benchmark._baselines import SpanAttributor

__all__ = ["EvalReport", "emit_report", "partial_path", "run_span_eval"]


@dataclass(frozen=True, slots=True)
class EvalReport:
    """Result of one evaluation run.

    Parameters
    ----------
    dataset : str
        Set name (``"quotesum"``, ...).
    method : str
        The attributor's ``name``.
    n : int
        Examples scored (answers with at least one span).
    metrics : dict
        For span sets: ``accuracy``, ``accuracy_order_controlled``, ``answer_accuracy``,
        ``answer_accuracy_order_controlled`` (fractions in [0, 1]; the order-controlled
        ones are None without order control), ``per_class`` (``{class: {"n", "accuracy",
        "accuracy_order_controlled"}}`` for every class of ``SPAN_CLASSES``, accuracies
        None when n = 0), ``n_spans``, ``n_answers``, ``n_skipped_no_spans``,
        ``n_spans_tied`` (spans whose top score is shared by several sources, original order).
    seconds_per_example : float
        Mean wall-clock seconds of one ``score_spans`` call in the original order (resumed
        rows keep the time measured when they ran).
    config : dict
        How the run was made (order control, seeds, tie rule, matching, resume counts, and
        whatever the caller adds, e.g. data dir and limit).
    records : tuple of dict
        Per-example results (the rows of the partial file), in example order. Not part of
        :meth:`to_json`.
    """

    dataset: str
    method: str
    n: int
    metrics: dict[str, Any]
    seconds_per_example: float
    config: dict[str, Any]
    records: tuple[dict[str, Any], ...] = field(default=(), repr=False)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict ``{"dataset", "method", "n", "metrics", "seconds_per_example", "config"}``."""
        return {
            "dataset": self.dataset,
            "method": self.method,
            "n": int(self.n),
            "metrics": jsonable(self.metrics),
            "seconds_per_example": float(self.seconds_per_example),
            "config": jsonable(self.config),
        }


def _check_scores(scores: Any, example: AttributionExample, method: str) -> np.ndarray:
    arr = np.asarray(scores, dtype=np.float64)
    want = (len(example.spans), len(example.sources))
    if arr.shape != want:
        raise InvalidInputError(
            f"{method}.score_spans({example.id!r}) returned shape {arr.shape}, expected "
            f"(n_spans, n_sources) = {want}"
        )
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError(f"{method}.score_spans({example.id!r}) returned non-finite scores")
    return arr


def _score_example(
    attributor: SpanAttributor, example: AttributionExample, seeds: tuple[int, ...]
) -> dict[str, Any]:
    method = attributor.name
    t0 = time.perf_counter()
    scores = _check_scores(attributor.score_spans(example), example, method)
    seconds = time.perf_counter() - t0
    ids = example.source_ids
    spans: list[dict[str, Any]] = []
    for i, span in enumerate(example.spans):
        row = scores[i]
        pred = ids[best_source(row)]
        spans.append(
            {
                "start": span.start,
                "end": span.end,
                "class": span_class(example, span),
                "gold": list(span.source_ids),
                "pred": pred,
                "correct": pred in span.source_ids,
                "n_top": int(np.sum(row == row.max())),
                "pred_perm": [],
                "correct_perm": [],
            }
        )
    for seed in seeds:
        permuted, _ = permute_example(example, seed)
        pscores = _check_scores(attributor.score_spans(permuted), permuted, method)
        pids = permuted.source_ids
        for i, span in enumerate(permuted.spans):
            pred = pids[best_source(pscores[i])]
            spans[i]["pred_perm"].append(pred)
            spans[i]["correct_perm"].append(pred in span.source_ids)
    return {
        "id": example.id,
        "n_sources": len(example.sources),
        "seconds": seconds,
        "seconds_total": time.perf_counter() - t0,
        "spans": spans,
    }


def emit_report(out: dict[str, Any], json_out: str | Path | None) -> None:
    """Print a report's JSON (``out``) on stdout, and write it to ``json_out`` too when given
    (its folder is created)."""
    text = json.dumps(out, indent=2, ensure_ascii=False)
    if json_out is not None:
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(json_out).write_text(text + "\n", encoding="utf-8")
    print(text)


def partial_path(json_out: str | Path) -> Path:
    """The per-example partial file of a ``--json OUT`` report: ``OUT.partial.jsonl``.

    Examples
    --------
    >>> partial_path("out/qs.json").name
    'qs.json.partial.jsonl'
    """
    p = Path(json_out)
    return p.with_name(p.name + ".partial.jsonl")


def _read_partial(path: Path, header: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Rows of a partial file keyed by id; drops a truncated tail and duplicate ids."""
    done: dict[str, dict[str, Any]] = {}
    dirty = False
    with path.open(encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if any(rest.strip() for rest in lines[lineno:]):
                raise DatasetFormatError(
                    f"{path}:{lineno}: corrupt line in the middle of the partial file"
                ) from None
            dirty = True  # a run killed mid-write leaves one truncated last line
            continue
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            raise DatasetFormatError(f"{path}:{lineno}: not a result row (no string 'id')")
        for key, want in header.items():
            if row.get(key) != want:
                raise InvalidInputError(
                    f"{path}:{lineno}: partial file was written with {key}={row.get(key)!r}, "
                    f"this run has {key}={want!r}; use another --json/--resume path or delete it"
                )
        if row["id"] in done:
            dirty = True
            continue
        done[row["id"]] = row
    if dirty:  # rewrite atomically without the broken tail / duplicates
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for row in done.values():
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    return done


def _mean(xs: Sequence[bool] | Sequence[float]) -> float | None:
    return float(np.mean(xs)) if len(xs) else None


def _metrics(rows: Sequence[Mapping[str, Any]], n_seeds: int) -> dict[str, Any]:
    spans = [s for r in rows for s in r["spans"]]
    oc = n_seeds > 0

    def acc_oc(ss: Sequence[Mapping[str, Any]]) -> float | None:
        if not oc or not ss:
            return None
        return float(np.mean([np.mean([s["correct_perm"][k] for s in ss]) for k in range(n_seeds)]))

    per_class = {}
    for cls in SPAN_CLASSES:
        ss = [s for s in spans if s["class"] == cls]
        per_class[cls] = {
            "n": len(ss),
            "accuracy": _mean([s["correct"] for s in ss]),
            "accuracy_order_controlled": acc_oc(ss),
        }
    ans_oc = None
    if oc and rows:
        ans_oc = float(
            np.mean(
                [np.mean([all(s["correct_perm"][k] for s in r["spans"]) for r in rows]) for k in range(n_seeds)]
            )
        )
    return {
        "accuracy": _mean([s["correct"] for s in spans]),
        "accuracy_order_controlled": acc_oc(spans),
        "answer_accuracy": _mean([all(s["correct"] for s in r["spans"]) for r in rows]),
        "answer_accuracy_order_controlled": ans_oc,
        "per_class": per_class,
        "n_spans": len(spans),
        "n_answers": len(rows),
        "n_spans_tied": sum(1 for s in spans if s["n_top"] > 1),
    }


def run_span_eval(
    dataset_name: str,
    attributor: SpanAttributor,
    examples: Sequence[AttributionExample],
    *,
    order_control: bool = True,
    progress: bool = True,
    resume_path: str | os.PathLike[str] | None = None,
    extra_config: Mapping[str, Any] | None = None,
) -> EvalReport:
    """Span accuracy of ``attributor`` on a span set (quotesum, verigran, kv).

    For every example with at least one span, ``attributor.score_spans`` is called on the
    example and, with ``order_control``, on each :func:`permute_example` of it (seeds
    :data:`SOURCE_PERMUTATION_SEEDS`). A span is correct when the best source (ties ->
    first in the order the method saw) is a gold source. Examples without spans (3 in
    VeriGran dev) are skipped and counted in ``metrics["n_skipped_no_spans"]``. For ``kv``
    every example must have exactly one span covering the whole answer (the gold value).

    Parameters
    ----------
    dataset_name : {"quotesum", "verigran", "kv"}
    attributor : SpanAttributor
    examples : sequence of AttributionExample
        E.g. ``load_dataset(dataset_name, limit=...)``; ids must be unique.
    order_control : bool, default=True
        Also run the 3 permuted orders (4 calls per example instead of 1).
    progress : bool, default=True
        tqdm progress bar on stderr.
    resume_path : str or path-like, default=None
        JSONL partial file. Finished examples are appended to it (one row each, flushed);
        rows already in it (same dataset, method and order control) are reused, so a
        killed run resumes without recomputing them and without duplicate rows. A
        truncated last line from a kill is dropped.
    extra_config : mapping, default=None
        Merged into ``report.config`` (e.g. data dir, limit, beta).

    Returns
    -------
    report : EvalReport

    Raises
    ------
    InvalidInputError
        Unknown or non-span dataset, duplicate example ids, a kv example that is not one
        whole-answer span, a partial file from another configuration, or scores of the wrong
        shape / non-finite.

    Examples
    --------
    >>> from tokenshapley_rag.benchmark._baselines import LexicalAttributor
    >>> from tokenshapley_rag.benchmark import load_dataset
    >>> rep = run_span_eval("kv", LexicalAttributor(), load_dataset("kv", limit=2), progress=False)
    >>> rep.n, rep.metrics["accuracy"], rep.metrics["accuracy_order_controlled"]
    (2, 1.0, 1.0)
    """
    if dataset_name not in (*SPAN_DATASETS, *SPAN_CHECKS):
        raise InvalidInputError(
            f"run_span_eval is for span sets {[*SPAN_DATASETS, *SPAN_CHECKS]}, got {dataset_name!r}"
        )
    name = getattr(attributor, "name", None)
    if not isinstance(name, str) or not callable(getattr(attributor, "score_spans", None)):
        raise InvalidInputTypeError(
            "attributor must have a str `name` and a `score_spans(example)` method, got "
            f"{type(attributor).__name__}"
        )
    examples = list(examples)
    seen: set[str] = set()
    for ex in examples:
        if not isinstance(ex, AttributionExample):
            raise InvalidInputTypeError(
                f"examples must be AttributionExample, got {type(ex).__name__}"
            )
        if ex.id in seen:
            raise InvalidInputError(f"duplicate example id {ex.id!r}")
        seen.add(ex.id)
        if dataset_name == "kv" and (
            len(ex.spans) != 1 or (ex.spans[0].start, ex.spans[0].end) != (0, len(ex.answer))
        ):
            raise InvalidInputError(
                f"kv example {ex.id!r}: expected one span covering the whole answer (the gold "
                f"value), got {[(s.start, s.end) for s in ex.spans]} for an answer of "
                f"{len(ex.answer)} chars"
            )
    seeds = tuple(SOURCE_PERMUTATION_SEEDS) if order_control else ()
    header = {"dataset": dataset_name, "method": name, "seeds": list(seeds)}

    done: dict[str, dict[str, Any]] = {}
    path = Path(resume_path) if resume_path is not None else None
    if path is not None and path.exists():
        done = _read_partial(path, header)
    n_resumed = sum(1 for ex in examples if ex.id in done)

    todo = [ex for ex in examples if ex.spans]
    n_skipped = len(examples) - len(todo)
    rows: list[dict[str, Any]] = []
    fh = None
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = path.open("a", encoding="utf-8")
    try:
        bar = tqdm(todo, desc=f"{dataset_name}/{name}", file=sys.stderr, disable=not progress, unit="ex")
        n_ok = n_spans = 0
        for ex in bar:
            row = done.get(ex.id)
            if row is None:
                row = {**header, **_score_example(attributor, ex, seeds)}
                if fh is not None:
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                    fh.flush()
            rows.append(row)
            n_ok += sum(s["correct"] for s in row["spans"])
            n_spans += len(row["spans"])
            if progress:
                bar.set_postfix(acc=f"{n_ok / max(n_spans, 1):.3f}", refresh=False)
        bar.close()
    finally:
        if fh is not None:
            fh.close()

    metrics = _metrics(rows, len(seeds))
    metrics["n_skipped_no_spans"] = n_skipped
    metrics["seconds_per_example_incl_permutations"] = (
        float(np.mean([r["seconds_total"] for r in rows])) if rows else 0.0
    )
    config: dict[str, Any] = {
        "order_control": bool(order_control),
        "permutation_seeds": list(seeds),
        "permutation": "np.random.default_rng([seed, sha256(example.id)[:8] as uint64]).permutation(n_sources)",
        "tie_rule": "argmax, ties -> first source in the order the method saw",
        "span_class_matching": "case-insensitive verbatim substring of Source.text (title + text)",
        "n_examples_given": len(examples),
        "n_resumed": n_resumed,
        "resume_path": str(path) if path is not None else None,
    }
    if extra_config:
        config.update(dict(extra_config))
    return EvalReport(
        dataset=dataset_name,
        method=name,
        n=len(rows),
        metrics=metrics,
        seconds_per_example=float(np.mean([r["seconds"] for r in rows])) if rows else 0.0,
        config=config,
        records=tuple(rows),
    )
