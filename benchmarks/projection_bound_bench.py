"""The projection lower bound as an exact candidate search, measured against the shipped exact
search (issue 25; docs/reports/performance.md, "Long contexts: the projection bound with a fixed
basis"). Not shipped: it was slower in every case measured. Kept to reproduce the figures.

With ``B`` an orthonormal basis (the top ``--directions`` principal axes of the keys of NQ dev
passages that are in no context below: fixed per encoder, not fitted on the datastore), each key
``k`` is kept as ``k' = (B^T k, |k - B B^T k|)`` (float32, ``directions + 1`` wide), and likewise
each query. Then ``|q' - k'|^2 = |q|^2 + |k|^2 - 2 q'.k'`` is a lower bound of ``|q - k|^2`` and has
the shape of the shipped search's product, so :func:`host_partial_distances` computes it in the
source blocks. Per answer token: one pass keeps the ``m`` entries of least bound (and the
``n_match`` of its class) as seeds, whose exact distances give cuts; a second pass keeps every
entry whose bound (less the float32 margin of the full-width product, which covers the
projection's rounding with room) is under the cuts; those are measured in float64 and ordered
as the shipped search orders them (:func:`measure_kept_rows`). A token with more than
``--cap`` of the context kept is searched by the shipped exact search. The players are compared
with ``Datastore.game_candidates``, every array equal.

    HF_HUB_OFFLINE=1 python benchmarks/projection_bound_bench.py --data ../shared/data \
        --sizes 16384 65536 --directions 63 127 191
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numba
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from long_context_bench import keep_in_memory, load_avg, nq_passages, padded  # noqa: E402

from tokenshapley_rag import TokenShapley  # noqa: E402
from tokenshapley_rag._datastore import Datastore, _preselect_margin, host_partial_distances  # noqa: E402
from tokenshapley_rag._kernels import exact_d2, insert, measure_kept_rows  # noqa: E402
from tokenshapley_rag._types import Source  # noqa: E402
from tokenshapley_rag.benchmark import load_dataset  # noqa: E402


def project(keys, B):
    """``(n, r + 1)`` float32: the keys' coordinates on ``B`` and their residual norms."""
    k = keys.astype(np.float64)
    p = k @ B
    r = np.sqrt(np.einsum("nd,nd->n", k - p @ B.T, k - p @ B.T))
    return np.ascontiguousarray(np.concatenate([p, r[:, None]], 1).astype(np.float32))


@numba.njit(cache=False, nogil=True)
def seed_row(partial, qn, key_margin, rep, classes, sentence_of, cls, n_match, near_d, near_i, match_d, match_i, carries):
    n_near = 0
    n_same = 0
    for j in range(partial.shape[0]):
        d = np.float64(partial[rep[j]]) + qn
        if d < 0.0:
            d = 0.0
        lo = d - key_margin[j]
        n_near = insert(near_d, near_i, n_near, lo, j)
        if classes[j] == cls:
            carries[sentence_of[j]] = True
            if n_match > 0:
                n_same = insert(match_d, match_i, n_same, lo, j)
    return n_near, n_same


@numba.njit(cache=False, parallel=True, nogil=True)
def seed_rows(partial, qns, q_margins, key_margin, rep, token_class, piece_class, sentence_of, classes, use_piece, n_match,
              near_d, near_i, match_d, match_i, n_nears, n_sames, carries):
    for t in numba.prange(partial.shape[0]):
        cl = piece_class if use_piece[t] else token_class
        n_nears[t], n_sames[t] = seed_row(partial[t], np.float64(qns[t]) - q_margins[t], key_margin, rep, cl,
                                          sentence_of, classes[t], n_match, near_d[t], near_i[t], match_d[t],
                                          match_i[t], carries[t])


@numba.njit(cache=False, parallel=True, nogil=True)
def keep_bounded_rows(partial, qns, q_margins, key_margin, rep, token_class, piece_class, classes, use_piece, n_match,
                      near_cuts, match_cuts, kept, lo_out, same_out, counts):
    cap = kept.shape[1]
    for t in numba.prange(partial.shape[0]):
        cl = piece_class if use_piece[t] else token_class
        cls = classes[t]
        qn = np.float64(qns[t])
        qm = q_margins[t]
        nc = near_cuts[t]
        mc = match_cuts[t]
        row = partial[t]
        c = 0
        for j in range(row.shape[0]):
            d = np.float64(row[rep[j]]) + qn
            if d < 0.0:
                d = 0.0
            lo = d - qm - key_margin[j]
            if lo > nc:
                if n_match == 0 or lo > mc or cl[j] != cls:
                    continue
                same = True
            else:
                same = cl[j] == cls
            if c < cap:
                kept[t, c] = j
                lo_out[t, c] = lo
                same_out[t, c] = same
            c += 1
        counts[t] = c


