"""Indexing the sources: their sentences, encoded (or loaded from the sentence cache) into a
:class:`~tokenshapley_rag._datastore.Datastore` of keys with their match classes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from tokenshapley_rag._datastore import Datastore, SentenceRecord, stacked_rows, widened_keys
from tokenshapley_rag._defaults import DEVICE_SEARCH_ABOVE
from tokenshapley_rag._sentence_cache import CachedSentence, SentenceCache, storage_keys
from tokenshapley_rag._encoder import CausalLMEncoder, TokenizedText
from tokenshapley_rag._limits import checkpoint
from tokenshapley_rag._memo import LRUMemo
from tokenshapley_rag._quantiser import Quantiser
from tokenshapley_rag._segment import split_sentences
from tokenshapley_rag._timing import step
from tokenshapley_rag._token_game import TokenClasses
from tokenshapley_rag._types import Source

__all__ = ["DatastoreBuilder"]

# Datastores of the last few source lists kept per builder (see DatastoreBuilder.datastore_for):
# at most 4 x 65,536 entries x ~2.3 KB = ~600 MB in the worst case, besides the ~300 MB of the
# indexed sources (INDEXED_SOURCE_MEMO_TOKENS).
DATASTORE_MEMO_ITEMS = 4
DATASTORE_MEMO_TOKENS = 65_536
# Context tokens whose sources are remembered as indexed (DatastoreBuilder.build): float32 keys,
# ~2.3 KB a token at SmolLM2's width, so at most ~300 MB.
INDEXED_SOURCE_MEMO_TOKENS = 131_072
# Bytes of float16 keys kept on the search device, per source (DatastoreBuilder._rows_on_device):
# a new list of known sources then copies nothing to the device. 1 GiB is 131,072 tokens of an
# 8B model's width (4,096), 932,067 of SmolLM2's (576).
DEVICE_ROWS_MEMO_BYTES = 1 << 30
# Lists probed per answer token on the approximate path (of the quantiser's 256), chosen on
# QuoteSum and VeriGran dev padded to 16k and 64k tokens (docs/reports/performance.md).
PROBES = 32


@dataclass(frozen=True, slots=True)
class IndexedSource:
    """One source as a datastore holds it, remembered per source text
    (:meth:`DatastoreBuilder.build`): its sentences (and pieces) as ``(start, end, text)``
    spans, their cache entries and token classes, and their keys widened to float32 in one
    block with their squared norms. Retrieved chunks recur in new combinations; a new
    source list of known chunks is then searched in these blocks where they are, instead of
    looking up, classing and widening every sentence again (docs/reports/performance.md,
    "Long contexts: indexed sources, and numpy's product" and "Long contexts: the keys
    searched where the sources keep them")."""

    spans: tuple[tuple[int, int, str], ...]
    entries: tuple[CachedSentence, ...]
    token_class: np.ndarray  # (tokens,): each token's match class, its sentences' in order
    piece_class: np.ndarray  # (tokens,): each token's piece class
    keys: np.ndarray  # (tokens, hidden) float32
    norms: np.ndarray  # (tokens,) float32

    @property
    def tokens(self) -> int:
        return self.keys.shape[0]


class DatastoreBuilder:
    """Builds the datastore of a list of sources with one encoder.

    Sentences longer than ``max_sentence_tokens`` are cut into consecutive pieces that fit,
    and each piece then acts as a sentence. ``piece_classes``: keep each entry's piece class
    too (``match="word_or_token"``). Remembers, for the last few thousand texts (the cache's
    ``memory_items``), each source's sentence split and each sentence's classes, and the
    datastores of the last few source lists (:meth:`datastore_for`).

    A datastore of more than ``approximate_above`` entries is searched approximately (over
    the lists of ``quantiser`` that each answer token probes, ``PROBES`` of them); its
    sentences' lists are assigned once and kept in the sentence cache. None, or no
    quantiser: always exact.

    With the encoder on a CUDA device, a datastore of more than ``device_search_above``
    entries (``DEVICE_SEARCH_ABOVE``, measured) is searched exactly on that device instead
    (``Datastore``'s ``search_device``; the same players), never approximately.
    """

    def __init__(
        self, encoder: CausalLMEncoder, cache: SentenceCache, classes: TokenClasses, *, max_sentence_tokens: int,
        piece_classes: bool, quantiser: Quantiser | None = None, approximate_above: int | None = None,
    ) -> None:
        self.encoder, self.cache, self.classes = encoder, cache, classes
        self.max_sentence_tokens, self.piece_classes = max_sentence_tokens, piece_classes
        self.quantiser, self.approximate_above = quantiser, approximate_above
        # Only CUDA: the search's bound needs IEEE float32 products, which torch states
        # (and lets a user turn off, _torch_matmul_is_ieee) for CUDA, not for MPS.
        device = encoder.loaded.model.device
        self.search_device: torch.device | None = device if device.type == "cuda" else None
        self.device_search_above: int | None = DEVICE_SEARCH_ABOVE
        self._splits_of_source = LRUMemo(cache.memory_items)  # source text -> sentence spans
        self._classes_of_sentence = LRUMemo(cache.memory_items)  # text -> (classes, pieces)
        self._datastores = LRUMemo(DATASTORE_MEMO_ITEMS)  # source texts -> Datastore
        # source text -> IndexedSource, weighed by tokens
        self._indexed_sources = LRUMemo(cache.memory_items, max_weight=INDEXED_SOURCE_MEMO_TOKENS)
        # source text -> its float16 keys on the search device, weighed by tokens
        width = max(int(encoder.loaded.hidden_size), 1)
        self._rows_on_device = LRUMemo(cache.memory_items, max_weight=max(DEVICE_ROWS_MEMO_BYTES // (2 * width), 1))

    def forget(self) -> None:
        """Empty the memos (the sentence cache is kept)."""
        for memo in (
            self._splits_of_source, self._classes_of_sentence, self._datastores, self._indexed_sources,
            self._rows_on_device,
        ):
            memo.clear()

    def sentences(
        self, sources: list[Source]
    ) -> tuple[list[SentenceRecord], list[CachedSentence | None], list[TokenizedText | None]]:
        """Sentences of every source, each with its cache entry (None on a miss) and, for a
        miss, its tokenization (None for a piece, tokenized on its own when encoded).

        A sentence found in the cache is not tokenized again (the entry holds its tokens).
        """
        records: list[SentenceRecord] = []
        entries: list[CachedSentence | None] = []
        tokens: list[TokenizedText | None] = []
        limit = self.max_sentence_tokens
        key = self.encoder.cache_key
        for si, src in enumerate(sources):
            index = 0
            for start, end in self.split(src.text):
                text = src.text[start:end]
                entry = self.cache.get(key, text)
                # The disk cache may be shared with an instance that cuts at a higher limit.
                if entry is not None and len(entry.ids) <= limit:
                    records.append(SentenceRecord(si, index, start, end, text))
                    entries.append(entry)
                    tokens.append(None)
                    index += 1
                    continue
                tok = self.encoder.tokenize(text)
                if len(tok.ids) <= limit:
                    records.append(SentenceRecord(si, index, start, end, text))
                    entries.append(None)
                    tokens.append(tok)
                    index += 1
                    continue
                for a in range(0, len(tok.ids), limit):
                    b = min(a + limit, len(tok.ids))
                    ps, pe = int(tok.offsets[a, 0]), int(tok.offsets[b - 1, 1])
                    records.append(SentenceRecord(si, index, start + ps, start + pe, text[ps:pe]))
                    entries.append(self.cache.get(key, text[ps:pe]))
                    tokens.append(None)
                    index += 1
        return records, entries, tokens

    def build(self, sources: list[Source], *, progress: bool = False, cancel: Any = None) -> Datastore:
        """Encode (or load from cache) the keys of every sentence of ``sources``; with
        ``progress``, a progress bar of the tokens to encode on stderr. ``cancel`` is
        checked after each forward pass of the encoder. Sources indexed by an earlier
        build (:class:`IndexedSource`, the last ``INDEXED_SOURCE_MEMO_TOKENS`` tokens'
        worth) are taken as they are."""
        with step("segment"):
            indexed: list[IndexedSource | None] = self._indexed_sources.get_many([src.text for src in sources])
            todo = list({src.text: src for src, known in zip(sources, indexed) if known is None}.values())
            records, entries, sentence_tokens = self.sentences(todo)
        key = self.encoder.cache_key
        missing = [i for i, e in enumerate(entries) if e is None]
        if missing:
            toks = [sentence_tokens[i] or self.encoder.tokenize(records[i].text) for i in missing]
            bar = None
            if progress:
                from tqdm.auto import tqdm

                bar = tqdm(total=sum(len(t.ids) for t in toks), desc="encoding sources", unit="tok", leave=False)

            def on_tokens(n: int) -> None:
                if bar is not None:
                    bar.update(n)
                checkpoint(cancel, "encoding the sources")

            try:
                checkpoint(cancel, "encoding the sources")
                with step("encode_context"):
                    states = self.encoder.encode_before([t.ids for t in toks], on_tokens)
            finally:
                if bar is not None:
                    bar.close()
            with step("store_keys"):
                new = [CachedSentence(ids=tok.ids, offsets=tok.offsets, keys=storage_keys(st)) for tok, st in zip(toks, states)]
                total = (sum(known.tokens for known in indexed if known is not None)
                         + sum(len(e.ids) for e in entries if e is not None) + sum(len(e.ids) for e in new))
                if self.searches_approximately(total):  # their lists, so each file is written once
                    new = self._with_lists([records[i] for i in missing], new, write=False)
                for i, entry in zip(missing, new):
                    self.cache.put(key, records[i].text, entry)
                    entries[i] = entry
        with step("sentence_classes"):
            classes = [self.sentence_classes(r.text, e) for r, e in zip(records, entries)]
        with step("index"):
            fresh = self._index(todo, records, entries, classes)
            indexed = [known if known is not None else fresh[src.text] for src, known in zip(sources, indexed)]
            return self._datastore(sources, indexed)

    def _index(
        self, sources: list[Source], records: list[SentenceRecord], entries: list[CachedSentence],
        classes: list[tuple[np.ndarray, np.ndarray]],
    ) -> dict[str, IndexedSource]:
        """:class:`IndexedSource` of each of ``sources`` (their sentences' ``records``,
        ``entries`` and ``classes`` in order, as :meth:`sentences` lists them), remembered."""
        width = next((e.keys.shape[1] for e in entries if e.keys.ndim == 2), 0)
        out: dict[str, IndexedSource] = {}
        a = 0
        for si, src in enumerate(sources):
            b = a
            while b < len(records) and records[b].source_index == si:
                b += 1
            tokens = sum(len(e.ids) for e in entries[a:b])
            keys = widened_keys([e.keys for e in entries[a:b]], tokens, width)
            out[src.text] = known = IndexedSource(
                spans=tuple((r.start, r.end, r.text) for r in records[a:b]), entries=tuple(entries[a:b]),
                token_class=_joined([c for c, _ in classes[a:b]]), piece_class=_joined([p for _, p in classes[a:b]]),
                keys=keys, norms=np.einsum("nd,nd->n", keys, keys),
            )
            self._indexed_sources.put(src.text, known, weight=max(tokens, 1))
            a = b
        return out

    def _datastore(self, sources: list[Source], indexed: list[IndexedSource]) -> Datastore:
        """The datastore of ``sources``, indexed: searched exactly on the host, on the
        encoder's device, or approximately, by its size."""
        records = [SentenceRecord(si, index, start, end, text) for si, known in enumerate(indexed)
                   for index, (start, end, text) in enumerate(known.spans)]
        done = [e for known in indexed for e in known.entries]
        token_classes = [known.token_class for known in indexed]
        pieces = [known.piece_class for known in indexed] if self.piece_classes else None
        entries = sum(known.tokens for known in indexed)
        if self.searches_on_device(entries):
            return Datastore(records, done, token_classes, pieces, search_device=self.search_device,
                             device_rows=self._device_rows(sources, indexed))
        source_keys = [(known.keys, known.norms) for known in indexed]
        if not self.searches_approximately(entries):
            return Datastore(records, done, token_classes, pieces, source_keys=source_keys)
        listed = self._with_lists(records, done)
        if any(new is not old for new, old in zip(listed, done)):  # remember the lists with the sources
            a = 0
            for src, known in zip(sources, indexed):
                b = a + len(known.entries)
                self._indexed_sources.put(src.text, replace(known, entries=tuple(listed[a:b])), weight=max(known.tokens, 1))
                a = b
        return Datastore(records, listed, token_classes, pieces, quantiser=self.quantiser, probes=PROBES,
                         source_keys=source_keys)

    def _device_rows(self, sources: list[Source], indexed: list[IndexedSource]) -> torch.Tensor:
        """The sources' keys as the cache has them (float16), stacked in entry order on
        :attr:`search_device`. Each source's rows go there once and are remembered: with
        an 8B encoder (width 4,096) copying a 16k-token list's rows took 53 ms of a 77 ms
        warm call, against a 10 ms encoder pass (docs/reports/performance.md)."""
        width = int(self.encoder.loaded.hidden_size)
        found = self._rows_on_device.get_many([src.text for src in sources])
        rows = []
        for src, known, kept in zip(sources, indexed, found):
            if not known.tokens:
                continue
            if kept is None or tuple(kept.shape) != (known.tokens, width):
                kept = torch.from_numpy(stacked_rows([e.keys for e in known.entries], known.tokens, width))
                kept = kept.to(self.search_device)
                self._rows_on_device.put(src.text, kept, weight=known.tokens)
            rows.append(kept)
        return torch.cat(rows) if rows else torch.zeros((0, width), dtype=torch.float16, device=self.search_device)

    def searches_approximately(self, entries: int) -> bool:
        """Whether a datastore of ``entries`` entries is searched approximately."""
        return (
            self.quantiser is not None and self.approximate_above is not None and entries > self.approximate_above
            and not self.searches_on_device(entries)
        )

    def searches_on_device(self, entries: int) -> bool:
        """Whether a datastore of ``entries`` entries is searched on the encoder's device."""
        return (
            self.search_device is not None and self.device_search_above is not None
            and entries > self.device_search_above
        )

    def _with_lists(
        self, records: list[SentenceRecord], entries: list[CachedSentence], *, write: bool = True
    ) -> list[CachedSentence]:
        """``entries``, each with its keys' lists in :attr:`quantiser`: those the cache
        does not hold yet are assigned in one batch and (``write``) written back to the
        cache (a sentence is assigned once, like it is encoded once)."""
        assert self.quantiser is not None
        digest = self.quantiser.digest
        missing = [i for i, e in enumerate(entries) if e.lists is None or e.lists_of != digest]
        if not missing:
            return entries
        keys = torch.from_numpy(np.concatenate([entries[i].keys for i in missing])).float().numpy()
        lists = self.quantiser.assign(keys)
        out = list(entries)
        at = 0
        key = self.encoder.cache_key
        for i in missing:
            n = len(entries[i].ids)
            out[i] = replace(entries[i], lists=lists[at: at + n], lists_of=digest)
            at += n
            if write:
                self.cache.put(key, records[i].text, out[i])
        return out

    def datastore_for(self, sources: list[Source], *, cancel: Any = None) -> Datastore:
        """:meth:`build`, remembered for the last few source lists: the same retrieved
        chunks attributed again (another answer, a stream, a retry) skip the rebuild from
        the sentence cache, which at 16k context tokens costs more than the answer's
        encoder pass (docs/reports/performance.md). Datastores above
        ``DATASTORE_MEMO_TOKENS`` entries are not kept (memory)."""
        key = tuple(s.text for s in sources)
        store = self._datastores.get(key)
        if store is None:
            store = self.build(sources, cancel=cancel)
            if store.size <= DATASTORE_MEMO_TOKENS:
                self._datastores.put(key, store)
        return store

    def split(self, text: str) -> list[tuple[int, int]]:
        """:func:`split_sentences` of a source, remembered per text (retrieved chunks
        recur; splitting them was a third of a warm build)."""
        spans = self._splits_of_source.get(text)
        if spans is None:
            spans = split_sentences(text)
            self._splits_of_source.put(text, spans)
        return spans

    def sentence_classes(self, text: str, entry: CachedSentence) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`TokenClasses.of` a source sentence, remembered per text (a warm
        datastore would otherwise spend most of its build time here)."""
        classes = self._classes_of_sentence.get(text)
        if classes is None:
            classes = self.classes.of(entry.ids, text, entry.offsets)
            for array in classes:
                array.setflags(write=False)
            self._classes_of_sentence.put(text, classes)
        return classes


def _joined(arrays: list[np.ndarray]) -> np.ndarray:
    """The arrays concatenated, read-only (shared by every datastore of the source)."""
    joined = np.concatenate(arrays) if arrays else np.zeros(0, np.int64)
    joined.setflags(write=False)
    return joined
