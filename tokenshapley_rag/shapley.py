"""Exact Shapley values of the weighted K-nearest-neighbour vote game.

This is the numerical core of TokenShapley. For one response token, the players are the
``N`` datastore entries nearest to it, and the game is the paper's weighted hard vote

    U(S) = 1[ sum_{j in top_K(S)} w_j >= 0 ],     U(empty) = 0,

where ``top_K(S)`` is the ``min(K, |S|)`` highest-ranked members of ``S`` (rank = descending
similarity, ties broken by lower index first), ``w_j = +sims[j]`` when candidate ``j``
carries the response token and ``-sims[j]`` otherwise (``weighted=False``: ``w_j = +-1``).
A sum of exactly zero counts as a correct vote. The sum is accumulated in rank order, in
float64, which is also what :func:`knn_shapley_brute_force` does, so the two agree
exactly on which coalitions win, including exact ties.

Algorithm (derivation in ``docs/method.md``)
--------------------------------------------
Only coalitions' top-K sets ``T`` matter. Grouping coalitions by ``T`` and summing the
Shapley weights in closed form gives, with ranks ``0..N-1`` and ``l`` the rank of the last
(lowest-ranked) member of ``T``:

* ``|T| = K``: every member of ``T`` gains ``A_l = (K-1)! (l+1-K)! / (l+1)!`` and every
  non-member ranked above ``l`` loses ``B_l = K! (l-K)! / (l+1)!``; players ranked below
  ``l`` are unaffected (they can never enter the top K of such a coalition).
* ``|T| < K`` (then the coalition is ``T`` itself): members gain ``w(t-1)``, non-members
  lose ``w(t)``, with ``w(s) = s! (N-1-s)! / N!``.

each times ``U(T)``. Enumerating the ``K-1`` highest members of ``T`` (a "prefix") and
finding the winning last members by binary search -- with ``|w|`` non-increasing in rank,
the winning matches form a prefix of the matches and the winning non-matches a suffix of
the non-matches -- costs ``O(C(N, K-1) log N)`` per row: ``O(N log N)`` for ``K = 1``,
``O(N^2 log N)`` for ``K = 3``, polynomial in ``N`` for every fixed ``K``. Range updates use
difference arrays, so no term costs more than ``O(K)``.
"""

from __future__ import annotations

import itertools
import math
from numbers import Integral

import numba
import numpy as np

__all__ = ["knn_shapley", "knn_shapley_batch", "knn_shapley_brute_force", "knn_utility"]


# --------------------------------------------------------------------------- validation


def _check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, Integral):
        raise TypeError(f"k must be an integer >= 1, got {type(k).__name__} {k!r}")
    if k < 1:
        raise ValueError(f"Expected k >= 1, but k = {k}")
    return int(k)


