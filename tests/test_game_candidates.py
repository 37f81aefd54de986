"""The warm path's compiled and batched steps against the plain computations they replace
(issue 8): the one-pass candidate scan, the batched verbatim checks and the vectorised
source ranking must give the same values, ties included; and the candidates do not depend
on the float32 matrix product's rounding (row blocks, thread counts). No model."""

import itertools
from contextlib import contextmanager, nullcontext

import numba
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

try:
    import threadpoolctl
except ImportError:  # optional: then only numba's and torch's threads are varied
    threadpoolctl = None

from tokenshapley_rag._citations import rank_sources
from tokenshapley_rag._text_search import SentenceTexts, sentences_with_sequence
from tokenshapley_rag._token_game import sentence_values
from tokenshapley_rag._datastore import Datastore, SentenceRecord, _PARALLEL_CELLS
from tokenshapley_rag._sentence_cache import CachedSentence
from tokenshapley_rag import _datastore
from tokenshapley_rag._types import Source
from tokenshapley_rag.shapley import knn_shapley_batch


def _random_store(rng, token_ids, hidden=6, n_classes=4, scale=3.0, blocks=None):
    """A datastore of random keys; ``blocks``: a random generator that splits the entries
    into consecutive source blocks (``source_keys``, some empty), already widened."""
    records = [SentenceRecord(i % 3, i, 0, 1, f"s{i}") for i in range(len(token_ids))]
    entries = [
        CachedSentence(ids=ids, offsets=np.zeros((len(ids), 2), np.int64),
                       keys=(rng.normal(size=(len(ids), hidden)) * scale).astype(np.float16))
        for ids in token_ids
    ]
    words = [ids % n_classes for ids in token_ids]
    pieces = [(ids // 2) % n_classes for ids in token_ids]
    source_keys = None
    if blocks is not None:
        cuts = np.sort(blocks.integers(0, len(entries) + 1, size=blocks.integers(0, 4)))
        source_keys = []
        for a, b in zip([0, *cuts], [*cuts, len(entries)]):
            keys = np.concatenate([e.keys for e in entries[a:b]] or [np.zeros((0, hidden))]).astype(np.float32)
            source_keys.append((keys, np.einsum("nd,nd->n", keys, keys)))
    return Datastore(records, entries, words, pieces, source_keys=source_keys)


def _oracle(store, queries, classes, pieces, m, n_match):
    """The mask-based searches (``mixed_nearest`` / ``nearest`` and ``sentences_holding``),
    with every entry ordered (no cut, no pre-selection) by its float64 distance."""
    m = min(m, store.size)
    d2 = store.exact_distances(queries)
    cls = np.where(pieces[:, None], store.piece_class[None, :], store.token_class[None, :])
    same = cls == classes[:, None]
    d_out, i_out = [], []
    for t in range(len(queries)):
        order = np.lexsort((np.arange(store.size), d2[t]))
        matched = [int(i) for i in order if same[t, i]][:n_match]
        chosen = matched + [int(i) for i in order[:m] if int(i) not in matched][: m - len(matched)]
        chosen.sort(key=lambda i: (d2[t, i], i))
        d_out.append(d2[t, chosen])
        i_out.append(chosen)
    return np.array(d_out, np.float64).reshape(len(queries), m), np.array(i_out).reshape(len(queries), m), \
        store.sentences_holding(classes, pieces)


_NEEDS_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")


def _on_device(store, device="cpu"):
    """The same datastore searched by the device path (:mod:`._device_search`), by default
    with torch's CPU as the device: the plumbing and the arithmetic a GPU runs, on any
    machine (the tests marked for CUDA run it on a GPU where there is one)."""
    twin = store.searched_on_host()
    twin.search_device = torch.device(device)
    return twin


def _mirror_queries(store, rng, n):
    """Queries halfway between two random keys: both at the same distance in exact
    arithmetic (and in float64 when the midpoint is a float32, which it usually is), which
    float32 matrix products put either way round."""
    a, b = rng.integers(0, store.size, size=(2, n))
    return ((store.keys[a].astype(np.float64) + store.keys[b]) / 2).astype(np.float32)


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 7), min_size=1, max_size=6),
    copies=st.integers(0, 3),
    n_queries=st.integers(1, 7),
    m=st.integers(1, 12),
    mixed=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
