"""Finding which source sentences hold a phrase word for word: by token classes in a row
(:func:`sentences_with_sequence`) or by normalized text (:class:`SentenceTexts`), and the
words of an answer span (:func:`span_words`)."""

from __future__ import annotations

import bisect
import re
import unicodedata
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["SentenceTexts", "WordIndex", "is_word_char", "sentences_with_sequence", "span_words"]


def sentences_with_sequence(
    token_class: np.ndarray, sentence_of: np.ndarray, n_sentences: int, sequence: np.ndarray
) -> np.ndarray:
    """``(n_sentences,)`` bool: whether each sentence holds the classes ``sequence`` as
    consecutive entries (the span word for word, under the ``match`` rule).

    >>> sentences_with_sequence(np.array([1, 2, 3, 1, 3]), np.array([0, 0, 0, 1, 1]), 2, np.array([1, 3])).tolist()
    [False, True]
    """
    out = np.zeros(n_sentences, dtype=bool)
    n = len(sequence)
    if n == 0 or len(token_class) < n:
        return out
    if n == 1:
        out[sentence_of[token_class == sequence[0]]] = True
        return out
    starts = np.flatnonzero(token_class[: len(token_class) - n + 1] == sequence[0])
    ok = np.ones(len(starts), dtype=bool)
    for i in range(1, n):
        ok &= (token_class[starts + i] == sequence[i]) & (sentence_of[starts + i] == sentence_of[starts])
    out[sentence_of[starts[ok]]] = True
    return out


_WORD = re.compile(r"\w+")


def span_words(text: str, offsets: np.ndarray, start: int, end: int) -> list[np.ndarray]:
    """The words of ``text[start:end]`` (runs of word characters), each as the indices of
    the tokens (``offsets``: their character spans) that overlap it; words no token
    overlaps are left out.

    >>> [w.tolist() for w in span_words("New York.", np.array([[0, 3], [3, 8], [8, 9]]), 0, 9)]
    [[0], [1]]
    """
    offsets = np.asarray(offsets).reshape(-1, 2)
    real = offsets[:, 1] > offsets[:, 0]
    out = []
    for m in _WORD.finditer(text, start, end):
        w = np.flatnonzero(real & (offsets[:, 0] < m.end()) & (offsets[:, 1] > m.start()))
        if len(w):
            out.append(w)
    return out


def is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_"  # what the re module's \w matches in a str


