"""The TokenShapley datastore: one entry per context token, and its on-disk sentence cache.

A key is the encoder's hidden state *before* a token, with the prefix starting at the
token's own sentence, so every key depends on its sentence alone: sentences are the unit
of caching (a chunk retrieved again costs nothing).
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
import torch

__all__ = ["CachedSentence", "SentenceCache", "SentenceRecord", "Datastore"]

logger = logging.getLogger(__name__)

_FORMAT_VERSION = 1


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
    """Token ids, offsets (into the sentence) and keys (:func:`storage_keys`) of one sentence."""

    ids: np.ndarray  # (n,) int64
    offsets: np.ndarray  # (n, 2) int64, into the sentence text
    keys: np.ndarray  # (n, hidden) float16, or float32 beyond float16's range


class SentenceCache:
    """Sentence keys on disk (and in a small in-memory LRU), keyed by encoder and text.

    Files live at ``root/<encoder key>/<h[:2]>/<h>.npz`` with ``h`` the SHA-256 of the
    sentence text. Writes go to a temporary file in the same folder and are renamed into
    place, so readers (and concurrent writers, which write identical content) never see a
    partial file. Every read checks the zip CRCs, the stored text and the array shapes; a
    file that fails is deleted and reported as a miss, so it is rebuilt, never used.

    Parameters
    ----------
    root : path or None
        Cache folder; None keeps keys in memory only.
    memory_items : int, default=4096
        Sentences kept in the in-memory LRU.
    """

    def __init__(self, root: str | os.PathLike | None, *, memory_items: int = 4096) -> None:
        self.root = Path(root) if root is not None else None
        self.memory_items = memory_items
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
        path = self.path(encoder_key, text)
        if path is None or not path.exists():
            with self._lock:
                self.misses += 1
            return None
        try:
            entry = self._read(path, text)
        except Exception as err:  # any failure to read back means the file is unusable
            with self._lock:
                self.corrupt += 1
                self.misses += 1
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
        """Store an entry (in memory, and atomically on disk when a root is set)."""
        self._remember((encoder_key, text), entry)
        path = self.path(encoder_key, text)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        np.savez(
            buf,
            version=np.array([_FORMAT_VERSION], dtype=np.int64),
            text=np.frombuffer(text.encode("utf-8"), dtype=np.uint8),
            ids=entry.ids.astype(np.int64),
            offsets=entry.offsets.astype(np.int64),
            keys=storage_keys(entry.keys),
        )
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".npz")
        try:
            # No fsync: it doubled the cost of a cold build, and a file cut short by a
            # crash fails the CRC check on read and is rebuilt (the cache is derived data).
            with os.fdopen(fd, "wb") as fh:
                fh.write(buf.getvalue())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def _remember(self, key: tuple[str, str], entry: CachedSentence) -> None:
        with self._lock:
            self._memory[key] = entry
            self._memory.move_to_end(key)
            while len(self._memory) > self.memory_items:
                self._memory.popitem(last=False)

    @staticmethod
    def _read(path: Path, text: str) -> CachedSentence:
        # np.load reads each member to its end, where zipfile checks its CRC-32 (raising
        # BadZipFile on a mismatch): a flipped bit is caught without a second full read.
        with np.load(path, allow_pickle=False) as data:
            if int(data["version"][0]) != _FORMAT_VERSION:
                raise ValueError(f"format version {int(data['version'][0])} != {_FORMAT_VERSION}")
            if data["text"].tobytes().decode("utf-8") != text:
                raise ValueError("stored text differs from the sentence (hash collision or wrong file)")
            ids, offsets, keys = data["ids"], data["offsets"], data["keys"]
        n = ids.shape[0]
        if offsets.shape != (n, 2) or keys.ndim != 2 or keys.shape[0] != n:
            raise ValueError(f"inconsistent shapes ids {ids.shape}, offsets {offsets.shape}, keys {keys.shape}")
        if not np.isfinite(keys).all():
            raise ValueError("non-finite keys")
        return CachedSentence(ids=ids, offsets=offsets, keys=keys)


@dataclass(frozen=True, slots=True)
class SentenceRecord:
    """Provenance of one datastore sentence: which source, which sentence, where."""

    source_index: int
    sentence_index: int  # position among the source's sentences
    start: int  # character offsets into the source text
    end: int
    text: str


# Query rows x entries per block of the exact search's distance matrix (64 MiB of float32).
_SEARCH_BLOCK = 1 << 24
# Entries a search over all entries takes beyond the m it returns, so that ties at the cut
# are ordered by index (see Datastore._search).
_SLACK = 8


class Datastore:
    """Keys, token values and provenance of every context token, searched exactly.

    Search is one matrix product per block of queries, ``|k|^2 - 2 q.k`` against cached
    key norms, then one compiled pass over each row (:meth:`game_candidates`, what
    attribution uses): it keeps the query's nearest entries and the nearest of its class
    (the "mixed" candidates) in exact (distance, index) order and notes which sentences
    carry the class, with no ``(queries x entries)`` mask. :meth:`nearest` and
    :meth:`mixed_nearest` take any mask instead (numpy, for analysis and as the scan's
    oracle). A datastore holds one answer's retrieved context (10^2-10^5 tokens). At 16k
    entries the exact search took a quarter to a half of the time of faiss's flat index
    on this CPU; at ~400 entries faiss's search alone was a little faster, but building
    its index took ~10x longer than the search (docs/performance.md). It needs no second
    copy of the keys. It grows with the datastore; an approximate index would trade
    exactness for that.

    Parameters
    ----------
    sentences : list of SentenceRecord
    entries : list of CachedSentence
        One per sentence, same order.
    token_classes : list of ndarray
        Per sentence, the match class of each token (see ``TokenShapley``'s ``match``).
    piece_classes : list of ndarray or None
        Per sentence, a second, finer-grained class of each token (the token's own
        normalized text when ``token_classes`` are word classes), for answer tokens that
        match by piece (``pieces=True`` in the searches); None: the same as
        ``token_classes``.
    """

    def __init__(
        self,
        sentences: list[SentenceRecord],
        entries: list[CachedSentence],
        token_classes: list[np.ndarray],
        piece_classes: list[np.ndarray] | None = None,
    ) -> None:
        self.sentences = sentences
        sizes = [len(e.ids) for e in entries]
        self.size = int(sum(sizes))
        hidden = next((e.keys.shape[1] for e in entries if e.keys.ndim == 2), 0)
        # torch converts float16 ~9x faster than numpy's astype (which is not vectorised).
        self.keys = (
            torch.from_numpy(np.concatenate([e.keys for e in entries])).float().numpy()
            if self.size
            else np.zeros((0, hidden), dtype=np.float32)
        )
        self.token_ids = np.concatenate([e.ids for e in entries]) if self.size else np.zeros(0, np.int64)
        # Entry i's key equals entry _representative[i]'s, bit for bit.
        self._representative = _share_prefix_keys(self.keys, [e.ids for e in entries])
        self.token_class = np.concatenate(token_classes) if self.size else np.zeros(0, np.int64)
        self.sentence_of = np.repeat(np.arange(len(sentences)), sizes).astype(np.int64)
        self.source_of = np.array([sentences[i].source_index for i in range(len(sentences))], dtype=np.int64)[
            self.sentence_of
        ] if self.size else np.zeros(0, np.int64)
        self.piece_class = (
            np.concatenate(piece_classes) if self.size and piece_classes is not None else self.token_class
        )
        # Entries grouped by class (computed once): a class's members are one slice.
        self._groups = {False: _group(self.token_class)}
        self._groups[True] = self._groups[False] if piece_classes is None else _group(self.piece_class)
        self._norms = np.einsum("nd,nd->n", self.keys, self.keys)

    @property
    def rows_per_block(self) -> int:
        """Queries per block of the search's (queries x entries) matrices."""
        return max(1, _SEARCH_BLOCK // max(self.size, 1))

    def nearest(self, queries: np.ndarray, m: int, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Squared L2 distances and entry indices of the ``m`` nearest entries per query,
        nearest first (ties: lower index first): two ``(T, min(m, size))`` arrays. With
        ``mask`` (``(T, size)`` bool, e.g. :meth:`class_mask`) only the entries where
        ``mask[t]`` are searched for query ``t``; rows with fewer are padded with index -1
        and distance inf."""
        return self._search(queries, [(m, mask)])[0]

    def mixed_nearest(self, queries: np.ndarray, m: int, n_match: int, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The "mixed" candidates of each query: its ``n_match`` nearest entries where
        ``mask[t]``, then its nearest other entries up to ``m`` in all; ``(T, min(m, size))``
        distances and indices, nearest first (ties: lower index first). One distance matrix
        serves both searches.

        >>> store = Datastore([SentenceRecord(0, 0, 0, 1, "s")],
        ...     [CachedSentence(np.arange(3), np.zeros((3, 2), np.int64), np.array([[0.], [1.], [5.]]))], [np.array([0, 0, 1])])
        >>> store.mixed_nearest(np.array([[0.]]), 2, 1, store.class_mask(np.array([1])))[1].tolist()
        [[0, 2]]
        """
        m = min(m, self.size)
        (d2_a, idx_a), (d2_b, idx_b) = self._search(queries, [(n_match, mask), (m, None)])
        # Every row has m players: the matched ones, then the nearest not already chosen
        # (idx_b holds m distinct entries, so the union always has m).
        dup = (idx_b[:, :, None] == idx_a[:, None, :]).any(axis=2)
        idx = np.concatenate([idx_a, idx_b], axis=1)
        d2 = np.concatenate([d2_a, d2_b], axis=1)
        take = np.concatenate([idx_a >= 0, ~dup], axis=1)
        pick = np.argsort(~take, axis=1, kind="stable")[:, :m]
        d2, idx = np.take_along_axis(d2, pick, axis=1), np.take_along_axis(idx, pick, axis=1)
        order = np.lexsort((idx, d2), axis=-1)
        return np.take_along_axis(d2, order, axis=1), np.take_along_axis(idx, order, axis=1)

    def game_candidates(
        self, queries: np.ndarray, classes: np.ndarray, m: int, n_match: int, pieces: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Everything the answer tokens' games need from the datastore, in one pass over
        each row of the distance matrix: the players and which sentences carry each class.

        For query ``t`` of class ``classes[t]`` (compared with piece classes where
        ``pieces[t]``): its :meth:`mixed_nearest` candidates, i.e. its ``n_match``
        nearest entries of that class, then its nearest other entries up to
        ``min(m, size)`` in all (``n_match=0``: its :meth:`nearest` entries), as squared
        distances and indices, nearest first (ties: lower index first); and, as
        ``(T, n_sentences)`` bool, whether each sentence holds an entry of the class
        (:meth:`sentences_holding`). Distances are those of :meth:`nearest`; the order
        is exact for any number of ties (a compiled scan keeps each top list sorted by
        (distance, index)), and no ``(T, size)`` class mask is built.

        >>> store = Datastore([SentenceRecord(0, 0, 0, 1, "s")],
        ...     [CachedSentence(np.arange(3), np.zeros((3, 2), np.int64), np.array([[0.], [1.], [5.]]))], [np.array([0, 0, 1])])
        >>> d2, idx, carries = store.game_candidates(np.array([[0.]]), np.array([1]), 2, 1)
        >>> idx.tolist(), d2.tolist(), carries.tolist()
        ([[0, 2]], [[0.0, 25.0]], [[True]])
        """
        q = np.ascontiguousarray(queries, dtype=np.float32)
        t_rows = q.shape[0]
        classes = np.ascontiguousarray(classes, dtype=np.int64)
        if classes.shape != (t_rows,):
            raise ValueError(f"classes must have one entry per query ({t_rows}), got shape {classes.shape}")
        use_piece = np.zeros(t_rows, dtype=bool) if pieces is None else np.ascontiguousarray(pieces, dtype=bool)
        if use_piece.shape != (t_rows,):
            raise ValueError(f"pieces must have one entry per query ({t_rows}), got shape {use_piece.shape}")
        m = min(m, self.size)
        n_match = max(0, min(n_match, m))
        d_out = np.zeros((t_rows, m), dtype=np.float32)
        i_out = np.zeros((t_rows, m), dtype=np.int64)
        carries = np.zeros((t_rows, len(self.sentences)), dtype=bool)
        if not self.size or not t_rows:
            return d_out, i_out, carries
        q_norms = np.einsum("td,td->t", q, q)
        rows = self.rows_per_block
        for a in range(0, t_rows, rows):
            b = min(a + rows, t_rows)
            # |k|^2 - 2 q.k; the scan adds |q|^2, reads each entry's representative's
            # column and clips at 0 as it goes: the values of _distances, without the copies.
            partial = self._partial_distances(q[a:b])
            scan = _scan_rows if partial.size >= _PARALLEL_CELLS else _scan_rows_serial
            scan(partial, q_norms[a:b], self._representative, self.token_class, self.piece_class, self.sentence_of,
                 classes[a:b], use_piece[a:b], n_match, d_out[a:b], i_out[a:b], carries[a:b])
        return d_out, i_out, carries

    def _partial_distances(self, q: np.ndarray) -> np.ndarray:
        """``|k|^2 - 2 q.k`` for queries ``q`` (float32) and every entry: one matrix product
        against the cached key norms (float32, like faiss's flat index)."""
        with torch.inference_mode():
            return torch.addmm(
                torch.from_numpy(self._norms)[None, :], torch.from_numpy(q), torch.from_numpy(self.keys).T, alpha=-2.0
            ).numpy()

    def _distances(self, q: np.ndarray) -> np.ndarray:
        """``(len(q), size)`` float32 squared distances of queries ``q`` (float32) to every
        entry: ``|q|^2 + |k|^2 - 2 q.k``, each entry taking its representative's value (so
        equal keys tie exactly), clipped at 0."""
        d2 = self._partial_distances(q)[:, self._representative]
        d2 += np.einsum("td,td->t", q, q)[:, None]
        np.maximum(d2, 0.0, out=d2)
        return d2

    def _search(self, queries: np.ndarray, requests: list[tuple[int, np.ndarray | None]]) -> list[tuple[np.ndarray, np.ndarray]]:
        """For each request ``(m, mask)``, :meth:`nearest` with that ``m`` and ``mask``,
        from one distance matrix: ``|q|^2 + |k|^2 - 2 q.k``, one matrix product per block
        of queries against cached key norms (float32, like faiss's flat index).

        Entries with equal keys (every sentence-initial token has the BOS state's key,
        :func:`_share_prefix_keys`) take the distance of one representative, so rounding
        cannot order them, and equal distances are ordered by entry index: the order of a
        game's players never depends on rounding. A search over all entries takes
        ``_SLACK`` more entries than asked before that ordering (so ties at the cut are
        kept up to that many); a masked search orders all the entries its mask allows.
        """
        q = np.ascontiguousarray(queries, dtype=np.float32)
        t_rows = q.shape[0]
        out = [
            (np.full((t_rows, min(m, self.size)), np.inf, np.float32), np.full((t_rows, min(m, self.size)), -1, np.int64))
            for m, _ in requests
        ]
        if not self.size or not t_rows or not any(min(m, self.size) for m, _ in requests):
            return out
        rows = self.rows_per_block
        for a in range(0, t_rows, rows):
            b = min(a + rows, t_rows)
            d2 = self._distances(q[a:b])
            for (m, mask), (d_out, i_out) in zip(requests, out):
                if d_out.shape[1] == 0:
                    continue
                if mask is None:
                    width = min(m + _SLACK, self.size)
                    cols = torch.topk(torch.from_numpy(d2), width, dim=1, largest=False, sorted=False).indices.numpy()
                    dist = np.take_along_axis(d2, cols, axis=1)
                else:
                    dist, cols = _masked_rows(d2, mask[a:b])
                order = np.lexsort((cols, dist), axis=-1)[:, : d_out.shape[1]]
                width = order.shape[1]
                d_out[a:b, :width] = np.take_along_axis(dist, order, axis=1)
                i_out[a:b, :width] = np.take_along_axis(cols, order, axis=1)
        for d_out, i_out in out:
            i_out[np.isinf(d_out)] = -1
        return out

    def members_of_class(self, cls: int, piece: bool = False) -> np.ndarray:
        """Indices of the entries whose token class (piece class with ``piece``) is ``cls``
        (ascending)."""
        order, sorted_class = self._groups[bool(piece)]
        lo, hi = np.searchsorted(sorted_class, [cls, cls + 1])
        return order[lo:hi]

    def class_mask(self, classes: np.ndarray, pieces: np.ndarray | None = None) -> np.ndarray:
        """``(len(classes), size)`` bool: whether each entry's token class equals
        ``classes[t]`` (its piece class on rows where ``pieces[t]``)."""
        classes = np.asarray(classes)[:, None]
        same = self.token_class[None, :] == classes
        if pieces is not None and np.any(pieces):
            same = np.where(np.asarray(pieces, bool)[:, None], self.piece_class[None, :] == classes, same)
        return same

    def matches(self, idx: np.ndarray, classes: np.ndarray, pieces: np.ndarray | None = None) -> np.ndarray:
        """Whether entries ``idx`` (shape ``(T, m)``) carry row ``t``'s class ``classes[t]``
        (compared with piece classes on rows where ``pieces[t]``)."""
        if pieces is None or not pieces.any():
            return self.token_class[idx] == classes[:, None]
        return np.where(pieces[:, None], self.piece_class[idx], self.token_class[idx]) == classes[:, None]

    def sentences_holding(
        self, classes: np.ndarray, pieces: np.ndarray | None = None, *, mask: np.ndarray | None = None
    ) -> np.ndarray:
        """``(len(classes), n_sentences)`` bool: whether each sentence holds an entry of
        each class (a piece class where ``pieces``); ``mask``: :meth:`class_mask` of the
        same arguments, when the caller has it already."""
        if mask is None:
            mask = self.class_mask(classes, pieces)
        out = np.zeros((mask.shape[0], len(self.sentences)), dtype=bool)
        if self.size and mask.shape[0]:
            # Entries are stored sentence by sentence: one reduction per run of entries.
            starts = np.searchsorted(self.sentence_of, np.arange(len(self.sentences)))
            filled = np.bincount(self.sentence_of, minlength=len(self.sentences)) > 0
            out[:, filled] = np.logical_or.reduceat(mask, starts[filled], axis=1)
        return out

    def sentences_with_sequences(self, sequences: list[np.ndarray]) -> np.ndarray:
        """``(len(sequences), n_sentences)`` bool: whether each sentence holds each
        sequence of token classes as consecutive entries (a span word for word, under the
        ``match`` rule); one compiled pass per sequence over the entries of its first class.

        >>> store = Datastore([SentenceRecord(0, 0, 0, 1, "a"), SentenceRecord(0, 1, 2, 3, "b")],
        ...     [CachedSentence(np.arange(3), np.zeros((3, 2), np.int64), np.zeros((3, 1))),
        ...      CachedSentence(np.arange(2), np.zeros((2, 2), np.int64), np.zeros((2, 1)))],
        ...     [np.array([1, 2, 3]), np.array([1, 3])])
        >>> store.sentences_with_sequences([np.array([1, 3]), np.array([3])]).tolist()
        [[False, True], [True, True]]
        """
        out = np.zeros((len(sequences), len(self.sentences)), dtype=bool)
        if not len(sequences) or not self.size:
            return out
        flat = np.concatenate([np.asarray(q, dtype=np.int64).ravel() for q in sequences])
        bounds = np.zeros(len(sequences) + 1, dtype=np.int64)
        np.cumsum([np.asarray(q).size for q in sequences], out=bounds[1:])
        order, sorted_class = self._groups[False]
        _sequence_rows(self.token_class, self.sentence_of, order, sorted_class, flat, bounds, out)
        return out

    def nearest_of_class(
        self, queries: np.ndarray, classes: np.ndarray, m: int, pieces: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """For each query, the ``m`` nearest entries whose token class equals ``classes[t]``
        (piece class where ``pieces[t]``; fewer when the datastore has fewer; padded with
        index -1 and distance inf)."""
        return self.nearest(queries, m, self.class_mask(classes, pieces))


def _masked_rows(d2: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The entries ``mask`` allows in each row of ``d2``, as two ``(rows, most allowed)``
    arrays of distances and entry indices, padded with distance inf."""
    rows, cols = np.nonzero(mask)  # row by row
    width = int(np.bincount(rows, minlength=d2.shape[0]).max(initial=0)) if len(rows) else 0
    dist = np.full((d2.shape[0], max(width, 1)), np.inf, dtype=d2.dtype)
    index = np.full(dist.shape, d2.shape[1], dtype=np.int64)
    at = np.arange(len(rows)) - np.searchsorted(rows, rows)  # position within its row
    dist[rows, at], index[rows, at] = d2[rows, cols], cols
    return dist, index


def _group(classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Entry indices sorted by class (stable), and the classes in that order."""
    order = np.argsort(classes, kind="stable")
    return order, classes[order]


def _share_prefix_keys(keys: np.ndarray, sentence_ids: list[np.ndarray]) -> np.ndarray:
    """Give entries whose sentences start with the same tokens one and the same key.

    A key depends only on its sentence's tokens before it, so such entries have equal
    keys by definition (every sentence-initial token shares the BOS state). Encoded in
    different batches, or rebuilt after a cache loss, they differ in their last bits,
    and those bits would then decide which of two equally near entries wins a game.
    Sentences are sorted by token sequence; each takes the keys of its predecessor for
    the prefix they share (in place, so the representative is deterministic). Returns,
    per entry, the index of the entry whose key it now shares (itself when none).
    """
    starts = np.concatenate([[0], np.cumsum([len(ids) for ids in sentence_ids])]).astype(np.int64)
    representative = np.arange(starts[-1], dtype=np.int64)
    lists = [ids.tolist() for ids in sentence_ids]
    order = sorted(range(len(lists)), key=lambda i: (lists[i], i))
    for prev, cur in zip(order, order[1:]):
        a, b = lists[prev], lists[cur]
        n = min(len(a), len(b))
        if n == 0:
            continue
        shared = 0  # tokens in common (sorted neighbours: usually none, or a whole copy)
        while shared < n and a[shared] == b[shared]:
            shared += 1
        # The key before token j depends on tokens [0, j): keys 0..shared are equal.
        width = min(shared + 1, n)
        keys[starts[cur] : starts[cur] + width] = keys[starts[prev] : starts[prev] + width]
        representative[starts[cur] : starts[cur] + width] = representative[starts[prev] : starts[prev] + width]
    return representative


# Distance-matrix cells (queries x entries) above which game_candidates scans rows on
# numba's threads. Measured in place (attribute() right after the encoder pass, 2 cores):
# threads cost +0.3 ms at 90 x 1k-4k cells and saved 1.6 ms at 90 x 16k (~3 ns a cell).
_PARALLEL_CELLS = 1 << 20


@numba.njit(cache=True, nogil=True)
def _insert(dist, index, n, d, j):
    """Put entry ``j`` at distance ``d`` into the list ``dist[:n], index[:n]`` sorted by
    (distance, index), keeping its capacity ``len(dist)``; entries arrive by ascending
    index, so an equal distance goes after the ones already there. Returns the new length."""
    cap = dist.shape[0]
    if n == cap and not d < dist[n - 1]:
        return n
    p = n if n < cap else n - 1
    while p > 0 and d < dist[p - 1]:
        dist[p] = dist[p - 1]
        index[p] = index[p - 1]
        p -= 1
    dist[p] = d
    index[p] = j
    return n + 1 if n < cap else n


@numba.njit(cache=True, nogil=True)
def _scan_row(partial, q_norm, representative, token_class, piece_class, sentence_of, cls, use_piece, n_match, d_out, i_out,
              carries):
    m = d_out.shape[0]
    zero = np.float32(0.0)
    near_d = np.empty(m, np.float32)
    near_i = np.empty(m, np.int64)
    match_d = np.empty(max(n_match, 1), np.float32)
    match_i = np.empty(max(n_match, 1), np.int64)
    n_near = 0
    n_same = 0
    # The worst distance each full list still holds (inf until full): most entries are
    # farther and cost one comparison.
    near_worst = np.float32(np.inf)
    match_worst = np.float32(np.inf)
    classes = piece_class if use_piece else token_class
    for j in range(partial.shape[0]):
        d = partial[representative[j]] + q_norm  # float32, as numpy adds them
        if d < zero:
            d = zero
        if classes[j] == cls:
            carries[sentence_of[j]] = True
            if n_match > 0 and (n_same < n_match or d < match_worst):
                n_same = _insert(match_d, match_i, n_same, d, j)
                if n_same == n_match:
                    match_worst = match_d[n_match - 1]
        if n_near < m or d < near_worst:
            n_near = _insert(near_d, near_i, n_near, d, j)
            if n_near == m:
                near_worst = near_d[m - 1]
    # The matched players, then the nearest others until there are m (the m nearest are
    # m distinct entries, so there always are), all in (distance, index) order.
    n = 0
    for r in range(n_same):
        n = _insert(d_out, i_out, n, match_d[r], match_i[r])
    for r in range(n_near):
        if n == m:
            break
        taken = False
        for s in range(n_same):
            if match_i[s] == near_i[r]:
                taken = True
                break
        if not taken:
            p = n
            while p > 0 and (near_d[r] < d_out[p - 1] or (near_d[r] == d_out[p - 1] and near_i[r] < i_out[p - 1])):
                d_out[p] = d_out[p - 1]
                i_out[p] = i_out[p - 1]
                p -= 1
            d_out[p] = near_d[r]
            i_out[p] = near_i[r]
            n += 1


@numba.njit(cache=True, parallel=True, nogil=True)
def _scan_rows(partial, q_norms, representative, token_class, piece_class, sentence_of, classes, use_piece, n_match, d_out,
               i_out, carries):
    for t in numba.prange(partial.shape[0]):
        _scan_row(partial[t], q_norms[t], representative, token_class, piece_class, sentence_of, classes[t], use_piece[t],
                  n_match, d_out[t], i_out[t], carries[t])


@numba.njit(cache=True, nogil=True)
def _scan_rows_serial(partial, q_norms, representative, token_class, piece_class, sentence_of, classes, use_piece, n_match,
                      d_out, i_out, carries):
    for t in range(partial.shape[0]):
        _scan_row(partial[t], q_norms[t], representative, token_class, piece_class, sentence_of, classes[t], use_piece[t],
                  n_match, d_out[t], i_out[t], carries[t])


@numba.njit(cache=True, nogil=True)
def _sequence_rows(token_class, sentence_of, order, sorted_class, flat, bounds, out):
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