@pytest.mark.parametrize("where", ["host", "blocks", "cpu", pytest.param("cuda", marks=_NEEDS_CUDA)])
def test_game_candidates_equal_the_mask_based_searches(where, sizes, copies, n_queries, m, mixed, seed):
    rng = np.random.default_rng(seed)
    token_ids = [rng.integers(0, 12, size=n).astype(np.int64) for n in sizes]
    token_ids += [token_ids[0].copy() for _ in range(copies)]  # equal sentences: exactly tied keys
    store = _random_store(np.random.default_rng(seed + 1), token_ids)
    if not store.size:
        return
    queries = (rng.normal(size=(n_queries, 6)) * 3).astype(np.float32)
    queries[0] = store.keys[0]  # at distance 0 of a key shared by every copy
    queries[1:3] = _mirror_queries(store, rng, 2)[: max(0, n_queries - 1)]
    classes = rng.integers(0, 4, size=n_queries)
    pieces = rng.random(n_queries) < 0.3
    n_match = min(m, store.size) // 2 if mixed else 0
    if where == "blocks":  # the same keys, given widened in source blocks, searched there
        searched = _random_store(np.random.default_rng(seed + 1), token_ids, blocks=rng)
        assert searched._keys is None
    else:
        searched = store if where == "host" else _on_device(store, where)
    d2, idx, carries = searched.game_candidates(queries, classes, m, n_match, pieces)
    if where == "blocks":
        assert searched._keys is None  # searched in place, no stacked copy
        np.testing.assert_array_equal(searched.keys, store.keys)
    want_d, want_i, want_carries = _oracle(store, queries, classes, pieces, m, n_match)
    # Exact equality: both order the same float64 distances (exact_distances, a function
    # of the two vectors' bits) by (distance, index); the scan's float32 pre-selection
    # only skips entries that provably cannot be players.
    np.testing.assert_array_equal(idx, want_i)
    np.testing.assert_array_equal(d2, want_d)
    np.testing.assert_array_equal(carries, want_carries)
    if not pieces.any() and where == "host":
        # The mask-based searches (the same exact distances, so the same bits).
        mask = store.class_mask(classes)
        old_d, old_i = store.mixed_nearest(queries, m, n_match, mask) if mixed else store.nearest(queries, m)
        np.testing.assert_array_equal(idx, old_i)
        np.testing.assert_array_equal(d2, old_d)


def test_many_exact_ties_keep_the_lowest_indices():
    # 40 copies of one sentence: every entry at a position ties with 39 others, far more
    # than any slack; the players must be the lowest indices, in index order.
    rng = np.random.default_rng(3)
    token_ids = [np.array([1, 2, 3])] * 40
    store = _random_store(rng, token_ids)
    q = store.keys[[1]].copy()  # distance 0 to position 1 of every copy
    d2, idx, _ = store.game_candidates(q, np.array([2]), 10, 5)
    assert idx[0].tolist() == [1 + 3 * c for c in range(10)]
    assert (d2[0] == 0).all()
    _, idx_nearest, _ = store.game_candidates(q, np.array([2]), 10, 0)
    assert idx_nearest[0].tolist() == idx[0].tolist()


def test_parallel_scan_equals_serial(monkeypatch):
    rng = np.random.default_rng(8)
    store = _random_store(rng, [rng.integers(0, 12, size=9).astype(np.int64) for _ in range(20)])
    queries = (rng.normal(size=(30, 6)) * 3).astype(np.float32)
    classes, pieces = rng.integers(0, 4, size=30), rng.random(30) < 0.5
    serial = store.game_candidates(queries, classes, 10, 5, pieces)
    monkeypatch.setattr(_datastore, "_PARALLEL_CELLS", 1)
    parallel = store.game_candidates(queries, classes, 10, 5, pieces)
    assert _PARALLEL_CELLS > 1
    for a, b in zip(serial, parallel):
        np.testing.assert_array_equal(a, b)


@contextmanager
def _threads(numba_threads, blas_threads):
    """numba's threads (at most its pool), torch's (and MKL's), and with threadpoolctl every
    BLAS and OpenMP pool in the process (numpy's OpenBLAS included), restored after."""
    old_numba, old_torch = numba.get_num_threads(), torch.get_num_threads()
    numba.set_num_threads(min(numba_threads, numba.config.NUMBA_NUM_THREADS))
    torch.set_num_threads(blas_threads)
    try:
        with threadpoolctl.threadpool_limits(blas_threads) if threadpoolctl else nullcontext():
            yield
    finally:
        numba.set_num_threads(old_numba)
        torch.set_num_threads(old_torch)


