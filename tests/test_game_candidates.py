"""The warm path's compiled and batched steps against the plain computations they replace
(issue 8): the one-pass candidate scan, the batched verbatim checks and the vectorised
source ranking must give the same values, ties included. No model."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenshapley_rag._attribution import SentenceTexts, _rank_sources, _sentence_values, sentences_with_sequence
from tokenshapley_rag._datastore import CachedSentence, Datastore, SentenceRecord, _PARALLEL_CELLS
from tokenshapley_rag import _datastore
from tokenshapley_rag._types import Source
from tokenshapley_rag.shapley import knn_shapley_batch


def _random_store(rng, token_ids, hidden=6, n_classes=4, scale=3.0):
    records = [SentenceRecord(i % 3, i, 0, 1, f"s{i}") for i in range(len(token_ids))]
    entries = [
        CachedSentence(ids=ids, offsets=np.zeros((len(ids), 2), np.int64),
                       keys=(rng.normal(size=(len(ids), hidden)) * scale).astype(np.float16))
        for ids in token_ids
    ]
    words = [ids % n_classes for ids in token_ids]
    pieces = [(ids // 2) % n_classes for ids in token_ids]
    return Datastore(records, entries, words, pieces)


def _oracle(store, queries, classes, pieces, m, n_match):
    """The mask-based searches (``mixed_nearest`` / ``nearest`` and ``sentences_holding``),
    with every entry ordered (no cut), on the same float32 distances."""
    m = min(m, store.size)
    d2 = store._distances(np.asarray(queries, np.float32))
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
    return np.array(d_out, np.float32).reshape(len(queries), m), np.array(i_out).reshape(len(queries), m), \
        store.sentences_holding(classes, pieces)


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 7), min_size=1, max_size=6),
    copies=st.integers(0, 3),
    n_queries=st.integers(1, 7),
    m=st.integers(1, 12),
    mixed=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_game_candidates_equal_the_mask_based_searches(sizes, copies, n_queries, m, mixed, seed):
    rng = np.random.default_rng(seed)
    token_ids = [rng.integers(0, 12, size=n).astype(np.int64) for n in sizes]
    token_ids += [token_ids[0].copy() for _ in range(copies)]  # equal sentences: exactly tied keys
    store = _random_store(rng, token_ids)
    if not store.size:
        return
    queries = (rng.normal(size=(n_queries, 6)) * 3).astype(np.float32)
    queries[0] = store.keys[0]  # at distance 0 of a key shared by every copy
    classes = rng.integers(0, 4, size=n_queries)
    pieces = rng.random(n_queries) < 0.3
    n_match = min(m, store.size) // 2 if mixed else 0
    d2, idx, carries = store.game_candidates(queries, classes, m, n_match, pieces)
    want_d, want_i, want_carries = _oracle(store, queries, classes, pieces, m, n_match)
    np.testing.assert_array_equal(idx, want_i)
    np.testing.assert_array_equal(d2, want_d)
    np.testing.assert_array_equal(carries, want_carries)
    if not pieces.any() and mixed:
        # The mask-based search it replaces (ties here never exceed its slack).
        old_d, old_i = store.mixed_nearest(queries, m, n_match, store.class_mask(classes))
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


def test_game_candidates_in_row_blocks_equal_one_block(monkeypatch):
    rng = np.random.default_rng(9)
    store = _random_store(rng, [rng.integers(0, 12, size=7).astype(np.int64) for _ in range(6)])
    # 12 queries: blocks of 2 rows (a block of one row is a matrix-vector product, whose
    # float32 rounding can differ in the last bit).
    queries = (rng.normal(size=(12, 6)) * 3).astype(np.float32)
    classes = rng.integers(0, 4, size=12)
    whole = store.game_candidates(queries, classes, 6, 3)
    monkeypatch.setattr(_datastore, "_SEARCH_BLOCK", 2 * store.size)  # two queries per block
    assert store.rows_per_block == 2
    for a, b in zip(whole, store.game_candidates(queries, classes, 6, 3)):
        np.testing.assert_array_equal(a, b)


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
    got = _rank_sources(sources, records, sentence_source, per, holds)
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
    got = _sentence_values(d2, idx, classes, store, k, gamma, pieces)
    want = _sentence_values_numpy(d2, idx, classes, store, k, gamma, pieces)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # Rows sum to the game's value U(all players) (efficiency): 0 or 1.
    assert set(np.round(got.sum(axis=1), 9).tolist()) <= {0.0, 1.0}


def test_sentence_values_parallel_equals_serial(monkeypatch):
    from tokenshapley_rag import _attribution

    rng = np.random.default_rng(4)
    store = _random_store(rng, [rng.integers(0, 12, size=8).astype(np.int64) for _ in range(6)])
    queries = (rng.normal(size=(40, 6)) * 3).astype(np.float32)
    classes = rng.integers(0, 4, size=40)
    d2, idx, _ = store.game_candidates(queries, classes, 10, 5)
    serial = _sentence_values(d2, idx, classes, store, 2, "auto")
    monkeypatch.setattr(_attribution, "_PARALLEL_WORK", 0)
    np.testing.assert_array_equal(_sentence_values(d2, idx, classes, store, 2, "auto"), serial)
