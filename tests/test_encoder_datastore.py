"""The encoder's packed sentence encoding and the datastore's exact search, against the
straightforward computations they replace (issue 8's speed-ups must not change a value)."""

from contextlib import contextmanager, nullcontext

import numba
import numpy as np
import pytest
import torch

from tokenshapley_rag import TokenShapley, _datastore
from tokenshapley_rag._datastore import Datastore, SentenceRecord
from tokenshapley_rag._sentence_cache import CachedSentence
from tokenshapley_rag._sources import coerce_sources

try:
    import threadpoolctl
except ImportError:  # optional: then only numba's and torch's threads are varied
    threadpoolctl = None

pytestmark = pytest.mark.slow


@pytest.fixture
def token_lists(ts):
    rng = np.random.default_rng(0)
    vocab = ts.loaded.tokenizer.vocab_size
    # Sentence-sized lists, one longer than a packed row, and an empty one.
    lengths = [*rng.integers(1, 40, size=30).tolist(), ts.encoder.pack_tokens + 37, 0]
    return [rng.integers(50, vocab - 1, size=n).astype(np.int64) for n in lengths]


def _encode(encoder, lists, pack_tokens):
    old = encoder.pack_tokens
    encoder.pack_tokens = pack_tokens
    try:
        return encoder.encode_before(lists)
    finally:
        encoder.pack_tokens = old


def test_packed_encoding_equals_each_sentence_alone(ts, token_lists):
    enc = ts.encoder
    assert enc._packing_works()
    packed = _encode(enc, token_lists, enc.pack_tokens)
    padded = _encode(enc, token_lists, None)
    alone = [enc.encode_before([t])[0] for t in token_lists[:5]]  # batch of one: no padding
    assert [p.shape for p in packed] == [(len(t), ts.loaded.hidden_size) for t in token_lists]
    for p, q in zip(packed, padded):
        np.testing.assert_allclose(p, q, atol=2e-3 * max(1.0, float(np.abs(q).max(initial=0))))
    for p, a in zip(packed, alone):
        np.testing.assert_allclose(p, a, atol=2e-3 * float(np.abs(a).max()))
    # A sentence's first key is the BOS state, whatever was packed before it.
    firsts = np.stack([p[0] for p in packed if len(p)])
    np.testing.assert_allclose(firsts, np.broadcast_to(firsts[0], firsts.shape), atol=1e-3 * float(np.abs(firsts).max()))


def test_a_model_that_ignores_packed_positions_gets_padded_batches(cache_root, monkeypatch, token_lists):
    ts = TokenShapley(cache_dir=cache_root, use_disk_cache=False)
    enc = ts.encoder
    reference = _encode(enc, token_lists[:8], None)
    real = enc._states_unlocked
    # Dropping position ids makes a packed row one long sequence: sentences see each other.
    monkeypatch.setattr(enc, "_states_unlocked", lambda ids, mask, cache=None, position_ids=None: real(ids, mask, cache))
    assert not enc._packing_works()
    for got, want in zip(enc.encode_before(token_lists[:8]), reference):
        np.testing.assert_allclose(got, want, atol=2e-3 * max(1.0, float(np.abs(want).max(initial=0))))


def _store(keys_per_sentence):
    records = [SentenceRecord(0, i, 0, 1, f"s{i}") for i in range(len(keys_per_sentence))]
    entries, classes = [], []
    for i, k in enumerate(keys_per_sentence):
        n = len(k)
        # Distinct token ids per sentence: no shared prefixes, keys stay as given.
        ids = np.arange(n, dtype=np.int64) + 1000 * (i + 1)
        entries.append(CachedSentence(ids=ids, offsets=np.zeros((n, 2), np.int64), keys=k.astype(np.float16)))
        classes.append(ids % 7)
    return Datastore(records, entries, classes)


