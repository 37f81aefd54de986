"""Pure metric functions of a chain evaluation (no model, no I/O).

Vocabulary used throughout:

* a keyword is **supported** when ``KeywordCitation.supported`` is True;
* a supported keyword is a **citation** of its best source (``KeywordCitation.best``);
  unsupported keywords cite nothing, even if context gave some source a positive score;
* a retrieved source is **used** when at least one citation goes to it; retrieved but
  never used is retrieval noise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from tokenshapley_rag.errors import InvalidInputError

__all__ = [
    "Concentration",
    "RankUtilization",
    "citation_concentration",
    "entropy_bits",
    "gini",
    "mean_or_none",
    "share",
    "utilization_by_rank",
]


def share(numerator: int, denominator: int) -> float | None:
    """``numerator / denominator``, or None when the denominator is 0 (nothing to measure).

    >>> share(3, 4), share(0, 0)
    (0.75, None)
    """
    return numerator / denominator if denominator else None


def gini(counts: Sequence[float]) -> float | None:
    """Gini coefficient of non-negative ``counts`` (0 = spread evenly, (n-1)/n = all on one).

    ``G = sum_i (2i - n - 1) x_(i) / (n * sum x)`` with ``x_(1) <= ... <= x_(n)``. Zeros count:
    a source that was retrieved but never cited makes citations more concentrated.

    Parameters
    ----------
    counts : sequence of float, shape (n,)

    Returns
    -------
    float or None
        None when ``counts`` is empty or sums to 0.

    Examples
    --------
    >>> gini([0, 0, 4]), gini([2, 2]), gini([1, 3])
    (0.6666666666666666, 0.0, 0.25)
    """
    x = np.sort(np.asarray(counts, dtype=np.float64))
    if np.any(x < 0):
        raise InvalidInputError(f"gini needs non-negative counts, got {list(counts)}")
    total = float(x.sum())
    if x.size == 0 or total == 0:
        return None
    n = x.size
    i = np.arange(1, n + 1)
    return float(np.sum((2 * i - n - 1) * x) / (n * total))


def entropy_bits(counts: Sequence[float], *, normalize: bool = False) -> float | None:
    """Shannon entropy, in bits, of the distribution ``counts / sum(counts)``.

    Parameters
    ----------
    counts : sequence of float, shape (n,)
    normalize : bool, default=False
        Divide by ``log2(n)``, the entropy of the uniform distribution over all ``n``
        entries (zeros included), so 1 means evenly spread and 0 all on one source.
        With ``n == 1`` the normalized entropy is 0.

    Returns
    -------
    float or None
        None when ``counts`` is empty or sums to 0.

    Examples
    --------
    >>> entropy_bits([2, 1, 1]), round(entropy_bits([2, 1, 1], normalize=True), 4)
    (1.5, 0.9464)
    """
    x = np.asarray(counts, dtype=np.float64)
    total = float(x.sum()) if x.size else 0.0
    if total == 0:
        return None
    p = x[x > 0] / total
    h = float(-np.sum(p * np.log2(p))) + 0.0  # + 0.0 turns -0.0 into 0.0
    if not normalize:
        return h
    return h / math.log2(x.size) if x.size > 1 else 0.0


@dataclass(frozen=True, slots=True)
class Concentration:
    """How concentrated one answer's citations are over its retrieved sources.

    Attributes
    ----------
    n_citations : int
        Citations (supported keywords with a best source).
    top_rank_share : float or None
        Share of the citations that go to the rank-1 retrieved source.
    max_share : float or None
        Share of the citations that go to the most-cited source.
    entropy_bits : float or None
        Entropy of the citation distribution over the retrieved sources.
    normalized_entropy : float or None
        ``entropy_bits / log2(n_sources)`` (0 with one source).
    gini : float or None
        Gini coefficient of the citation counts, uncited sources included.

    All but ``n_citations`` are None when there is no citation.
    """

    n_citations: int
    top_rank_share: float | None
    max_share: float | None
    entropy_bits: float | None
    normalized_entropy: float | None
    gini: float | None


def citation_concentration(counts: Sequence[int]) -> Concentration:
    """Concentration of citations over sources, ``counts`` in retrieval-rank order.

    Parameters
    ----------
    counts : sequence of int, shape (n_sources,)
        ``counts[0]`` is the number of citations of the rank-1 source, and so on; include
        the zeros of uncited sources.

    Returns
    -------
    Concentration

    Examples
    --------
    >>> c = citation_concentration([1, 3, 0, 0])
    >>> c.top_rank_share, c.max_share, round(c.entropy_bits, 4), round(c.gini, 4)
    (0.25, 0.75, 0.8113, 0.625)
    """
    n = int(sum(counts))
    if n == 0:
        return Concentration(0, None, None, None, None, None)
    return Concentration(
        n_citations=n,
        top_rank_share=counts[0] / n,
        max_share=max(counts) / n,
        entropy_bits=entropy_bits(counts),
        normalized_entropy=entropy_bits(counts, normalize=True),
        gini=gini(counts),
    )


@dataclass(frozen=True, slots=True)
class RankUtilization:
    """How often the source retrieved at one rank was used.

    Attributes
    ----------
    rank : int
        1-based retrieval rank.
    n_retrieved : int
        Answers that had a source at this rank.
    n_used : int
        Of those, answers that cited it at least once.
    n_citations : int
        Citations that went to sources at this rank, over all answers.
    utilization : float or None
        ``n_used / n_retrieved``.
    """

    rank: int
    n_retrieved: int
    n_used: int
    n_citations: int
    utilization: float | None


def utilization_by_rank(answers: Iterable[Sequence[tuple[int, int]]]) -> tuple[RankUtilization, ...]:
    """Per-rank utilization over many answers.

    Parameters
    ----------
    answers : iterable of sequences of (rank, n_citations)
        One sequence per answer: each retrieved source's 1-based rank and how many of the
        answer's citations it received.

    Returns
    -------
    tuple of RankUtilization
        One per rank seen, ascending.

    Examples
    --------
    >>> u = utilization_by_rank([[(1, 2), (2, 0)], [(1, 1), (2, 1), (3, 0)]])
    >>> [(r.rank, r.n_retrieved, r.n_used, r.n_citations, r.utilization) for r in u]
    [(1, 2, 2, 3, 1.0), (2, 2, 1, 1, 0.5), (3, 1, 0, 0, 0.0)]
    """
    retrieved: dict[int, int] = {}
    used: dict[int, int] = {}
    cites: dict[int, int] = {}
    for answer in answers:
        for rank, n in answer:
            retrieved[rank] = retrieved.get(rank, 0) + 1
            used[rank] = used.get(rank, 0) + (1 if n > 0 else 0)
            cites[rank] = cites.get(rank, 0) + int(n)
    return tuple(
        RankUtilization(rank, retrieved[rank], used[rank], cites[rank], share(used[rank], retrieved[rank]))
        for rank in sorted(retrieved)
    )


def mean_or_none(values: Iterable[float | None]) -> float | None:
    """Mean of the values that are not None (None if there are none).

    >>> mean_or_none([1.0, None, 2.0]), mean_or_none([None])
    (1.5, None)
    """
    xs = [v for v in values if v is not None]
    return float(np.mean(xs)) if xs else None
