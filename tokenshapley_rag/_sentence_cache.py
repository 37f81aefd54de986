"""The on-disk sentence cache: each sentence's token ids, offsets and keys, stored once per
encoder. A key depends on its sentence alone (its prefix starts at the sentence), so a
sentence is the unit of caching: a chunk retrieved again costs nothing.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import threading
import time
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from tokenshapley_rag._files import write_bytes_atomic

__all__ = ["CachedSentence", "SentenceCache", "storage_keys"]

logger = logging.getLogger(__name__)

_FORMAT_VERSION = 2  # 2: the file states its encoder key, key width and a content digest
# A temporary file older than this is left over from a crashed write and is removed.
_STALE_TMP_SECONDS = 3600


_FLOAT16_MAX = float(np.finfo(np.float16).max)


def storage_keys(keys: np.ndarray) -> np.ndarray:
    """Keys in the precision they are cached in: float16 (half the bytes, below the
    search's resolution), or float32 when a value is beyond float16's range (65504), as
    Gemma-3's middle layers reach ~1e5 at the BOS position, which float16 would turn
    into inf.

    >>> storage_keys(np.array([[1.0, -2.5]])).dtype, storage_keys(np.array([[1e5, 0.0]])).dtype
    (dtype('float16'), dtype('float32'))
    """
    keys = np.asarray(keys)
    if keys.size and float(np.abs(keys).max()) > _FLOAT16_MAX:
        return keys.astype(np.float32)
    return keys.astype(np.float16)


@dataclass(frozen=True, slots=True)
class CachedSentence:
    """Token ids, offsets (into the sentence) and keys (:func:`storage_keys`) of one
    sentence; and, once a long context needed them, its keys' lists in the approximate
    search's quantiser (``lists_of`` names that quantiser: lists of another are ignored)."""

    ids: np.ndarray  # (n,) int64
    offsets: np.ndarray  # (n, 2) int64, into the sentence text
    keys: np.ndarray  # (n, hidden) float16, or float32 beyond float16's range
    lists: np.ndarray | None = None  # (n,) int32: each key's nearest centroid
    lists_of: str = ""  # the quantiser's digest (Quantiser.digest)


class SentenceCache:
    """Sentence keys on disk (and in a small in-memory LRU), keyed by encoder and text.

    Files live at ``root/<encoder key>/<h[:2]>/<h>.npz`` with ``h`` the SHA-256 of the
    sentence text. Writes go to a temporary file in the same folder and are renamed into
    place, so readers (and concurrent writers, which write identical content) never see a
    partial file. Every read checks the zip CRCs, the stored text, the encoder key, the
    key width (``width``), the array shapes and a SHA-256 digest of the content; a file that
    fails is deleted and reported as a miss, so it is rebuilt, never used.

    The cache degrades, never fails: when the folder cannot be written (or read), one
    warning is given and the keys stay in memory only. Folders are created ``0700`` (file
    names are hashes of the sources' sentences) and files ``0600``; temporary files of
    crashed writes older than an hour are removed.

    Parameters
    ----------
    root : path or None
        Cache folder; None keeps keys in memory only.
    memory_items : int, default=4096
        Sentences kept in the in-memory LRU.
    width : int or None
        The encoder's key width; a file holding keys of another width is refused.
    """

    def __init__(self, root: str | os.PathLike | None, *, memory_items: int = 4096, width: int | None = None) -> None:
        self.root = Path(root) if root is not None else None
        self.memory_items = memory_items
        self.width = width
        self.disk_error: str | None = None  # why the disk cache was given up, if it was
        self._swept: set[Path] = set()
        self._memory: OrderedDict[tuple[str, str], CachedSentence] = OrderedDict()
        self._lock = threading.Lock()  # the LRU and counters are shared by concurrent calls
        self.hits = 0
        self.misses = 0
        self.corrupt = 0

    @staticmethod
    def text_hash(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def path(self, encoder_key: str, text: str) -> Path | None:
        if self.root is None:
            return None
        h = self.text_hash(text)
        return self.root / encoder_key / h[:2] / f"{h}.npz"

    def get(self, encoder_key: str, text: str) -> CachedSentence | None:
        """The cached entry, or None (a miss, or a corrupt file that was removed)."""
        mem_key = (encoder_key, text)
        with self._lock:
            entry = self._memory.get(mem_key)
            if entry is not None:
                self._memory.move_to_end(mem_key)
                self.hits += 1
                return entry
        path = self.path(encoder_key, text) if self.disk_error is None else None
        try:
            found = path is not None and path.exists()
        except OSError as err:  # an unreadable folder
            self._give_up_disk(err)
            found = False
        if not found:
            with self._lock:
                self.misses += 1
            return None
        try:
            entry = self._read(path, text, encoder_key, self.width)
        except Exception as err:  # any failure to read back means the file is unusable
            old_format = isinstance(err, _OldFormatError)
            with self._lock:
                self.corrupt += 0 if old_format else 1
                self.misses += 1
            if old_format:  # written by an earlier release: replaced without alarm
                logger.debug("tokenshapley cache file %s has an older format; rebuilding it", path)
            else:
                logger.warning("tokenshapley cache file %s is corrupt (%s); rebuilding it", path, err)
            try:
                path.unlink()
            except OSError:
                pass
            return None
        with self._lock:
            self.hits += 1
        self._remember(mem_key, entry)
        return entry

    def put(self, encoder_key: str, text: str, entry: CachedSentence) -> None:
        """Store an entry (in memory, and atomically on disk when a root is set and
        writable; see the class docstring)."""
        self._remember((encoder_key, text), entry)
        path = self.path(encoder_key, text) if self.disk_error is None else None
        if path is None:
            return
        keys = storage_keys(entry.keys)
        ids, offsets = entry.ids.astype(np.int64), entry.offsets.astype(np.int64)
        # Lists are optional members (a file without them is read as before).
        lists = {} if entry.lists is None else {
            "lists": np.asarray(entry.lists, dtype=np.int32),
            "lists_of": np.frombuffer(entry.lists_of.encode("utf-8"), dtype=np.uint8),
        }
        buf = io.BytesIO()
        np.savez(
            buf,
            version=np.array([_FORMAT_VERSION], dtype=np.int64),
            encoder=np.frombuffer(encoder_key.encode("utf-8"), dtype=np.uint8),
            text=np.frombuffer(text.encode("utf-8"), dtype=np.uint8),
            ids=ids,
            offsets=offsets,
            keys=keys,
            digest=np.frombuffer(_digest(encoder_key, text, ids, offsets, keys, *lists.values()), dtype=np.uint8),
            **lists,
        )
        try:
            self._make_folder(path.parent)
            # No fsync: it doubled the cost of a cold build, and a file cut short by a
            # crash fails the CRC check on read and is rebuilt (the cache is derived data).
            # The ".tmp-" prefix is what the folder sweep removes after a crash.
            write_bytes_atomic(path, buf.getvalue(), prefix=".tmp-", suffix=".npz", fsync=False)
        except OSError as err:  # read-only or full disk, no permission: memory only
            self._give_up_disk(err)

    def _make_folder(self, folder: Path) -> None:
        """Create ``folder`` (and its parents under the root) as 0700, once per process
        sweeping temporary files that crashed writes left there."""
        if folder in self._swept:
            return
        assert self.root is not None
        if not self.root.exists():
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        for part in reversed([folder, *folder.parents]):
            if part == self.root or self.root in part.parents:
                if not part.exists():
                    part.mkdir(mode=0o700, exist_ok=True)
        now = time.time()
        for stale in folder.glob(".tmp-*.npz"):
            try:
                if now - stale.stat().st_mtime > _STALE_TMP_SECONDS:
                    stale.unlink()
            except OSError:
                pass
        self._swept.add(folder)

    def _give_up_disk(self, err: OSError) -> None:
        with self._lock:
            first = self.disk_error is None
            self.disk_error = f"{type(err).__name__}: {err}"
        if first:
            warnings.warn(
                f"tokenshapley cache folder {str(self.root)!r} cannot be used ({self.disk_error}); sentence keys "
                "are kept in memory only (pass cache_dir= or use_disk_cache=False to silence this)",
                RuntimeWarning,
                stacklevel=3,
            )

    def _remember(self, key: tuple[str, str], entry: CachedSentence) -> None:
        with self._lock:
            self._memory[key] = entry
            self._memory.move_to_end(key)
            while len(self._memory) > self.memory_items:
                self._memory.popitem(last=False)

    @staticmethod
    def _read(path: Path, text: str, encoder_key: str, width: int | None) -> CachedSentence:
        # np.load reads each member to its end, where zipfile checks its CRC-32 (raising
        # BadZipFile on a mismatch): a flipped bit is caught without a second full read.
        with np.load(path, allow_pickle=False) as data:
            if int(data["version"][0]) != _FORMAT_VERSION:
                raise _OldFormatError(f"format version {int(data['version'][0])} != {_FORMAT_VERSION}")
            if data["text"].tobytes().decode("utf-8") != text:
                raise ValueError("stored text differs from the sentence (hash collision or wrong file)")
            if data["encoder"].tobytes().decode("utf-8") != encoder_key:
                raise ValueError("the file was written by another encoder, layer or dtype")
            ids, offsets, keys = data["ids"], data["offsets"], data["keys"]
            digest = data["digest"].tobytes()
            lists = (data["lists"], data["lists_of"]) if "lists" in data.files else ()
        n = ids.shape[0]
        if offsets.shape != (n, 2) or keys.ndim != 2 or keys.shape[0] != n:
            raise ValueError(f"inconsistent shapes ids {ids.shape}, offsets {offsets.shape}, keys {keys.shape}")
        if width is not None and keys.shape[1] != width:
            raise ValueError(f"keys are {keys.shape[1]} wide; the encoder's are {width}")
        if digest != _digest(encoder_key, text, ids, offsets, keys, *lists):
            raise ValueError("content digest mismatch (the keys were changed after writing)")
        if not np.isfinite(keys).all():
            raise ValueError("non-finite keys")
        if lists and lists[0].shape != (n,):
            raise ValueError(f"lists of shape {lists[0].shape} for {n} keys")
        if lists:
            return CachedSentence(ids=ids, offsets=offsets, keys=keys, lists=lists[0],
                                  lists_of=lists[1].tobytes().decode("utf-8"))
        return CachedSentence(ids=ids, offsets=offsets, keys=keys)


class _OldFormatError(ValueError):
    """A cache file of another format version (an earlier release wrote it)."""


def _digest(encoder_key: str, text: str, ids: np.ndarray, offsets: np.ndarray, keys: np.ndarray,
            *extra: np.ndarray) -> bytes:
    """SHA-256 of what a cache file claims: its encoder, text, tokens and keys (and its
    lists and their quantiser, ``extra``, when it has them)."""
    h = hashlib.sha256()
    for part in (encoder_key.encode("utf-8"), text.encode("utf-8")):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    for array in (ids, offsets, keys, *extra):
        h.update(str((array.dtype.str, array.shape)).encode())
        h.update(np.ascontiguousarray(array).tobytes())
    return h.digest()