@pytest.mark.parametrize("block", [_datastore._SEARCH_BLOCK, 50])  # one block, and many small ones
def test_exact_search_equals_brute_force(monkeypatch, block):
    monkeypatch.setattr(_datastore, "_SEARCH_BLOCK", block)
    rng = np.random.default_rng(3)
    store = _store([rng.normal(size=(n, 16)) * 4 for n in (5, 9, 1, 12)])
    queries = rng.normal(size=(11, 16)).astype(np.float32) * 4
    d2, idx = store.nearest(queries, 6)
    brute = ((queries[:, None, :].astype(np.float64) - store.keys[None].astype(np.float64)) ** 2).sum(-1)
    want = np.argsort(brute, axis=1, kind="stable")[:, :6]
    np.testing.assert_array_equal(idx, want)
    np.testing.assert_allclose(d2, np.take_along_axis(brute, want, axis=1), rtol=1e-4, atol=1e-3)
    assert (np.diff(d2, axis=1) >= 0).all()
    # m larger than the datastore: every entry, nearest first.
    d2_all, idx_all = store.nearest(queries[:2], 100)
    assert idx_all.shape == (2, store.size) and sorted(idx_all[0].tolist()) == list(range(store.size))


def test_warm_build_reads_tokens_from_the_cache_not_the_tokenizer(cache_root, monkeypatch):
    sources = ["The Eiffel Tower is 330 metres tall. It was completed in 1889.", "Big Ben is in London."]
    first = TokenShapley(cache_dir=cache_root)
    cold = first.build_datastore(sources)
    second = TokenShapley(cache_dir=cache_root)
    calls = []
    real = second.encoder.tokenize
    monkeypatch.setattr(second.encoder, "tokenize", lambda text: calls.append(text) or real(text))
    warm = second.build_datastore(sources)
    assert calls == []
    np.testing.assert_array_equal(warm.token_ids, cold.token_ids)
    np.testing.assert_array_equal(warm.keys, cold.keys)
    np.testing.assert_array_equal(warm.token_class, second.build_datastore(sources).token_class)  # memoised classes


def test_a_cached_sentence_over_this_instances_limit_is_cut(cache_root):
    long = "Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau."
    TokenShapley(cache_dir=cache_root).build_datastore([long])  # caches the whole sentence
    short = TokenShapley(cache_dir=cache_root, max_sentence_tokens=8)
    store = short.build_datastore([long])
    assert len(store.sentences) >= 3 and max(np.bincount(store.sentence_of)) <= 8


def test_bfloat16_encoder_cites_like_float32(cache_root, ts):
    from tokenshapley_rag.errors import InvalidInputError

    sources = ["The Eiffel Tower is 330 metres tall. It was completed in 1889.", "Big Ben is in London. It was finished in 1859."]
    answer = "The tower is 330 metres tall and was completed in 1889."
    bf16 = TokenShapley(cache_dir=cache_root, dtype="bfloat16")
    assert bf16.config["dtype"] == "bfloat16" and ts.config["dtype"] == "float32"
    assert bf16.encoder.cache_key != ts.encoder.cache_key  # keys of one dtype never serve the other
    a = bf16.attribute("How tall is the Eiffel Tower?", sources, answer)
    b = ts.attribute("How tall is the Eiffel Tower?", sources, answer)
    best = {c.text: (c.best.source_id, c.best.sentence_index) for c in a.citations if c.best}
    assert best == {c.text: (c.best.source_id, c.best.sentence_index) for c in b.citations if c.best}
    assert best["330 metres"] == ("0", 0) and best["1889"] == ("0", 1)
    with pytest.raises(InvalidInputError, match="dtype must be one of"):
        TokenShapley(cache_dir=cache_root, dtype="int8")


@pytest.mark.parametrize("pack_tokens", [256, None])
def test_progress_counts_every_encoded_token(cache_root, capsys, token_lists, pack_tokens):
    ts = TokenShapley(cache_dir=cache_root, use_disk_cache=False)
    ts.encoder.pack_tokens = pack_tokens
    seen = []
    ts.encoder.encode_before(token_lists, seen.append)
    assert sum(seen) == sum(len(t) for t in token_lists) and len(seen) >= 1
    ts.prepare(["The Eiffel Tower is 330 metres tall. It was completed in 1889."], progress=True)
    assert "encoding sources" in capsys.readouterr().err


