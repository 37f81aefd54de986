"""The compiled (numba) kernels of the attribution pipeline, in one place: the token game's
per-sentence values, the context game's span rows, and the datastore's search (the exact
float64 distances, the candidate scans and the sequence search). Each has a numpy oracle in
the tests; the callers that check their input and pick serial or parallel are in
``_token_game``, ``_context_game`` and ``_datastore`` (the Shapley closed form's kernels stay
next to its public functions in ``shapley``)."""

from __future__ import annotations

import numba
import numpy as np

from tokenshapley_rag.shapley import _shapley_row

__all__ = [
    "exact_d2", "exact_rows", "keep_entries", "keep_row", "keep_rows", "keep_rows_serial", "measure_kept_rows",
    "ordered_product", "scan_rows", "scan_rows_serial", "select_rows",
    "select_rows_serial", "sentence_value_row", "sentence_value_rows", "sentence_value_rows_serial", "sequence_rows",
    "span_game_rows", "prefix_representatives", "probe_rows", "list_products", "widen_halves",
]


@numba.njit(cache=True, nogil=True)
def span_game_rows(scores, carries, sentence_source, n_sources, answer_sentence, flat, bounds, weight, scale, verbatim,
                   use_verbatim, word_tokens, word_bounds, word_of_span, result, own, holds):
    """:func:`~tokenshapley_rag._context_game.span_games`, one span (row) at a time; what
    each step means is spelled out in the numpy oracle of tests/test_context_game.py."""
    n_tok, n_sent = scores.shape
    in_context = np.zeros(n_sent)
    weights = np.zeros(n_tok)
    member = np.zeros(n_tok, dtype=np.bool_)
    candidate_source = np.zeros(n_sources, dtype=np.bool_)
    word_held = np.zeros(n_sources, dtype=np.bool_)
    count = np.zeros(n_sources, dtype=np.int64)
    for r in range(bounds.shape[0] - 1):
        a, b = bounds[r], bounds[r + 1]
        if a == b:
            continue  # an empty span: every value 0, no candidate
        member[:] = False
        for i in range(a, b):
            member[flat[i]] = True
        # own: the span tokens' values; holds: the sentences carrying one of its tokens.
        for t in range(n_tok):
            if member[t]:
                for s in range(n_sent):
                    own[r, s] += scores[t, s]
                    if carries[t, s]:
                        holds[r, s] = True
        exact = False
        if use_verbatim:
            for s in range(n_sent):
                if verbatim[r, s]:
                    exact = True
            if exact:
                for s in range(n_sent):
                    holds[r, s] = verbatim[r, s]
        # The context game: weight 1 on the span's tokens, weight * exp(-d / scale) on the
        # other tokens of its answer sentence (d: tokens to the nearest end of the span).
        if weight > 0:
            first, last = flat[a], flat[b - 1]
            for t in range(n_tok):
                if member[t]:
                    weights[t] = 1.0
                elif answer_sentence[t] == answer_sentence[first]:
                    weights[t] = weight * np.exp(-min(abs(t - first), abs(t - last)) / scale)
                else:
                    weights[t] = 0.0
            in_context[:] = 0.0
            for t in range(n_tok):
                if weights[t] != 0.0:
                    for s in range(n_sent):
                        in_context[s] += weights[t] * scores[t, s]
        else:
            in_context[:] = own[r]
        # Candidate sources: those holding the span (verbatim when any does); for a span no
        # source holds verbatim, with its words given, those holding the most of its words.
        candidate_source[:] = False
        if not exact and word_of_span[r + 1] > word_of_span[r]:
            count[:] = 0
            for w in range(word_of_span[r], word_of_span[r + 1]):
                word_held[:] = False
                for i in range(word_bounds[w], word_bounds[w + 1]):
                    t = word_tokens[i]
                    for s in range(n_sent):
                        if carries[t, s]:
                            word_held[sentence_source[s]] = True
                for src in range(n_sources):
                    if word_held[src]:
                        count[src] += 1
            most = 0
            for src in range(n_sources):
                most = max(most, count[src])
            for src in range(n_sources):
                candidate_source[src] = most > 0 and count[src] == most
        else:
            for s in range(n_sent):
                if holds[r, s]:
                    candidate_source[sentence_source[s]] = True
        for s in range(n_sent):
            if candidate_source[sentence_source[s]]:
                result[r, s] = in_context[s]
            elif exact:
                result[r, s] = -np.inf
            else:
                result[r, s] = own[r, s]