def test_candidates_and_values_are_identical_for_any_block_and_thread_count(monkeypatch):
    # The float32 product |k|^2 - 2 q.k rounds differently for other row blocks (matrix-
    # vector vs matrix-matrix kernels) and BLAS thread counts, by a few units in the last
    # place (this test's predecessor compared it bit for bit and failed under load). The
    # search only pre-selects with it, with a margin that bounds that rounding
    # (_preselect_margin); the candidates' distances are then float64 sums in one fixed
    # order, from the keys, and are ordered by (distance, index). So the players, their
    # distances and their Shapley values are identical bits whatever the blocks and threads:
    # exact equality is what must hold, not a tolerance. Realistic width (the default
    # model's 576), exact ties (copies of sentences) and mirror ties (queries halfway
    # between two keys, which float32 rounding orders either way).
    rng = np.random.default_rng(9)
    base = [rng.integers(0, 12, size=9).astype(np.int64) for _ in range(30)]
    store = _random_store(rng, base + [base[0], base[3]], hidden=576, scale=1.0)
    queries = np.concatenate([
        (store.keys[rng.integers(0, store.size, 12)] + rng.normal(size=(12, 576)) * 0.3).astype(np.float32),
        _mirror_queries(store, rng, 12),
        store.keys[[0, 5, 28]],  # distance 0 to a key shared by two sentences
        (rng.normal(size=(9, 576))).astype(np.float32),
    ])
    t_rows = len(queries)
    classes = rng.integers(0, 4, size=t_rows)
    pieces = rng.random(t_rows) < 0.3

    def run():
        d2, idx, carries = store.game_candidates(queries, classes, 10, 5, pieces)
        return d2, idx, carries, sentence_values(d2, idx, classes, store, 3, "auto", pieces)

    reference = run()
    np.testing.assert_array_equal(reference[1], _oracle(store, queries, classes, pieces, 10, 5)[1])
    rows_options = [1, 2, 7, t_rows]  # 1: matrix-vector products
    for rows, numba_threads, blas_threads, parallel in itertools.product(rows_options, [1, 2], [1, 3], [False, True]):
        monkeypatch.setattr(_datastore, "_SEARCH_BLOCK", rows * store.size)
        monkeypatch.setattr(_datastore, "_PARALLEL_CELLS", 1 if parallel else 1 << 40)
        assert store.rows_per_block == rows
        with _threads(numba_threads, blas_threads):
            got = run()
        for a, b in zip(got, reference):
            np.testing.assert_array_equal(a, b, err_msg=f"rows {rows}, threads {numba_threads}/{blas_threads}")
    # The host product's key blocks (torch's, one product per block), and another BLAS
    # (numpy's OpenBLAS, taken while torch's float32 products may round to bfloat16), which
    # block and sum differently.
    for block_rows in (1, 7):
        monkeypatch.setattr(_datastore, "HOST_PRODUCT_ROWS", block_rows)
        for a, b in zip(run(), reference):
            np.testing.assert_array_equal(a, b, err_msg=f"{block_rows} key rows per product")
    monkeypatch.setattr(_datastore, "_torch_matmul_is_ieee", lambda device_type="cpu": False)
    for a, b in zip(run(), reference):
        np.testing.assert_array_equal(a, b)


def test_the_search_in_source_blocks_equals_the_stacked_search(monkeypatch):
    # Keys given in source blocks are searched where they are (one product per block, the
    # measured entries' keys gathered); the players, distances, carriers and values must be
    # the stacked search's bit for bit: with exact ties (copies of sentences, and every
    # sentence start sharing one key), rows that outgrow their room for kept entries, one
    # or many rows per block, serial or parallel.
    rng = np.random.default_rng(21)
    base = [rng.integers(0, 10, size=rng.integers(1, 9)).astype(np.int64) for _ in range(40)]
    token_ids = base + [base[0]] * 12 + [base[5], base[7]]
    queries = None
    for variant in range(6):
        split = np.random.default_rng(100 + variant)
        in_blocks = _random_store(np.random.default_rng(3), token_ids, hidden=16, blocks=split)
        stacked = _random_store(np.random.default_rng(3), token_ids, hidden=16, blocks=np.random.default_rng(100 + variant))
        stacked.keys  # stacked at first use: the stacked search from here on
        assert in_blocks._keys is None and stacked._keys is not None
        if queries is None:
            queries = np.concatenate([
                stacked.keys[rng.integers(0, stacked.size, 6)],  # distance 0, shared keys included
                (stacked.keys[rng.integers(0, stacked.size, 6)] + rng.normal(size=(6, 16))).astype(np.float32),
                _mirror_queries(stacked, rng, 4),
            ])
            classes = rng.integers(0, 4, size=len(queries))
            pieces = rng.random(len(queries)) < 0.3
        monkeypatch.setattr(_datastore, "_SEARCH_BLOCK", (1 + variant % 3 * 7) * stacked.size)
        monkeypatch.setattr(_datastore, "_PARALLEL_CELLS", 1 if variant % 2 else 1 << 40)
        monkeypatch.setattr(_datastore, "HOST_PRODUCT_ROWS", [3, 2048][variant % 2])
        for m, n_match in ((10, 5), (4, 0), (30, 15)):
            want = stacked.game_candidates(queries, classes, m, n_match, pieces)
            got = in_blocks.game_candidates(queries, classes, m, n_match, pieces)
            for a, b in zip(got, want):
                np.testing.assert_array_equal(a, b, err_msg=f"variant {variant}, m {m}")
            np.testing.assert_array_equal(
                sentence_values(*got[:2], classes, in_blocks, 3, "auto", pieces),
                sentence_values(*want[:2], classes, stacked, 3, "auto", pieces))
        assert in_blocks._keys is None