def test_word_or_token_matches_an_absent_word_by_its_pieces(cache_root):
    sources = ["The Eiffel Tower in Paris was painted in 1889.", "Big Ben in London was completed in 1859."]
    answer = "Parisians painted the tower."
    cited, games = {}, {}
    for match in ("word", "word_or_token"):
        ts = TokenShapley(cache_dir=cache_root, match=match)
        res = ts.attribute("Who painted it?", sources, answer)
        cited[match] = {c.text: (c.best.source_id if c.best else None, c.supported) for c in res.citations}
        games[match] = res.span_scores(0, len("Parisians"), context=False)
        assert ts.config["match"] == match
    # "Parisians" is in no source: as a word nothing carries it; its piece "Paris" is in
    # source 0, so the piece-level game gives that source evidence ...
    assert games["word"]["0"] <= 0
    assert games["word_or_token"]["0"] > 0 and games["word_or_token"]["0"] > games["word_or_token"]["1"]
    # ... but no source holds the word, so it is not supported either way (docs/method.md §8).
    assert cited["word"]["Parisians"] == cited["word_or_token"]["Parisians"] == (None, False)
    # Words the sources have are matched as words either way.
    assert cited["word"]["tower"] == cited["word_or_token"]["tower"] == ("0", True)


def test_piece_class_searches_equal_brute_force():
    rng = np.random.default_rng(5)
    keys = [rng.normal(size=(n, 8)) for n in (6, 4, 7)]
    records = [SentenceRecord(0, i, 0, 1, f"s{i}") for i in range(3)]
    entries, words, pieces = [], [], []
    for i, k in enumerate(keys):
        ids = np.arange(len(k), dtype=np.int64) + 100 * (i + 1)
        entries.append(CachedSentence(ids=ids, offsets=np.zeros((len(k), 2), np.int64), keys=k.astype(np.float16)))
        words.append(rng.integers(0, 5, size=len(k)))
        pieces.append(rng.integers(0, 3, size=len(k)))
    store = Datastore(records, entries, words, pieces)
    queries = rng.normal(size=(9, 8)).astype(np.float32)
    classes = rng.integers(0, 5, size=9)
    flags = rng.random(9) < 0.5
    classes[flags] %= 3
    d2, idx = store.nearest_of_class(queries, classes, 3, flags)
    wc, pc = np.concatenate(words), np.concatenate(pieces)
    for t in range(9):
        members = np.flatnonzero((pc if flags[t] else wc) == classes[t])
        dist = ((queries[t] - store.keys[members]) ** 2).sum(1)
        want = members[np.argsort(dist, kind="stable")[:3]]
        assert idx[t][idx[t] >= 0].tolist() == want.tolist()
        carries = {int(store.sentence_of[e]) for e in members}
        assert set(np.flatnonzero(store.sentences_holding(classes, flags)[t]).tolist()) == carries
    got = store.matches(idx.clip(0), classes, flags)
    want = np.where(flags[:, None], pc[idx.clip(0)], wc[idx.clip(0)]) == classes[:, None]
    np.testing.assert_array_equal(got, want)


def test_mixed_candidates_equal_brute_force_and_break_ties_by_index():
    # Sentences 0 and 2 have the same tokens, so _share_prefix_keys gives them one set of
    # keys: their entries are at exactly equal distances from every query, and the lower
    # index must come first whatever the rounding of the distance matrix.
    rng = np.random.default_rng(11)
    token_ids = [np.array([5, 6, 7, 8]), np.array([9, 10, 11]), np.array([5, 6, 7, 8]), np.array([12, 5, 6])]
    records = [SentenceRecord(i, 0, 0, 1, f"s{i}") for i in range(len(token_ids))]
    entries = [
        CachedSentence(ids=ids, offsets=np.zeros((len(ids), 2), np.int64), keys=rng.normal(size=(len(ids), 8)).astype(np.float16) * 30)
        for ids in token_ids
    ]
    store = Datastore(records, entries, [ids % 3 for ids in token_ids])
    assert (store.keys[0:4] == store.keys[7:11]).all()
    queries = (rng.normal(size=(13, 8)) * 30).astype(np.float32)
    queries[:4] = store.keys[[0, 1, 7, 8]]  # at distance 0 from a pair of equal keys
    classes = rng.integers(0, 3, size=13)
    m, n_match = 6, 3
    d2, idx = store.mixed_nearest(queries, m, n_match, store.class_mask(classes))
    for t in range(len(queries)):
        exact = ((queries[t].astype(np.float64) - store.keys.astype(np.float64)) ** 2).sum(1)
        by_distance = np.lexsort((np.arange(store.size), exact))
        matched = [int(i) for i in by_distance if store.token_class[i] == classes[t]][:n_match]
        chosen = matched + [int(i) for i in by_distance if int(i) not in matched][: m - len(matched)]
        want = sorted(chosen, key=lambda i: (exact[i], i))
        assert idx[t].tolist() == want, t
        np.testing.assert_allclose(d2[t], exact[want], rtol=1e-4, atol=1e-2)