@numba.njit(cache=True, nogil=True)
def sentence_value_row(d2, idx, cls, classes, sentence_of, k, auto, gamma, out):
    """One answer token's game (its candidates' squared distances ``d2`` and entries ``idx``,
    nearest first; its class ``cls``), its Shapley values added to ``out`` per sentence."""
    m = d2.shape[0]
    if m == 0:
        return
    g = gamma
    if auto:
        # The row is sorted (nearest first): its median is its middle, as np.median gives
        # it (the mean of the two middle values for an even m).
        mid = m // 2
        med = np.float64(d2[mid]) if m % 2 else (np.float64(d2[mid - 1]) + np.float64(d2[mid])) / 2
        g = 1.0 / med if med > 0 else 1.0
    nearest = np.float64(d2[0])
    sims = np.empty(m)
    matches = np.empty(m, dtype=np.bool_)
    phi = np.empty(m)
    for j in range(m):
        sims[j] = np.exp(-g * (np.float64(d2[j]) - nearest))
        matches[j] = classes[idx[j]] == cls
    _shapley_row(sims, matches, k, True, phi)
    for j in range(m):
        out[sentence_of[idx[j]]] += phi[j]


@numba.njit(cache=True, parallel=True, nogil=True)
def sentence_value_rows(d2, idx, game_classes, use_piece, token_class, piece_class, sentence_of, k, auto, gamma, out):
    for t in numba.prange(d2.shape[0]):
        classes = piece_class if use_piece[t] else token_class
        sentence_value_row(d2[t], idx[t], game_classes[t], classes, sentence_of, k, auto, gamma, out[t])


@numba.njit(cache=True, nogil=True)
def sentence_value_rows_serial(d2, idx, game_classes, use_piece, token_class, piece_class, sentence_of, k, auto, gamma, out):
    for t in range(d2.shape[0]):
        classes = piece_class if use_piece[t] else token_class
        sentence_value_row(d2[t], idx[t], game_classes[t], classes, sentence_of, k, auto, gamma, out[t])


# ---------------------------------------------------------------- the datastore's search


@numba.njit(cache=True, nogil=True)
def ordered_product(a, b, out):
    """``out = a @ b`` (float64) with each cell summed over ``a``'s columns in index order:
    the same bits for any BLAS, thread count or machine load (a BLAS product's rounding
    depends on its threads; measured: 83 of 200 products of the predicate game's shape
    differed between one and two OpenBLAS threads). Zero weights are skipped (most of a
    context-game row is zero), which changes no finite sum."""
    rows, inner = a.shape
    cols = b.shape[1]
    for i in range(rows):
        for j in range(cols):
            out[i, j] = 0.0
        for t in range(inner):
            w = a[i, t]
            if w == 0.0:
                continue
            for j in range(cols):
                out[i, j] += w * b[t, j]


@numba.njit(cache=True, nogil=True)
def exact_d2(q, key):
    """``sum_i (q_i - k_i)^2`` of two float32 vectors in float64, in one fixed order: eight
    interleaved partial sums (``i mod 8``) added as a fixed tree, then the tail. numba
    compiles without fastmath, so LLVM may not reassociate or contract it (it may put the
    eight sums in one vector register, which adds lane by lane alike): for the same two
    vectors, the same bits in every compiled variant, thread and block of queries."""
    n = q.shape[0]
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    s4 = 0.0
    s5 = 0.0
    s6 = 0.0
    s7 = 0.0
    i = 0
    while i + 8 <= n:
        t0 = np.float64(q[i]) - np.float64(key[i])
        t1 = np.float64(q[i + 1]) - np.float64(key[i + 1])
        t2 = np.float64(q[i + 2]) - np.float64(key[i + 2])
        t3 = np.float64(q[i + 3]) - np.float64(key[i + 3])
        t4 = np.float64(q[i + 4]) - np.float64(key[i + 4])
        t5 = np.float64(q[i + 5]) - np.float64(key[i + 5])
        t6 = np.float64(q[i + 6]) - np.float64(key[i + 6])
        t7 = np.float64(q[i + 7]) - np.float64(key[i + 7])
        s0 += t0 * t0
        s1 += t1 * t1
        s2 += t2 * t2
        s3 += t3 * t3
        s4 += t4 * t4
        s5 += t5 * t5
        s6 += t6 * t6
        s7 += t7 * t7
        i += 8
    s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    while i < n:
        t = np.float64(q[i]) - np.float64(key[i])
        s += t * t
        i += 1
    return s