@numba.njit(cache=False, nogil=True)
def seed_d2(q, keys, x):
    for t in range(q.shape[0]):
        for c in range(keys.shape[1]):
            x[t, c] = exact_d2(q[t], keys[t, c])


def rows_of(blocks, starts, entries, width):
    out = np.empty((len(entries), width), dtype=np.float32)
    block = np.searchsorted(starts, entries, side="right") - 1
    for i in np.unique(block).tolist():
        at = np.flatnonzero(block == i)
        out[at] = blocks[i][entries[at] - starts[i]]
    return out


def bounded(store, pblocks, B, q, classes, m, n_match, pieces, cap_frac, timing):
    """``game_candidates`` by the projection bound (module docstring); parts' seconds into ``timing``."""
    t0 = time.perf_counter()
    T = q.shape[0]
    m = min(m, store.size)
    use_piece = np.zeros(T, bool) if pieces is None else pieces.astype(bool)
    qd = torch.from_numpy(q.astype(np.float64))
    BT = torch.from_numpy(B)
    pq = qd @ BT
    res = qd - pq @ BT.T
    qp = torch.cat([pq, torch.linalg.vector_norm(res, dim=1)[:, None]], 1).float().numpy()
    qn = np.einsum("td,td->t", q, q)
    rel = _preselect_margin(q.shape[1])[0]
    q_margins = rel * qn.astype(np.float64)
    key_margin = store._key_margin
    partial = host_partial_distances(qp * np.float32(-2.0), pblocks, store._norms)
    t1 = time.perf_counter()
    near_d = np.zeros((T, m)); near_i = np.zeros((T, m), np.int64)
    nm = max(n_match, 1)
    match_d = np.zeros((T, nm)); match_i = np.zeros((T, nm), np.int64)
    n_nears = np.zeros(T, np.int64); n_sames = np.zeros(T, np.int64)
    carries = np.zeros((T, len(store.sentences)), bool)
    seed_rows(partial, qn, q_margins, key_margin, store._representative, store.token_class, store.piece_class,
              store.sentence_of, classes, use_piece, n_match, near_d, near_i, match_d, match_i, n_nears, n_sames, carries)
    # exact distances of seeds
    seeds = np.concatenate([near_i, match_i], 1)
    keys = rows_of(store._blocks, store._block_starts, store._representative[seeds.ravel()], q.shape[1])
    x = np.empty(seeds.shape)
    seed_d2(q, keys.reshape(seeds.shape[0], seeds.shape[1], -1), x)
    near_cuts = x[:, :m].max(1)
    match_cuts = np.full(T, -np.inf)
    if n_match:  # a class with fewer than n_match entries: all of them are players (cut inf)
        mc = np.full(T, np.inf)
        for t in range(T):
            if n_sames[t] >= n_match:
                mc[t] = x[t, m:m + n_match].max()
        match_cuts = mc
    t2 = time.perf_counter()
    capn = max(int(cap_frac * store.size), 4 * m)
    kept = np.zeros((T, capn), np.int64); lo = np.zeros((T, capn)); same = np.zeros((T, capn), bool)
    counts = np.zeros(T, np.int64)
    keep_bounded_rows(partial, qn, q_margins, key_margin, store._representative, store.token_class, store.piece_class,
                      classes, use_piece, n_match, near_cuts, match_cuts, kept, lo, same, counts)
    t3 = time.perf_counter()
    d_out = np.zeros((T, m)); i_out = np.zeros((T, m), np.int64)
    easy = counts <= capn
    ez = np.flatnonzero(easy)
    if len(ez):
        c = counts[ez]
        took = np.arange(capn)[None, :] < c[:, None]
        flat = kept[ez][took]
        rs = np.zeros(len(ez) + 1, np.int64); np.cumsum(c, out=rs[1:])
        kk = rows_of(store._blocks, store._block_starts, store._representative[flat], q.shape[1])
        dd = np.zeros((len(ez), m)); ii = np.zeros((len(ez), m), np.int64)
        measure_kept_rows(q[ez], kk, rs, flat, lo[ez][took], same[ez][took], near_cuts[ez], match_cuts[ez], n_match, dd, ii)
        d_out[ez], i_out[ez] = dd, ii
    t4 = time.perf_counter()
    hard = np.flatnonzero(~easy)
    if len(hard):
        sub = store._exact_candidates(q[hard], qn[hard], classes[hard], use_piece[hard], m, n_match)
        d_out[hard], i_out[hard] = sub[0], sub[1]
    t5 = time.perf_counter()
    timing.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, len(hard), float(np.median(counts)), float(np.mean(np.minimum(counts, capn)))))
    return d_out, i_out, carries