@contextmanager
def _threads(numba_threads, blas_threads):
    """numba's threads (at most its pool), torch's (and MKL's), and with threadpoolctl every
    BLAS and OpenMP pool in the process, restored after."""
    old_numba, old_torch = numba.get_num_threads(), torch.get_num_threads()
    numba.set_num_threads(min(numba_threads, numba.config.NUMBA_NUM_THREADS))
    torch.set_num_threads(blas_threads)
    try:
        with threadpoolctl.threadpool_limits(blas_threads) if threadpoolctl else nullcontext():
            yield
    finally:
        numba.set_num_threads(old_numba)
        torch.set_num_threads(old_torch)


def _cited(result):
    return [(c.text, c.start, c.end, c.supported, [(s.source_id, s.sentence_index) for s in c.sources]) for c in result.citations]


def test_citations_do_not_depend_on_search_blocks_or_threads(ts, monkeypatch):
    # Answer tokens are searched in blocks of rows, whose float32 distance matrices round
    # differently by block size and BLAS threads; the search only pre-selects with them and
    # orders its players by float64 distances computed in one fixed order from the keys
    # (Datastore.game_candidates). Given the same answer states, every score is then the
    # same bits for any block size and thread count: exact equality, by construction.
    sources = ["The Eiffel Tower is 330 metres tall. It was completed in 1889.", "Big Ben is in London. It was finished in 1859."]
    query, answer = "Tell me about towers.", "The Eiffel Tower, finished in 1889, is 330 metres tall; Big Ben is in London."
    srcs = coerce_sources(sources)
    store = ts.pipeline.datastore_for(srcs)
    resp = ts.encoder.tokenize(answer)
    states = ts.encoder.encode_response(query, resp)
    whole = ts.pipeline.attribute(query, answer, srcs, store, resp, states, ts.config)
    assert store.rows_per_block >= len(resp.ids)  # one block
    best = {c.text: (c.best.source_id, c.best.sentence_index) for c in whole.citations if c.best}
    assert best["330 metres"] == ("0", 0) and best["1889"] == ("0", 1) and best["London"] == ("1", 0)
    for rows, numba_threads, blas_threads, parallel in [(1, 1, 1, True), (3, 2, 1, False), (4, 1, 3, True), (7, 2, 2, True)]:
        monkeypatch.setattr(_datastore, "_SEARCH_BLOCK", rows * store.size)
        monkeypatch.setattr(_datastore, "_PARALLEL_CELLS", 1 if parallel else 1 << 40)
        assert store.rows_per_block == rows < len(resp.ids)
        with _threads(numba_threads, blas_threads):
            got = ts.pipeline.attribute(query, answer, srcs, store, resp, states, ts.config)
        np.testing.assert_array_equal(got.tokens.scores, whole.tokens.scores)
        assert [c.to_dict() for c in got.citations] == [c.to_dict() for c in whole.citations]
        assert [s.to_dict() for s in got.sentence_scores] == [s.to_dict() for s in whole.sentence_scores]
    # The whole attribution, the encoder's forward passes included: they are float32 torch
    # computations whose rounding may follow the thread count (not the search's concern),
    # so the same citations, and scores equal up to that rounding.
    monkeypatch.setattr(_datastore, "_SEARCH_BLOCK", 2 * store.size)
    for numba_threads, blas_threads in [(1, 1), (2, 3)]:
        with _threads(numba_threads, blas_threads):
            full = ts.attribute(query, sources, answer)
        assert _cited(full) == _cited(whole)
        np.testing.assert_allclose(full.tokens.scores, whole.tokens.scores, rtol=1e-4, atol=1e-6)