@numba.njit(cache=True, parallel=True, nogil=True)
def exact_rows(q, keys, out):
    for t in numba.prange(q.shape[0]):
        for j in range(keys.shape[0]):
            out[t, j] = exact_d2(q[t], keys[j])


@numba.njit(cache=True, nogil=True)
def insert(dist, index, n, d, j):
    """Put entry ``j`` at distance ``d`` into the list ``dist[:n], index[:n]`` sorted by
    (distance, index), keeping its capacity ``len(dist)``; entries may arrive in any order
    (an equal distance goes by index). Returns the new length."""
    cap = dist.shape[0]
    if n == cap and not (d < dist[n - 1] or (d == dist[n - 1] and j < index[n - 1])):
        return n
    p = n if n < cap else n - 1
    while p > 0 and (d < dist[p - 1] or (d == dist[p - 1] and j < index[p - 1])):
        dist[p] = dist[p - 1]
        index[p] = index[p - 1]
        p -= 1
    dist[p] = d
    index[p] = j
    return n + 1 if n < cap else n


@numba.njit(cache=True, nogil=True)
def insert_value(vals, n, v):
    """Put ``v`` into the ascending list ``vals[:n]``, keeping the ``len(vals)`` smallest;
    returns the new length."""
    cap = vals.shape[0]
    if n == cap and not v < vals[n - 1]:
        return n
    p = n if n < cap else n - 1
    while p > 0 and v < vals[p - 1]:
        vals[p] = vals[p - 1]
        p -= 1
    vals[p] = v
    return n + 1 if n < cap else n


@numba.njit(cache=True, nogil=True)
def lower_cut(bounds, n, hi, cut):
    """Offer the upper bound ``hi`` to ``bounds[:n]``, the ``len(bounds)`` smallest so far
    (:func:`insert_value`); once it is full the cut is its largest. Returns ``(n, cut)``."""
    if hi < cut:
        n = insert_value(bounds, n, hi)
        if n == bounds.shape[0]:
            cut = bounds[n - 1]
    return n, cut


@numba.njit(cache=True, nogil=True)
def merge_players(match_d, match_i, n_same, near_d, near_i, n_near, d_out, i_out):
    """Write a token's players into ``d_out, i_out``: its ``n_same`` matched entries, then its
    nearest others (``near_*[:n_near]``, ascending) not among them, until there are
    ``len(d_out)``, all in (distance, index) order. Returns how many were written."""
    m = d_out.shape[0]
    n = 0
    for r in range(n_same):
        n = insert(d_out, i_out, n, match_d[r], match_i[r])
    for r in range(n_near):
        if n == m:
            break
        taken = False
        for s in range(n_same):
            if match_i[s] == near_i[r]:
                taken = True
                break
        if not taken:
            n = insert(d_out, i_out, n, near_d[r], near_i[r])  # n < m here: always placed
    return n