def normalize_text(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def sentence_words(normalized: Sequence[str]) -> dict[str, np.ndarray]:
    """Each word (a run of word characters, ``\\w+``, the runs :func:`is_word_char` bounds) of
    the ``normalized`` sentences, with the sentences that hold it whole, ascending.

    >>> sorted((w, s.tolist()) for w, s in sentence_words(["a b.", "b c-a"]).items())
    [('a', [0, 1]), ('b', [0, 1]), ('c', [1])]
    """
    holders: dict[str, list[int]] = {}
    for s, text in enumerate(normalized):
        for word in set(_WORD.findall(text)):
            holders.setdefault(word, []).append(s)
    return {w: np.asarray(ss, dtype=np.int64) for w, ss in holders.items()}


# Bits of a block's word signature (WordIndex): a block of ~100 distinct words sets ~9% of them.
SIGNATURE_BITS = 1024


def _word_bit(word: str) -> int:
    """The signature bit of ``word``: the same in every process (a signature may outlive a
    process's ``hash`` seed, e.g. pickled), unlike ``hash``."""
    return zlib.crc32(word.encode("utf-8", "surrogatepass")) & (SIGNATURE_BITS - 1)


def word_signature(words: Sequence[str]) -> np.ndarray:
    """``(1, SIGNATURE_BITS // 64)`` uint64: the bits of ``words`` (:func:`_word_bit`) set.
    A block missing any bit of a phrase's words holds none of its matches.

    >>> sig = word_signature(["paris", "city"])
    >>> sig.shape, int(np.unpackbits(sig.view(np.uint8)).sum())
    ((1, 16), 2)
    """
    signature = np.zeros((1, SIGNATURE_BITS // 64), dtype=np.uint64)
    bits = np.fromiter((_word_bit(w) for w in words), dtype=np.int64, count=len(words))
    np.bitwise_or.at(signature[0], bits >> 6, np.left_shift(np.uint64(1), (bits & 63).astype(np.uint64)))
    return signature


@dataclass(frozen=True)
class WordIndex:
    """Which sentences hold each word, block by block (a block: one source's sentences, its
    :func:`sentence_words`, kept with the source; a context only lists its blocks). A
    phrase found word for word (:meth:`SentenceTexts.holding` with both boundaries) holds
    each of its words whole, so only the sentences holding all of them need a scan: the
    whole joined context was scanned once per keyword (docs/reports/performance.md). With
    each block's :func:`word_signature` (``signatures``), only the blocks whose signatures
    have every word's bit are looked up: a long context has hundreds of blocks, and a
    keyword's words are in a few.

    >>> index = WordIndex(((0, sentence_words(["a b.", "c"])), (2, sentence_words(["b c"]))), 3)
    >>> index.candidates("b c").tolist(), index.candidates("a").tolist(), index.candidates("%")
    ([True, False, True], [True, False, False], None)
    """

    blocks: tuple[tuple[int, Mapping[str, np.ndarray]], ...]  # (first sentence, its sentence_words)
    n_sentences: int
    signatures: np.ndarray | None = None  # (blocks, SIGNATURE_BITS // 64) uint64, or None: look up every block

    def candidates(self, needle: str) -> np.ndarray | None:
        """``(n_sentences,)`` bool: in each block, the sentences holding whole the word of
        ``needle`` (already normalized) that the fewest of them hold, and none where a word
        is held by none; a superset of the sentences holding the needle bounded. None when
        it has no word (every sentence is a candidate)."""
        words = _WORD.findall(needle)
        if not words:
            return None
        out = np.zeros(self.n_sentences, dtype=bool)
        chosen: Iterable[int] = range(len(self.blocks))
        if self.signatures is not None:
            maybe = np.ones(len(self.blocks), dtype=bool)
            for word in set(words):
                bit = _word_bit(word)
                maybe &= (self.signatures[:, bit >> 6] & np.uint64(1 << (bit & 63))) != 0
            chosen = np.flatnonzero(maybe).tolist()
        for b in chosen:
            first, holders = self.blocks[b]
            fewest = None
            for word in words:
                found = holders.get(word)
                if found is None:
                    fewest = None
                    break
                if fewest is None or len(found) < len(fewest):
                    fewest = found
            if fewest is not None:
                out[first + fewest] = True
        return out


@dataclass(frozen=True)
class SentenceTexts:
    """The datastore's sentences, normalized once (NFKC, case folded, whitespace
    collapsed) and joined, for finding which sentences hold a phrase word for word.

    >>> SentenceTexts.of(["Voiced by Selena Gomez.", "An unvoiced consonant."]).holding("voiced").tolist()
    [True, False]
    """

    text: str
    starts: np.ndarray  # (n_sentences,) start of each sentence in ``text``
    _bounds: list[int] = field(init=False, repr=False, compare=False)  # starts, then len(text)
    # Which sentences hold each word (None: none kept; every phrase scans the whole text).
    words: WordIndex | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_bounds", [*np.asarray(self.starts).tolist(), len(self.text)])

    @classmethod
    def of(cls, texts: Sequence[str]) -> SentenceTexts:
        return cls.joined([normalize_text(t) for t in texts])

    @classmethod
    def joined(cls, normalized: Sequence[str]) -> SentenceTexts:
        """From the sentences already normalized (:func:`normalize_text`; a caller that
        remembers them per sentence skips the normalization, most of :meth:`of`).

        >>> SentenceTexts.joined(["a b.", "c."]).starts.tolist()
        [0, 5]
        """
        lengths = np.fromiter((len(t) + 1 for t in normalized), dtype=np.int64, count=len(normalized))
        starts = np.zeros(len(normalized), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])  # "\n" between sentences: a phrase never spans two
        return cls("\n".join(normalized), starts)

    @classmethod
    def of_blocks(cls, blocks: Sequence[SentenceTexts]) -> SentenceTexts:
        """The blocks' sentences in order, as :meth:`joined` of all of them gives them, with
        the blocks' word indexes listed (each block: one source's sentences, joined once and
        kept with the source, so a new list of known sources joins a few hundred texts, not
        thousands). Every block has a sentence; without a word index in each (:meth:`indexed`), the
        result has none.

        >>> a, b = SentenceTexts.indexed(["a b.", "c."]), SentenceTexts.indexed(["b c"])
        >>> both = SentenceTexts.of_blocks([a, b])
        >>> whole = SentenceTexts.joined(["a b.", "c.", "b c"])
        >>> both.text == whole.text, both.starts.tolist() == whole.starts.tolist(), both.holding_many(["b"]).tolist()
        (True, True, [[True, False, True]])
        """
        # One pass over the blocks (a long context has hundreds).
        texts, starts, counts, lengths, holders, signatures = [], [], [], [], [], []
        indexed = signed = True
        for block in blocks:
            texts.append(block.text)
            starts.append(block.starts)
            counts.append(len(block.starts))
            lengths.append(len(block.text) + 1)  # with its "\n"
            words = block.words
            if words is None or len(words.blocks) != 1 or words.blocks[0][0] != 0:
                # A block without its index leaves the whole context without one (its
                # sentences would otherwise never be candidates).
                indexed = False
                continue
            holders.append(words.blocks[0][1])
            if words.signatures is None:
                signed = False
            else:
                signatures.append(words.signatures)
        if not blocks:
            return cls("", np.zeros(0, np.int64), WordIndex((), 0))
        sizes, widths = np.array(counts, dtype=np.int64), np.array(lengths, dtype=np.int64)
        joined_starts = np.concatenate(starts) + np.repeat(np.cumsum(widths) - widths, sizes)
        index = WordIndex(
            tuple(zip((np.cumsum(sizes) - sizes).tolist(), holders)), len(joined_starts),
            np.concatenate(signatures) if signed else None,
        ) if indexed else None
        return cls("\n".join(texts), joined_starts, index)

    @classmethod
    def indexed(cls, normalized: Sequence[str]) -> SentenceTexts:
        """:meth:`joined`, with the word index of its sentences (one block)."""
        texts, words = cls.joined(normalized), sentence_words(normalized)
        return cls(texts.text, texts.starts, WordIndex(((0, words),), len(normalized), word_signature(list(words))))

    def holding_many(self, phrases: Sequence[str], within: Sequence[np.ndarray | None] | None = None) -> np.ndarray:
        """``(len(phrases), n_sentences)`` bool: :meth:`holding` of each phrase; with
        ``within``, phrase ``r`` is looked for only in the sentences where ``within[r]``
        (a bool mask; None: in all), and the others are False for it (a caller that only
        needs some sentences' answer reads those, not the whole context).

        >>> texts = SentenceTexts.of(["Voiced by Selena Gomez.", "An unvoiced consonant.", "Voiced."])
        >>> texts.holding_many(["voiced", "an"]).tolist()
        [[True, False, True], [False, True, False]]
        >>> texts.holding_many(["voiced", "an"], [np.array([False, True, True]), None]).tolist()
        [[False, False, True], [False, True, False]]
        """
        out = np.zeros((len(phrases), len(self._bounds) - 1), dtype=bool)
        for r, phrase in enumerate(phrases):
            only = None if within is None else within[r]
            if self.words is not None and (maybe := self.words.candidates(normalize_text(phrase))) is not None:
                only = maybe if only is None else maybe & only  # the rest cannot hold it (WordIndex)
            self._find(phrase, False, False, out[r], only)
        return out

    def holding(self, phrase: str, *, open_start: bool = False, open_end: bool = False) -> np.ndarray:
        """``(n_sentences,)`` bool: the sentences that contain ``phrase`` (normalized like
        the sentences, punctuation included) with no word character right before or after
        it, so "voiced" is found in "(voiced by" but not in "unvoiced". ``open_start`` /
        ``open_end``: the phrase starts / ends inside a word where it was cut from (a span
        "evapor" of "evaporates"), so no boundary is required on that side.

        >>> SentenceTexts.of(["It evaporates.", "Vapour."]).holding("evapor", open_end=True).tolist()
        [True, False]
        """
        out = np.zeros(len(self._bounds) - 1, dtype=bool)
        self._find(phrase, open_start, open_end, out)
        return out

    def _find(
        self, phrase: str, open_start: bool, open_end: bool, out: np.ndarray, only: np.ndarray | None = None
    ) -> None:
        """Set ``out[s]`` for every sentence ``s`` that holds ``phrase`` (:meth:`holding`),
        among the sentences where ``only`` (None: all)."""
        bounds = self._bounds
        needle = normalize_text(phrase)
        if not needle:
            return
        # str.find, then the boundary checks by hand: a regex with look-arounds is not
        # searched by its literal prefix and took ~2 ms per keyword on 50k characters.
        text, n = self.text, len(needle)
        check_before = is_word_char(needle[0]) and not open_start
        check_after = is_word_char(needle[-1]) and not open_end
        end = len(text)
        # The whole text, or each chosen sentence (a phrase has no "\n": a match lies in one).
        ranges = [(0, end)] if only is None else [(bounds[s], bounds[s + 1]) for s in np.flatnonzero(only).tolist()]
        for lo, hi in ranges:
            i = text.find(needle, lo, hi)
            while i != -1:
                j = i + n
                # (is_word_char inlined: this loop runs for every occurrence of every keyword)
                if not (check_before and i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")) and not (
                    check_after and j < end and (text[j].isalnum() or text[j] == "_")
                ):
                    # Found in this sentence: go on from the next one (a stopword-like phrase
                    # can occur dozens of times in a sentence).
                    s = bisect.bisect_right(bounds, i) - 1
                    out[s] = True
                    i = text.find(needle, bounds[s + 1], hi)
                else:
                    i = text.find(needle, i + 1, hi)