def test_host_partial_distances_match_the_float64_product_for_any_key_block(monkeypatch):
    rng = np.random.default_rng(4)
    keys = rng.normal(size=(23, 16)).astype(np.float32)
    q2 = rng.normal(size=(5, 16)).astype(np.float32)
    norms = np.einsum("nd,nd->n", keys, keys)
    want = q2.astype(np.float64) @ keys.T.astype(np.float64) + norms
    for block_rows in (1, 4, 23, 2048):
        monkeypatch.setattr(_datastore, "HOST_PRODUCT_ROWS", block_rows)
        for blocks in ([keys], [keys[:5], keys[5:6], keys[6:]]):
            got = _datastore.host_partial_distances(q2, blocks, norms)
            assert got.dtype == np.float32 and got.shape == (5, 23) and got.flags.c_contiguous
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)
    assert _datastore.host_partial_distances(q2[:0], [keys], norms).shape == (0, 23)
    assert _datastore.host_partial_distances(q2, [keys[:0]], norms[:0]).shape == (5, 0)


def _rounded_differently(store, rng, share):
    """A stand-in for Datastore._partial_distances that rounds like no BLAS would, yet within
    the search's bound: the float64 ``|k|^2 - 2 q.k`` moved by up to ``share`` of the bound
    (_preselect_margin) per cell, then rounded to float32. With the float32 |q|^2 the scan
    adds (and the rounding to float32), ``share = 0.5`` stays inside the bound."""

    def partial(self, q):
        q64, k64 = q.astype(np.float64), self.keys.astype(np.float64)
        exact = (k64 * k64).sum(1)[None, :] - 2 * q64 @ k64.T
        margin = self._rel * (q64 * q64).sum(1)[:, None] + self._key_margin[None, :]
        return (exact + rng.uniform(-share, share, size=exact.shape) * margin).astype(np.float32)

    return partial


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=6),
    copies=st.integers(0, 2),
    m=st.integers(1, 12),
    mixed=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_candidates_do_not_depend_on_the_float32_rounding(sizes, copies, m, mixed, seed):
    # Any rounding of the matrix product within the bound gives the same bits.
    rng = np.random.default_rng(seed)
    token_ids = [rng.integers(0, 12, size=n).astype(np.int64) for n in sizes]
    token_ids += [token_ids[0].copy() for _ in range(copies)]
    store = _random_store(rng, token_ids)
    queries = np.concatenate([(rng.normal(size=(4, 6)) * 3).astype(np.float32), _mirror_queries(store, rng, 4)])
    classes = rng.integers(0, 4, size=len(queries))
    pieces = rng.random(len(queries)) < 0.3
    n_match = min(m, store.size) // 2 if mixed else 0
    want = store.game_candidates(queries, classes, m, n_match, pieces)
    mask = store.class_mask(classes, pieces)
    want_mixed = store.mixed_nearest(queries, m, n_match, mask)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Datastore, "_partial_distances", _rounded_differently(store, rng, 0.5))
        got = store.game_candidates(queries, classes, m, n_match, pieces)
        got_mixed = store.mixed_nearest(queries, m, n_match, mask)
    for a, b in zip((*got, *got_mixed), (*want, *want_mixed)):
        np.testing.assert_array_equal(a, b)


def test_mirror_ties_go_to_the_lower_index_however_float32_orders_them(monkeypatch):
    # Two different keys at exactly the same float64 distance from the query: the players
    # are ordered by index even where the float32 distances (here moved within the bound)
    # put the higher index first, which they do for some of these draws.
    rng = np.random.default_rng(2)
    store = _random_store(rng, [rng.integers(0, 12, size=8).astype(np.int64) for _ in range(5)])
    exact = store.exact_distances(store.keys)
    exact[np.tril_indices(store.size)] = np.inf
    exact[exact == 0] = np.inf  # equal keys (every sentence starts with the BOS state)
    a, b = np.unravel_index(np.argmin(exact), exact.shape)  # the closest pair: its midpoint is nearest to both
    queries = np.repeat(((store.keys[a].astype(np.float64) + store.keys[b]) / 2).astype(np.float32)[None], 40, axis=0)
    exact = store.exact_distances(queries[:1])[0]
    assert exact[a] == exact[b] and (np.delete(exact, [a, b]) > exact[a]).all()
    monkeypatch.setattr(Datastore, "_partial_distances", _rounded_differently(store, rng, 0.5))
    float32 = store._partial_distances(queries)
    assert (float32[:, b] < float32[:, a]).any()  # float32 order would flip the tie
    d2, idx, _ = store.game_candidates(queries, np.zeros(40, np.int64), 2, 0)
    assert (idx == [a, b]).all() and (d2 == exact[a]).all()
    # One player: the lower index, even where float32 put the other first.
    assert (store.game_candidates(queries, np.zeros(40, np.int64), 1, 0)[1] == a).all()
    assert (store.nearest(queries, 1)[1] == a).all()
    _, idx_nearest = store.nearest(queries, 2)
    assert (idx_nearest == [a, b]).all()