def _check_inputs(sims: object, matches: object, ndim: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate and convert to contiguous float64 / bool arrays of the expected rank."""
    s = np.asarray(sims)
    m = np.asarray(matches)
    if s.ndim != ndim:
        raise ValueError(f"Expected sims with {ndim} dimension(s), got shape {s.shape}")
    if m.shape != s.shape:
        raise ValueError(f"sims and matches must have the same shape, got {s.shape} and {m.shape}")
    if s.dtype == object or not (np.issubdtype(s.dtype, np.floating) or np.issubdtype(s.dtype, np.integer)):
        raise TypeError(f"sims must be a real-valued numeric array, got dtype {s.dtype}")
    if m.dtype != np.bool_ and m.size:
        if m.dtype == object or not np.issubdtype(m.dtype, np.integer):
            raise TypeError(f"matches must be a boolean array, got dtype {m.dtype}")
        if m.size and not np.isin(m, (0, 1)).all():
            raise ValueError("matches must hold only booleans (or 0/1)")
    s = np.ascontiguousarray(s, dtype=np.float64)
    m = np.ascontiguousarray(m, dtype=np.bool_)
    if s.size:
        if not np.isfinite(s).all():
            bad = np.argwhere(~np.isfinite(s))[0]
            raise ValueError(f"sims must be finite; found {s[tuple(bad)]} at index {tuple(int(b) for b in bad)}")
        if (s < 0).any():
            bad = np.argwhere(s < 0)[0]
            raise ValueError(
                f"sims must be >= 0 (similarities, higher = nearer); found {s[tuple(bad)]} "
                f"at index {tuple(int(b) for b in bad)}"
            )
    return s, m


# --------------------------------------------------------------------------- public API


def knn_shapley(sims, matches, k: int, *, weighted: bool = True) -> np.ndarray:
    """Exact Shapley values of the N given candidates in the weighted K-NN vote game.

    Parameters
    ----------
    sims : array-like of shape (N,)
        Similarity of each candidate to the test point; finite and ``>= 0``; higher is
        nearer. Candidates are ranked by descending similarity, ties by lower index.
    matches : array-like of bool, shape (N,)
        Whether candidate ``i`` carries the test token (its vote is positive).
    k : int
        Number of neighbours that vote, ``>= 1``. ``k >= N`` is allowed.
    weighted : bool, default=True
        Votes weigh ``+-sims[i]``; with ``False`` every vote weighs ``+-1``.

    Returns
    -------
    phi : ndarray of shape (N,), float64
        Shapley values in the input order; ``phi.sum() == knn_utility(all candidates)``.

    See Also
    --------
    knn_shapley_batch : many test points at once (compiled, parallel over rows).
    knn_shapley_brute_force : the definition, by enumerating all coalitions.

    Examples
    --------
    >>> import numpy as np
    >>> from tokenshapley_rag.shapley import knn_shapley
    >>> knn_shapley([0.9, 0.5, 0.1], [True, False, True], k=1)
    array([ 0.83333333, -0.16666667,  0.33333333])
    """
    k = _check_k(k)
    s, m = _check_inputs(sims, matches, ndim=1)
    out = np.zeros((1, s.shape[0]), dtype=np.float64)
    if s.shape[0]:
        _shapley_rows(s[None, :], m[None, :], k, bool(weighted), out)
    return out[0]


def knn_shapley_batch(sims, matches, k: int, *, weighted: bool = True) -> np.ndarray:
    """Row-wise :func:`knn_shapley` for T test points, compiled and parallel over rows.

    Parameters
    ----------
    sims : array-like of shape (T, N)
        Row ``t`` holds the similarities of the N candidates of test point ``t``.
    matches : array-like of bool, shape (T, N)
        Row ``t`` says which candidates carry test token ``t``.
    k : int
        Number of neighbours that vote, ``>= 1``.
    weighted : bool, default=True
        Votes weigh ``+-sims``; with ``False`` every vote weighs ``+-1``.

    Returns
    -------
    phi : ndarray of shape (T, N), float64
        ``phi[t] == knn_shapley(sims[t], matches[t], k)``. ``N = 0`` or ``T = 0`` gives an
        empty array of that shape.

    Examples
    --------
    >>> import numpy as np
    >>> from tokenshapley_rag.shapley import knn_shapley_batch
    >>> phi = knn_shapley_batch(np.array([[0.9, 0.5], [0.2, 0.7]]),
    ...                         np.array([[True, False], [False, True]]), k=1)
    >>> phi.round(3)
    array([[1., 0.],
           [0., 1.]])
    """
    k = _check_k(k)
    s, m = _check_inputs(sims, matches, ndim=2)
    out = np.zeros(s.shape, dtype=np.float64)
    if s.shape[0] and s.shape[1]:
        # Waking numba's thread pool costs ~1-3 ms, far more than a typical answer's games
        # (T ~ 100 rows of M = 10 take ~0.1 ms on one thread): small batches run serially.
        work = s.shape[0] * s.shape[1] * math.comb(s.shape[1], min(k, s.shape[1]) - 1)
        rows = _shapley_rows if work >= _PARALLEL_WORK else _shapley_rows_serial
        rows(s, m, k, bool(weighted), out)
    return out


def knn_utility(sims, matches, k: int, subset, *, weighted: bool = True) -> float:
    """The game's value U(S) for one coalition (the definition, for tests and docs).

    Examples
    --------
    >>> from tokenshapley_rag.shapley import knn_utility
    >>> knn_utility([0.9, 0.5, 0.1], [False, True, True], 1, [0, 2])
    0.0
    >>> knn_utility([0.9, 0.5, 0.1], [False, True, True], 1, [1, 2])
    1.0
    """
    k = _check_k(k)
    s, m = _check_inputs(sims, matches, ndim=1)
    members = sorted(set(int(i) for i in subset), key=lambda i: (-s[i], i))
    if not members:
        return 0.0
    total = 0.0
    for i in members[:k]:  # accumulate in rank order, as the fast engine does
        w = s[i] if weighted else 1.0
        total += w if m[i] else -w
    return 1.0 if total >= 0 else 0.0


def knn_shapley_brute_force(sims, matches, k: int, *, weighted: bool = True) -> np.ndarray:
    """Shapley values by enumerating all ``2^N`` coalitions (reference oracle, N <= ~16).

    Examples
    --------
    >>> from tokenshapley_rag.shapley import knn_shapley_brute_force
    >>> knn_shapley_brute_force([0.9, 0.5, 0.1], [True, False, True], k=1).round(6)
    array([ 0.833333, -0.166667,  0.333333])
    """
    k = _check_k(k)
    s, m = _check_inputs(sims, matches, ndim=1)
    n = s.shape[0]
    if n > 20:
        raise ValueError(f"brute force enumerates 2^N coalitions; N = {n} is too large (max 20)")
    value = {}
    for size in range(n + 1):
        for subset in itertools.combinations(range(n), size):
            value[subset] = knn_utility(s, m, k, subset, weighted=weighted)
    phi = np.zeros(n)
    for subset, u_without in value.items():
        weight = math.factorial(len(subset)) * math.factorial(n - 1 - len(subset)) / math.factorial(n) if len(subset) < n else 0.0
        for i in range(n):
            if i in subset:
                continue
            with_i = tuple(sorted(subset + (i,)))
            phi[i] += weight * (value[with_i] - u_without)
    return phi


# --------------------------------------------------------------------------- compiled core


@numba.njit(cache=True, nogil=True)
def _lose_gain_weights(n, k):
    """A_l (gain of members of a full top-K set whose last rank is l) and B_l (loss of
    non-members ranked above l), in float64, as products of K factors (no factorials)."""
    gain = np.zeros(n)
    loss = np.zeros(n)
    for last in range(k - 1, n):
        a = 1.0 / (last + 1)
        for j in range(1, k):
            a *= j / (last + 1 - j)
        gain[last] = a
        if last >= k:
            b = 1.0 / (last + 1)
            for j in range(1, k + 1):
                b *= j / (last + 1 - j)
            loss[last] = b
    return gain, loss


@numba.njit(cache=True, nogil=True)
def _coalition_weight(n, s):
    """w(s) = s! (n-1-s)! / n!: Shapley weight of one coalition of size s (0 if s >= n)."""
    if s < 0 or s > n - 1:
        return 0.0
    w = 1.0 / n
    for j in range(1, s + 1):
        w *= j / (n - j)
    return w


@numba.njit(cache=True, nogil=True)
def _first_false_prefix(values, sigma):
    """First index i with sigma + values[i] < 0, for non-increasing values (prefix true)."""
    lo = 0
    hi = values.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if sigma + values[mid] >= 0.0:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(cache=True, nogil=True)
def _first_true_suffix(values, sigma):
    """First index i with sigma - values[i] >= 0, for non-increasing values (suffix true)."""
    lo = 0
    hi = values.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if sigma - values[mid] >= 0.0:
            hi = mid
        else:
            lo = mid + 1
    return lo


@numba.njit(cache=True, nogil=True)
def _shapley_row(sims, matches, k, weighted, out):
    n = sims.shape[0]
    # Stable sort of -sims: descending similarity, ties by lower index first.
    order = np.argsort(-sims, kind="mergesort")
    absw = np.empty(n)
    is_match = np.empty(n, dtype=np.bool_)
    for r in range(n):
        absw[r] = sims[order[r]] if weighted else 1.0
        is_match[r] = matches[order[r]]

    # Per-class lists (ranks ascending) and "how many of the class rank below r" counts.
    n_match = 0
    for r in range(n):
        if is_match[r]:
            n_match += 1
    n_non = n - n_match
    match_rank = np.empty(n_match, dtype=np.int64)
    non_rank = np.empty(n_non, dtype=np.int64)
    match_before = np.zeros(n + 1, dtype=np.int64)  # matches among ranks < r
    im = 0
    jn = 0
    for r in range(n):
        match_before[r] = im
        if is_match[r]:
            match_rank[im] = r
            im += 1
        else:
            non_rank[jn] = r
            jn += 1
    match_before[n] = im
    match_w = absw[match_rank]
    non_w = absw[non_rank]

    gain, loss = _lose_gain_weights(n, k)
    # Prefix sums of (gain + loss) along each class list: what the K-1 highest members of a
    # full top-K set collect over a range of winning last members.
    cum_gl_match = np.zeros(n_match + 1)
    for i in range(n_match):
        cum_gl_match[i + 1] = cum_gl_match[i] + gain[match_rank[i]] + loss[match_rank[i]]
    cum_gl_non = np.zeros(n_non + 1)
    for i in range(n_non):
        cum_gl_non[i + 1] = cum_gl_non[i] + gain[non_rank[i]] + loss[non_rank[i]]

    # Difference arrays over class lists: how often each rank is the winning last member of
    # a full top-K set, and the summed small-coalition coefficients it receives.
    full_count_match = np.zeros(n_match + 1)
    full_count_non = np.zeros(n_non + 1)
    small_coef_match = np.zeros(n_match + 1)
    small_coef_non = np.zeros(n_non + 1)
    phi = np.zeros(n)
    everyone = 0.0

    largest = min(k, n)
    prefix = np.empty(max(largest - 1, 1), dtype=np.int64)
    for q in range(largest):  # prefix size; the top set has t = q + 1 members
        t = q + 1
        full = t == k
        w_in = _coalition_weight(n, t - 1)
        w_out = _coalition_weight(n, t)
        small_coef = w_in + w_out
        # Prefixes are q-combinations of ranks 0..n-2 (a last member must follow them).
        if q > n - 1:
            break
        for j in range(q):
            prefix[j] = j
        while True:
            last = prefix[q - 1] if q > 0 else -1
            sigma = 0.0
            for j in range(q):
                r = prefix[j]
                sigma += absw[r] if is_match[r] else -absw[r]
            m_lo = match_before[last + 1]
            m_hi = max(m_lo, _first_false_prefix(match_w, sigma))
            n_lo = last + 1 - m_lo
            n_start = max(n_lo, _first_true_suffix(non_w, sigma))
            count = (m_hi - m_lo) + (n_non - n_start)
            if count > 0:
                if full:
                    full_count_match[m_lo] += 1.0
                    full_count_match[m_hi] -= 1.0
                    full_count_non[n_start] += 1.0
                    full_count_non[n_non] -= 1.0
                    add = (cum_gl_match[m_hi] - cum_gl_match[m_lo]) + (cum_gl_non[n_non] - cum_gl_non[n_start])
                else:
                    small_coef_match[m_lo] += small_coef
                    small_coef_match[m_hi] -= small_coef
                    small_coef_non[n_start] += small_coef
                    small_coef_non[n_non] -= small_coef
                    add = count * small_coef
                    everyone -= count * w_out
                for j in range(q):
                    phi[prefix[j]] += add
            # Next q-combination of 0..n-2 in lexicographic order.
            if q == 0:
                break
            i = q - 1
            while i >= 0 and prefix[i] == n - 1 - q + i:
                i -= 1
            if i < 0:
                break
            prefix[i] += 1
            for j in range(i + 1, q):
                prefix[j] = prefix[j - 1] + 1

    # Resolve the difference arrays into per-rank counts/coefficients.
    count_at = np.zeros(n)
    coef_at = np.zeros(n)
    run_c = 0.0
    run_s = 0.0
    for i in range(n_match):
        run_c += full_count_match[i]
        run_s += small_coef_match[i]
        count_at[match_rank[i]] = run_c
        coef_at[match_rank[i]] = run_s
    run_c = 0.0
    run_s = 0.0
    for i in range(n_non):
        run_c += full_count_non[i]
        run_s += small_coef_non[i]
        count_at[non_rank[i]] = run_c
        coef_at[non_rank[i]] = run_s

    # Last members gain A_l; every rank above a winning last member l loses B_l.
    below = 0.0
    for r in range(n - 1, -1, -1):
        phi[r] += count_at[r] * gain[r] + coef_at[r] + everyone - below
        below += count_at[r] * loss[r]
    for r in range(n):
        out[order[r]] = phi[r]


# Rows x candidates x C(candidates, k - 1) above which the rows run on numba's threads.
_PARALLEL_WORK = 200_000


@numba.njit(cache=True, parallel=True, nogil=True)
def _shapley_rows(sims, matches, k, weighted, out):
    for t in numba.prange(sims.shape[0]):
        _shapley_row(sims[t], matches[t], k, weighted, out[t])


@numba.njit(cache=True, nogil=True)
def _shapley_rows_serial(sims, matches, k, weighted, out):
    for t in range(sims.shape[0]):
        _shapley_row(sims[t], matches[t], k, weighted, out[t])
