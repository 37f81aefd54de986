"""The approximate candidate search of long contexts (``approximate_above``, docs/method.md
§3): the compiled shared-prefix rule against the Python rule it replaced, the probed search
against the exact one (every list probed: the same bits; fewer: the same matched players and
carrying sentences), the quantiser's lists through the sentence cache, the parameter's
validation, and the same citations as exact search on a real example with the threshold
forced to 0."""

import numpy as np
import pytest

from tokenshapley_rag._datastore import Datastore, SentenceRecord, _share_prefix_keys
from tokenshapley_rag._quantiser import Quantiser
from tokenshapley_rag._sentence_cache import CachedSentence, SentenceCache
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError


def _python_prefix_rule(keys, sentence_ids):
    """The Python rule _share_prefix_keys had before it was compiled (the oracle)."""
    starts = np.concatenate([[0], np.cumsum([len(ids) for ids in sentence_ids])]).astype(np.int64)
    representative = np.arange(starts[-1], dtype=np.int64)
    lists = [ids.tolist() for ids in sentence_ids]
    order = sorted(range(len(lists)), key=lambda i: (lists[i], i))
    for prev, cur in zip(order, order[1:]):
        a, b = lists[prev], lists[cur]
        n = min(len(a), len(b))
        if n == 0:
            continue
        shared = 0
        while shared < n and a[shared] == b[shared]:
            shared += 1
        width = min(shared + 1, n)
        keys[starts[cur]: starts[cur] + width] = keys[starts[prev]: starts[prev] + width]
        representative[starts[cur]: starts[cur] + width] = representative[starts[prev]: starts[prev] + width]
    return representative


@pytest.mark.parametrize("seed", range(6))
def test_compiled_prefix_rule_equals_the_python_rule(seed):
    rng = np.random.default_rng(seed)
    # Few token values and short sentences: many shared prefixes, duplicates and empties.
    ids = [rng.integers(0, 3, size=rng.integers(0, 6)).astype(np.int64) for _ in range(40)]
    keys = rng.normal(size=(sum(map(len, ids)), 4)).astype(np.float32)
    expected_keys = keys.copy()
    expected = _python_prefix_rule(expected_keys, ids)
    got = _share_prefix_keys(keys, ids)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(keys, expected_keys)