def test_exact_distances_are_the_float64_squared_distances():
    rng = np.random.default_rng(6)
    for hidden in (1, 7, 8, 576):  # below, at and above the eight partial sums, and a tail
        store = _random_store(rng, [rng.integers(0, 12, size=5).astype(np.int64) for _ in range(3)], hidden=hidden)
        queries = (rng.normal(size=(4, hidden)) * 3).astype(np.float32)
        got = store.exact_distances(queries)
        want = ((queries[:, None, :].astype(np.float64) - store.keys[None].astype(np.float64)) ** 2).sum(-1)
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)
        assert got.dtype == np.float64 and got.shape == (4, store.size)


def test_searches_refuse_non_finite_or_misshaped_queries():
    rng = np.random.default_rng(1)
    store = _random_store(rng, [np.array([1, 2, 3])])
    bad = np.zeros((2, 6), np.float32)
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="finite"):
        store.game_candidates(bad, np.array([1, 2]), 2, 1)
    with pytest.raises(ValueError, match="finite"):
        store.nearest(np.full((1, 6), np.inf), 2)
    with pytest.raises(ValueError, match="shape"):
        store.game_candidates(np.zeros((2, 5), np.float32), np.array([1, 2]), 2, 1)
    with pytest.raises(ValueError, match="mask must have shape"):
        store.nearest(np.zeros((2, 6), np.float32), 2, np.ones((2, 2), bool))


def test_torch_matmul_precision_is_read():
    assert _datastore._torch_matmul_is_ieee()  # torch's default
    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")  # may use bfloat16: numpy's product instead
        assert not _datastore._torch_matmul_is_ieee()
    finally:
        torch.set_float32_matmul_precision(old)
    assert _datastore._torch_matmul_is_ieee()


def test_game_candidates_reject_misshaped_classes_and_pieces():
    rng = np.random.default_rng(1)
    store = _random_store(rng, [np.array([1, 2, 3])])
    with pytest.raises(ValueError, match="classes must have one entry per query"):
        store.game_candidates(np.zeros((2, 6), np.float32), np.array([1]), 2, 1)
    with pytest.raises(ValueError, match="pieces must have one entry per query"):
        store.game_candidates(np.zeros((2, 6), np.float32), np.array([1, 2]), 2, 1, np.array([True]))


def test_empty_store_and_no_queries():
    rng = np.random.default_rng(1)
    empty = Datastore([SentenceRecord(0, 0, 0, 0, "")], [CachedSentence(np.zeros(0, np.int64), np.zeros((0, 2), np.int64),
                                                                         np.zeros((0, 6), np.float16))], [np.zeros(0, np.int64)])
    d2, idx, carries = empty.game_candidates(np.zeros((3, 6), np.float32), np.array([1, 2, 3]), 10, 5)
    assert d2.shape == idx.shape == (3, 0) and carries.shape == (3, 1) and not carries.any()
    store = _random_store(rng, [np.array([1, 2, 3])])
    d2, idx, carries = store.game_candidates(np.zeros((0, 6), np.float32), np.zeros(0, np.int64), 10, 5)
    assert d2.shape == (0, 3) and carries.shape == (0, 1)
    d2, idx, carries = store.game_candidates(np.zeros((2, 6), np.float32), np.array([1, 9]), 0, 0)  # no players
    assert d2.shape == idx.shape == (2, 0) and carries.tolist() == [[True], [False]]


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(0, 6), min_size=1, max_size=5), data=st.data())
def test_sentences_with_sequences_equal_one_at_a_time(sizes, data):
    n = sum(sizes)
    token_ids = []
    classes_of = []
    for size in sizes:
        token_ids.append(np.arange(size, dtype=np.int64))
        classes_of.append(np.array(data.draw(st.lists(st.integers(0, 3), min_size=size, max_size=size)), dtype=np.int64))
    rng = np.random.default_rng(0)
    records = [SentenceRecord(0, i, 0, 1, f"s{i}") for i in range(len(sizes))]
    entries = [CachedSentence(ids, np.zeros((len(ids), 2), np.int64), rng.normal(size=(len(ids), 2)).astype(np.float16))
               for ids in token_ids]
    store = Datastore(records, entries, classes_of)
    sequences = [np.array(s, dtype=np.int64) for s in data.draw(st.lists(st.lists(st.integers(0, 4), max_size=4), max_size=6))]
    got = store.sentences_with_sequences(sequences)
    assert got.shape == (len(sequences), len(sizes))
    for r, seq in enumerate(sequences):
        want = sentences_with_sequence(store.token_class, store.sentence_of, len(sizes), seq) if n else np.zeros(len(sizes), bool)
        np.testing.assert_array_equal(got[r], want)