@numba.njit(cache=True, nogil=True)
def measure_players(q, keys, key_rows, kept, kept_lo, kept_same, n_kept, near_cut, match_cut, n_match, d_out, i_out):
    """The exact end of the scans: the kept entries still under the final cuts measured in
    float64 (:func:`exact_d2`; ``kept[c]``'s key is ``keys[key_rows[c]]``), the matched ones
    (``kept_same``) and the nearest listed apart, then merged (:func:`merge_players`).
    Returns the number of players written."""
    m = d_out.shape[0]
    near_d = np.empty(m)
    near_i = np.empty(m, np.int64)
    match_d = np.empty(max(n_match, 1))
    match_i = np.empty(max(n_match, 1), np.int64)
    n_near = 0
    n_same = 0
    for c in range(n_kept):
        j = kept[c]
        lo = kept_lo[c]
        in_near = not lo > near_cut
        in_match = n_match > 0 and not lo > match_cut and kept_same[c]
        if in_near or in_match:
            x = exact_d2(q, keys[key_rows[c]])
            if in_match:
                n_same = insert(match_d, match_i, n_same, x, j)
            if in_near:
                n_near = insert(near_d, near_i, n_near, x, j)
    return merge_players(match_d, match_i, n_same, near_d, near_i, n_near, d_out, i_out)


# Why the pre-selection is exact (both scans below). From the float32 row, ``d`` (|q|^2
# added in float64, clipped at 0) bounds entry j's float64 distance x_j (exact_d2) to
# [lo_j, hi_j] = [d - e_j, d + e_j] (_preselect_margin). A list of capacity c keeps the c
# smallest upper bounds; its largest, the cut, is at least the c-th smallest x (c entries
# have x <= their hi <= cut). Every entry among the c nearest in (x, index) order, ties at
# the c-th included, has x at most the c-th smallest, so lo <= x <= cut. The cut only
# falls during the pass, so the entries kept as they come (lo at most the cut so far)
# include them all; those still under the final cut are measured exactly and inserted,
# by ascending index, into a list sorted by (x, index): the c nearest, whatever the
# float32 rounding was. (A NaN bound keeps its entry: only finite bounds rule one out.)


@numba.njit(cache=True, nogil=True)
def keep_entries(partial, q_norm, key_margin, rel, representative, token_class, piece_class, sentence_of, cls,
                 use_piece, n_match, m, carries):
    """The pass of one row over every entry (:func:`scan_row`), ``carries`` marked.
    Returns ``(kept, kept_lo, kept_same, n_kept, near_cut, match_cut)``: the entries kept as
    they came (their first ``n_kept``, in index order) and the cuts at the end of the pass."""
    n_entries = partial.shape[0]
    kept = np.empty(n_entries, np.int64)
    kept_lo = np.empty(n_entries)
    kept_same = np.empty(n_entries, np.bool_)
    classes = piece_class if use_piece else token_class
    qn = np.float64(q_norm)
    q_margin = rel * qn
    near_hi = np.empty(m)
    match_hi = np.empty(max(n_match, 1))
    n_near_hi = 0
    n_match_hi = 0
    near_cut = np.inf if m > 0 else -np.inf  # -inf: no list, nothing kept for it
    match_cut = np.inf if n_match > 0 else -np.inf
    n_kept = 0
    for j in range(n_entries):
        d = np.float64(partial[representative[j]]) + qn
        if d < 0.0:
            d = 0.0
        e = q_margin + key_margin[j]
        lo = d - e
        same = classes[j] == cls
        if same:
            carries[sentence_of[j]] = True
            if lo > near_cut and lo > match_cut:
                continue
        elif lo > near_cut:
            continue  # most entries: too far to be a player
        kept[n_kept] = j
        kept_lo[n_kept] = lo
        kept_same[n_kept] = same
        n_kept += 1
        hi = d + e
        n_near_hi, near_cut = lower_cut(near_hi, n_near_hi, hi, near_cut)
        if same:
            n_match_hi, match_cut = lower_cut(match_hi, n_match_hi, hi, match_cut)
    return kept, kept_lo, kept_same, n_kept, near_cut, match_cut


@numba.njit(cache=True, nogil=True)
def scan_row(partial, q_norm, q, keys, key_margin, rel, representative, token_class, piece_class, sentence_of, cls,
              use_piece, n_match, d_out, i_out, carries):
    kept, kept_lo, kept_same, n_kept, near_cut, match_cut = keep_entries(
        partial, q_norm, key_margin, rel, representative, token_class, piece_class, sentence_of, cls, use_piece,
        n_match, d_out.shape[0], carries)
    # The matched players, then the nearest others until there are m (the m nearest are m
    # distinct entries, so there always are), all in (distance, index) order.
    measure_players(q, keys, kept, kept, kept_lo, kept_same, n_kept, near_cut, match_cut, n_match, d_out, i_out)


