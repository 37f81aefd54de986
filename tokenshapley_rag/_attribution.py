"""TokenShapley: attribute every keyword of an answer to the source sentences it came from."""

from __future__ import annotations

import bisect
import functools
import inspect
import math
import os
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numba
import numpy as np

from tokenshapley_rag._datastore import CachedSentence, Datastore, SentenceCache, SentenceRecord, storage_keys
from tokenshapley_rag._defaults import DEFAULT_LAYER
from tokenshapley_rag._encoder import CausalLMEncoder, TokenizedText
from tokenshapley_rag._limits import (
    DEFAULT_MAX_CONTEXT_CHARS,
    DEFAULT_MAX_SOURCE_CHARS,
    check_cancel_event,
    check_context_size,
    check_limit,
    checkpoint,
)
from tokenshapley_rag._models import default_cache_dir, load_causal_lm
from tokenshapley_rag._segment import Keyword, find_keywords, split_sentences, token_words
from tokenshapley_rag._sources import coerce_sources, document_index
from tokenshapley_rag._text import check_text
from tokenshapley_rag._support import (
    PREDICATE_AGREEMENT,
    PREDICATE_TOLERANCE,
    VALUE_KINDS,
    SentenceFacts,
    holding_mask,
    is_name,
    keyword_facts,
    keyword_status,
    locate_keyword,
    sentence_facts,
    sentence_verdict,
)
from tokenshapley_rag._types import (
    KeywordCitation,
    SentenceScore,
    SentenceVerdict,
    Source,
    SourceAttribution,
    display_name,
    page_of,
)
from tokenshapley_rag.errors import (
    EmptyTextError,
    InvalidInputError,
    InvalidInputTypeError,
)
from tokenshapley_rag.shapley import _PARALLEL_WORK, _shapley_row

if TYPE_CHECKING:
    from tokenshapley_rag._stream import AttributionStream

__all__ = ["TokenShapley", "AttributionResult", "TokenScores", "coerce_sources", "context_scores", "context_weights"]

_MATCH_MODES = ("word", "word_or_token", "normalized", "exact")
_LOADING_PARAMETERS = frozenset(("self", "model", "tokenizer", "layer", "device", "dtype", "cache_dir"))
_CANDIDATE_MODES = ("nearest", "mixed")
# Datastores of the last few source lists kept per TokenShapley (see _datastore_for):
# at most 4 x 65,536 entries x ~2.3 KB = ~600 MB in the worst case.
_DATASTORE_MEMO_ITEMS = 4
_DATASTORE_MEMO_TOKENS = 65_536


class _Memo:
    """A thread-safe least-recently-used dict of at most ``size`` items (what
    TokenShapley remembers between calls: datastores, source splits, sentence classes)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def values(self) -> list[Any]:
        with self._lock:
            return list(self._items.values())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


def context_scores(
    scores: np.ndarray,
    carries: np.ndarray,
    sentence_source: np.ndarray,
    answer_sentence: np.ndarray,
    members: np.ndarray,
    weight: float,
    scale: float,
    verbatim: np.ndarray | None = None,
    words: Sequence[np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-sentence scores of the span made of the answer tokens ``members``.

    Parameters
    ----------
    scores : (T, n_sentences) token Shapley values per sentence
    carries : (T, n_sentences) bool, whether the sentence holds an entry of the token's class
    sentence_source : (n_sentences,) source index of each sentence
    answer_sentence : (T,) answer sentence of each token
    members : indices of the span's tokens
    weight, scale : the context weights (:func:`context_weights`)
    verbatim : (n_sentences,) bool, optional
        Whether each sentence holds the span word for word (its token classes in a row,
        :func:`sentences_with_sequence`, or its text, :meth:`SentenceTexts.holding`).
    words : list of int arrays, optional
        The span's words, each as the answer tokens it is made of (:func:`span_words`).
        With them, a span that no source holds word for word has as candidates the
        sources that hold the most of its words, instead of every source holding one.

    Returns
    -------
    (in_context, own) : two (n_sentences,) arrays. ``own`` sums the span tokens' Shapley
    values (the paper's aggregation). ``in_context`` is the context game's value
    (``context_weights(...) @ scores``) for the sentences of the candidate sources. When
    some source holds the span verbatim, the candidates are those sources, and every other
    sentence gets ``-inf`` (it is not a candidate): a phrase found word for word is not
    outvoted by sources that share only some of its words. Otherwise the candidates are
    the sources that hold at least one of the span's tokens (with ``words``: the sources
    that hold the most of the span's words, a word being held when one of the source's
    sentences carries one of its tokens), and the others keep ``own``: context decides
    between the sources that carry the span and cannot pull it to one that does not.
    """
    in_context, own, _ = span_games(
        scores, carries, sentence_source, answer_sentence, [np.sort(np.asarray(members, dtype=np.int64))], weight, scale,
        None if verbatim is None else np.asarray(verbatim, bool)[None, :],
        None if words is None else [[np.asarray(w, dtype=np.int64) for w in words]],
    )
    return in_context[0], own[0]