@settings(max_examples=100, deadline=None)
@given(
    sentences=st.lists(st.text(alphabet="ab .,", max_size=12), min_size=1, max_size=5),
    phrases=st.lists(st.text(alphabet="ab .,", max_size=5), max_size=5),
)
def test_holding_many_equals_holding(sentences, phrases):
    texts = SentenceTexts.of(sentences)
    got = texts.holding_many(phrases)
    assert got.shape == (len(phrases), len(sentences))
    for r, phrase in enumerate(phrases):
        assert got[r].tolist() == texts.holding(phrase).tolist()


def _rank_sources_loop(sources, records, sentence_source, per_sentence, holds):
    """The per-keyword, per-source loop the vectorised ranking replaced (oracle)."""
    out = []
    for r in range(per_sentence.shape[0]):
        scored = []
        for src in range(len(sources)):
            cols = np.flatnonzero(sentence_source == src)
            if not len(cols):
                continue
            values, ok = per_sentence[r, cols], np.isfinite(per_sentence[r, cols])
            total = float(sum(v for v, o in zip(values.tolist(), ok.tolist()) if o))
            held = holds[r, cols] & ok
            pool = held if held.any() else ok
            best = cols[int(np.argmax(np.where(pool, values, -np.inf)))]
            scored.append((src, total, best))
        scored.sort(key=lambda x: -x[1])  # stable: ties keep source order
        out.append(tuple((sources[src].id, total, records[best].sentence_index) for src, total, best in scored if total > 0))
    return out


@settings(max_examples=200, deadline=None)
@given(
    sentence_source=st.lists(st.integers(0, 4), min_size=1, max_size=9),
    n_kw=st.integers(0, 4),
    seed=st.integers(0, 2**31 - 1),
)
def test_rank_sources_equals_the_per_source_loop(sentence_source, n_kw, seed):
    rng = np.random.default_rng(seed)
    sentence_source = np.array(sentence_source, dtype=np.int64)  # any order; source 4 may have none
    sources = [Source(id=f"src{i}", text="x") for i in range(5)]
    records = [SentenceRecord(int(s), j, 0, 1, f"s{j}") for j, s in enumerate(sentence_source)]
    # Quarters: ties happen, and every sum is exact whatever the order of the additions.
    per = np.round(rng.normal(size=(n_kw, len(sentence_source))) * 4) / 4
    per[rng.random(per.shape) < 0.25] = -np.inf
    holds = rng.random(per.shape) < 0.4
    got = rank_sources(sources, records, sentence_source, per, holds)
    want = _rank_sources_loop(sources, records, sentence_source, per, holds)
    assert len(got) == len(want) == n_kw
    for g, w in zip(got, want):
        assert [(a.source_id, a.sentence_index) for a in g] == [(sid, si) for sid, _, si in w]
        np.testing.assert_allclose([a.score for a in g], [t for _, t, _ in w], rtol=1e-12, atol=1e-12)


def _sentence_values_numpy(d2, idx, classes, store, k, gamma="auto", pieces=None):
    """Each answer token's game spelled out in numpy (what the compiled pass replaced):
    similarities from np.median, matches from Datastore.matches, knn_shapley_batch, sums
    per sentence by bincount."""
    d2 = np.asarray(d2, dtype=np.float64)
    n_tok, n_sent = d2.shape[0], len(store.sentences)
    if gamma == "auto":
        med = np.median(d2, axis=1, keepdims=True)
        g = np.where(med > 0, 1.0 / np.where(med > 0, med, 1.0), 1.0)
    else:
        g = float(gamma)
    sims = np.exp(-g * (d2 - d2[:, :1]))
    phi = knn_shapley_batch(sims, store.matches(idx, classes, pieces), k)
    cell = (np.arange(n_tok)[:, None] * n_sent + store.sentence_of[idx]).ravel()
    return np.bincount(cell, weights=phi.ravel(), minlength=n_tok * n_sent).reshape(n_tok, n_sent)