@numba.njit(cache=True, nogil=True)
def keep_row(partial, q_norm, key_margin, rel, representative, token_class, piece_class, sentence_of, cls, use_piece,
             n_match, m, kept_out, lo_out, same_out, carries):
    """:func:`scan_row` without its keys: the kept entries still under the final cuts
    (those :func:`measure_players` measures, in the same order) into ``kept_out`` /
    ``lo_out`` / ``same_out`` as far as they hold. Returns ``(count, near_cut,
    match_cut)``; a count over the outputs' length means they hold only the first ones."""
    kept, kept_lo, kept_same, n_kept, near_cut, match_cut = keep_entries(
        partial, q_norm, key_margin, rel, representative, token_class, piece_class, sentence_of, cls, use_piece,
        n_match, m, carries)
    cap = kept_out.shape[0]
    count = 0
    for c in range(n_kept):
        lo = kept_lo[c]
        if not lo > near_cut or (n_match > 0 and not lo > match_cut and kept_same[c]):
            if count < cap:
                kept_out[count] = kept[c]
                lo_out[count] = lo
                same_out[count] = kept_same[c]
            count += 1
    return count, near_cut, match_cut


@numba.njit(cache=True, parallel=True, nogil=True)
def keep_rows(partial, q_norms, key_margin, rel, representative, token_class, piece_class, sentence_of, classes,
              use_piece, n_match, m, kept_out, lo_out, same_out, counts, near_cuts, match_cuts, carries):
    """:func:`keep_row` for every row (query) of ``partial``, in parallel: the host search
    over keys kept in their sources' blocks (``Datastore``), whose players are then measured
    from the kept entries' keys alone (:func:`measure_kept_rows`)."""
    for t in numba.prange(partial.shape[0]):
        counts[t], near_cuts[t], match_cuts[t] = keep_row(
            partial[t], q_norms[t], key_margin, rel, representative, token_class, piece_class, sentence_of,
            classes[t], use_piece[t], n_match, m, kept_out[t], lo_out[t], same_out[t], carries[t])


@numba.njit(cache=True, nogil=True)
def keep_rows_serial(partial, q_norms, key_margin, rel, representative, token_class, piece_class, sentence_of,
                     classes, use_piece, n_match, m, kept_out, lo_out, same_out, counts, near_cuts, match_cuts,
                     carries):
    for t in range(partial.shape[0]):
        counts[t], near_cuts[t], match_cuts[t] = keep_row(
            partial[t], q_norms[t], key_margin, rel, representative, token_class, piece_class, sentence_of,
            classes[t], use_piece[t], n_match, m, kept_out[t], lo_out[t], same_out[t], carries[t])


@numba.njit(cache=True, parallel=True, nogil=True)
def scan_rows(partial, q_norms, q, keys, key_margin, rel, representative, token_class, piece_class, sentence_of,
               classes, use_piece, n_match, d_out, i_out, carries):
    for t in numba.prange(partial.shape[0]):
        scan_row(partial[t], q_norms[t], q[t], keys, key_margin, rel, representative, token_class, piece_class,
                  sentence_of, classes[t], use_piece[t], n_match, d_out[t], i_out[t], carries[t])


@numba.njit(cache=True, nogil=True)
def scan_rows_serial(partial, q_norms, q, keys, key_margin, rel, representative, token_class, piece_class,
                      sentence_of, classes, use_piece, n_match, d_out, i_out, carries):
    for t in range(partial.shape[0]):
        scan_row(partial[t], q_norms[t], q[t], keys, key_margin, rel, representative, token_class, piece_class,
                  sentence_of, classes[t], use_piece[t], n_match, d_out[t], i_out[t], carries[t])


