"""The sentence cache on disk: precision of stored keys, and corrupt files (no model)."""

import numpy as np

from tokenshapley_rag._datastore import CachedSentence, SentenceCache, storage_keys


def _entry(keys):
    n = len(keys)
    return CachedSentence(ids=np.arange(n, dtype=np.int64), offsets=np.zeros((n, 2), np.int64), keys=keys)


def test_keys_within_float16_range_are_stored_as_float16(tmp_path):
    keys = np.array([[1.5, -860.5], [0.0, 65504.0]], dtype=np.float32)
    SentenceCache(tmp_path).put("enc", "A sentence.", _entry(storage_keys(keys)))
    got = SentenceCache(tmp_path).get("enc", "A sentence.")  # a new instance: read from disk
    assert got.keys.dtype == np.float16
    np.testing.assert_array_equal(got.keys, keys)


def test_keys_beyond_float16_range_are_stored_as_float32_not_inf(tmp_path):
    # Gemma-3-270m's layers 8-17 reach |h| ~ 1e5 at the BOS position; float16 max is 65504.
    keys = np.array([[98538.5, -1.25], [3.0, -107000.0]], dtype=np.float32)
    stored = storage_keys(keys)
    assert stored.dtype == np.float32
    SentenceCache(tmp_path).put("enc", "Big values.", _entry(stored))
    # put() itself must not narrow them either (an entry built elsewhere in float32).
    SentenceCache(tmp_path).put("enc", "Also big.", _entry(keys))
    for text in ("Big values.", "Also big."):
        got = SentenceCache(tmp_path).get("enc", text)
        assert got is not None and got.keys.dtype == np.float32
        np.testing.assert_array_equal(got.keys, keys)


def test_a_file_with_non_finite_keys_is_a_miss_and_removed(tmp_path):
    cache = SentenceCache(tmp_path)
    cache.put("enc", "Bad.", _entry(np.array([[np.inf, 0.0]], dtype=np.float32)))
    fresh = SentenceCache(tmp_path)
    assert fresh.get("enc", "Bad.") is None
    assert fresh.corrupt == 1 and not cache.path("enc", "Bad.").exists()