@settings(max_examples=100, deadline=None)
@given(
    n_queries=st.integers(1, 6),
    m=st.integers(1, 9),
    k=st.integers(1, 4),
    gamma=st.sampled_from(["auto", 0.05, 2.0]),
    with_pieces=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_sentence_values_equal_the_numpy_game(n_queries, m, k, gamma, with_pieces, seed):
    rng = np.random.default_rng(seed)
    store = _random_store(rng, [rng.integers(0, 12, size=n).astype(np.int64) for n in (5, 3, 6, 4)])
    queries = (rng.normal(size=(n_queries, 6)) * 3).astype(np.float32)
    classes = rng.integers(0, 4, size=n_queries)
    pieces = rng.random(n_queries) < 0.5 if with_pieces else None
    d2, idx, _ = store.game_candidates(queries, classes, m, min(m, store.size) // 2, pieces)
    got = sentence_values(d2, idx, classes, store, k, gamma, pieces)
    want = _sentence_values_numpy(d2, idx, classes, store, k, gamma, pieces)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # Rows sum to the game's value U(all players) (efficiency): 0 or 1.
    assert set(np.round(got.sum(axis=1), 9).tolist()) <= {0.0, 1.0}


def test_sentence_values_parallel_equals_serial(monkeypatch):
    from tokenshapley_rag import _token_game

    rng = np.random.default_rng(4)
    store = _random_store(rng, [rng.integers(0, 12, size=8).astype(np.int64) for _ in range(6)])
    queries = (rng.normal(size=(40, 6)) * 3).astype(np.float32)
    classes = rng.integers(0, 4, size=40)
    d2, idx, _ = store.game_candidates(queries, classes, 10, 5)
    serial = sentence_values(d2, idx, classes, store, 2, "auto")
    monkeypatch.setattr(_token_game, "_PARALLEL_WORK", 0)
    np.testing.assert_array_equal(sentence_values(d2, idx, classes, store, 2, "auto"), serial)


def test_widening_float16_keys_is_numpys_conversion_for_every_value():
    from tokenshapley_rag._datastore import _HALF_TO_FLOAT
    from tokenshapley_rag._kernels import widen_halves

    bits = np.arange(1 << 16, dtype=np.uint16)
    out = np.empty(bits.shape, dtype=np.float32)
    widen_halves(bits, _HALF_TO_FLOAT, out)
    want = bits.view(np.float16).astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(out), nan)
    assert np.array_equal(out[~nan].view(np.uint32), want[~nan].view(np.uint32))  # -0.0, subnormals, inf included


def test_stacked_keys_equal_a_plain_concatenation():
    from tokenshapley_rag._datastore import stacked_rows, widened_keys

    rng = np.random.default_rng(5)
    halves = [rng.standard_normal((n, 6)).astype(np.float16) for n in (3, 0, 5, 1)]
    wide = np.full((2, 6), 1e6, dtype=np.float32)  # a block beyond float16's range stays float32
    for blocks in (halves, halves[:2] + [wide] + halves[2:], [np.zeros((0, 6), np.float16)]):
        rows = sum(b.shape[0] for b in blocks)
        got = widened_keys(blocks, rows, 6)
        want = np.concatenate([b.astype(np.float32) for b in blocks]) if rows else np.zeros((0, 6), np.float32)
        assert got.dtype == np.float32 and np.array_equal(got, want)
        stacked = stacked_rows(blocks, rows, 6)  # what goes to a device: float16 where every block is
        assert stacked.dtype == (np.float16 if all(b.dtype == np.float16 for b in blocks) else np.float32)
        assert np.array_equal(stacked.astype(np.float32), want)


def test_device_index_widens_the_float16_rows_as_the_host_does():
    rng = np.random.default_rng(9)
    token_ids = [rng.integers(0, 12, size=5).astype(np.int64) for _ in range(6)] * 2  # shared prefixes
    records = [SentenceRecord(0, i, 0, 1, f"s{i}") for i in range(len(token_ids))]
    entries = [CachedSentence(ids=ids, offsets=np.zeros((5, 2), np.int64),
                              keys=rng.normal(size=(5, 6)).astype(np.float16)) for ids in token_ids]
    classes = [ids % 4 for ids in token_ids]
    host = Datastore(records, entries, classes)
    built = Datastore(records, entries, classes, search_device=torch.device("cpu"))
    assert built._device_index is not None and built._keys is None  # copied at build, from the float16 rows
    assert (host._representative != np.arange(host.size)).any()  # some keys were shared
    assert np.array_equal(built._device_index.keys.numpy(), host.keys)
    np.testing.assert_allclose(built._device_index.norms.numpy(), host._norms, rtol=1e-6)
    # A host search widens the host's copy then: the same keys.
    assert np.array_equal(built.keys, host.keys) and built._stacked is None
    queries = rng.normal(size=(4, 6)).astype(np.float32)
    for a, b in zip(built.game_candidates(queries, np.arange(4), 5, 2), host.game_candidates(queries, np.arange(4), 5, 2)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=_NEEDS_CUDA)])