@numba.njit(cache=True, parallel=True, nogil=True)
def measure_kept_rows(q, kept_keys, row_starts, kept, kept_lo, kept_same, near_cuts, match_cuts, n_match, d_out,
                      i_out):
    """The exact end of the device search (``_device_search``): row ``t``'s kept entries
    ``kept[row_starts[t]:row_starts[t + 1]]`` (their keys at the same rows of ``kept_keys``,
    their lower bounds and whether they carry the row's class beside them) measured and
    merged by :func:`measure_players` under the row's final cuts, which the device computed
    over every entry at once."""
    rows = np.arange(kept.shape[0])
    for t in numba.prange(q.shape[0]):
        a, b = row_starts[t], row_starts[t + 1]
        measure_players(q[t], kept_keys, rows[a:b], kept[a:b], kept_lo[a:b], kept_same[a:b], b - a, near_cuts[t],
                        match_cuts[t], n_match, d_out[t], i_out[t])


@numba.njit(cache=True, nogil=True)
def select_row(partial, q_norm, q, keys, key_margin, rel, representative, allowed, use_mask, d_out, i_out):
    """The ``len(d_out)`` nearest entries (among those ``allowed`` with ``use_mask``) in
    (distance, index) order into ``d_out, i_out`` (the caller pads the rest)."""
    w = d_out.shape[0]
    n_entries = partial.shape[0]
    qn = np.float64(q_norm)
    q_margin = rel * qn
    hi_list = np.empty(w)
    n_hi = 0
    cut = np.inf
    kept = np.empty(n_entries, np.int64)
    kept_lo = np.empty(n_entries)
    n_kept = 0
    for j in range(n_entries):
        if use_mask and not allowed[j]:
            continue
        d = np.float64(partial[representative[j]]) + qn
        if d < 0.0:
            d = 0.0
        e = q_margin + key_margin[j]
        lo = d - e
        if lo > cut:
            continue
        kept[n_kept] = j
        kept_lo[n_kept] = lo
        n_kept += 1
        hi = d + e
        n_hi, cut = lower_cut(hi_list, n_hi, hi, cut)
    n = 0
    for c in range(n_kept):
        if not kept_lo[c] > cut:
            j = kept[c]
            n = insert(d_out, i_out, n, exact_d2(q, keys[j]), j)


@numba.njit(cache=True, parallel=True, nogil=True)
def select_rows(partial, q_norms, q, keys, key_margin, rel, representative, allowed, use_mask, d_out, i_out):
    for t in numba.prange(partial.shape[0]):
        select_row(partial[t], q_norms[t], q[t], keys, key_margin, rel, representative, allowed[t], use_mask,
                    d_out[t], i_out[t])


@numba.njit(cache=True, nogil=True)
def select_rows_serial(partial, q_norms, q, keys, key_margin, rel, representative, allowed, use_mask, d_out, i_out):
    for t in range(partial.shape[0]):
        select_row(partial[t], q_norms[t], q[t], keys, key_margin, rel, representative, allowed[t], use_mask,
                    d_out[t], i_out[t])


@numba.njit(cache=True, nogil=True)
def sequence_rows(token_class, sentence_of, order, sorted_class, flat, bounds, out):
    n_entries = token_class.shape[0]
    for r in range(bounds.shape[0] - 1):
        a = bounds[r]
        n = bounds[r + 1] - a
        if n == 0:
            continue
        lo = np.searchsorted(sorted_class, flat[a])
        hi = np.searchsorted(sorted_class, flat[a] + 1)
        for p in range(lo, hi):
            j = order[p]
            if j + n > n_entries or out[r, sentence_of[j]]:
                continue
            same = True
            for i in range(1, n):
                if token_class[j + i] != flat[a + i] or sentence_of[j + i] != sentence_of[j]:
                    same = False
                    break
            if same:
                out[r, sentence_of[j]] = True


@numba.njit(cache=True, nogil=True)
def _sequence_less(ids, starts, a, b):
    """Whether sentence ``a``'s token sequence sorts before ``b``'s (then: lower index)."""
    la = starts[a + 1] - starts[a]
    lb = starts[b + 1] - starts[b]
    n = min(la, lb)
    for i in range(n):
        x = ids[starts[a] + i]
        y = ids[starts[b] + i]
        if x != y:
            return x < y
    if la != lb:
        return la < lb
    return a < b


