"""The TokenShapley datastore: one entry per context token (its key, token and provenance),
searched exactly. The keys come from the sentence cache (:mod:`._sentence_cache`); the
compiled search kernels are in :mod:`._kernels`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from tokenshapley_rag._device_search import DeviceIndex, device_candidates
from tokenshapley_rag._kernels import (
    exact_rows,
    keep_rows,
    keep_rows_serial,
    list_products,
    measure_kept_rows,
    prefix_representatives,
    probe_rows,
    scan_rows,
    scan_rows_serial,
    select_rows,
    select_rows_serial,
    sequence_rows,
    widen_halves,
)
from tokenshapley_rag._sentence_cache import CachedSentence
from tokenshapley_rag._timing import step

if TYPE_CHECKING:
    from tokenshapley_rag._quantiser import Quantiser

__all__ = ["Datastore", "SentenceRecord", "widened_keys"]

@dataclass(frozen=True, slots=True)
class SentenceRecord:
    """Provenance of one datastore sentence: which source, which sentence, where."""

    source_index: int
    sentence_index: int  # position among the source's sentences
    start: int  # character offsets into the source text
    end: int
    text: str


# Query rows x entries per block of the search's float32 distance matrix (64 MiB).
_SEARCH_BLOCK = 1 << 24


def _preselect_margin(hidden: int) -> tuple[float, float]:
    """``(rel, abs)`` for keys of width ``hidden``: the searches' float32 distance (the
    matrix product's ``|k|^2 - 2 q.k`` plus ``|q|^2``, clipped at 0) is within
    ``rel * (|q|^2 + |k|^2) + abs`` of the float64 distance (:func:`exact_d2`), with the
    norms as computed in float32, whatever the BLAS's summation order, blocking, kernel
    or thread count.

    Any summation order of ``n + 1`` float32 terms (with or without FMA) is within
    ``g * sum of |terms|`` of the exact sum, ``g = gamma_(n+1) = (n+1)u / (1 - (n+1)u)``,
    ``u = 2^-24`` (Higham, Accuracy and Stability of Numerical Algorithms, 3.1). The
    product's cell sums ``|k|^2`` (as cached) and the ``-2 q_i k_i`` (the factor 2 is
    exact): within ``g (|k|^2 (1 + g) + 2|q||k|)``; the cached ``|k|^2`` and ``|q|^2``
    are each within ``g`` of theirs. With ``2|q||k| <= |q|^2 + |k|^2`` the error is at most
    ``(3 + g) g (|q|^2 + |k|^2)``, and ``(3 + g) g / (1 - g)`` with the computed norms.
    The float64 distance is within ``~2(n+1) 2^-53`` of the true one relative to that
    sum, as is the float64 arithmetic of the bounds: ``4 (n+2) u`` covers it all, with a
    quarter to spare, for any width below 10^5. ``abs`` covers underflow (denormals
    flushed to zero included): at most ``2^-126`` a term.
    """
    return 4.0 * (hidden + 2) * 2.0**-24, (hidden + 2) * 2.0**-100


class Datastore:
    """Keys, token values and provenance of every context token, searched exactly.

    Search is one float32 matrix product per block of queries, ``|k|^2 - 2 q.k`` against
    cached key norms, then one compiled pass over each row (:meth:`game_candidates`, what
    attribution uses): it keeps the query's nearest entries and the nearest of its class
    (the "mixed" candidates) and notes which sentences carry the class, with no
    ``(queries x entries)`` mask. :meth:`nearest` and :meth:`mixed_nearest` take any mask
    instead (for analysis and as the scan's oracle).

    The float32 product only pre-selects: it rounds differently for other row blocks and
    BLAS thread counts, so every entry whose float32 distance could be, within a proven
    bound (:func:`_preselect_margin`), among the nearest is a candidate, and the
    candidates' distances are recomputed in float64 from the keys in one fixed order
    (:func:`exact_d2`, :meth:`exact_distances`) and ordered by (distance, index). The
    players, their distances and so the Shapley values are then the same bits for any
    block size, thread count or machine load.

    A datastore holds one answer's retrieved context (10^2-10^5 tokens). At 16k entries
    the exact search took a quarter to a half of the time of faiss's flat index on this
    CPU; at ~400 entries faiss's search alone was a little faster, but building its index
    took ~10x longer than the search (docs/reports/performance.md). It needs no second copy of the
    keys. It grows with the datastore: above ``approximate_above`` context tokens the builder
    passes a ``quantiser`` and the search scans only each query's probed lists and its class
    (the ``quantiser`` parameter below; docs/method.md §3), its players still measured exactly.

    Parameters
    ----------
    sentences : list of SentenceRecord
    entries : list of CachedSentence
        One per sentence, same order.
    token_classes : list of ndarray
        The match class of each token (see ``TokenShapley``'s ``match``), in arrays whose
        concatenation follows the entries (one per sentence, or one per source).
    piece_classes : list of ndarray or None
        Likewise, a second, finer-grained class of each token (the token's own
        normalized text when ``token_classes`` are word classes), for answer tokens that
        match by piece (``pieces=True`` in the searches); None: the same as
        ``token_classes``.
    quantiser : Quantiser or None
        With ``probes``: :meth:`game_candidates` searches approximately, over the entries
        of each query's ``probes`` nearest lists (``quantiser.nearest``) and every entry of
        its class, instead of all entries; each entry's list is its sentence's
        ``CachedSentence.lists`` (assigned with this quantiser). The players found are
        still measured and ordered exactly. None: exact search (the default).
    probes : int
        Lists probed per query on the approximate path.
    search_device : torch.device or None
        Where :meth:`game_candidates` runs its exact search: None, the host (the compiled
        scan above); a device (the encoder's GPU), the float16 keys are copied there when
        the datastore is built, or given there (``device_rows``); no float32 copy is made on
        the host unless a host search asks for :attr:`keys`; each block of queries is bounded there
        (:mod:`._device_search`), with the same players, bit for bit. It takes precedence
        over ``quantiser``.
    source_keys : list of (ndarray, ndarray) or None
        The entries' keys already widened, in consecutive blocks (one per source, as the
        builder remembers them): float32 ``(n, hidden)`` keys and their float32 squared
        norms. The exact host search then reads them where they are: one product per
        block, and the keys of the few entries it measures gathered from their blocks
        (no float32 copy of the keys, every float16 key widened and norm summed again
        neither). :attr:`keys` stacks them at first use, for the other searches. Ignored
        with ``search_device``. None: widened from ``entries``.
    device_rows : torch.Tensor or None
        With ``search_device``: the entries' float16 keys already stacked there, in entry
        order (the builder keeps each source's rows on the device, so a new list of known
        sources copies nothing). None: stacked from ``entries`` and copied.
    """

    def __init__(
        self,
        sentences: list[SentenceRecord],
        entries: list[CachedSentence],
        token_classes: list[np.ndarray],
        piece_classes: list[np.ndarray] | None = None,
        *,
        quantiser: Quantiser | None = None,
        probes: int = 0,
        search_device: torch.device | None = None,
        source_keys: list[tuple[np.ndarray, np.ndarray]] | None = None,
        device_rows: torch.Tensor | None = None,
    ) -> None:
        self.sentences = sentences
        sizes = [len(e.ids) for e in entries]
        self.size = int(sum(sizes))
        hidden = next((e.keys.shape[1] for e in entries if e.keys.ndim == 2), 0)
        self._width = hidden
        self.token_ids = np.concatenate([e.ids for e in entries]) if self.size else np.zeros(0, np.int64)
        # Entry i's key equals entry _representative[i]'s, bit for bit (_share_prefix_keys).
        self._representative = _prefix_representatives([e.ids for e in entries], self.token_ids)
        # The searches' error bound e = rel |q|^2 + (rel |k|^2 + abs) (_preselect_margin).
        self._rel, self._abs = _preselect_margin(self._width)
        self._probe: _ProbeIndex | None = None
        self._exact_only = False
        self.search_device = search_device
        self._device_index: DeviceIndex | None = None
        self._keys: np.ndarray | None = None
        # The source_keys blocks (consecutive, covering every entry) and their first rows:
        # the exact host search reads them in place (_exact_candidates_in_blocks).
        self._blocks: list[np.ndarray] | None = None
        self._block_starts: np.ndarray | None = None
        # Built for a device: the keys as the cache has them (float16, half the bytes) go
        # there, and the host widens its float32 copy only if a host search asks for it.
        self._stacked: np.ndarray | torch.Tensor | None = None
        # Where the host widens its float32 keys from, if a host search asks (device_rows).
        self._entry_keys: list[np.ndarray] | None = None
        norms: np.ndarray | None = None
        if search_device is not None and self.size and device_rows is not None:
            where = torch.device(search_device).type
            if tuple(device_rows.shape) != (self.size, hidden) or device_rows.device.type != where:
                raise ValueError(
                    f"device_rows must be ({self.size}, {hidden}) on {search_device}, got "
                    f"{tuple(device_rows.shape)} on {device_rows.device}"
                )
            self._stacked, self._entry_keys = device_rows, [e.keys for e in entries]
        elif search_device is not None and self.size:
            self._stacked = stacked_rows([e.keys for e in entries], self.size, hidden)
        elif source_keys is not None and self.size:
            self._blocks, self._block_starts, norms = _checked_source_keys(source_keys, self.size, hidden)
            _copy_representatives(norms, self._representative)
        else:
            self._keys = widened_keys([e.keys for e in entries], self.size, hidden)
            _copy_representatives(self._keys, self._representative)
        if quantiser is not None and probes > 0 and self.size:
            # An entry's list is its representative's (equal keys, one list).
            lists = np.concatenate([np.asarray(e.lists, dtype=np.int64) for e in entries])[self._representative]
            self._probe = _ProbeIndex(quantiser, probes, lists)
        self.token_class = np.concatenate(token_classes) if self.size else np.zeros(0, np.int64)
        self.sentence_of = np.repeat(np.arange(len(sentences)), sizes).astype(np.int64)
        self.source_of = np.array([sentences[i].source_index for i in range(len(sentences))], dtype=np.int64)[
            self.sentence_of
        ] if self.size else np.zeros(0, np.int64)
        self.piece_class = (
            np.concatenate(piece_classes) if self.size and piece_classes is not None else self.token_class
        )
        # Entries grouped by class (computed once, the piece classes' at first use): a
        # class's members are one slice.
        self._groups = {False: _group(self.token_class)}
        if piece_classes is None:
            self._groups[True] = self._groups[False]
        if self._stacked is not None:
            self._device_index = self._copy_to_device(self._stacked, norms=None)
            self._norms = self._device_index.norms.cpu().numpy()
        elif norms is not None:
            self._norms = norms
        else:
            self._norms = np.einsum("nd,nd->n", self.keys, self.keys)
        # The margin's part of each entry (its representative's norm, like its distance).
        self._key_margin = self._rel * self._norms.astype(np.float64)[self._representative] + self._abs

    @property
    def keys(self) -> np.ndarray:
        """``(size, hidden)`` float32: every entry's key (its representative's, bit for bit).
        Built with the datastore, or at first use where the datastore was built for a
        device (widened from its float16 keys) or from ``source_keys`` (the blocks stacked)."""
        if self._keys is None:
            if self._blocks is not None:
                blocks = self._blocks
            elif self._entry_keys is not None:  # the stacked rows are on the device
                blocks = self._entry_keys
            else:
                blocks = [self._stacked]
            keys = widened_keys(blocks, self.size, self._width)
            _copy_representatives(keys, self._representative)
            self._keys, self._stacked, self._entry_keys = keys, None, None
        return self._keys

    @property
    def keys_width(self) -> int:
        """The keys' (and queries') width: the encoder's hidden size."""
        return self._width

    @property
    def approximate(self) -> bool:
        """Whether :meth:`game_candidates` searches approximately (only the probed lists)."""
        return self._probe is not None and not self._exact_only and self.search_device is None

    def searched_on_host(self) -> Datastore:
        """This datastore (sharing its arrays) with :meth:`game_candidates` searching on
        the host: the device search's reference."""
        twin = copy.copy(self)
        twin.search_device = None
        return twin

    def searched_exactly(self) -> Datastore:
        """This datastore (sharing its arrays) with :meth:`game_candidates` searching
        every entry: the approximate search's reference."""
        twin = copy.copy(self)
        twin._exact_only = True
        return twin

    @property
    def rows_per_block(self) -> int:
        """Queries per block of the search's (queries x entries) matrices."""
        return max(1, _SEARCH_BLOCK // max(self.size, 1))

    def nearest(self, queries: np.ndarray, m: int, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Squared L2 distances (:meth:`exact_distances`) and entry indices of the ``m``
        nearest entries per query, nearest first (ties: lower index first): two
        ``(T, min(m, size))`` arrays, float64 and int64. With
        ``mask`` (``(T, size)`` bool, e.g. :meth:`class_mask`) only the entries where
        ``mask[t]`` are searched for query ``t``; rows with fewer are padded with index -1
        and distance inf."""
        return self._search(queries, [(m, mask)])[0]

    def mixed_nearest(self, queries: np.ndarray, m: int, n_match: int, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The "mixed" candidates of each query: its ``n_match`` nearest entries where
        ``mask[t]``, then its nearest other entries up to ``m`` in all; ``(T, min(m, size))``
        distances (:meth:`exact_distances`) and indices, nearest first (ties: lower index
        first). One distance matrix serves both searches.

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
        distances (float64, :meth:`exact_distances`) and indices, nearest first (ties:
        lower index first); and, as ``(T, n_sentences)`` bool, whether each sentence
        holds an entry of the class (:meth:`sentences_holding`). No ``(T, size)`` class
        mask is built. The result depends on the queries' and keys' bits alone, not on
        :attr:`rows_per_block` or thread counts: the float32 matrix product only bounds
        the distances (:func:`_preselect_margin`), the candidates it cannot rule out are
        measured in float64 in a fixed order, and a compiled scan keeps each top list
        sorted by (distance, index) for any number of ties.

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
        d_out = np.zeros((t_rows, m), dtype=np.float64)
        i_out = np.zeros((t_rows, m), dtype=np.int64)
        carries = np.zeros((t_rows, len(self.sentences)), dtype=bool)
        if not self.size or not t_rows:
            return d_out, i_out, carries
        self._check_queries(q)
        q_norms = np.einsum("td,td->t", q, q)
        if self.search_device is not None and _torch_matmul_is_ieee(torch.device(self.search_device).type):
            with step("distance_product"):
                device_candidates(self._on_device(), self._rel, q, q_norms, classes, use_piece, n_match, d_out, i_out)
            self._mark_carriers(classes, use_piece, carries)
            return d_out, i_out, carries
        if self.approximate:
            exact = self._probe_candidates(q, q_norms, classes, use_piece, n_match, d_out, i_out, carries)
            if not exact.any():
                return d_out, i_out, carries
            # Rows whose probed lists held fewer than m entries: searched exactly.
            rows_left = np.flatnonzero(exact)
            carries[rows_left] = False
            sub = self._exact_candidates(q[rows_left], q_norms[rows_left], classes[rows_left], use_piece[rows_left],
                                         m, n_match)
            d_out[rows_left], i_out[rows_left], carries[rows_left] = sub
            return d_out, i_out, carries
        return self._exact_candidates(q, q_norms, classes, use_piece, m, n_match, d_out, i_out, carries)

    def _on_device(self) -> DeviceIndex:
        """The search's arrays on :attr:`search_device` (copied when the datastore was built
        for it, or now)."""
        if self._device_index is None or self._device_index.device != torch.device(self.search_device):
            self._device_index = self._copy_to_device(self.keys, norms=self._norms)
        return self._device_index

    def _copy_to_device(self, keys: np.ndarray, norms: np.ndarray | None) -> DeviceIndex:
        """:class:`DeviceIndex` of this datastore on :attr:`search_device`: ``keys`` are the
        float32 keys or the float16 rows they are widened from; ``norms`` None: computed
        there."""
        return DeviceIndex.of(
            torch.device(self.search_device), keys=keys, norms=norms, representative=self._representative,
            token_class=self.token_class, piece_class=self.piece_class, margin=(self._rel, self._abs),
        )

    def _mark_carriers(self, classes: np.ndarray, use_piece: np.ndarray, carries: np.ndarray) -> None:
        """``carries[t, s] = True`` where sentence ``s`` holds an entry of row ``t``'s class
        (its piece class where ``use_piece[t]``): what the host scan notes as it passes,
        read here from the entries grouped by class."""
        for t, (cls, piece) in enumerate(zip(classes.tolist(), use_piece.tolist())):
            carries[t, self.sentence_of[self.members_of_class(cls, piece)]] = True

    def _probe_candidates(self, q, q_norms, classes, use_piece, n_match, d_out, i_out, carries) -> np.ndarray:
        """The approximate search (class docstring); returns, per row, whether it found
        fewer than ``m`` players (then it must be searched exactly)."""
        probe = self._probe
        probes = probe.quantiser.nearest(q, probe.probes)
        n_probes = probes.shape[1]
        # Each (query, probe) pair gets a slot of its list's length in one flat buffer.
        sizes = np.diff(probe.starts)[probes]
        slot_base = np.zeros(probes.size + 1, dtype=np.int64)
        np.cumsum(sizes.ravel(), out=slot_base[1:])
        products = np.empty(int(slot_base[-1]), dtype=np.float32)
        pair_order = np.argsort(probes.ravel(), kind="stable")
        pair_starts = np.zeros(probe.quantiser.n_lists + 1, dtype=np.int64)
        np.cumsum(np.bincount(probes.ravel(), minlength=probe.quantiser.n_lists), out=pair_starts[1:])
        slot_base = slot_base[:-1].reshape(probes.shape)
        with step("distance_product"):
            list_products(q, self.keys, self._norms, probe.order, probe.starts, pair_order, pair_starts, n_probes,
                          slot_base, products)
        found = np.zeros(q.shape[0], dtype=np.int64)
        (token_order, token_sorted), (piece_order, piece_sorted) = self._grouped(False), self._grouped(True)
        probe_rows(q, q_norms, self.keys, self._norms, self._key_margin, self._rel, self._representative,
                   self.token_class, self.piece_class, self.sentence_of, classes, use_piece, n_match, probes,
                   probe.order, probe.starts, token_order, token_sorted, piece_order, piece_sorted, products,
                   slot_base, d_out, i_out, carries, found)
        return found < d_out.shape[1]

    def _exact_candidates(self, q, q_norms, classes, use_piece, m, n_match, d_out=None, i_out=None, carries=None):
        """:meth:`game_candidates` by the exact search, into the given arrays."""
        t_rows = q.shape[0]
        if d_out is None:
            d_out = np.zeros((t_rows, m), dtype=np.float64)
            i_out = np.zeros((t_rows, m), dtype=np.int64)
            carries = np.zeros((t_rows, len(self.sentences)), dtype=bool)
        if self._keys is None and self._blocks is not None and _torch_matmul_is_ieee("cpu"):
            return self._exact_candidates_in_blocks(q, q_norms, classes, use_piece, m, n_match, d_out, i_out, carries)
        rows = self.rows_per_block
        for a in range(0, t_rows, rows):
            b = min(a + rows, t_rows)
            # |k|^2 - 2 q.k; the scan adds |q|^2, reads each entry's representative's
            # column and clips at 0 as it goes, and bounds the float64 distance from it.
            with step("distance_product"):
                partial = self._partial_distances(q[a:b])
            scan = scan_rows if partial.size >= _PARALLEL_CELLS else scan_rows_serial
            scan(partial, q_norms[a:b], q[a:b], self.keys, self._key_margin, self._rel, self._representative,
                 self.token_class, self.piece_class, self.sentence_of, classes[a:b], use_piece[a:b], n_match,
                 d_out[a:b], i_out[a:b], carries[a:b])
        return d_out, i_out, carries

    def _exact_candidates_in_blocks(self, q, q_norms, classes, use_piece, m, n_match, d_out, i_out, carries):
        """:meth:`_exact_candidates` over the ``source_keys`` blocks where they are: the
        product block by block (:func:`host_partial_distances`), the pass over every entry
        without the keys (:func:`keep_rows`: the entries still under the final cuts and the
        cuts), then those entries' keys gathered from their blocks and measured
        (:func:`measure_kept_rows`). The players are the stacked search's, bit for bit: the
        same entries are measured against the same keys (a representative's own key) under
        the same cuts, in the same order."""
        t_rows = q.shape[0]
        # Room for each row's kept entries: the m (+ n_match) players and the few the bound
        # cannot rule out; a row with more (ties: every sentence start shares one key) is
        # passed again with room for all.
        room = 2 * (m + n_match) + 16
        for a in range(0, t_rows, self.rows_per_block):
            b = min(a + self.rows_per_block, t_rows)
            with step("distance_product"):
                partial = host_partial_distances(q[a:b] * np.float32(-2.0), self._blocks, self._norms)
            kept, lo, same, counts, near_cuts, match_cuts = self._keep(
                partial, q_norms[a:b], classes[a:b], use_piece[a:b], m, n_match, room, carries[a:b])
            over = np.flatnonzero(counts > room)
            if len(over):
                # (The carriers of these rows are marked already: the second pass marks a copy.)
                wide = self._keep(partial[over], q_norms[a:b][over], classes[a:b][over], use_piece[a:b][over], m,
                                  n_match, int(counts[over].max()), carries[a:b][over])
                widened = [np.pad(x, ((0, 0), (0, wide[0].shape[1] - room))) for x in (kept, lo, same)]
                for x, w in zip(widened, wide[:3]):
                    x[over] = w
                kept, lo, same = widened
            took = np.arange(kept.shape[1])[None, :] < counts[:, None]
            flat = kept[took]
            row_starts = np.zeros(b - a + 1, dtype=np.int64)
            np.cumsum(counts, out=row_starts[1:])
            measure_kept_rows(q[a:b], self._rows_of(self._representative[flat]), row_starts, flat, lo[took],
                              same[took], near_cuts, match_cuts, n_match, d_out[a:b], i_out[a:b])
        return d_out, i_out, carries

    def _keep(self, partial, q_norms, classes, use_piece, m, n_match, room, carries):
        """:func:`keep_rows` into new arrays with ``room`` entries per row."""
        t_rows = partial.shape[0]
        kept = np.zeros((t_rows, room), dtype=np.int64)
        lo = np.zeros((t_rows, room), dtype=np.float64)
        same = np.zeros((t_rows, room), dtype=bool)
        counts = np.zeros(t_rows, dtype=np.int64)
        near_cuts = np.zeros(t_rows, dtype=np.float64)
        match_cuts = np.zeros(t_rows, dtype=np.float64)
        keep = keep_rows if partial.size >= _PARALLEL_CELLS else keep_rows_serial
        keep(partial, q_norms, self._key_margin, self._rel, self._representative, self.token_class, self.piece_class,
             self.sentence_of, classes, use_piece, n_match, m, kept, lo, same, counts, near_cuts, match_cuts, carries)
        return kept, lo, same, counts, near_cuts, match_cuts

    def _rows_of(self, entries: np.ndarray) -> np.ndarray:
        """The keys of ``entries`` (indices, in order), gathered from the blocks: float32
        ``(len(entries), hidden)``."""
        out = np.empty((len(entries), self._width), dtype=np.float32)
        block = np.searchsorted(self._block_starts, entries, side="right") - 1
        for i in np.unique(block).tolist():
            at = np.flatnonzero(block == i)
            out[at] = self._blocks[i][entries[at] - self._block_starts[i]]
        return out

    def _check_queries(self, q: np.ndarray) -> None:
        """Refuse queries the compiled scans cannot bound (a NaN or inf) or index (width)."""
        if q.ndim != 2 or q.shape[1] != self._width:
            raise ValueError(f"queries must have shape (T, {self._width}), got {q.shape}")
        if not np.isfinite(q).all():
            raise ValueError("queries must be finite (as float32)")

    def exact_distances(self, queries: np.ndarray) -> np.ndarray:
        """``(len(queries), size)`` float64: the squared distance of each query (as float32)
        to each entry's key, ``sum_i (q_i - k_i)^2`` in float64 in one fixed order
        (:func:`exact_d2`), the distances every search orders by. A function of the two
        vectors' bits alone (no BLAS), so equal keys tie exactly (entries that share a
        prefix share their key, :func:`_share_prefix_keys`)."""
        q = np.ascontiguousarray(queries, dtype=np.float32)
        out = np.empty((q.shape[0], self.size), dtype=np.float64)
        if out.size:
            exact_rows(q, self.keys, out)
        return out

    def _partial_distances(self, q: np.ndarray) -> np.ndarray:
        """``|k|^2 - 2 q.k`` for queries ``q`` (float32) and every entry, against the cached
        key norms (float32, like faiss's flat index). Its rounding differs with the BLAS,
        its blocks and its threads; the searches only use it within
        :func:`_preselect_margin`, which holds for any IEEE float32 product. The product is
        torch's (:func:`host_partial_distances`) while torch multiplies float32 in float32,
        numpy's otherwise. The factor -2 goes into the queries: scaling by a power of two is
        exact, so the product is the same."""
        q2 = q * np.float32(-2.0)
        if _torch_matmul_is_ieee("cpu"):
            return host_partial_distances(q2, [self.keys], self._norms)
        out = np.matmul(q2, self.keys.T)
        out += self._norms
        return out

    def _search(self, queries: np.ndarray, requests: list[tuple[int, np.ndarray | None]]) -> list[tuple[np.ndarray, np.ndarray]]:
        """For each request ``(m, mask)``, :meth:`nearest` with that ``m`` and ``mask``,
        from one float32 distance matrix per block of queries, which only pre-selects
        (:func:`_preselect_margin`): the entries it cannot rule out are measured exactly
        (:meth:`exact_distances`) and ordered by (distance, index), so ties (every
        sentence-initial token has the BOS state's key, :func:`_share_prefix_keys`) go to
        the lower index, however many, and nothing depends on the product's rounding.
        """
        q = np.ascontiguousarray(queries, dtype=np.float32)
        t_rows = q.shape[0]
        out = [
            (np.full((t_rows, min(m, self.size)), np.inf, np.float64), np.full((t_rows, min(m, self.size)), -1, np.int64))
            for m, _ in requests
        ]
        if not self.size or not t_rows or not any(min(m, self.size) for m, _ in requests):
            return out
        self._check_queries(q)
        masks = []
        for _, mask in requests:
            if mask is not None:
                mask = np.ascontiguousarray(mask, dtype=bool)
                if mask.shape != (t_rows, self.size):
                    raise ValueError(f"mask must have shape {(t_rows, self.size)}, got {mask.shape}")
            masks.append(mask)
        q_norms = np.einsum("td,td->t", q, q)
        no_mask = np.zeros((t_rows, 0), dtype=bool)
        rows = self.rows_per_block
        for a in range(0, t_rows, rows):
            b = min(a + rows, t_rows)
            partial = self._partial_distances(q[a:b])
            select = select_rows if partial.size >= _PARALLEL_CELLS else select_rows_serial
            for mask, (d_out, i_out) in zip(masks, out):
                if d_out.shape[1]:
                    select(partial, q_norms[a:b], q[a:b], self.keys, self._key_margin, self._rel, self._representative,
                           (no_mask if mask is None else mask)[a:b], mask is not None, d_out[a:b], i_out[a:b])
        return out

    def _grouped(self, piece: bool) -> tuple[np.ndarray, np.ndarray]:
        """The entries sorted by token class (piece class with ``piece``), and their classes
        in that order (:func:`_group`)."""
        if piece not in self._groups:
            self._groups[piece] = _group(self.piece_class)
        return self._groups[piece]

    def members_of_class(self, cls: int, piece: bool = False) -> np.ndarray:
        """Indices of the entries whose token class (piece class with ``piece``) is ``cls``
        (ascending)."""
        order, sorted_class = self._grouped(bool(piece))
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
        order, sorted_class = self._grouped(False)
        sequence_rows(self.token_class, self.sentence_of, order, sorted_class, flat, bounds, out)
        return out

    def nearest_of_class(
        self, queries: np.ndarray, classes: np.ndarray, m: int, pieces: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """For each query, the ``m`` nearest entries whose token class equals ``classes[t]``
        (piece class where ``pieces[t]``; fewer when the datastore has fewer; padded with
        index -1 and distance inf)."""
        return self.nearest(queries, m, self.class_mask(classes, pieces))


#: Key rows per product of :func:`host_partial_distances`: each block's ``(rows, T)``
#: result stays in the core's cache while it is added to the norms and transposed.
#: 512-4,096 measured the same at 16k keys, and best at 64k (performance.md).
HOST_PRODUCT_ROWS = 2048


def host_partial_distances(q2: np.ndarray, blocks: Sequence[np.ndarray], norms: np.ndarray) -> np.ndarray:
    """``(T, N)`` float32 ``q2 @ keys.T + norms``, on torch's threads, for the keys given as
    consecutive ``blocks`` of rows (one array, or a source's keys each).

    One ``keys[a:b] @ q2.T`` per block of at most :data:`HOST_PRODUCT_ROWS` key rows (MKL's
    fastest orientation for a few queries against many keys), each added to its norms and
    transposed into the result. Why not numpy's BLAS: after each call OpenBLAS's threads
    keep spinning on the cores for tens of milliseconds, against the encoder's next pass
    and the compiled scans, which nearly doubled a warm call at 1k-16k context tokens
    (docs/reports/performance.md, "Long contexts: one thread pool for the search's product").

    >>> q2, keys = np.array([[-2.0, 0.0]], np.float32), np.array([[1.0, 0.0], [0.0, 3.0]], np.float32)
    >>> host_partial_distances(q2, [keys[:1], keys[1:]], np.einsum("nd,nd->n", keys, keys)).tolist()
    [[-1.0, 9.0]]
    """
    n, t_rows = norms.shape[0], q2.shape[0]
    out = np.empty((t_rows, n), dtype=np.float32)
    if not n or not t_rows:
        return out
    queries = torch.from_numpy(np.ascontiguousarray(q2)).T
    rows_per_product = min(HOST_PRODUCT_ROWS, n)
    block = torch.empty((rows_per_product, t_rows), dtype=torch.float32)
    block_rows = block.numpy()
    # Blocks shorter than a product are copied together into one buffer first: a product
    # of a few hundred rows runs well below MKL's speed on 2,048.
    staged = np.empty((rows_per_product, q2.shape[1]), dtype=np.float32)
    staged_rows = torch.from_numpy(staged)
    n_staged = 0

    def product(rows: torch.Tensor, start: int) -> None:
        count = rows.shape[0]
        torch.mm(rows, queries, out=block[:count])
        np.add(block_rows[:count].T, norms[start : start + count], out=out[:, start : start + count])

    start = 0
    for keys in blocks:
        count = keys.shape[0]
        if count < rows_per_product:
            if n_staged + count > rows_per_product:
                product(staged_rows[:n_staged], start - n_staged)
                n_staged = 0
            staged[n_staged : n_staged + count] = keys
            n_staged += count
        else:
            if n_staged:
                product(staged_rows[:n_staged], start - n_staged)
                n_staged = 0
            rows = torch.from_numpy(keys)
            for a in range(0, count, rows_per_product):
                product(rows[a : a + rows_per_product], start + a)
        start += count
    if n_staged:
        product(staged_rows[:n_staged], start - n_staged)
    return out


def _torch_matmul_is_ieee(device_type: str = "cpu") -> bool:
    """Whether torch multiplies float32 matrices in float32 on ``device_type`` ("cpu" or
    "cuda"), its default: not after ``torch.set_float32_matmul_precision("high" or
    "medium")``, with the backend's ``fp32_precision`` set to bf16 or tf32 (which raises in
    the legacy getters), or with CUDA's ``allow_tf32``."""
    try:
        backend = torch.backends.cuda if device_type == "cuda" else getattr(torch.backends, "mkldnn", None)
        precision = getattr(getattr(backend, "matmul", None), "fp32_precision", None)
        if precision is not None and precision not in ("ieee", "none"):
            return False
        if device_type == "cuda" and torch.backends.cuda.matmul.allow_tf32:
            return False
        return torch.get_float32_matmul_precision() == "highest"
    except Exception:
        return False


#: float16 bits -> float32, every value (256 KiB): the table :func:`widen_halves` reads.
_HALF_TO_FLOAT = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)


def widened_keys(blocks: list[np.ndarray], rows: int, width: int) -> np.ndarray:
    """The blocks' rows stacked into one float32 ``(rows, width)`` array. It runs over
    every token of a source the builder has not indexed yet (the sentence cache keeps
    float16 keys), and was most of a warm rebuild before sources were remembered indexed:
    the float16 rows are stacked (a copy of half the bytes), then widened in one compiled
    pass (:func:`widen_halves`), the same values as ``astype``. A float32 block (keys
    beyond float16's range) is copied as it is. (Summing the norms in the same pass was
    measured slower than numpy's separate one.)"""
    out = np.empty((rows, width), dtype=np.float32)
    filled = [block for block in blocks if block.shape[0]]
    if not filled:
        return out
    if all(block.dtype == np.float16 for block in filled):
        halves = filled[0] if len(filled) == 1 else np.concatenate(filled)
        widen_halves(np.ascontiguousarray(halves).reshape(-1).view(np.uint16), _HALF_TO_FLOAT, out.reshape(-1))
        return out
    start = 0
    for block in filled:
        out[start : start + block.shape[0]] = block
        start += block.shape[0]
    return out


def _checked_source_keys(
    blocks: list[tuple[np.ndarray, np.ndarray]], rows: int, width: int
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """The key blocks of ``source_keys`` (:class:`Datastore`), checked: the non-empty
    blocks, their first rows, and the norms stacked (``(rows,)`` float32)."""
    blocks = [(keys, norms) for keys, norms in blocks if keys.shape[0]]
    if sum(keys.shape[0] for keys, _ in blocks) != rows or any(
        keys.dtype != np.float32 or keys.shape[1:] != (width,) or norms.dtype != np.float32
        or norms.shape != keys.shape[:1] or not keys.flags.c_contiguous for keys, norms in blocks
    ):
        raise ValueError(f"source_keys must be C-contiguous float32 blocks of width {width} covering the {rows} "
                         f"entries, each with one norm per key")
    starts = np.zeros(len(blocks), dtype=np.int64)
    np.cumsum([keys.shape[0] for keys, _ in blocks[:-1]], out=starts[1:])
    return [keys for keys, _ in blocks], starts, np.concatenate([norms for _, norms in blocks])


def stacked_rows(blocks: list[np.ndarray], rows: int, width: int) -> np.ndarray:
    """The blocks' rows stacked as they are: float16 when every block is (the sentence
    cache's keys), else float32."""
    filled = [block for block in blocks if block.shape[0]]
    if not filled:
        return np.zeros((0, width), np.float16)
    if all(block.dtype == np.float16 for block in filled):
        return np.concatenate(filled)
    return widened_keys(filled, rows, width)


def _group(classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Entry indices sorted by class (stable), and the classes in that order."""
    order = np.argsort(classes, kind="stable")
    return order, classes[order]


def _share_prefix_keys(keys: np.ndarray, sentence_ids: list[np.ndarray], flat_ids: np.ndarray | None = None) -> np.ndarray:
    """Give entries whose sentences start with the same tokens one and the same key.

    A key depends only on its sentence's tokens before it, so such entries have equal
    keys by definition (every sentence-initial token shares the BOS state). Encoded in
    different batches, or rebuilt after a cache loss, they differ in their last bits,
    and those bits would then decide which of two equally near entries wins a game.
    Sentences are sorted by token sequence; each takes the keys of its predecessor for
    the prefix they share (in place, so the representative is deterministic). Returns,
    per entry, the index of the entry whose key it now shares (itself when none).
    The rule is compiled (:func:`~tokenshapley_rag._kernels.prefix_representatives`):
    in Python it took ~90 ms of a 64k-token rebuild. ``flat_ids``: the sentences' ids
    concatenated, when the caller has them.
    """
    representative = _prefix_representatives(sentence_ids, flat_ids)
    _copy_representatives(keys, representative)
    return representative


def _prefix_representatives(sentence_ids: list[np.ndarray], flat_ids: np.ndarray | None = None) -> np.ndarray:
    """Per entry, the entry whose key it shares (:func:`_share_prefix_keys`), from the
    token ids alone."""
    starts = np.zeros(len(sentence_ids) + 1, dtype=np.int64)
    np.cumsum([len(ids) for ids in sentence_ids], out=starts[1:])
    if flat_ids is None:
        flat_ids = np.concatenate(sentence_ids) if sentence_ids else np.zeros(0, np.int64)
    return prefix_representatives(np.ascontiguousarray(flat_ids, dtype=np.int64), starts)


def _copy_representatives(keys: np.ndarray, representative: np.ndarray) -> None:
    """Copy each representative's key onto the entries that share it (in place).
    Representatives are roots (entries that point to themselves), so one gather copies
    them all."""
    moved = np.flatnonzero(representative != np.arange(len(representative)))
    if len(moved):
        keys[moved] = keys[representative[moved]]


class _ProbeIndex:
    """The approximate search's lists over one datastore: ``order`` holds the entries
    sorted by list (then index); list ``l``'s entries are ``order[starts[l]:starts[l + 1]]``.
    The keys stay where the datastore has them: gathering them into list order cost more
    in the rebuild (one more pass over every key) than it saved in the search."""

    def __init__(self, quantiser: Quantiser, probes: int, lists: np.ndarray) -> None:
        self.quantiser, self.probes, self.lists = quantiser, probes, lists
        self.order = np.argsort(lists, kind="stable")
        self.starts = np.zeros(quantiser.n_lists + 1, dtype=np.int64)
        np.cumsum(np.bincount(lists, minlength=quantiser.n_lists), out=self.starts[1:])


# Distance-matrix cells (queries x entries) above which the searches scan rows on numba's
# threads. Measured in place (attribute() right after the encoder pass, 2 cores): threads
# cost +0.3 ms at 90 x 1k-4k cells and saved 1.6 ms at 90 x 16k (~3 ns a cell).
_PARALLEL_CELLS = 1 << 20


