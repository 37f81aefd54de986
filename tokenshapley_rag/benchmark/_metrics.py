"""Evaluation metrics: span accuracy, span classes, order control, ranking, AUROC, log-prob drop.

All functions are pure (no state, no I/O) and validate their input first. The protocols
they implement are described in ``docs/evaluation.md``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from numbers import Integral
from typing import Any

import numpy as np

from tokenshapley_rag.benchmark._data import AttributionExample, GoldEvidence, GoldSpan
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError

__all__ = [
    "SOURCE_PERMUTATION_SEEDS",
    "SPAN_CLASSES",
    "accuracy_order_controlled",
    "answer_accuracy",
    "auroc",
    "best_source",
    "evidence_overlaps",
    "mean_logprob_drop",
    "permute_example",
    "precision_recall_f1_at_k",
    "ranking_metrics",
    "source_permutation",
    "span_accuracy",
    "span_class",
    "span_correct",
]

#: Seeds of the fixed source permutations behind ``accuracy_order_controlled``.
SOURCE_PERMUTATION_SEEDS: tuple[int, ...] = (0, 1, 2)

#: The four span classes of :func:`span_class`, in reporting order.
SPAN_CLASSES: tuple[str, ...] = ("gold-only", "several", "nowhere", "non-gold-only")

Evidence = GoldEvidence | Sequence[Any]


# --------------------------------------------------------------------------- span accuracy


def _scores_row(scores_row: Any, name: str = "scores_row") -> np.ndarray:
    row = np.asarray(scores_row, dtype=np.float64)
    if row.ndim != 1 or row.shape[0] == 0:
        raise InvalidInputError(f"{name} must be a non-empty 1-D array, got shape {row.shape}")
    if not np.all(np.isfinite(row)):
        raise InvalidInputError(f"{name} must be finite, got {row.tolist()}")
    return row


def best_source(scores_row: Any) -> int:
    """Index of the highest-scoring source; ties go to the FIRST in the given order.

    The tie rule is deliberate: a method that gives several sources the same score is
    credited only when the gold source happens to come first, which is exactly what the
    order-controlled accuracy (:func:`permute_example`) exposes.

    Parameters
    ----------
    scores_row : array-like of shape (n_sources,)
        Finite scores, higher = more likely the source.

    Returns
    -------
    index : int

    Raises
    ------
    InvalidInputError
        Empty, not 1-D, or not finite.

    Examples
    --------
    >>> best_source([0.1, 0.7, 0.2])
    1
    >>> best_source([0.5, 0.9, 0.9])
    1
    """
    return int(np.argmax(_scores_row(scores_row)))


def span_correct(scores_row: Any, gold_set: Iterable[int]) -> bool:
    """Whether :func:`best_source` of ``scores_row`` is in ``gold_set``.

    Examples
    --------
    >>> span_correct([0.2, 0.8], {1}), span_correct([0.8, 0.8], {1})
    (True, False)
    """
    return best_source(scores_row) in set(gold_set)


def span_accuracy(span_scores: Sequence[Any], gold_sets: Sequence[Iterable[int]]) -> float:
    """Fraction of spans whose best source (ties -> first) is a gold source.

    Parameters
    ----------
    span_scores : list of array-like of shape (n_sources,)
        One score row per span (rows may differ in length across examples).
    gold_sets : list of set of int
        Gold source indices of each span, same length as ``span_scores``.

    Returns
    -------
    accuracy : float in [0, 1]

    Raises
    ------
    InvalidInputError
        Lengths differ, or there are no spans.

    Examples
    --------
    >>> span_accuracy([[0.1, 0.9], [0.3, 0.3], [1.0, 0.0]], [{1}, {1}, {0}])
    0.6666666666666666
    """
    if len(span_scores) != len(gold_sets):
        raise InvalidInputError(
            f"span_scores and gold_sets must have the same length, got "
            f"{len(span_scores)} and {len(gold_sets)}"
        )
    if len(span_scores) == 0:
        raise InvalidInputError("span_accuracy needs at least one span, got 0")
    return float(np.mean([span_correct(s, g) for s, g in zip(span_scores, gold_sets)]))


def answer_accuracy(
    answer_span_scores: Sequence[Sequence[Any]], answer_gold_sets: Sequence[Sequence[Iterable[int]]]
) -> float:
    """Fraction of answers whose spans are ALL correct (per :func:`span_correct`).

    Parameters
    ----------
    answer_span_scores : list (answers) of list (spans) of array-like of shape (n_sources,)
    answer_gold_sets : list (answers) of list (spans) of set of int

    Returns
    -------
    accuracy : float in [0, 1]

    Raises
    ------
    InvalidInputError
        Lengths differ, no answers, or an answer without spans.

    Examples
    --------
    >>> answer_accuracy([[[0, 1], [1, 0]], [[0, 1]]], [[{1}, {0}], [{0}]])
    0.5
    """
    if len(answer_span_scores) != len(answer_gold_sets):
        raise InvalidInputError(
            f"answer_span_scores and answer_gold_sets must have the same length, got "
            f"{len(answer_span_scores)} and {len(answer_gold_sets)}"
        )
    if len(answer_span_scores) == 0:
        raise InvalidInputError("answer_accuracy needs at least one answer, got 0")
    ok = []
    for i, (rows, golds) in enumerate(zip(answer_span_scores, answer_gold_sets)):
        if len(rows) != len(golds) or len(rows) == 0:
            raise InvalidInputError(
                f"answer {i}: needs as many score rows as gold sets and at least one, got "
                f"{len(rows)} and {len(golds)}"
            )
        ok.append(all(span_correct(s, g) for s, g in zip(rows, golds)))
    return float(np.mean(ok))


def span_class(example: AttributionExample, span: GoldSpan) -> str:
    """Where the span text occurs verbatim among the example's sources.

    Matching is **case-insensitive** substring search (``span.text.lower() in
    source.text.lower()``) over ``Source.text``, which includes the title for sets that have
    titles. (Case-sensitive matching gives 678 / 134 / 5 on QuoteSum dev instead of the
    reference 665 / 147 / 5; case-insensitive reproduces the reference counts.)

    Let ``hits`` be the sources containing the span and ``gold`` its gold sources:

    - ``"nowhere"``: no source contains it;
    - ``"gold-only"``: every source containing it is gold (``hits`` non-empty, a subset of ``gold``);
    - ``"several"``: otherwise, two or more sources contain it (almost always the gold one
      and others; 7 VeriGran dev spans occur in several sources none of which is gold);
    - ``"non-gold-only"``: otherwise, exactly one non-gold source contains it.

    Parameters
    ----------
    example : AttributionExample
    span : GoldSpan
        A span of ``example`` (its ``source_ids`` must be source ids of ``example``).

    Returns
    -------
    cls : {"gold-only", "several", "nowhere", "non-gold-only"}

    Examples
    --------
    >>> from tokenshapley_rag._types import Source
    >>> ex = AttributionExample("t", "", (Source("a", "Red apples."), Source("b", "red apples and PEARS")),
    ...                         "red apples, pears, kiwi", (), (), {})
    >>> [span_class(ex, GoldSpan(0, 0, t, ("a",))) for t in ("Red apples", "pears", "kiwi", "Red apples.")]
    ['several', 'non-gold-only', 'nowhere', 'gold-only']
    """
    if not isinstance(example, AttributionExample):
        raise InvalidInputTypeError(
            f"example must be an AttributionExample, got {type(example).__name__}"
        )
    if not isinstance(span, GoldSpan):
        raise InvalidInputTypeError(f"span must be a GoldSpan, got {type(span).__name__}")
    gold = example.gold_indices(span)
    needle = span.text.lower()
    hits = {i for i, s in enumerate(example.sources) if needle in s.text.lower()}
    if not hits:
        return "nowhere"
    if hits <= gold:
        return "gold-only"
    if len(hits) >= 2:
        return "several"
    return "non-gold-only"


# --------------------------------------------------------------------------- order control


def _id_key(example_id: str) -> int:
    return int.from_bytes(hashlib.sha256(example_id.encode("utf-8")).digest()[:8], "little")


def source_permutation(example_id: str, n_sources: int, seed: int) -> np.ndarray:
    """The fixed permutation of ``n_sources`` sources for one example and seed.

    ``np.random.default_rng([seed, key]).permutation(n_sources)`` where ``key`` is the first
    8 bytes (little-endian) of ``sha256(example_id)``. Mixing the example id in matters:
    ``default_rng(seed).permutation(n)`` alone is the same for every example of a given
    size, and for seeds 0, 1, 2 it is the identity for every 2-source example and for seed
    1 at 3 sources, so it would leave most QuoteSum answers in their original order. The
    permutation depends only on (seed, id, n), not on dataset order or ``--limit``.

    Examples
    --------
    >>> a = source_permutation("AMBIG_val_1010_1", 3, 0)
    >>> b = source_permutation("AMBIG_val_1010_1", 3, 0)
    >>> a.tolist() == b.tolist()
    True
    >>> sorted(source_permutation("x", 5, 1).tolist())
    [0, 1, 2, 3, 4]
    """
    if isinstance(n_sources, bool) or not isinstance(n_sources, Integral) or n_sources < 1:
        raise InvalidInputError(f"n_sources must be a positive int, got {n_sources!r}")
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise InvalidInputError(f"seed must be a non-negative int, got {seed!r}")
    rng = np.random.default_rng([int(seed), _id_key(str(example_id))])
    return rng.permutation(int(n_sources))


def permute_example(example: AttributionExample, seed: int) -> tuple[AttributionExample, np.ndarray]:
    """The example with its sources reordered by :func:`source_permutation`.

    Source ids, texts, spans and gold ranges are unchanged (they refer to sources by id),
    only the order of ``sources`` changes. Re-run a method on the permuted example and score
    it as usual; the order-controlled accuracy is the mean over
    :data:`SOURCE_PERMUTATION_SEEDS`.

    Parameters
    ----------
    example : AttributionExample
    seed : int
        One of :data:`SOURCE_PERMUTATION_SEEDS` (any non-negative int works).

    Returns
    -------
    permuted : AttributionExample
        ``permuted.sources[i] is example.sources[perm[i]]``.
    perm : ndarray of shape (n_sources,), dtype int64
        New position -> original position.

    Examples
    --------
    >>> from tokenshapley_rag._types import Source
    >>> ex = AttributionExample("t", "", tuple(Source(str(i), f"s{i}") for i in range(4)), "", (), (), {})
    >>> p, perm = permute_example(ex, 0)
    >>> [s.id for s in p.sources] == [str(i) for i in perm]
    True
    """
    if not isinstance(example, AttributionExample):
        raise InvalidInputTypeError(
            f"example must be an AttributionExample, got {type(example).__name__}"
        )
    if len(example.sources) == 0:
        raise InvalidInputError(f"example {example.id!r} has no sources to permute")
    perm = source_permutation(example.id, len(example.sources), seed).astype(np.int64)
    permuted = replace(example, sources=tuple(example.sources[i] for i in perm))
    return permuted, perm


def accuracy_order_controlled(
    span_scores_by_seed: Sequence[Sequence[Any]], gold_sets_by_seed: Sequence[Sequence[Iterable[int]]]
) -> float:
    """Mean of :func:`span_accuracy` over the permuted runs (one per seed).

    Parameters
    ----------
    span_scores_by_seed : list (seeds) of list (spans) of array-like of shape (n_sources,)
        Scores of the method re-run on each permuted example, in permuted source order.
    gold_sets_by_seed : list (seeds) of list (spans) of set of int
        Gold indices in the same permuted order.

    Returns
    -------
    accuracy : float in [0, 1]

    Examples
    --------
    A method that scores two sources equally is right only when the gold one comes first:

    >>> accuracy_order_controlled([[[1.0, 1.0]], [[1.0, 1.0]], [[1.0, 1.0]]], [[{0}], [{1}], [{1}]])
    0.3333333333333333
    """
    if len(span_scores_by_seed) != len(gold_sets_by_seed) or len(span_scores_by_seed) == 0:
        raise InvalidInputError(
            f"need one score list and one gold list per seed (at least one seed), got "
            f"{len(span_scores_by_seed)} and {len(gold_sets_by_seed)}"
        )
    return float(np.mean([span_accuracy(s, g) for s, g in zip(span_scores_by_seed, gold_sets_by_seed)]))


# --------------------------------------------------------------------------- ranking


def _triple(x: Evidence, name: str) -> tuple[str, int, int]:
    if isinstance(x, GoldEvidence):
        return x.source_id, x.start, x.end
    try:
        sid, start, end = x
    except (TypeError, ValueError):
        raise InvalidInputTypeError(
            f"{name} items must be GoldEvidence or (source_id, start, end), got {x!r}"
        ) from None
    if any(isinstance(v, bool) or not isinstance(v, Integral) for v in (start, end)):
        raise InvalidInputTypeError(f"{name} offsets must be ints, got {x!r}")
    if start > end:
        raise InvalidInputError(f"{name} item has start > end: {x!r}")
    return str(sid), int(start), int(end)


def evidence_overlaps(pred: Evidence, gold: Evidence) -> bool:
    """Whether a predicted sentence counts as gold for a gold range.

    Rule: same ``source_id`` and at least one shared character of the half-open ranges,
    i.e. ``pred.start < gold.end and gold.start < pred.end``. Touching ranges
    (``pred.end == gold.start``) and empty ranges never overlap.

    Examples
    --------
    >>> evidence_overlaps(("1", 0, 10), ("1", 9, 20)), evidence_overlaps(("1", 0, 10), ("1", 10, 20))
    (True, False)
    >>> evidence_overlaps(("1", 0, 10), GoldEvidence("2", 0, 10))
    False
    """
    ps, pa, pb = _triple(pred, "pred")
    gs, ga, gb = _triple(gold, "gold")
    return ps == gs and pa < pb and ga < gb and pa < gb and ga < pb


def _relevance(ranked: Sequence[Evidence], gold: Sequence[Evidence]) -> np.ndarray:
    preds = [_triple(p, "ranked_sentence_spans") for p in ranked]
    golds = [_triple(g, "gold_evidence") for g in gold]
    return np.array([any(evidence_overlaps(p, g) for g in golds) for p in preds], dtype=bool)


def precision_recall_f1_at_k(
    ranked_sentence_spans: Sequence[Evidence], gold_evidence: Sequence[Evidence], k: int
) -> tuple[float, float, float]:
    """Precision, recall and F1 of the top ``k`` of a sentence ranking.

    A candidate ``(source_id, start, end)`` is *relevant* when it overlaps a gold range of
    the same source (:func:`evidence_overlaps`). ``ranked_sentence_spans`` must be the FULL
    ranking of every candidate sentence, best first, because the recall denominator is the
    number of relevant candidates in it (NQ: the sentences of the gold passage; WiCE: the
    supporting sentences).

    - precision@k = relevant in top k / k (divided by ``k`` even when fewer than ``k``
      candidates exist);
    - recall@k = relevant in top k / relevant in the whole list (NaN when none is relevant);
    - F1@k = 2PR / (P + R) (0 when P + R = 0, NaN when recall is NaN).

    Parameters
    ----------
    ranked_sentence_spans : sequence of (source_id, start, end) or GoldEvidence
        Candidate sentences, best first; offsets index into ``Source.text``.
    gold_evidence : sequence of (source_id, start, end) or GoldEvidence
        Gold char ranges (``AttributionExample.gold``).
    k : int >= 1

    Returns
    -------
    precision, recall, f1 : float

    Examples
    --------
    Gold passage "2" has 3 sentences; the ranking puts two of them in the top 3:

    >>> ranked = [("2", 0, 10), ("1", 0, 8), ("2", 11, 30), ("2", 31, 40), ("1", 9, 20)]
    >>> gold = [GoldEvidence("2", 0, 40)]
    >>> [tuple(round(v, 3) for v in precision_recall_f1_at_k(ranked, gold, k)) for k in (1, 3, 5)]
    [(1.0, 0.333, 0.5), (0.667, 0.667, 0.667), (0.6, 1.0, 0.75)]
    """
    if isinstance(k, bool) or not isinstance(k, Integral) or k < 1:
        raise InvalidInputError(f"k must be an int >= 1, got {k!r}")
    rel = _relevance(ranked_sentence_spans, gold_evidence)
    hit = int(rel[: int(k)].sum())
    total = int(rel.sum())
    precision = hit / int(k)
    if total == 0:
        return precision, math.nan, math.nan
    recall = hit / total
    f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return precision, recall, f1


def ranking_metrics(
    rankings: Sequence[Sequence[Evidence]],
    golds: Sequence[Sequence[Evidence]],
    *,
    ks: Iterable[int] = range(1, 11),
) -> dict[int, dict[str, float]]:
    """Mean precision / recall @ k over examples, with F1 of the means.

    Examples with no relevant candidate (recall undefined, e.g. WiCE claims without gold)
    are left out of every mean and counted in ``n_no_gold``. ``f1`` is the harmonic mean
    of the mean precision and mean recall (how the paper's NQ F1@5 = 0.417 relates to its
    P = 0.344 and R = 0.528); ``f1_mean`` is the mean of per-example F1.

    Parameters
    ----------
    rankings : list of full candidate rankings (see :func:`precision_recall_f1_at_k`)
    golds : list of gold ranges, one list per example
    ks : iterable of int, default=range(1, 11)

    Returns
    -------
    metrics : dict
        ``{k: {"precision", "recall", "f1", "f1_mean", "n", "n_no_gold"}}``.

    Examples
    --------
    >>> m = ranking_metrics([[("a", 0, 5), ("b", 0, 5)], [("a", 0, 5), ("b", 0, 5)]],
    ...                     [[("b", 0, 5)], [("a", 0, 5)]], ks=[1, 2])
    >>> m[1]["precision"], m[1]["recall"], m[2]["recall"], m[2]["f1"]
    (0.5, 0.5, 1.0, 0.6666666666666666)
    """
    if len(rankings) != len(golds):
        raise InvalidInputError(
            f"rankings and golds must have the same length, got {len(rankings)} and {len(golds)}"
        )
    ks = list(ks)
    if not ks:
        raise InvalidInputError("ks must not be empty")
    out: dict[int, dict[str, float]] = {}
    for k in ks:
        rows = [precision_recall_f1_at_k(r, g, k) for r, g in zip(rankings, golds)]
        kept = [r for r in rows if not math.isnan(r[1])]
        if kept:
            p = float(np.mean([r[0] for r in kept]))
            rc = float(np.mean([r[1] for r in kept]))
            f1 = 0.0 if p + rc == 0 else 2 * p * rc / (p + rc)
            f1_mean = float(np.mean([r[2] for r in kept]))
        else:
            p = rc = f1 = f1_mean = math.nan
        out[int(k)] = {
            "precision": p,
            "recall": rc,
            "f1": f1,
            "f1_mean": f1_mean,
            "n": len(kept),
            "n_no_gold": len(rows) - len(kept),
        }
    return out


# --------------------------------------------------------------------------- AUROC, log-prob


def auroc(scores: Any, labels: Any) -> float:
    """Area under the ROC curve, ties counted as half (average ranks, Mann-Whitney U).

    ``AUROC = (sum of positive ranks - n_pos (n_pos + 1) / 2) / (n_pos n_neg)`` with ranks
    1..n over ``scores`` and tied scores given their average rank. It equals the probability
    that a random positive scores above a random negative, plus half the probability of a tie.

    Parameters
    ----------
    scores : array-like of shape (n,)
        Finite scores, higher = more likely positive.
    labels : array-like of shape (n,)
        Booleans or 0/1.

    Returns
    -------
    auroc : float in [0, 1]

    Raises
    ------
    InvalidInputError
        Shapes differ, non-finite scores, labels not 0/1, or only one class present.

    Examples
    --------
    >>> auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
    0.75
    >>> auroc([1, 1, 1], [0, 1, 1])
    0.5
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    if s.ndim != 1 or y.shape != s.shape:
        raise InvalidInputError(
            f"scores and labels must be 1-D of the same length, got shapes {s.shape} and {y.shape}"
        )
    if not np.all(np.isfinite(s)):
        raise InvalidInputError("scores must be finite")
    if y.dtype != bool:
        if not np.all(np.isin(y, (0, 1))):
            raise InvalidInputError(f"labels must be booleans or 0/1, got values {np.unique(y).tolist()}")
        y = y.astype(bool)
    n_pos = int(y.sum())
    n_neg = int(y.size - n_pos)
    if n_pos == 0 or n_neg == 0:
        raise InvalidInputError(
            f"auroc needs both classes, got {n_pos} positives and {n_neg} negatives"
        )
    order = np.argsort(s, kind="mergesort")
    sorted_s = s[order]
    ranks = np.empty(s.size, dtype=np.float64)
    i = 0
    n = s.size
    while i < n:
        j = i + 1
        while j < n and sorted_s[j] == sorted_s[i]:
            j += 1
        ranks[order[i:j]] = (i + 1 + j) / 2.0  # average of ranks i+1 .. j
        i = j
    u = ranks[y].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def mean_logprob_drop(full_logprobs: Any, ablated_logprobs: Any) -> float:
    """Mean drop in the log-probability of a response when top-attributed text is removed.

    ``mean(full - ablated)`` over examples: ``full[i]`` is the log-probability of example
    i's response given the whole context and ``ablated[i]`` given the context with the
    top-k attributed sentences removed. Pass the same kind of value for both (total
    log-probability of the response, or per token); higher = the attribution found text
    the response depends on.

    Parameters
    ----------
    full_logprobs, ablated_logprobs : array-like of shape (n_examples,)

    Returns
    -------
    drop : float

    Examples
    --------
    >>> mean_logprob_drop([-10.0, -20.0], [-11.5, -20.5])
    1.0
    """
    a = np.asarray(full_logprobs, dtype=np.float64)
    b = np.asarray(ablated_logprobs, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise InvalidInputError(
            f"full_logprobs and ablated_logprobs must be non-empty 1-D of the same length, "
            f"got shapes {a.shape} and {b.shape}"
        )
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise InvalidInputError("log-probabilities must be finite")
    return float(np.mean(a - b))