@numba.njit(cache=True, nogil=True)
def prefix_representatives(ids, starts):
    """Per entry, the entry whose key it shares (itself when none): the compiled rule of
    :func:`~tokenshapley_rag._datastore._share_prefix_keys` (its docstring says why).
    Sentences (``ids[starts[s]:starts[s + 1]]``) are merge-sorted by token sequence, then
    index; each takes its predecessor's representatives for the prefix they share plus one
    (the key before token ``j`` depends on tokens ``[0, j)``)."""
    n_sent = starts.shape[0] - 1
    representative = np.arange(starts[n_sent])
    order = np.arange(n_sent)
    buffer = np.empty(n_sent, np.int64)
    width = 1
    while width < n_sent:  # bottom-up merge sort: stable, O(n log n) comparisons
        for lo in range(0, n_sent, 2 * width):
            mid = min(lo + width, n_sent)
            hi = min(lo + 2 * width, n_sent)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if _sequence_less(ids, starts, order[j], order[i]):
                    buffer[k] = order[j]
                    j += 1
                else:
                    buffer[k] = order[i]
                    i += 1
                k += 1
            while i < mid:
                buffer[k] = order[i]
                i += 1
                k += 1
            while j < hi:
                buffer[k] = order[j]
                j += 1
                k += 1
        order[:] = buffer
        width *= 2
    for r in range(1, n_sent):
        prev, cur = order[r - 1], order[r]
        a, b = starts[prev], starts[cur]
        n = min(starts[prev + 1] - a, starts[cur + 1] - b)
        if n == 0:
            continue
        shared = 0
        while shared < n and ids[a + shared] == ids[b + shared]:
            shared += 1
        for j in range(min(shared + 1, n)):
            representative[b + j] = representative[a + j]
    return representative


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def dot32(q, key):
    """``q . key`` in float32 in whatever order LLVM vectorises it: used only where the
    pre-selection bound (``_preselect_margin``) covers any summation order."""
    s = np.float32(0.0)
    for i in range(q.shape[0]):
        s += q[i] * key[i]
    return s


@numba.njit(cache=True, nogil=True)
def probe_row(q, q_norm, keys, norms, key_margin, rel, representative, classes, sentence_of, cls, n_match,
              probes, list_order, list_starts, class_order, class_sorted, products, slot_base, d_out, i_out, carries):
    """:func:`scan_row` over the candidates of the approximate search only: every entry of
    the token's class (so its matched players and carrying sentences are exact) and the
    entries of its probed lists. Float32 distances pre-select within the same bound: the
    class's from :func:`dot32`, the lists' from ``products`` (:func:`list_products`, probe
    ``p``'s list at ``slot_base[p]``); the survivors are measured in float64 (:func:`exact_d2`) and ordered by
    (distance, index). Returns the number of players found (the caller searches exactly when it is under
    ``len(d_out)``)."""
    m = d_out.shape[0]
    qn = np.float64(q_norm)
    q_margin = rel * qn
    two = np.float32(2.0)
    near_hi = np.empty(m)
    match_hi = np.empty(max(n_match, 1))
    n_near_hi = 0
    n_match_hi = 0
    near_cut = np.inf if m > 0 else -np.inf
    match_cut = np.inf if n_match > 0 else -np.inf
    c_lo = np.searchsorted(class_sorted, cls)
    c_hi = np.searchsorted(class_sorted, cls + 1)
    n_cand = c_hi - c_lo
    for p in range(probes.shape[0]):
        n_cand += list_starts[probes[p] + 1] - list_starts[probes[p]]
    kept = np.empty(n_cand, np.int64)
    kept_lo = np.empty(n_cand)
    kept_same = np.empty(n_cand, np.bool_)
    n_kept = 0
    # Pass 1: the class's members; pass 2: the probed lists' other entries.
    for stage in range(2):
        n_src = c_hi - c_lo if stage == 0 else probes.shape[0]
        for s in range(n_src):
            a = c_lo + s if stage == 0 else list_starts[probes[s]]
            b = a + 1 if stage == 0 else list_starts[probes[s] + 1]
            for c in range(a, b):
                j = class_order[c] if stage == 0 else list_order[c]
                same = stage == 0
                if not same and classes[j] == cls:
                    continue  # seen in pass 1
                if same:
                    carries[sentence_of[j]] = True
                if same:
                    r = representative[j]
                    partial = norms[r] - two * dot32(q, keys[r])
                else:
                    partial = products[slot_base[s] + c - a]
                d = np.float64(partial) + qn
                if d < 0.0:
                    d = 0.0
                e = q_margin + key_margin[j]
                lo = d - e
                if same:
                    if lo > near_cut and lo > match_cut:
                        continue
                elif lo > near_cut:
                    continue
                kept[n_kept] = j
                kept_lo[n_kept] = lo
                kept_same[n_kept] = same
                n_kept += 1
                hi = d + e
                n_near_hi, near_cut = lower_cut(near_hi, n_near_hi, hi, near_cut)
                if same:
                    n_match_hi, match_cut = lower_cut(match_hi, n_match_hi, hi, match_cut)
    return measure_players(q, keys, kept, kept, kept_lo, kept_same, n_kept, near_cut, match_cut, n_match, d_out, i_out)