def basis(sample: np.ndarray, r: int) -> np.ndarray:
    """The top ``r`` principal axes of ``sample``'s keys, float64 orthonormal ``(width, r)``."""
    s = sample.astype(np.float64)
    s = s - s.mean(0)
    _, vectors = np.linalg.eigh(s.T @ s)
    return np.ascontiguousarray(vectors[:, ::-1][:, :r])


def capture(ts, sources):
    """The datastore of ``sources`` (rebuilt) and the ``game_candidates`` calls of one warm
    ``attribute()`` on them."""
    calls = []
    original = Datastore.game_candidates

    def spy(self, q, classes, m, n_match, pieces=None):
        calls.append((np.array(q, np.float32), np.array(classes), m, n_match, None if pieces is None else np.array(pieces)))
        return original(self, q, classes, m, n_match, pieces)

    Datastore.game_candidates = spy
    try:
        ts.pipeline.builder._datastores.clear()
        ts.attribute(query=SOURCES_QUERY[0], sources=sources, response=SOURCES_QUERY[1])
    finally:
        Datastore.game_candidates = original
    return ts.pipeline.builder.datastore_for(sources), calls


SOURCES_QUERY = ["", ""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.environ.get("TOKENSHAPLEY_DATA"), required=False)
    ap.add_argument("--sizes", type=int, nargs="+", default=[16384, 65536])
    ap.add_argument("--directions", type=int, nargs="+", default=[127])
    ap.add_argument("--cap", type=float, default=0.04, help="kept fraction above which a token is searched exactly")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    ts = TokenShapley(cache_dir=None, max_source_chars=None, max_context_chars=None, approximate_above=10**9)
    keep_in_memory(ts, 1 << 16)
    data = Path(args.data)
    pool = nq_passages(data)
    examples = [("quotesum", 0), ("quotesum", 1), ("verigran", 0)]
    # The basis: keys of the last 300 NQ passages, which no context below reaches.
    sample = ts.build_datastore([Source(f"far-{i}", t) for i, t in enumerate(pool[-300:])]).keys
    print("| set, answer | context tokens | answer tokens | directions | identical | exact (ms) | bounded (ms) "
          "| · product | · seeds | · keep | · measure | · exact rows | tokens searched exactly | kept, median / mean | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        for name, i in examples:
            ex = [e for e in load_dataset(name, data) if e.answer.strip()][i]
            sources = padded(ts, list(ex.sources), pool, size)
            SOURCES_QUERY[:] = [ex.question, ex.answer]
            store, calls = capture(ts, sources)
            for r in args.directions:
                B = basis(sample, r)
                pblocks = [project(b, B) for b in store._blocks]
                for q, classes, m, n_match, pieces in calls:
                    ref = store.game_candidates(q, classes, m, n_match, pieces)
                    timing = []
                    got = bounded(store, pblocks, B, q, classes, m, n_match, pieces, args.cap, timing)
                    same = all(np.array_equal(a, b) for a, b in zip(ref, got))
                    exact, fast = [], []
                    timing = []
                    for _ in range(args.repeats):  # interleaved
                        t0 = time.perf_counter()
                        store.game_candidates(q, classes, m, n_match, pieces)
                        exact.append(time.perf_counter() - t0)
                        t0 = time.perf_counter()
                        bounded(store, pblocks, B, q, classes, m, n_match, pieces, args.cap, timing)
                        fast.append(time.perf_counter() - t0)
                    parts = np.median(np.array([t[:5] for t in timing]), 0) * 1e3
                    print(f"| {name} {i} | {store.size:,} | {q.shape[0]} | {r} | {same} | {1e3 * np.median(exact):.1f} | "
                          f"{1e3 * np.median(fast):.1f} | " + " | ".join(f"{x:.1f}" for x in parts) +
                          f" | {timing[-1][5]} | {timing[-1][6]:.0f} / {timing[-1][7]:.0f} | {load_avg()} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