def span_games(
    scores: np.ndarray,
    carries: np.ndarray,
    sentence_source: np.ndarray,
    answer_sentence: np.ndarray,
    spans: Sequence[np.ndarray],
    weight: float,
    scale: float,
    verbatim: np.ndarray | None = None,
    words: Sequence[Sequence[np.ndarray]] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`context_scores` of several spans at once (``spans``: each span's token
    indices, ascending; ``verbatim``: ``(len(spans), n_sentences)``; ``words``: per span,
    its words as arrays of token indices, or None to skip the most-words rule for it), and
    the sentences that hold each span: those holding it word for word when any does,
    otherwise those holding at least one of its tokens.

    Returns ``(in_context, own, holds)``, three ``(len(spans), n_sentences)`` arrays.
    """
    n_tok, n_sent = scores.shape
    scores = np.ascontiguousarray(scores, dtype=np.float64)
    spans = [np.asarray(m, dtype=np.int64).ravel() for m in spans]
    flat = np.concatenate(spans) if spans else np.zeros(0, np.int64)
    bounds = np.zeros(len(spans) + 1, dtype=np.int64)
    np.cumsum([len(m) for m in spans], out=bounds[1:])
    # The words of the most-words rule, flattened: span r's words are word_of_span[r] to
    # word_of_span[r + 1] - 1, word i's tokens word_tokens[word_bounds[i]:word_bounds[i + 1]].
    per_span = [list(words[r] or ()) if words is not None else [] for r in range(len(spans))]
    word_list = [np.asarray(w, dtype=np.int64).ravel() for ws in per_span for w in ws]
    word_tokens = np.concatenate(word_list) if word_list else np.zeros(0, np.int64)
    word_bounds = np.zeros(len(word_list) + 1, dtype=np.int64)
    np.cumsum([len(w) for w in word_list], out=word_bounds[1:])
    word_of_span = np.zeros(len(spans) + 1, dtype=np.int64)
    np.cumsum([len(ws) for ws in per_span], out=word_of_span[1:])
    shape = (len(spans), n_sent)
    # The compiled pass does not check indices: bad input is refused here, by name.
    for name, array, want in (("carries", carries, (n_tok, n_sent)), ("sentence_source", sentence_source, (n_sent,)),
                              ("answer_sentence", answer_sentence, (n_tok,)),
                              ("verbatim", shape if verbatim is None else verbatim, shape)):
        got = array if isinstance(array, tuple) else np.shape(array)
        if tuple(got) != want:
            raise ValueError(f"{name} must have shape {want} for scores of shape {scores.shape}, got {tuple(got)}")
    for name, tokens in (("spans", flat), ("words", word_tokens)):
        if len(tokens) and (tokens.min() < 0 or tokens.max() >= n_tok):
            raise ValueError(f"{name} hold token indices outside [0, {n_tok}): {tokens.min()}..{tokens.max()}")
    result, own, holds = np.zeros(shape), np.zeros(shape), np.zeros(shape, dtype=bool)
    if n_sent == 0:
        return result, own, holds
    _span_game_rows(
        scores, np.ascontiguousarray(carries, dtype=bool), np.ascontiguousarray(sentence_source, dtype=np.int64),
        int(sentence_source.max()) + 1, np.ascontiguousarray(answer_sentence, dtype=np.int64), flat, bounds,
        float(weight), float(scale),
        np.zeros((len(spans), n_sent), dtype=bool) if verbatim is None else np.ascontiguousarray(verbatim, dtype=bool),
        verbatim is not None, word_tokens, word_bounds, word_of_span, result, own, holds,
    )
    return result, own, holds


@numba.njit(cache=True, nogil=True)
def _span_game_rows(scores, carries, sentence_source, n_sources, answer_sentence, flat, bounds, weight, scale, verbatim,
                    use_verbatim, word_tokens, word_bounds, word_of_span, result, own, holds):
    """:func:`span_games`, one span (row) at a time; what each step means is spelled out
    in the numpy oracle of tests/test_context_game.py."""
    n_tok, n_sent = scores.shape
    in_context = np.zeros(n_sent)
    weights = np.zeros(n_tok)
    member = np.zeros(n_tok, dtype=np.bool_)
    candidate_source = np.zeros(n_sources, dtype=np.bool_)
    word_held = np.zeros(n_sources, dtype=np.bool_)
    count = np.zeros(n_sources, dtype=np.int64)
    for r in range(bounds.shape[0] - 1):
        a, b = bounds[r], bounds[r + 1]
        if a == b:
            continue  # an empty span: every value 0, no candidate
        member[:] = False
        for i in range(a, b):
            member[flat[i]] = True
        # own: the span tokens' values; holds: the sentences carrying one of its tokens.
        for t in range(n_tok):
            if member[t]:
                for s in range(n_sent):
                    own[r, s] += scores[t, s]
                    if carries[t, s]:
                        holds[r, s] = True
        exact = False
        if use_verbatim:
            for s in range(n_sent):
                if verbatim[r, s]:
                    exact = True
            if exact:
                for s in range(n_sent):
                    holds[r, s] = verbatim[r, s]
        # The context game: weight 1 on the span's tokens, weight * exp(-d / scale) on the
        # other tokens of its answer sentence (d: tokens to the nearest end of the span).
        if weight > 0:
            first, last = flat[a], flat[b - 1]
            for t in range(n_tok):
                if member[t]:
                    weights[t] = 1.0
                elif answer_sentence[t] == answer_sentence[first]:
                    weights[t] = weight * np.exp(-min(abs(t - first), abs(t - last)) / scale)
                else:
                    weights[t] = 0.0
            in_context[:] = 0.0
            for t in range(n_tok):
                if weights[t] != 0.0:
                    for s in range(n_sent):
                        in_context[s] += weights[t] * scores[t, s]
        else:
            in_context[:] = own[r]
        # Candidate sources: those holding the span (verbatim when any does); for a span no
        # source holds verbatim, with its words given, those holding the most of its words.
        candidate_source[:] = False
        if not exact and word_of_span[r + 1] > word_of_span[r]:
            count[:] = 0
            for w in range(word_of_span[r], word_of_span[r + 1]):
                word_held[:] = False
                for i in range(word_bounds[w], word_bounds[w + 1]):
                    t = word_tokens[i]
                    for s in range(n_sent):
                        if carries[t, s]:
                            word_held[sentence_source[s]] = True
                for src in range(n_sources):
                    if word_held[src]:
                        count[src] += 1
            most = 0
            for src in range(n_sources):
                most = max(most, count[src])
            for src in range(n_sources):
                candidate_source[src] = most > 0 and count[src] == most
        else:
            for s in range(n_sent):
                if holds[r, s]:
                    candidate_source[sentence_source[s]] = True
        for s in range(n_sent):
            if candidate_source[sentence_source[s]]:
                result[r, s] = in_context[s]
            elif exact:
                result[r, s] = -np.inf
            else:
                result[r, s] = own[r, s]


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


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_"  # what the re module's \w matches in a str


def _normalize_text(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "_bounds", [*np.asarray(self.starts).tolist(), len(self.text)])

    @classmethod
    def of(cls, texts: Sequence[str]) -> SentenceTexts:
        parts, starts, at = [], [], 0
        for t in texts:
            norm = _normalize_text(t)
            starts.append(at)
            parts.append(norm)
            at += len(norm) + 1  # "\n" between sentences: a phrase never spans two
        return cls("\n".join(parts), np.asarray(starts, dtype=np.int64))

    def holding_many(self, phrases: Sequence[str]) -> np.ndarray:
        """``(len(phrases), n_sentences)`` bool: :meth:`holding` of each phrase.

        >>> SentenceTexts.of(["Voiced by Selena Gomez.", "An unvoiced consonant."]).holding_many(["voiced", "an"]).tolist()
        [[True, False], [False, True]]
        """
        out = np.zeros((len(phrases), len(self._bounds) - 1), dtype=bool)
        for r, phrase in enumerate(phrases):
            self._find(phrase, False, False, out[r])
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

    def _find(self, phrase: str, open_start: bool, open_end: bool, out: np.ndarray) -> None:
        """Set ``out[s]`` for every sentence ``s`` that holds ``phrase`` (:meth:`holding`)."""
        bounds = self._bounds
        needle = _normalize_text(phrase)
        if not needle:
            return
        # str.find, then the boundary checks by hand: a regex with look-arounds is not
        # searched by its literal prefix and took ~2 ms per keyword on 50k characters.
        text, n = self.text, len(needle)
        check_before = _is_word_char(needle[0]) and not open_start
        check_after = _is_word_char(needle[-1]) and not open_end
        i = text.find(needle)
        end = len(text)
        while i != -1:
            j = i + n
            # (_is_word_char inlined: this loop runs for every occurrence of every keyword)
            if not (check_before and i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")) and not (
                check_after and j < end and (text[j].isalnum() or text[j] == "_")
            ):
                # Found in this sentence: go on from the next one (a stopword-like phrase
                # can occur dozens of times in a sentence).
                s = bisect.bisect_right(bounds, i) - 1
                out[s] = True
                i = text.find(needle, bounds[s + 1])
            else:
                i = text.find(needle, i + 1)


def context_weights(answer_sentence: np.ndarray, members: np.ndarray, weight: float, scale: float) -> np.ndarray:
    """Weights of the answer tokens in the game of a span made of the tokens ``members``.

    1 for the span's own tokens; ``weight * exp(-d / scale)`` for the other tokens of the
    same answer sentence, ``d`` their distance in tokens to the nearest span token; 0
    elsewhere. A span's score is the weighted sum of its tokens' Shapley values, which is
    the exact Shapley value of the same weighted sum of token games (Shapley values are
    linear), so the neighbouring words of the answer break ties between sources that all
    hold the span.

    >>> context_weights(np.array([0, 0, 0, 0, 1]), np.array([1]), 0.5, 1.0).round(3).tolist()
    [0.184, 1.0, 0.184, 0.068, 0.0]
    """
    return _context_weight_rows(answer_sentence, [np.sort(np.asarray(members, dtype=np.int64))], weight, scale)[0]


def _context_weight_rows(answer_sentence: np.ndarray, spans: Sequence[np.ndarray], weight: float, scale: float) -> np.ndarray:
    """:func:`context_weights` of each span (its token indices ascending), one row per span."""
    n_tok = len(answer_sentence)
    w = np.zeros((len(spans), n_tok))
    filled = [r for r, m in enumerate(spans) if len(m)]
    if weight > 0 and filled:
        first = np.array([spans[r][0] for r in filled])
        last = np.array([spans[r][-1] for r in filled])
        t = np.arange(n_tok)[None, :]
        d = np.minimum(np.abs(t - first[:, None]), np.abs(t - last[:, None]))
        same = answer_sentence[None, :] == answer_sentence[first][:, None]
        w[filled] = np.where(same, weight * np.exp(-d / scale), 0.0)
    for r in filled:
        w[r, spans[r]] = 1.0
    return w


@dataclass(frozen=True)
class TokenScores:
    """Per-token attribution, for analysis.

    ``scores[t, j]`` is the summed Shapley value of the datastore entries of sentence ``j``
    (``AttributionResult.sentence_scores[j]``) for answer token ``t``. Row sums equal the
    token game's value U(all) (1 if the nearest evidence carries the token, else 0, for
    K = 1). ``keyword[t]`` is the index of the token's keyword in ``keywords`` or -1;
    ``answer_sentence[t]`` the index of the answer sentence the token is in;
    ``carries[t, j]`` whether sentence ``j`` holds a token that matches token ``t``
    (``sentence_source[j]``: the index of sentence ``j``'s source). ``classes``,
    ``context_classes`` and ``context_sentence`` are the match classes of the answer
    tokens and of the datastore entries, and each entry's sentence: what
    :meth:`verbatim` needs to find a span word for word in the sources.
    """

    texts: list[str]
    offsets: np.ndarray  # (T, 2) int64 char offsets into the answer
    scores: np.ndarray  # (T, n_sentences) float64
    keyword: np.ndarray  # (T,) int64
    answer_sentence: np.ndarray  # (T,) int64
    carries: np.ndarray  # (T, n_sentences) bool
    sentence_source: np.ndarray  # (n_sentences,) int64
    classes: np.ndarray  # (T,) int64 match class of each answer token
    context_classes: np.ndarray  # (N,) int64 match class of each datastore entry
    context_sentence: np.ndarray  # (N,) int64 sentence of each datastore entry

    @classmethod
    def empty(cls) -> TokenScores:
        """No tokens and no sentences (an answer that was not attributed)."""
        ints = np.zeros(0, dtype=np.int64)
        return cls(
            texts=[],
            offsets=np.zeros((0, 2), dtype=np.int64),
            scores=np.zeros((0, 0)),
            keyword=ints,
            answer_sentence=ints,
            carries=np.zeros((0, 0), dtype=bool),
            sentence_source=ints,
            classes=ints,
            context_classes=ints,
            context_sentence=ints,
        )

    def verbatim(self, members: np.ndarray) -> np.ndarray:
        """``(n_sentences,)`` bool: the sentences that hold the answer tokens ``members``
        word for word (see :func:`sentences_with_sequence`)."""
        return sentences_with_sequence(
            self.context_classes, self.context_sentence, len(self.sentence_source), self.classes[members]
        )


@dataclass(frozen=True)
class AttributionResult:
    """Keyword citations of one answer, with source-, sentence- and token-level scores.

    Scores are sums of exact Shapley values (see :class:`TokenShapley`), so they add up:
    a keyword's score for a source is the weighted sum over its tokens and their answer
    context, over the source's sentences (:meth:`span_scores`); ``source_scores`` sums over
    all answer tokens, stopwords included.
    """

    query: str
    response: str
    sources: list[Source]
    citations: list[KeywordCitation]
    source_scores: dict[str, float]
    sentence_scores: list[SentenceScore]
    tokens: TokenScores
    config: dict[str, Any] = field(default_factory=dict)
    sentences: list[SentenceVerdict] = field(default_factory=list)

    @functools.cached_property
    def _sentence_texts(self) -> SentenceTexts:
        return SentenceTexts.of([s.sentence for s in self.sentence_scores])

    @property
    def support(self) -> float:
        """How well the sources support the answer as a whole: the mean
        ``KeywordCitation.support`` over the cited keywords (0.0 when there are none).

        Measured on the first 30 WiCE dev claims (8 supported, 14 partially supported, 8
        not supported; docs/method.md §8) it separates supported from not-supported claims
        with AUROC 0.86 (partially supported vs not: 0.83).
        """
        if not self.citations:
            return 0.0
        return float(np.mean([c.support for c in self.citations]))

    def span_scores(self, start: int, end: int, *, context: bool = True) -> dict[str, float]:
        """Per-source score of any span of the answer, computed like a keyword's.

        The span's tokens are the answer tokens that overlap ``response[start:end]``; its
        score is the sum of their Shapley values plus, with ``context=True``, those of the
        other tokens of its answer sentence weighted by :func:`context_weights` (the
        ``context_weight`` / ``context_scale`` of the config), for the sentences of its
        candidate sources (:func:`context_scores`: those holding one of the span's tokens,
        or the most of its words when no source holds it word for word).
        ``context=False`` gives the plain sum of the span's own tokens (the paper's
        aggregation), with no rule on top. With
        ``context=True`` and ``verbatim`` in the config, a source that lacks the span word
        for word while another holds it scores ``-inf`` (it is not a candidate).

        Examples
        --------
        >>> res.span_scores(0, 5)  # doctest: +SKIP
        {'0': 1.0, '1': 0.0}
        """
        if not (0 <= start < end <= len(self.response)):
            raise InvalidInputError(f"span [{start}, {end}) is not inside the answer of length {len(self.response)}")
        offs = self.tokens.offsets
        inside = np.flatnonzero((offs[:, 0] < end) & (offs[:, 1] > start) & (offs[:, 1] > offs[:, 0]))
        weight = float(self.config.get("context_weight", 0.0)) if context else 0.0
        scale = float(self.config.get("context_scale", 1.0))
        t = self.tokens
        text = self.response
        verbatim = (
            t.verbatim(inside)
            | self._sentence_texts.holding(
                text[start:end],
                open_start=start > 0 and _is_word_char(text[start - 1]) and _is_word_char(text[start]),
                open_end=end < len(text) and _is_word_char(text[end - 1]) and _is_word_char(text[end]),
            )
            if context and self.config.get("verbatim", False)
            else None
        )
        per_sentence, _own = context_scores(
            t.scores, t.carries, t.sentence_source, t.answer_sentence, inside, weight, scale, verbatim,
            span_words(text, offs, start, end) if verbatim is not None else None,
        )
        sums = {s.id: 0.0 for s in self.sources}
        candidates = set()
        for j, sent in enumerate(self.sentence_scores):
            if np.isfinite(per_sentence[j]):  # -inf: not a candidate (see context_scores)
                sums[sent.source_id] += float(per_sentence[j])
                candidates.add(sent.source_id)
        return {sid: v if sid in candidates else -np.inf for sid, v in sums.items()} if candidates else sums

    def to_markdown(self) -> str:
        """The answer with footnote markers ``[^n]`` after cited keywords and a footnote
        list quoting each cited sentence (see :func:`tokenshapley_rag.render_markdown`)."""
        from tokenshapley_rag._render import render_markdown

        return render_markdown(self)

    def to_html(self) -> str:
        """A self-contained HTML page: keywords highlighted, hover/focus/click shows the
        source sentence (see :func:`tokenshapley_rag.render_html`)."""
        from tokenshapley_rag._render import render_html

        return render_html(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable dict of the whole result (token scores included)."""
        return {
            "query": self.query,
            "response": self.response,
            "sources": [
                {"id": s.id, "text": s.text, "metadata": dict(s.metadata), "document": s.document} for s in self.sources
            ],
            "citations": [c.to_dict() for c in self.citations],
            "sentences": [v.to_dict() for v in self.sentences],
            "support": self.support,
            "source_scores": {k: float(v) for k, v in self.source_scores.items()},
            "sentence_scores": [s.to_dict() for s in self.sentence_scores],
            "tokens": [
                {
                    "text": text,
                    "start": int(self.tokens.offsets[t, 0]),
                    "end": int(self.tokens.offsets[t, 1]),
                    "keyword": int(self.tokens.keyword[t]),
                    "scores": {str(j): float(v) for j, v in enumerate(self.tokens.scores[t]) if v != 0.0},
                }
                for t, text in enumerate(self.tokens.texts)
            ],
            "config": dict(self.config),
        }