@numba.njit(cache=True, parallel=True, nogil=True)
def probe_rows(q, q_norms, keys, norms, key_margin, rel, representative, token_class, piece_class, sentence_of,
               classes, use_piece, n_match, probes, list_order, list_starts, token_groups, token_sorted, piece_groups,
               piece_sorted, products, slot_base, d_out, i_out, carries, found):
    for t in numba.prange(q.shape[0]):
        if use_piece[t]:
            found[t] = probe_row(q[t], q_norms[t], keys, norms, key_margin, rel, representative, piece_class,
                                 sentence_of, classes[t], n_match, probes[t], list_order, list_starts, piece_groups,
                                 piece_sorted, products, slot_base[t], d_out[t], i_out[t], carries[t])
        else:
            found[t] = probe_row(q[t], q_norms[t], keys, norms, key_margin, rel, representative, token_class,
                                 sentence_of, classes[t], n_match, probes[t], list_order, list_starts, token_groups,
                                 token_sorted, products, slot_base[t], d_out[t], i_out[t], carries[t])


@numba.njit(cache=True, parallel=True, nogil=True)
def list_products(q, keys, norms, list_order, list_starts, pair_order, pair_starts, n_probes, slot_base, products):
    """``|k|^2 - 2 q.k`` in float32 for every query and every entry of each list it probes,
    list by list: each key is read once and met by every query probing its list while in
    cache, as a matrix product would (each query alone would read every probed key again).
    List ``l``'s entries are ``list_order[list_starts[l]:list_starts[l + 1]]``. Pair
    ``pair_order[i]`` (``t * n_probes + p``: query ``t``'s probe ``p``) is in list ``l`` for
    ``pair_starts[l] <= i < pair_starts[l + 1]``; its row goes to ``products[slot_base[t, p]:]``."""
    two = np.float32(2.0)
    for lst in numba.prange(list_starts.shape[0] - 1):
        a, b = list_starts[lst], list_starts[lst + 1]
        for c in range(a, b):
            j = list_order[c]
            key = keys[j]
            norm = norms[j]
            for i in range(pair_starts[lst], pair_starts[lst + 1]):
                pair = pair_order[i]
                t = pair // n_probes
                products[slot_base[t, pair % n_probes] + c - a] = norm - two * dot32(q[t], key)


@numba.njit(cache=True, nogil=True)
def widen_halves(halves, table, out):
    """``out[i] = table[halves[i]]``: float16 values (their bits, ``uint16``) widened to
    float32 through the table of all 65,536 conversions (``table``: numpy's own, so the
    result is numpy's ``astype`` bit for bit). One serial pass: numpy's conversion is not
    vectorised, and torch's runs in threads whose start-up under load cost more than the
    copy (docs/reports/performance.md, "Long contexts")."""
    for i in range(halves.shape[0]):
        out[i] = table[halves[i]]