def _stores(seed, n_lists=6, probes=None, hidden=8):
    rng = np.random.default_rng(seed)
    token_ids = [rng.integers(0, 12, size=rng.integers(1, 30)).astype(np.int64) for _ in range(25)]
    quantiser = Quantiser(rng.normal(size=(n_lists, hidden)) * 3.0)
    records = [SentenceRecord(i % 4, i, 0, 1, f"s{i}") for i in range(len(token_ids))]
    entries = []
    for ids in token_ids:
        keys = (rng.normal(size=(len(ids), hidden)) * 3.0).astype(np.float16)
        entries.append(CachedSentence(ids=ids, offsets=np.zeros((len(ids), 2), np.int64), keys=keys,
                                      lists=quantiser.assign(keys.astype(np.float32)), lists_of=quantiser.digest))
    words = [ids % 5 for ids in token_ids]
    pieces = [ids % 3 for ids in token_ids]
    exact = Datastore(records, entries, words, pieces)
    approx = Datastore(records, entries, words, pieces, quantiser=quantiser, probes=probes or n_lists)
    queries = rng.normal(size=(30, hidden)).astype(np.float32) * 3.0
    classes = rng.integers(0, 5, size=30)
    use_piece = rng.random(30) < 0.3
    return exact, approx, queries, classes, use_piece


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n_match", [0, 5])
def test_probing_every_list_is_the_exact_search(seed, n_match):
    exact, approx, q, classes, pieces = _stores(seed)
    assert approx.approximate and not exact.approximate
    want = exact.game_candidates(q, classes, 10, n_match, pieces)
    got = approx.game_candidates(q, classes, 10, n_match, pieces)
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)
    # The keys kept in list order read back in entry order; the exact twin searches them all.
    np.testing.assert_array_equal(approx.keys, exact.keys)
    twin = approx.searched_exactly()
    assert not twin.approximate and approx.approximate
    for a, b in zip(want, twin.game_candidates(q, classes, 10, n_match, pieces)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", range(4))
def test_probing_one_list_keeps_the_matched_players_and_carrying_sentences_exact(seed):
    exact, approx, q, classes, pieces = _stores(seed, probes=1)
    d_e, i_e, c_e = exact.game_candidates(q, classes, 10, 5, pieces)
    d_a, i_a, c_a = approx.game_candidates(q, classes, 10, 5, pieces)
    np.testing.assert_array_equal(c_a, c_e)
    match_e = exact.matches(i_e, classes, pieces)
    match_a = approx.matches(i_a, classes, pieces)
    for t in range(len(q)):
        # The matched players are the class's nearest, by exact distance, in both.
        np.testing.assert_array_equal(i_a[t][match_a[t]][:5], i_e[t][match_e[t]][:5])
        # Every player's distance is its exact distance, in (distance, index) order.
        np.testing.assert_array_equal(d_a[t], exact.exact_distances(q[t:t + 1])[0][i_a[t]])
        assert np.all(np.diff(d_a[t]) >= 0)
    assert i_a.shape == i_e.shape


def test_quantiser_nearest_is_the_float64_order():
    rng = np.random.default_rng(0)
    centroids = rng.normal(size=(40, 16)).astype(np.float32)
    centroids[7] = centroids[3]  # a tie: the lower index first
    qz = Quantiser(centroids)
    x = rng.normal(size=(50, 16)).astype(np.float32)
    x[0] = centroids[3]
    d64 = ((x.astype(np.float64)[:, None, :] - centroids.astype(np.float64)[None]) ** 2).sum(-1)
    want = np.lexsort((np.broadcast_to(np.arange(40), d64.shape), d64), axis=-1)[:, :5]
    np.testing.assert_array_equal(qz.nearest(x, 5), want)
    assert qz.nearest(x, 5)[0, :2].tolist() == [3, 7]


def test_lists_round_trip_through_the_sentence_cache(tmp_path):
    rng = np.random.default_rng(1)
    keys = rng.normal(size=(5, 4)).astype(np.float16)
    entry = CachedSentence(np.arange(5), np.zeros((5, 2), np.int64), keys, lists=np.array([3, 1, 4, 1, 5], np.int32),
                           lists_of="abc123")
    SentenceCache(tmp_path, width=4).put("enc", "A sentence.", entry)
    back = SentenceCache(tmp_path, width=4).get("enc", "A sentence.")
    assert back is not None and back.lists_of == "abc123"
    np.testing.assert_array_equal(back.lists, entry.lists)
    np.testing.assert_array_equal(back.keys, keys)
    # A file without lists (written before them) is read as before.
    SentenceCache(tmp_path, width=4).put("enc", "Another.", CachedSentence(np.arange(5), np.zeros((5, 2), np.int64), keys))
    plain = SentenceCache(tmp_path, width=4).get("enc", "Another.")
    assert plain is not None and plain.lists is None


def test_changed_lists_fail_the_digest(tmp_path):
    cache = SentenceCache(tmp_path, width=4)
    entry = CachedSentence(np.arange(2), np.zeros((2, 2), np.int64), np.ones((2, 4), np.float16),
                           lists=np.array([0, 1], np.int32), lists_of="q")
    cache.put("enc", "S.", entry)
    path = cache.path("enc", "S.")
    with np.load(path) as data:
        members = {k: data[k] for k in data.files}
    members["lists"] = np.array([1, 1], np.int32)
    np.savez(path, **members)
    assert SentenceCache(tmp_path, width=4).get("enc", "S.") is None  # refused (and removed)
    assert not path.exists()


@pytest.mark.parametrize("value, error, message", [
    (-1, InvalidInputError, "approximate_above must be None or an int in [0, inf), got -1"),
    (1.5, InvalidInputTypeError, "approximate_above must be None or an int in [0, inf), got 1.5"),
    ("16k", InvalidInputTypeError, "approximate_above must be None or an int in [0, inf), got '16k'"),
    (True, InvalidInputTypeError, "approximate_above must be None or an int in [0, inf), got True"),
])
def test_approximate_above_is_validated(value, error, message):
    from tokenshapley_rag import TokenShapley

    with pytest.raises(error) as info:
        TokenShapley(approximate_above=value)
    assert str(info.value) == message
    assert issubclass(InvalidInputError, ValueError) and issubclass(InvalidInputTypeError, TypeError)


def _citations(res):
    return [(c.text, c.start, c.status, tuple((s.source_id, s.sentence_index) for s in c.sources)) for c in res.citations]


def test_threshold_zero_gives_the_exact_citations_on_a_real_example(ts, monkeypatch):
    """The whole approximate path with the real model and its shipped quantiser: lists
    assigned, kept in the cache, probed. Probing every list must reproduce exact search
    bit for bit (how close fewer probes come is measured on dev sets in
    benchmarks/long_context_bench.py, not asserted on one tiny example, whose ~60 entries
    fill few of the 256 lists)."""
    from tokenshapley_rag import TokenShapley, _indexing
    from tokenshapley_rag._quantiser import load_quantiser

    # The default searches exactly and loads no quantiser; the default encoder has one shipped.
    assert ts.pipeline.builder.quantiser is None and load_quantiser(ts.encoder.cache_key) is not None
    monkeypatch.setattr(_indexing, "PROBES", load_quantiser(ts.encoder.cache_key).n_lists)
    approx = TokenShapley(ts.encoder, cache_dir=ts.cache.root.parent if ts.cache.root else None, approximate_above=0)
    exact = TokenShapley(ts.encoder, cache_dir=ts.cache.root.parent if ts.cache.root else None, approximate_above=None)
    sources = [
        "The Eiffel Tower is in Paris. It was completed in 1889 for the World's Fair.",
        "Big Ben is a clock tower in London. Its bell weighs 13.7 tonnes.",
        "The Colosseum in Rome held 50,000 spectators. It was finished in 80 AD.",
    ]
    response = "The Eiffel Tower, completed in 1889, is in Paris; the Colosseum is in Rome."
    assert approx.build_datastore(sources).approximate and not exact.build_datastore(sources).approximate
    got = approx.attribute(query="Where are these landmarks?", sources=sources, response=response)
    want = exact.attribute(query="Where are these landmarks?", sources=sources, response=response)
    assert got.citations and got.citations == want.citations
    cached = approx.cache.get(approx.encoder.cache_key, "The Eiffel Tower is in Paris.")
    assert cached is not None and cached.lists_of == approx.pipeline.builder.quantiser.digest
    # The lists are remembered with the indexed sources: a new list of them assigns none.
    assigned = []
    quantiser = approx.pipeline.builder.quantiser
    monkeypatch.setattr(approx.pipeline.builder, "quantiser", _Counting(quantiser, assigned))
    assert approx.build_datastore(sources[::-1]).approximate and assigned == []
    # A source first indexed for an exact search gets its lists once, when a long context
    # needs them.
    builder = approx.pipeline.builder
    builder.approximate_above = None
    extra = "The Louvre is the world's most-visited museum."
    assert not approx.build_datastore([extra]).approximate and assigned == []
    builder.approximate_above = 0
    assert approx.build_datastore([extra, *sources]).approximate and len(assigned) == 1
    assert approx.build_datastore([*sources, extra]).approximate and len(assigned) == 1


class _Counting:
    """A quantiser that notes how many keys it assigns."""

    def __init__(self, quantiser, assigned):
        self._quantiser, self._assigned = quantiser, assigned

    def __getattr__(self, name):
        return getattr(self._quantiser, name)

    def assign(self, keys):
        self._assigned.append(len(keys))
        return self._quantiser.assign(keys)


def test_the_probed_search_does_not_depend_on_thread_counts():
    import numba
    import torch

    _, approx, q, classes, pieces = _stores(7, probes=2)
    saved = numba.get_num_threads(), torch.get_num_threads()
    runs = []
    try:
        for threads in sorted({1, numba.config.NUMBA_NUM_THREADS}):
            numba.set_num_threads(threads)
            torch.set_num_threads(threads)
            runs.append(approx.game_candidates(q, classes, 10, 5, pieces))
    finally:
        numba.set_num_threads(saved[0])
        torch.set_num_threads(saved[1])
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            np.testing.assert_array_equal(a, b)
