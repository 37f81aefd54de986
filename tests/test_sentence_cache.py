"""The sentence cache on disk: precision of stored keys, and corrupt files (no model)."""

import numpy as np

from tokenshapley_rag._sentence_cache import CachedSentence, SentenceCache, storage_keys


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


# ---------------------------------------------------------------------- the cache degrades, never fails

import os  # noqa: E402
import stat  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import pytest  # noqa: E402


def _rewrite(path, **changes):
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    arrays.update(changes)
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def test_an_unwritable_folder_keeps_keys_in_memory_with_one_warning(tmp_path):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder should be")
    cache = SentenceCache(blocked)
    with pytest.warns(RuntimeWarning, match="kept in memory only"):
        cache.put("enc", "One.", _entry(np.ones((1, 2), np.float32)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache.put("enc", "Two.", _entry(np.ones((1, 2), np.float32)))  # no second warning
    assert cache.disk_error is not None
    assert cache.get("enc", "One.") is not None and cache.get("enc", "Two.") is not None


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"keys": np.ones((1, 3), np.float16)}, "wide"),  # another key width
        ({"keys": np.full((1, 2), 1e6, np.float32)}, "digest"),  # keys scaled after writing
        ({"encoder": np.frombuffer(b"other", np.uint8)}, "another encoder"),
    ],
)
def test_a_file_that_does_not_match_what_it_claims_is_removed_and_rebuilt(tmp_path, caplog, change, reason):
    SentenceCache(tmp_path, width=2).put("enc", "One.", _entry(np.ones((1, 2), np.float32)))
    path = SentenceCache(tmp_path).path("enc", "One.")
    _rewrite(path, **change)
    fresh = SentenceCache(tmp_path, width=2)
    assert fresh.get("enc", "One.") is None and fresh.corrupt == 1 and not path.exists()
    assert reason in caplog.text


def test_folders_are_private_and_stale_temp_files_are_swept(tmp_path):
    cache = SentenceCache(tmp_path / "cache")
    cache.put("enc", "One.", _entry(np.ones((1, 2), np.float32)))
    path = cache.path("enc", "One.")
    for folder in (tmp_path / "cache", path.parent.parent, path.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stale, fresh_tmp = path.parent / ".tmp-crashed.npz", path.parent / ".tmp-writing.npz"
    stale.write_bytes(b"x")
    fresh_tmp.write_bytes(b"x")
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    # the next process to write into that folder sweeps it
    SentenceCache(tmp_path / "cache").put("enc", "One.", _entry(np.ones((1, 2), np.float32)))
    assert not stale.exists() and fresh_tmp.exists()