class TokenShapley:
    """Keyword-level citations with TokenShapley (exact KNN-Shapley over a token datastore).

    For every context token the datastore holds the encoder's hidden state before that
    token, with the prefix starting at the token's own sentence (so keys are cached per
    sentence), and the token itself. Each answer token is encoded teacher-forced after the
    query (the generator can be any model, an API model included); its ``m`` nearest
    datastore entries play the game ``U(S) = 1[sum of the top-k votes in S >= 0]`` with vote
    ``+s`` for an entry carrying the same token and ``-s`` otherwise, ``s`` an RBF
    similarity. Their exact Shapley values are summed per sentence, per keyword and per
    source.

    Parameters
    ----------
    model : str, path, transformers.PreTrainedModel or None, default=None
        The encoder: None for the embedded SmolLM2-135M-Instruct, a local path / cached hub
        name, ``"gemma-3-270m"``, or a loaded causal LM (then pass ``tokenizer``).
    tokenizer : optional
        Tokenizer for a loaded ``model`` (must be a fast tokenizer).
    layer : int, default=8
        Which hidden state (0 = embeddings) keys and queries come from.
    k : int, default=1
        Neighbours that vote (the paper's K).
    m : int, default=10
        Candidates per answer token whose Shapley values are computed (the paper's M).
    gamma : float or "auto", default="auto"
        RBF width in ``s = exp(-gamma * d^2)``. "auto" uses ``1 / median(d^2)`` over each
        answer token's ``m`` candidates (with ``k=1`` only the nearest candidate's vote
        counts, so gamma has no effect). Similarities are computed as
        ``exp(-gamma * (d^2 - d^2_nearest))``: the vote game is unchanged by a common
        positive factor, and the nearest entry gets 1, so they cannot all underflow to 0.
    match : {"word", "word_or_token", "normalized", "exact"}, default="word"
        When a datastore token "equals" an answer token. "exact": same token id.
        "normalized": same decoded text after Unicode NFKC, case folding and stripping
        whitespace, so " Paris" (mid-sentence) matches "Paris" (sentence-initial).
        "word": same normalized text and the same word of the text, so the digits of 2010
        are no evidence for 2011. "word_or_token": "word" for answer words that occur in
        the sources, "normalized" for the others (a paraphrased or inflected word still
        finds its pieces).
    candidates : {"nearest", "mixed"}, default="mixed"
        "nearest": the ``m`` nearest entries (the paper). "mixed": the ``m // 2`` nearest
        entries carrying the answer token plus the nearest others, so evidence that carries
        the token is always among the players when the context has it.
    context_weight, context_scale : float, default=1.0 and 16.0
        The answer-context game: a keyword's score also counts the other tokens of its
        answer sentence, weighted ``context_weight * exp(-d / context_scale)`` (``d`` in
        tokens), for the sources that hold the keyword (:func:`context_scores`). 0 gives
        the paper's plain sum over the keyword's tokens.
    verbatim : bool, default=True
        When some sources hold a keyword word for word (the same token classes in a row,
        or its text, case-insensitively, as whole words: :class:`SentenceTexts`), only
        they are its candidate sources; otherwise the sources holding the most of its
        words are (a word is held when a sentence carries one of its tokens). Shared words
        alone then cannot outvote the source the phrase is from.
    support_threshold : float or None, default=None
        None (the default): the match rule and the status rule decide ``supported``
        (docs/method.md §8). A number demands more: a keyword found supported becomes
        ``unsupported`` unless its best source sentence's score, divided by its number of
        tokens, exceeds this (``KeywordCitation.support``).
    device : str, default="cpu"
    dtype : {"float32", "bfloat16", "float16"} or torch.dtype, default="float32"
        Weights and activations of the encoder. ``"bfloat16"`` measured the same span
        accuracy on QuoteSum (docs/reports/performance.md); its speed depends on the CPU's
        kernels: 2.6x faster than float32 on one 2-core AMD EPYC, ~0.7x the float32
        speed on an Intel Xeon with avx512_bf16 (both measured), so time it on yours.
        Keys are cached per dtype (the fingerprint includes it).
    cache_dir : path or None
        Where converted models and sentence keys are cached; defaults to
        ``$TOKENSHAPLEY_CACHE`` or ``~/.cache/tokenshapley-rag``.
    use_disk_cache : bool, default=True
        Keep sentence keys on disk (otherwise only in memory).
    max_sentence_tokens : int or None, default=None
        Longer source sentences are cut into consecutive pieces of at most this many
        tokens, each treated as a sentence; None means the model's context length.
    max_source_chars : int or None, default=50_000
        :meth:`attribute` and :meth:`stream` refuse a source longer than this (in
        characters) with :class:`~tokenshapley_rag.errors.TextTooLongError`, before any
        work. None: no limit.
    max_context_chars : int or None, default=120_000
        The same for all sources together. The defaults bound a cold attribution to
        about 90 CPU-seconds and 0.4 GB above the loaded model on 2 CPU cores
        (docs/reports/performance.md, "Bounded work") and admit every context of the evaluation
        sets; raise them for longer contexts (time and memory grow linearly), or pass
        None to disable them. :meth:`prepare` and :meth:`build_datastore` are not limited.

    Notes
    -----
    ``KeywordCitation.support`` is ``max_sentence(sum of the keyword tokens' Shapley values
    from that sentence) / n_tokens``: how far some single source sentence holds, on balance,
    evidence that votes for the keyword's tokens. 1 means every token's game is won by that
    sentence's entries; values slightly above 1 occur when other sentences' entries have
    negative values; 0 means no entry near any of the keyword's tokens carries it.

    One instance may be shared by several threads (framework callbacks, ``batch``): forward
    passes are serialised by the encoder, and the token-class table and sentence cache are
    guarded by locks.

    Examples
    --------
    >>> from tokenshapley_rag import TokenShapley
    >>> ts = TokenShapley()  # doctest: +SKIP
    >>> res = ts.attribute(query="Where is the Eiffel Tower?",
    ...                    sources=["The Eiffel Tower is in Paris.", "Big Ben is in London."],
    ...                    response="It is in Paris.")  # doctest: +SKIP
    >>> [(c.text, c.best.source_id) for c in res.citations]  # doctest: +SKIP
    [('Paris', '0')]
    """

    def __init__(
        self,
        model: Any = None,
        tokenizer: Any = None,
        *,
        layer: int = DEFAULT_LAYER,
        k: int = 1,
        m: int = 10,
        gamma: float | str = "auto",
        match: str = "word",
        candidates: str = "mixed",
        context_weight: float = 1.0,
        context_scale: float = 16.0,
        verbatim: bool = True,
        support_threshold: float | None = None,
        device: str = "cpu",
        dtype: str | Any = "float32",
        cache_dir: str | os.PathLike | None = None,
        use_disk_cache: bool = True,
        max_sentence_tokens: int | None = None,
        max_source_chars: int | None = DEFAULT_MAX_SOURCE_CHARS,
        max_context_chars: int | None = DEFAULT_MAX_CONTEXT_CHARS,
    ) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidInputError(f"k must be an integer >= 1, got {k!r}")
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise InvalidInputError(f"m must be an integer >= 1, got {m!r}")
        if not (gamma == "auto" or (isinstance(gamma, (int, float)) and gamma > 0 and np.isfinite(gamma))):
            raise InvalidInputError(f"gamma must be 'auto' or a positive finite number, got {gamma!r}")
        if match not in _MATCH_MODES:
            raise InvalidInputError(f"match must be one of {_MATCH_MODES}, got {match!r}")
        if candidates not in _CANDIDATE_MODES:
            raise InvalidInputError(f"candidates must be one of {_CANDIDATE_MODES}, got {candidates!r}")
        for name, value in (("context_weight", context_weight), ("context_scale", context_scale)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
                raise InvalidInputError(f"{name} must be a finite number >= 0, got {value!r}")
        if context_scale == 0:
            raise InvalidInputError("context_scale must be > 0 (it is a distance in tokens)")
        self.context_weight, self.context_scale = float(context_weight), float(context_scale)
        if not isinstance(verbatim, bool):
            raise InvalidInputTypeError(f"verbatim must be a bool, got {type(verbatim).__name__}")
        self.verbatim = verbatim
        self.k, self.m, self.gamma = k, m, gamma
        self.match, self.candidates = match, candidates
        if support_threshold is not None and (
            isinstance(support_threshold, bool)
            or not isinstance(support_threshold, (int, float))
            or not np.isfinite(support_threshold)
        ):
            raise InvalidInputError(f"support_threshold must be a finite number or None, got {support_threshold!r}")
        self.support_threshold = None if support_threshold is None else float(support_threshold)
        if max_sentence_tokens is not None and (
            isinstance(max_sentence_tokens, bool) or not isinstance(max_sentence_tokens, int) or max_sentence_tokens < 1
        ):
            raise InvalidInputError(f"max_sentence_tokens must be a positive integer or None, got {max_sentence_tokens!r}")
        self.max_source_chars = check_limit(max_source_chars, "max_source_chars")
        self.max_context_chars = check_limit(max_context_chars, "max_context_chars")
        cache_root = default_cache_dir() if cache_dir is None else cache_dir
        self.loaded = load_causal_lm(model, tokenizer, cache_dir=cache_root, device=device, dtype=_torch_dtype(dtype))
        self.encoder = CausalLMEncoder(self.loaded, layer)
        # The model's dtype, read once (``model.dtype`` walks the parameters on every call).
        self._dtype_name = str(self.loaded.model.dtype).removeprefix("torch.")
        self.cache = SentenceCache(
            os.path.join(cache_root, "datastore") if use_disk_cache else None, width=self.loaded.hidden_size
        )
        limit = self.encoder.max_length - 1  # one position goes to the BOS that starts a sentence
        self.max_sentence_tokens = min(max_sentence_tokens or limit, limit)
        self._class_of_id: dict[int, int] = {}
        self._class_of_text: dict[str, int] = {}
        self._class_of_word: dict[tuple[int, str], int] = {}
        # Class ids are handed out as len(table): concurrent attribute() calls must not both
        # take the same id for two different texts (that would make unrelated tokens match).
        self._class_lock = threading.Lock()
        self._classes_of_sentence = _Memo(self.cache.memory_items)  # text -> (classes, pieces)
        self._facts_of_sentence = _Memo(self.cache.memory_items)  # text -> SentenceFacts
        self._splits_of_source = _Memo(self.cache.memory_items)  # source text -> sentence spans
        self._datastores = _Memo(_DATASTORE_MEMO_ITEMS)  # source texts -> Datastore

    @classmethod
    def from_pretrained(
        cls,
        model: Any = None,
        tokenizer: Any = None,
        *,
        layer: int = DEFAULT_LAYER,
        device: str = "cpu",
        dtype: str | Any = "float32",
        cache_dir: str | os.PathLike | None = None,
        **params: Any,
    ) -> TokenShapley:
        """Load an encoder model and build a :class:`TokenShapley` over it.

        The loading options come first (which model, its layer, device, dtype and cache);
        ``params`` are the method's parameters (``k``, ``m``, ``gamma``, ``match``,
        ``candidates``, ``context_weight``, ``context_scale``, ``verbatim``,
        ``support_threshold``, ``use_disk_cache``, ``max_sentence_tokens``,
        ``max_source_chars``, ``max_context_chars``), validated as the constructor does.

        Parameters
        ----------
        model : str, path, PreTrainedModel or None
            An alias (``"smollm2-135m-instruct"``, the default when None, or
            ``"gemma-3-270m"``), a local checkpoint folder or ``.gguf`` file, a hub id in
            the local cache, or a loaded causal LM (then pass its ``tokenizer``).
        tokenizer : tokenizer or None
            The fast tokenizer of a loaded ``model``.
        layer, device, dtype, cache_dir
            As in :class:`TokenShapley`.
        **params
            The method's parameters.

        Raises
        ------
        InvalidInputTypeError
            A keyword that is neither a loading option nor a method parameter.

        Examples
        --------
        >>> from tokenshapley_rag import TokenShapley
        >>> ts = TokenShapley.from_pretrained("smollm2-135m-instruct", layer=8, m=10)  # doctest: +SKIP
        >>> ts.config["m"]  # doctest: +SKIP
        10
        """
        # The method's parameters are the constructor's keywords that are not loading options.
        method = [p for p in inspect.signature(cls.__init__).parameters if p not in _LOADING_PARAMETERS]
        unknown = sorted(set(params) - set(method))
        if unknown:
            raise InvalidInputTypeError(
                f"from_pretrained() got unexpected keyword(s) {unknown}; expected loading options "
                f"(layer, device, dtype, cache_dir) or method parameters {method}"
            )
        return cls(model, tokenizer, layer=layer, device=device, dtype=dtype, cache_dir=cache_dir, **params)

    # ------------------------------------------------------------------ configuration

    @property
    def config(self) -> dict[str, Any]:
        return {
            "model": self.loaded.name,
            "fingerprint": self.loaded.fingerprint,
            "dtype": self._dtype_name,
            "layer": self.encoder.layer,
            "k": self.k,
            "m": self.m,
            "gamma": self.gamma,
            "match": self.match,
            "candidates": self.candidates,
            "context_weight": self.context_weight,
            "context_scale": self.context_scale,
            "verbatim": self.verbatim,
            "support_threshold": self.support_threshold,
            "max_sentence_tokens": self.max_sentence_tokens,
            "max_source_chars": self.max_source_chars,
            "max_context_chars": self.max_context_chars,
        }

    def _token_classes(self, ids: np.ndarray, text: str, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Map tokens to match classes: equal class <=> tokens "equal" under ``match``.

        Returns ``(classes, piece_classes)``: the second is each token's normalized text
        (what ``match="word_or_token"`` falls back to), equal to the first unless words
        are matched. ``text`` and ``offsets`` (the tokens' char offsets into it) give each
        token's word.
        """
        if self.match == "exact":
            exact = ids.astype(np.int64)
            return exact, exact
        words = token_words(text, offsets) if self.match in ("word", "word_or_token") else None
        pieces = []
        with self._class_lock:
            of_id = self._class_of_id
            for tid in ids.tolist():
                norm = of_id.get(tid)
                if norm is None:
                    piece = unicodedata.normalize("NFKC", self.loaded.tokenizer.decode([tid])).casefold().strip()
                    norm = self._class_of_text.setdefault(piece, len(self._class_of_text))
                    of_id[tid] = norm
                pieces.append(norm)
            if words is None:
                return np.array(pieces, dtype=np.int64), np.array(pieces, dtype=np.int64)
            of_word = self._class_of_word
            out = [
                of_word.setdefault((norm, word), len(of_word))
                for norm, word in zip(pieces, (unicodedata.normalize("NFKC", w) for w in words))
            ]
        return np.array(out, dtype=np.int64), np.array(pieces, dtype=np.int64)

    # ------------------------------------------------------------------ datastore

    def _sentences(
        self, sources: Sequence[Source]
    ) -> tuple[list[SentenceRecord], list[CachedSentence | None], list[TokenizedText | None]]:
        """Sentences of every source, each with its cache entry (None on a miss) and, for a
        miss, its tokenization (None for a piece, tokenized on its own when encoded).

        A sentence found in the cache is not tokenized again (the entry holds its tokens).
        Sentences longer than ``max_sentence_tokens`` are cut into consecutive pieces that
        fit, and each piece then acts as a sentence.
        """
        records: list[SentenceRecord] = []
        entries: list[CachedSentence | None] = []
        tokens: list[TokenizedText | None] = []
        limit = self.max_sentence_tokens
        key = self.encoder.cache_key
        for si, src in enumerate(sources):
            index = 0
            for start, end in self._split(src.text):
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

    def build_datastore(self, sources: Sequence[Any], *, progress: bool = False, cancel: Any = None) -> Datastore:
        """Encode (or load from cache) the keys of every sentence of ``sources``; with
        ``progress``, a progress bar of the tokens to encode on stderr. ``cancel`` (a
        :class:`threading.Event`) is checked after each forward pass of the encoder
        (:class:`~tokenshapley_rag.errors.AttributionCancelledError` when set). No size
        limit applies here: this also encodes whole corpora ahead of time."""
        srcs = coerce_sources(sources)
        records, entries, sentence_tokens = self._sentences(srcs)
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
                states = self.encoder.encode_before([t.ids for t in toks], on_tokens)
            finally:
                if bar is not None:
                    bar.close()
            for i, tok, st in zip(missing, toks, states):
                entry = CachedSentence(ids=tok.ids, offsets=tok.offsets, keys=storage_keys(st))
                self.cache.put(key, records[i].text, entry)
                entries[i] = entry
        done = [e for e in entries if e is not None]
        classes = [self._sentence_classes(r.text, e) for r, e in zip(records, done)]
        pieces = [p for _, p in classes] if self.match == "word_or_token" else None
        return Datastore(records, done, [c for c, _ in classes], pieces)

    def _split(self, text: str) -> list[tuple[int, int]]:
        """:func:`split_sentences` of a source, remembered for the last few thousand
        sources (retrieved chunks recur; splitting them was a third of a warm build)."""
        spans = self._splits_of_source.get(text)
        if spans is None:
            spans = split_sentences(text)
            self._splits_of_source.put(text, spans)
        return spans

    def _sentence_classes(self, text: str, entry: CachedSentence) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_token_classes` of a source sentence, remembered per text (a warm
        datastore would otherwise spend most of its build time here)."""
        classes = self._classes_of_sentence.get(text)
        if classes is None:
            classes = self._token_classes(entry.ids, text, entry.offsets)
            for array in classes:
                array.setflags(write=False)
            self._classes_of_sentence.put(text, classes)
        return classes

    def _sentence_facts(self, text: str) -> SentenceFacts:
        """:func:`sentence_facts` of a source sentence, remembered per text."""
        facts = self._facts_of_sentence.get(text)
        if facts is None:
            facts = sentence_facts(text)
            self._facts_of_sentence.put(text, facts)
        return facts

    def _datastore_for(self, sources: list[Source], cancel: Any = None) -> Datastore:
        """:meth:`build_datastore`, remembered for the last few source lists: the same
        retrieved chunks attributed again (another answer, a stream, a retry) skip the
        rebuild from the sentence cache, which at 16k context tokens costs more than the
        answer's encoder pass (docs/reports/performance.md). Datastores above
        ``_DATASTORE_MEMO_TOKENS`` entries are not kept (memory)."""
        key = tuple(s.text for s in sources)
        store = self._datastores.get(key)
        if store is None:
            store = self.build_datastore(sources, cancel=cancel)
            if store.size <= _DATASTORE_MEMO_TOKENS:
                self._datastores.put(key, store)
        return store

    def prepare(self, sources: Sequence[Any], *, progress: bool = False) -> None:
        """Encode and cache the sources' sentence keys ahead of :meth:`attribute`
        (``progress``: show a progress bar of the tokens to encode)."""
        self.build_datastore(sources, progress=progress)

    def check_context(self, sources: Sequence[Any]) -> list[Source]:
        """``sources`` as validated :class:`Source` objects, or the error :meth:`attribute`
        would raise for them, without encoding anything (a server can refuse a request
        before it takes a worker).

        Raises
        ------
        TextTooLongError
            A source is over ``max_source_chars``, or all of them over ``max_context_chars``.
        InvalidInputTypeError, EmptyTextError, DuplicateSourceIdError, InvalidTextError
            As :meth:`attribute`.
        """
        srcs = coerce_sources(sources)
        check_context_size([s.text for s in srcs], max_source_chars=self.max_source_chars,
                           max_context_chars=self.max_context_chars, ids=[s.id for s in srcs])
        return srcs

    # ------------------------------------------------------------------ attribution

    def attribute(
        self, query: str = "", sources: Sequence[Any] = (), response: str = "", *, cancel: Any = None
    ) -> AttributionResult:
        """Attribute every keyword of ``response`` to the sentences of ``sources``.

        Parameters
        ----------
        query : str
            The user's question ("" when there is none).
        sources : list of str, Source, mapping or object with id/text
            The retrieved chunks the answer was generated from.
        response : str
            The answer, from any generator.
        cancel : threading.Event, optional
            Checked at each checkpoint (after each forward pass over the sources, and
            between the steps below): once set, the call stops there with
            :class:`~tokenshapley_rag.errors.AttributionCancelledError`.

        Returns
        -------
        AttributionResult

        Raises
        ------
        TextTooLongError
            A source over ``max_source_chars``, the sources over ``max_context_chars``
            (checked before any work), or query + answer over the model's context.
        """
        check_text(query, "query")
        check_text(response, "response")
        check_cancel_event(cancel)
        if not response.strip():
            raise EmptyTextError("response is empty or only whitespace: there is nothing to attribute")
        srcs = self.check_context(sources)
        resp_tok = self.encoder.tokenize(response)
        # Query + answer over the model's context: refused before the sources are encoded.
        self.encoder._check_response_length(self.encoder.prompt_ids(query), len(resp_tok.ids))
        checkpoint(cancel, "starting")
        store = self._datastore_for(srcs, cancel)
        checkpoint(cancel, "encoding the answer")
        queries = self.encoder.encode_response(query, resp_tok)
        checkpoint(cancel, "scoring the answer")
        return self._result(query, response, srcs, store, resp_tok, queries)

    def stream(self, query: str = "", sources: Sequence[Any] = (), *, cancel: Any = None) -> AttributionStream:
        """Attribute an answer while it streams: citations of each sentence as soon as it ends.

        The sources' datastore is built here; :meth:`AttributionStream.feed` takes the
        answer's text deltas and returns the sentences they complete, each with its keyword
        citations, encoding only the new tokens (the query and earlier sentences stay in
        the encoder's past keys/values). :meth:`AttributionStream.finish` ends the answer;
        ``stream.result`` then equals ``attribute(query, sources, answer)`` (same
        citations, scores equal up to float rounding). The sources' size limits are those
        of :meth:`attribute`; ``cancel`` (a :class:`threading.Event`) stops the datastore's
        build and any later ``feed`` or ``finish`` at their next checkpoint.

        Examples
        --------
        >>> stream = ts.stream(query="Where is the Eiffel Tower?",
        ...                    sources=["The Eiffel Tower is in Paris.", "Big Ben is in London."])  # doctest: +SKIP
        >>> [c.text for s in stream.feed("It is in Paris. And ") for c in s.citations]  # doctest: +SKIP
        ['Paris']
        >>> tail = stream.finish(); stream.result.response  # doctest: +SKIP
        'It is in Paris. And '
        """
        from tokenshapley_rag._stream import AttributionStream

        return AttributionStream(self, query, sources, cancel=cancel)

    def _result(
        self, query: str, response: str, sources: list[Source], store: Datastore, resp: TokenizedText, states: np.ndarray
    ) -> AttributionResult:
        scores, carries, classes = self._token_sentence_scores(store, response, resp, states)
        return self._assemble(query, response, sources, store, resp, scores, carries, classes)

    def _token_sentence_scores(
        self, store: Datastore, response: str, resp: TokenizedText, queries: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(T, n_sentences) Shapley values summed per sentence, whether each sentence holds
        a token that matches each answer token, and the answer tokens' match classes."""
        n_tok = len(resp.ids)
        classes, piece_classes = self._token_classes(resp.ids, response, resp.offsets)
        if store.size == 0 or n_tok == 0:
            return np.zeros((n_tok, len(store.sentences))), np.zeros((n_tok, len(store.sentences)), dtype=bool), classes
        pieces = None
        game_classes = classes
        if self.match == "word_or_token":
            # A word that no source has is matched token by token (its sub-word pieces are
            # the only evidence a paraphrase or an inflection leaves).
            pieces = np.array([len(store.members_of_class(c)) == 0 for c in classes.tolist()], dtype=bool)
            game_classes = np.where(pieces, piece_classes, classes)
        m = min(self.m, store.size)
        n_match = m // 2 if self.candidates == "mixed" and m >= 2 else 0
        d2, idx, carries = store.game_candidates(queries, game_classes, m, n_match, pieces)
        return _sentence_values(d2, idx, game_classes, store, self.k, self.gamma, pieces), carries, classes

    def _assemble(
        self,
        query: str,
        response: str,
        sources: list[Source],
        store: Datastore,
        resp: TokenizedText,
        scores: np.ndarray,
        carries: np.ndarray,
        classes: np.ndarray,
    ) -> AttributionResult:
        keywords = find_keywords(response)
        token_kw = _assign_tokens(resp.offsets, keywords)
        answer_spans = split_sentences(response)
        answer_sentence = _assign_sentences(resp.offsets, answer_spans)
        n_sent = len(store.sentences)
        sentence_source = np.array([r.source_index for r in store.sentences], dtype=np.int64)
        # Each keyword's tokens: token_kw grouped by keyword (ascending token order within).
        by_kw = np.argsort(token_kw, kind="stable")
        bounds = np.searchsorted(token_kw[by_kw], np.arange(len(keywords) + 1))
        cited = [
            (kw, by_kw[bounds[ki] : bounds[ki + 1]])
            for ki, kw in enumerate(keywords)
            if kw.citable and bounds[ki + 1] > bounds[ki]
        ]
        # The match rule on facts (docs/method.md §8): which sentences hold each keyword's
        # value (numbers by value, dates by their parts, names by their words, other words
        # by stem).
        facts = [self._sentence_facts(r.text) for r in store.sentences]
        # Support is checked per document: chunks cut from one document back each other.
        source_document = np.asarray(document_index(sources), dtype=np.int64)
        sentence_document = source_document[sentence_source]
        retyped = {r for r, (kw, _) in enumerate(cited) if kw.kind == "word" and is_name(kw.text, facts)}
        cited = [(Keyword(kw.start, kw.end, kw.text, "name") if r in retyped else kw, m) for r, (kw, m) in enumerate(cited)]
        kfacts = [keyword_facts(kw.text, kw.kind) for kw, _ in cited]
        held = (
            np.array([holding_mask(kf, facts, sentence_document) for kf in kfacts], dtype=bool).reshape(len(cited), n_sent)
        )
        # Ranked by each keyword's game in its answer context; support is judged on the
        # keyword's own tokens only, so context cannot make an invented keyword supported.
        verbatim = sentence_texts = None
        if self.verbatim and n_sent and cited:
            sentence_texts = SentenceTexts.of([r.text for r in store.sentences])
            verbatim = store.sentences_with_sequences([classes[members] for _, members in cited])
            verbatim |= sentence_texts.holding_many([kw.text for kw, _ in cited])
            for r, (kw, _) in enumerate(cited):
                # A number, date or name plays among the sentences holding its value: the
                # verbatim holders among them when any, else all of them.
                if kw.kind in VALUE_KINDS and held[r].any():
                    both = verbatim[r] & held[r]
                    verbatim[r] = both if both.any() else held[r]
        per_sentence, own, holds = span_games(
            scores, carries, sentence_source, answer_sentence, [members for _, members in cited],
            self.context_weight, self.context_scale, verbatim,
            None if verbatim is None else [
                None if found else span_words(response, resp.offsets, kw.start, kw.end)
                for found, (kw, _) in zip(verbatim.any(axis=1).tolist(), cited)
            ],
        )
        # The predicate game stays inside the keyword's clause: a semicolon joins two claims
        # that may come from two sources ("X is 330 metres tall; Big Ben dates from 1859").
        clause_starts = [i + 1 for i, ch in enumerate(response) if ch == ";"]
        answer_clause = answer_sentence * (len(clause_starts) + 1) + np.searchsorted(
            np.asarray(clause_starts, dtype=np.int64), resp.offsets[:, 0], side="right"
        ) if clause_starts else answer_sentence
        statuses, allowed, rivals = self._statuses(
            cited, kfacts, held, scores, answer_sentence, answer_spans, response, sentence_document, facts,
            int(source_document.max()) + 1, retyped, answer_clause,
        )
        # A keyword is ranked among the sources it may be cited by (a source's score sums
        # all its sentences, as in span_scores), quoted by a sentence that holds it.
        citable = np.zeros((len(cited), len(sources)), dtype=bool)
        rows, cols = np.nonzero(allowed)
        citable[rows, sentence_source[cols]] = True
        ranked = _rank_sources(
            sources, store.sentences, sentence_source, np.where(citable[:, sentence_source], per_sentence, -np.inf),
            holds & allowed, [kw for kw, _ in cited],
        )
        citations: list[KeywordCitation] = []
        for r, (kw, members) in enumerate(cited):
            status = statuses[r]
            support = float(own[r][allowed[r]].max()) / len(members) if allowed[r].any() else 0.0
            if status == "supported" and self.support_threshold is not None and support <= self.support_threshold:
                status = "unsupported"
            cited_by: tuple[SourceAttribution, ...] = ()
            if status == "supported":
                cited_by = ranked[r] or _fallback_citation(sources, store.sentences, own[r], allowed[r], kw)
            conflict = (
                _source_attribution(sources, store.sentences[rivals[r]], 0.0) if rivals[r] >= 0 else None
            )
            citations.append(
                KeywordCitation(
                    text=kw.text,
                    start=kw.start,
                    end=kw.end,
                    sources=cited_by,
                    supported=status == "supported",
                    support=support,
                    status=status,
                    kind=kw.kind,
                    conflict=conflict,
                )
            )
        verdicts = _sentence_verdicts(response, answer_spans, citations)
        totals = scores.sum(axis=0) if n_sent else np.zeros(0)
        keyword_totals = np.where(np.isfinite(per_sentence), per_sentence, 0.0).sum(axis=0) if n_sent else totals
        source_scores = {s.id: 0.0 for s in sources}
        sentence_scores = []
        for rec, total, keyword_total in zip(store.sentences, totals.tolist(), keyword_totals.tolist()):
            sid = sources[rec.source_index].id
            source_scores[sid] += total
            sentence_scores.append(SentenceScore(sid, rec.sentence_index, rec.text, rec.start, rec.end, total, keyword_total))
        tokens = TokenScores(
            texts=[response[a:b] for a, b in resp.offsets.tolist()],
            offsets=resp.offsets.copy(),
            scores=scores,
            keyword=token_kw,
            answer_sentence=answer_sentence,
            carries=carries,
            sentence_source=sentence_source,
            classes=classes,
            context_classes=store.token_class,
            context_sentence=store.sentence_of,
        )
        result = AttributionResult(
            query=query,
            response=response,
            sources=sources,
            citations=citations,
            source_scores=source_scores,
            sentence_scores=sentence_scores,
            tokens=tokens,
            config=self.config,
            sentences=verdicts,
        )
        if sentence_texts is not None:
            result.__dict__["_sentence_texts"] = sentence_texts  # span_scores' cache: the same sentences
        return result


    def _statuses(
        self,
        cited: list[tuple[Keyword, np.ndarray]],
        kfacts: list[Any],
        held: np.ndarray,
        scores: np.ndarray,
        answer_sentence: np.ndarray,
        answer_spans: list[tuple[int, int]],
        response: str,
        sentence_document: np.ndarray,
        facts: list[SentenceFacts],
        n_documents: int,
        retyped: Collection[int] = (),
        answer_clause: np.ndarray | None = None,
    ) -> tuple[list[str], np.ndarray, list[int]]:
        """Each keyword's status, the sentences it may be cited by, and its conflicting
        sentence (-1: none): :func:`keyword_status` with the predicate game's values.
        ``retyped``: the keywords that open their sentence and are names only because a
        source spells them as one (no context agreement check for them). ``answer_clause``:
        each answer token's clause (sentences cut at semicolons; default: its sentence), the
        span of the predicate game. ``sentence_document``: each sentence's document (chunks
        of one document are one source here: the anchor and the holding sources are
        documents)."""
        n_kw, n_sent = held.shape
        if n_kw == 0:
            return [], held.copy(), []
        if n_sent == 0:
            return ["unsupported"] * n_kw, held.copy(), [-1] * n_kw
        # The predicate game: the context game of each keyword's answer sentence over the
        # tokens of no number, date or name keyword (what is said of the subject), whose
        # exact Shapley values are `weights @ scores` (linearity).
        clause = answer_sentence if answer_clause is None else answer_clause
        weights = _context_weight_rows(clause, [m for _, m in cited], 1.0, self.context_scale)
        value_tokens = np.concatenate(
            [m for kw, m in cited if kw.kind in VALUE_KINDS] or [np.zeros(0, dtype=np.int64)]
        )
        weights[:, value_tokens] = 0.0
        for r, (_, members) in enumerate(cited):
            weights[r, members] = 0.0
        predicate = weights @ scores
        # The claim's anchor: the sources that hold the most of the answer sentence's other
        # numbers, dates and names, its subject (first name) counting twice.
        kw_sentence = [int(answer_sentence[m[0]]) for _, m in cited]
        subject: dict[int, int] = {}
        for r, (kw, _) in enumerate(cited):
            if kw.kind == "name":
                subject.setdefault(kw_sentence[r], r)
        held_by_source = np.zeros((n_kw, n_documents), dtype=bool)
        rows, cols = np.nonzero(held)
        held_by_source[rows, sentence_document[cols]] = True
        answer_facts = {i: sentence_facts(response[a:b]) for i, (a, b) in enumerate(answer_spans)}
        statuses: list[str] = []
        allowed = np.zeros_like(held)
        rivals: list[int] = []
        # Items of one list ("A, B and C") are alternatives an answer may take from
        # different sources: they are not each other's anchor.
        group = list(range(n_kw))
        for r in range(1, n_kw):
            a, b = cited[r - 1][0], cited[r][0]
            if a.kind == b.kind and a.kind in VALUE_KINDS and _LIST_JOINER.fullmatch(response[a.end : b.start]):
                group[r] = group[r - 1]
        for r in range(n_kw):
            others = [
                o for o in range(n_kw)
                if group[o] != group[r] and kw_sentence[o] == kw_sentence[r] and cited[o][0].kind in VALUE_KINDS
                and held_by_source[o].any()
            ]
            subject_sources = None
            the_subject = subject.get(kw_sentence[r])
            if the_subject is not None and the_subject != r and held_by_source[the_subject].any():
                subject_sources = held_by_source[the_subject]  # a value is checked against the subject
            elif the_subject == r and others:
                # The subject is checked against the sources holding the most of the rest.
                agreement = held_by_source[others].sum(axis=0)
                subject_sources = agreement == agreement.max()
            status, ok, rival = keyword_status(
                kfacts[r], held[r], subject_sources, predicate[r], sentence_document, facts,
                answer_facts.get(kw_sentence[r]) or sentence_facts(""),
                1.0 / PREDICATE_TOLERANCE if subject.get(kw_sentence[r]) == r else PREDICATE_TOLERANCE,
                None if r in retyped else PREDICATE_AGREEMENT,
                float(weights[r].sum()),
            )
            statuses.append(status)
            allowed[r] = ok
            rivals.append(rival)
        return statuses, allowed, rivals


_LIST_JOINER = re.compile(r"\s*(?:,|;|&|,?\s*(?:and|or))\s*(?:(?:the|a|an)\s+)?", re.IGNORECASE)


def _fallback_citation(
    sources: list[Source], records: list[SentenceRecord], own: np.ndarray, allowed: np.ndarray, keyword: Keyword
) -> tuple[SourceAttribution, ...]:
    """A supported keyword whose game gives no source a positive score is cited by the
    holding sentence with the best own score (it holds the keyword's value)."""
    j = int(np.flatnonzero(allowed)[np.argmax(own[allowed])])
    return (_source_attribution(sources, records[j], float(own[j]), keyword),)


def _sentence_verdicts(
    response: str, spans: list[tuple[int, int]], citations: list[KeywordCitation]
) -> list[SentenceVerdict]:
    """Each answer sentence's verdict from its keywords (:func:`sentence_verdict`) and its
    score: the mean over its keywords of 0.5 + 0.5 * clip(support, 0, 1) when supported,
    0 when unsupported and -1 when contradicted (1.0 for a sentence with no keyword)."""
    out = []
    for i, (a, b) in enumerate(spans):
        inside = [c for c in citations if a <= c.start < b]
        values = [
            0.5 + 0.5 * min(max(c.support, 0.0), 1.0) if c.status == "supported" else (-1.0 if c.status == "contradicted" else 0.0)
            for c in inside
        ]
        out.append(
            SentenceVerdict(
                index=i,
                start=a,
                end=b,
                text=response[a:b],
                verdict=sentence_verdict([c.status for c in inside]),
                score=float(np.mean(values)) if values else 1.0,
                n_keywords=len(inside),
            )
        )
    return out


_DTYPES = ("float32", "bfloat16", "float16")


def _torch_dtype(dtype: Any) -> Any:
    """``dtype`` as a torch.dtype (a name from :data:`_DTYPES` or a torch.dtype)."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and dtype in _DTYPES:
        return getattr(torch, dtype)
    raise InvalidInputError(f"dtype must be one of {_DTYPES} or a torch.dtype, got {dtype!r}")


def _rank_sources(
    sources: list[Source],
    records: list[SentenceRecord],
    sentence_source: np.ndarray,
    per_sentence: np.ndarray,
    holds: np.ndarray,
    keywords: Sequence[Keyword] | None = None,
) -> list[tuple[SourceAttribution, ...]]:
    """Each keyword's sources, best first (one row of ``per_sentence`` and ``holds`` per
    keyword): each candidate source scores the sum of its sentences' values (what
    :meth:`AttributionResult.span_scores` gives it) and is listed when that is positive,
    with the sentence it is cited by: its best-scoring sentence among those that hold the
    keyword (``holds``), so the quoted sentence contains the keyword whenever the source
    does; its best sentence otherwise."""
    n_kw, n_sent = per_sentence.shape
    if n_sent == 0:
        return [()] * n_kw
    # Columns grouped by source (stable: each source's sentences in their order), so that
    # every per-source sum, any and argmax is one reduction over runs of columns.
    by_source = np.argsort(sentence_source, kind="stable")
    src_sorted = sentence_source[by_source]
    new_run = np.ones(n_sent, dtype=bool)
    new_run[1:] = src_sorted[1:] != src_sorted[:-1]
    first = np.flatnonzero(new_run)
    present = src_sorted[first]  # sources that have sentences
    run = np.cumsum(new_run) - 1  # each sorted column's run
    values = per_sentence[:, by_source]
    ok = np.isfinite(values)
    totals = np.zeros((n_kw, len(sources)))  # a source that is no candidate stays at 0: never listed
    totals[:, present] = np.add.reduceat(np.where(ok, values, 0.0), first, axis=1)
    held = holds[:, by_source] & ok
    pool = np.where(np.logical_or.reduceat(held, first, axis=1)[:, run], held, ok)
    # Each run's best column, the first of equals (np.argmax's rule): the lowest position
    # holding the run's maximum.
    key = np.where(pool, values, -np.inf)
    best = key == np.maximum.reduceat(key, first, axis=1)[:, run]
    position = np.where(best, np.arange(n_sent)[None, :], n_sent)
    cited_by = np.zeros((n_kw, len(sources)), dtype=np.int64)
    cited_by[:, present] = by_source[np.minimum.reduceat(position, first, axis=1)]
    # Best first (ties: source order); the positive totals lead each row of that order.
    order = np.argsort(-totals, axis=1, kind="stable").tolist()
    n_listed = (totals > 0).sum(axis=1).tolist()
    totals_of, cited_of = totals.tolist(), cited_by.tolist()
    return [
        tuple(
            _source_attribution(sources, records[cited_of[r][src]], totals_of[r][src], keywords[r] if keywords else None)
            for src in order[r][: n_listed[r]]
        )
        for r in range(n_kw)
    ]


def _source_attribution(
    sources: list[Source], rec: SentenceRecord, score: float, keyword: Keyword | None = None
) -> SourceAttribution:
    """The citation of one source sentence, named for a reader, with the keyword's own
    range in the source text when the sentence holds it."""
    src = sources[rec.source_index]
    at = locate_keyword(keyword.text, keyword.kind, rec.text) if keyword is not None else None
    return SourceAttribution(
        source_id=src.id,
        score=score,
        sentence=rec.text,
        sentence_start=rec.start,
        sentence_end=rec.end,
        sentence_index=rec.sentence_index,
        display_name=display_name(src.id, src.metadata),
        page=page_of(src.metadata),
        keyword_start=None if at is None else rec.start + at[0],
        keyword_end=None if at is None else rec.start + at[1],
    )


def _assign_tokens(offsets: np.ndarray, keywords: list[Keyword]) -> np.ndarray:
    """Index of the keyword each token overlaps most (-1: punctuation or space only)."""
    out = np.full(len(offsets), -1, dtype=np.int64)
    if not keywords or not len(offsets):
        return out
    starts = np.array([k.start for k in keywords])
    ends = np.array([k.end for k in keywords])
    overlap = np.minimum(ends[None, :], offsets[:, 1:2]) - np.maximum(starts[None, :], offsets[:, 0:1])
    best = np.argmax(overlap, axis=1)
    ok = (offsets[:, 1] > offsets[:, 0]) & (overlap[np.arange(len(offsets)), best] > 0)
    out[ok] = best[ok]
    return out


def _assign_sentences(offsets: np.ndarray, sentences: list[tuple[int, int]]) -> np.ndarray:
    """Index of the answer sentence each token belongs to: the last sentence starting at
    or before the token's last character (a token's leading space can precede its
    sentence's start)."""
    starts = np.array([a for a, _ in sentences] or [0])
    last_char = np.maximum(offsets[:, 1] - 1, offsets[:, 0])
    return np.maximum(np.searchsorted(starts, last_char, side="right") - 1, 0).astype(np.int64)


def _sentence_values(
    d2: np.ndarray, idx: np.ndarray, classes: np.ndarray, store: Datastore, k: int, gamma: float | str,
    pieces: np.ndarray | None = None,
) -> np.ndarray:
    """``(T, n_sentences)``: each answer token's exact Shapley values summed per sentence.

    ``d2``, ``idx``: the players' squared distances and entries, nearest first
    (:meth:`Datastore.game_candidates`). Similarities ``exp(-gamma * (d2 - d2_nearest))``,
    with ``gamma = 1 / median(d2)`` per token for "auto" (so that a token's values do not
    depend on the rest of the answer, which lets a streamed sentence be attributed before
    the answer ends); a player matches when its entry carries the token's class (its
    piece class where ``pieces``). One compiled pass per token; the numpy spelling is the
    oracle in tests/test_game_candidates.py.
    """
    n_tok, m = d2.shape
    out = np.zeros((n_tok, len(store.sentences)))
    if not n_tok or not m:
        return out
    use_piece = np.zeros(n_tok, dtype=bool) if pieces is None else np.ascontiguousarray(pieces, dtype=bool)
    work = n_tok * m * math.comb(m, min(k, m) - 1)
    rows = _sentence_value_rows if work >= _PARALLEL_WORK else _sentence_value_rows_serial
    rows(np.ascontiguousarray(d2), np.ascontiguousarray(idx, dtype=np.int64), np.ascontiguousarray(classes, dtype=np.int64),
         use_piece, store.token_class, store.piece_class, store.sentence_of, int(k), gamma == "auto",
         1.0 if gamma == "auto" else float(gamma), out)
    return out


@numba.njit(cache=True, nogil=True)
def _sentence_value_row(d2, idx, cls, classes, sentence_of, k, auto, gamma, out):
    m = d2.shape[0]
    if m == 0:
        return
    g = gamma
    if auto:
        # The row is sorted (nearest first): its median is its middle, as np.median gives
        # it (the mean of the two middle values for an even m).
        mid = m // 2
        med = np.float64(d2[mid]) if m % 2 else (np.float64(d2[mid - 1]) + np.float64(d2[mid])) / 2
        g = 1.0 / med if med > 0 else 1.0
    nearest = np.float64(d2[0])
    sims = np.empty(m)
    matches = np.empty(m, dtype=np.bool_)
    phi = np.empty(m)
    for j in range(m):
        sims[j] = np.exp(-g * (np.float64(d2[j]) - nearest))
        matches[j] = classes[idx[j]] == cls
    _shapley_row(sims, matches, k, True, phi)
    for j in range(m):
        out[sentence_of[idx[j]]] += phi[j]


@numba.njit(cache=True, parallel=True, nogil=True)
def _sentence_value_rows(d2, idx, game_classes, use_piece, token_class, piece_class, sentence_of, k, auto, gamma, out):
    for t in numba.prange(d2.shape[0]):
        classes = piece_class if use_piece[t] else token_class
        _sentence_value_row(d2[t], idx[t], game_classes[t], classes, sentence_of, k, auto, gamma, out[t])


@numba.njit(cache=True, nogil=True)
def _sentence_value_rows_serial(d2, idx, game_classes, use_piece, token_class, piece_class, sentence_of, k, auto, gamma, out):
    for t in range(d2.shape[0]):
        classes = piece_class if use_piece[t] else token_class
        _sentence_value_row(d2[t], idx[t], game_classes[t], classes, sentence_of, k, auto, gamma, out[t])