def test_device_rows_given_stacked_are_the_rows_copied_at_build(device):
    # The builder's rows of each source, already on the device, stand for the copy made at
    # build: the same device index, the same players; a host search widens its keys from
    # the entries.
    rng = np.random.default_rng(11)
    token_ids = [rng.integers(0, 12, size=4).astype(np.int64) for _ in range(5)] * 2
    records = [SentenceRecord(0, i, 0, 1, f"s{i}") for i in range(len(token_ids))]
    entries = [CachedSentence(ids=ids, offsets=np.zeros((4, 2), np.int64),
                              keys=rng.normal(size=(4, 6)).astype(np.float16)) for ids in token_ids]
    classes = [ids % 3 for ids in token_ids]
    copied = Datastore(records, entries, classes, search_device=torch.device(device))
    rows = torch.from_numpy(np.concatenate([e.keys for e in entries])).to(device)
    given = Datastore(records, entries, classes, search_device=torch.device(device), device_rows=rows)
    assert given._device_index.keys.dtype == torch.float32
    assert torch.equal(given._device_index.keys, copied._device_index.keys)
    assert np.array_equal(given._norms, copied._norms)
    queries = rng.normal(size=(3, 6)).astype(np.float32)
    host = Datastore(records, entries, classes)
    for a, b in zip(given.game_candidates(queries, np.arange(3), 4, 2), host.game_candidates(queries, np.arange(3), 4, 2)):
        np.testing.assert_array_equal(a, b)
    assert np.array_equal(given.keys, host.keys) and given._stacked is None
    with pytest.raises(ValueError, match=r"device_rows must be \(40, 6\)"):
        Datastore(records, entries, classes, search_device=torch.device(device), device_rows=rows[:-1])


def test_device_search_keeps_the_lowest_of_many_exact_ties():
    rng = np.random.default_rng(3)
    store = _on_device(_random_store(rng, [np.array([1, 2, 3])] * 40))
    q = store.keys[[1]].copy()
    d2, idx, _ = store.game_candidates(q, np.array([2]), 10, 5)
    assert idx[0].tolist() == [1 + 3 * c for c in range(10)] and (d2[0] == 0).all()
    # A class with fewer entries than n_match: all of them play, then the nearest others.
    d2, idx, carries = store.game_candidates(q, np.array([7]), 10, 5)
    assert idx[0].tolist() == [1 + 3 * c for c in range(10)] and not carries.any()


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=_NEEDS_CUDA)])
def test_device_search_is_the_host_search_for_any_block(device, monkeypatch):
    from tokenshapley_rag import _device_search

    rng = np.random.default_rng(11)
    token_ids = [rng.integers(0, 12, size=9).astype(np.int64) for _ in range(30)] * 2
    store = _random_store(rng, token_ids, hidden=16)
    queries = np.concatenate([(rng.normal(size=(40, 16)) * 3).astype(np.float32), _mirror_queries(store, rng, 20)])
    classes = rng.integers(0, 4, size=len(queries))
    pieces = rng.random(len(queries)) < 0.3
    want = store.game_candidates(queries, classes, 9, 4, pieces)
    for cells in (1, store.size * 7, 1 << 23):  # one query a block, several, all
        monkeypatch.setattr(_device_search, "_DEVICE_BLOCK_CELLS", cells)
        for got, expected in zip(_on_device(store, device).game_candidates(queries, classes, 9, 4, pieces), want):
            np.testing.assert_array_equal(got, expected)


def test_device_search_steps_aside_when_torch_may_round_float32_products_lower(monkeypatch):
    from tokenshapley_rag import _device_search

    rng = np.random.default_rng(4)
    store = _on_device(_random_store(rng, [rng.integers(0, 12, size=6).astype(np.int64) for _ in range(4)]))
    calls = []
    monkeypatch.setattr(_datastore, "device_candidates",
                        lambda *a, **k: calls.append(1) or _device_search.device_candidates(*a, **k))
    queries = (rng.normal(size=(3, 6)) * 3).astype(np.float32)
    want = store.searched_on_host().game_candidates(queries, np.array([0, 1, 2]), 4, 2)
    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")
        got = store.game_candidates(queries, np.array([0, 1, 2]), 4, 2)
    finally:
        torch.set_float32_matmul_precision(old)
    assert not calls and not store.approximate
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    store.game_candidates(queries, np.array([0, 1, 2]), 4, 2)
    assert calls == [1]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=_NEEDS_CUDA)])
def test_device_search_on_wide_keys_equals_the_host_search(device):
    # The encoder's width (576) and magnitudes, many shared prefixes and mirror ties: the
    # float32 products round differently on the device (another BLAS, other blocks), and
    # the players must still be the host's, bit for bit.
    rng = np.random.default_rng(12)
    token_ids = [rng.integers(0, 40, size=int(n)).astype(np.int64) for n in rng.integers(1, 30, size=150)]
    token_ids += [ids.copy() for ids in token_ids[:40]]
    store = _random_store(rng, token_ids, hidden=576, n_classes=9, scale=8.0)
    queries = np.concatenate([(rng.normal(size=(48, 576)) * 8).astype(np.float32), _mirror_queries(store, rng, 16),
                              store.keys[rng.integers(0, store.size, size=8)]])
    classes = rng.integers(0, 9, size=len(queries))
    pieces = rng.random(len(queries)) < 0.25
    want = store.game_candidates(queries, classes, 10, 5, pieces)
    got = _on_device(store, device).game_candidates(queries, classes, 10, 5, pieces)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
