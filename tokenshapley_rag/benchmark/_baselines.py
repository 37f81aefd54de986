"""Span attribution baselines behind one protocol, :class:`SpanAttributor`.

A span attributor scores, for every gold keyword span of an
:class:`~tokenshapley_rag.benchmark.AttributionExample`, how likely each source is the one the
span came from. The evaluation runner (``tokenshapley_rag.benchmark.run_span_eval``) takes the
argmax per span (ties -> first source) and compares it with the gold source.

Baselines here: :class:`LexicalAttributor` (exact substring first, then IDF-weighted word
overlap), :class:`ExactMatchAttributor` (verbatim substring only) and
:class:`RandomAttributor`. Each also implements the sentence-level protocol
(:class:`~tokenshapley_rag.benchmark._sentences.SentenceAttributor`: ``score_sentences(query,
sources, response, sentences)``) used by NQ, CNN/DM and WiCE. The model-based baselines
(HidSim, EmbSim, ContextCite) live in :mod:`tokenshapley_rag.benchmark._model_baselines`;
:func:`make_baseline` builds any of them by name.

Words are lowercase ``\\w+`` tokens (Python ``re`` with Unicode ``\\w``): ``"Hot-in Herre's"``
gives ``["hot", "in", "herre", "s"]``.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from numbers import Integral
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tokenshapley_rag._types import Source
from tokenshapley_rag.benchmark._data import AttributionExample
from tokenshapley_rag.benchmark._sentences import SentenceScores, SentenceUnit
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError

__all__ = [
    "BASELINE_NAMES",
    "MODEL_BASELINE_NAMES",
    "ExactMatchAttributor",
    "LexicalAttributor",
    "RandomAttributor",
    "SpanAttributor",
    "longest_common_run",
    "make_baseline",
    "words",
]

#: Model-free baselines (cheap; no model is loaded).
BASELINE_NAMES: tuple[str, ...] = ("lexical", "exact", "random")
#: Model-based baselines of :mod:`tokenshapley_rag.benchmark._model_baselines` (load a model when built).
MODEL_BASELINE_NAMES: tuple[str, ...] = ("hidsim", "embsim", "contextcite")

_WORD = re.compile(r"\w+")


@runtime_checkable
class SpanAttributor(Protocol):
    """Anything that scores each gold span of an example against each of its sources.

    Attributes
    ----------
    name : str
        Method name used in reports (``"lexical"``, ``"tokenshapley"``, ...).

    Methods
    -------
    score_spans(example) -> ndarray of shape (n_spans, n_sources), dtype float64
        Row i scores ``example.spans[i]`` against ``example.sources`` in the order given;
        higher = more likely the source. Must be finite. A method must not read
        ``span.source_ids`` (the gold answer).

    Examples
    --------
    >>> isinstance(LexicalAttributor(), SpanAttributor)
    True
    """

    name: str

    def score_spans(self, example: AttributionExample) -> np.ndarray:
        """Scores of shape (n_spans, n_sources), higher = more likely the source."""
        ...


def words(text: str) -> list[str]:
    """Lowercase ``\\w+`` tokens of ``text``, in order.

    Examples
    --------
    >>> words("Hot-in Herre's 2002 hit")
    ['hot', 'in', 'herre', 's', '2002', 'hit']
    """
    return _WORD.findall(text.lower())


def _check_example(example: AttributionExample) -> None:
    if not isinstance(example, AttributionExample):
        raise InvalidInputTypeError(
            f"example must be an AttributionExample, got {type(example).__name__}"
        )
    if len(example.sources) == 0:
        raise InvalidInputError(f"example {example.id!r} has no sources")


def _contains(hay: str, needle: str, case_sensitive: bool) -> bool:
    return needle in hay if case_sensitive else needle.lower() in hay.lower()


def _idf_overlap(query_words: list[str], docs: list[frozenset[str]]) -> np.ndarray:
    """IDF-weighted share of ``query_words`` (distinct) found in each doc, IDF over ``docs``."""
    n = len(docs)
    df = Counter(w for ws in docs for w in ws)
    qw = list(dict.fromkeys(query_words))
    weights = {w: math.log((1 + n) / (1 + df.get(w, 0))) + 1.0 for w in qw}
    total = sum(weights.values())
    out = np.zeros(n, dtype=np.float64)
    if total:
        for j, ws in enumerate(docs):
            out[j] = sum(weights[w] for w in qw if w in ws) / total
    return out


def longest_common_run(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest run of consecutive items shared by ``a`` and ``b``.

    Examples
    --------
    >>> longest_common_run(["the", "tower", "is", "tall"], ["a", "tower", "is", "old"])
    2
    """
    best = 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, start=1):
            if x == y:
                cur[j] = prev[j - 1] + 1
                best = max(best, cur[j])
        prev = cur
    return best


@dataclass(frozen=True, slots=True)
class LexicalAttributor:
    """Exact substring match first, then IDF-weighted word overlap.

    For span ``s`` and source ``j``::

        score[s, j] = 2 * verbatim(s, j) + overlap(s, j)
        overlap(s, j) = sum(idf[w] for w in W(s) if w in W(j)) / sum(idf[w] for w in W(s))

    ``verbatim`` is 1 when the span text is a substring of ``Source.text`` (case-insensitive
    by default), else 0. ``W(x)`` is the SET of lowercase ``\\w+`` words of ``x`` (each
    distinct span word counts once), ``overlap`` is in [0, 1] (0 for a span without
    words), so a source containing the span verbatim (score >= 2) always outranks one
    that does not (score <= 1).

    IDF is computed over the example's own sources (each source is one document):
    ``idf[w] = ln((1 + N) / (1 + df[w])) + 1`` with N the number of sources and ``df[w]``
    the number of sources containing word w (smoothed as in scikit-learn's
    ``TfidfVectorizer(smooth_idf=True)``, so a word in every source still counts).

    Parameters
    ----------
    case_sensitive : bool, default=False
        Case sensitivity of the verbatim test (words are always lowercased).

    Examples
    --------
    >>> from tokenshapley_rag._types import Source
    >>> from tokenshapley_rag.benchmark import AttributionExample, GoldSpan
    >>> srcs = (Source("a", "The quick brown fox."), Source("b", "A brown quick fox."))
    >>> span = GoldSpan(0, 15, "quick brown fox", ("a",))
    >>> ex = AttributionExample("t", "", srcs, "quick brown fox", (span,), (), {})
    >>> LexicalAttributor().score_spans(ex).round(3).tolist()
    [[3.0, 1.0]]
    """

    case_sensitive: bool = False
    name: str = field(default="lexical", init=False)

    def score_spans(self, example: AttributionExample) -> np.ndarray:
        """Scores of shape (n_spans, n_sources), dtype float64 (see the class docstring)."""
        _check_example(example)
        src_words = [frozenset(words(s.text)) for s in example.sources]
        n = len(src_words)
        df = Counter(w for ws in src_words for w in ws)
        out = np.zeros((len(example.spans), n), dtype=np.float64)
        for i, span in enumerate(example.spans):
            span_words = list(dict.fromkeys(words(span.text)))
            weights = {w: math.log((1 + n) / (1 + df.get(w, 0))) + 1.0 for w in span_words}
            total = sum(weights.values())
            for j, (src, ws) in enumerate(zip(example.sources, src_words)):
                overlap = sum(weights[w] for w in span_words if w in ws) / total if total else 0.0
                exact = 2.0 if _contains(src.text, span.text, self.case_sensitive) else 0.0
                out[i, j] = exact + overlap
        return out

    def score_sentences(
        self, query: str, sources: Sequence[Source], response: str, sentences: Sequence[SentenceUnit]
    ) -> SentenceScores:
        """Per candidate sentence: ``2 * verbatim(response) + overlap(response words)``.

        The same rule as for spans with the whole response as the span and the candidate
        sentences as the documents (IDF over the candidates).
        """
        docs = [frozenset(words(u.text)) for u in sentences]
        overlap = _idf_overlap(words(response), docs)
        exact = np.array([2.0 if _contains(u.text, response, self.case_sensitive) else 0.0 for u in sentences])
        return SentenceScores(exact + overlap if len(sentences) else np.zeros(0))


@dataclass(frozen=True, slots=True)
class ExactMatchAttributor:
    """1.0 for a source whose text contains the span verbatim, else 0.0.

    Parameters
    ----------
    case_sensitive : bool, default=False

    Examples
    --------
    >>> from tokenshapley_rag._types import Source
    >>> from tokenshapley_rag.benchmark import AttributionExample, GoldSpan
    >>> ex = AttributionExample("t", "", (Source("a", "Red apple"), Source("b", "red APPLE pie")),
    ...                         "red apple", (GoldSpan(0, 9, "red apple", ("a",)),), (), {})
    >>> ExactMatchAttributor().score_spans(ex).tolist()
    [[1.0, 1.0]]
    >>> ExactMatchAttributor(case_sensitive=True).score_spans(ex).tolist()
    [[0.0, 0.0]]
    """

    case_sensitive: bool = False
    name: str = field(default="exact", init=False)

    def score_spans(self, example: AttributionExample) -> np.ndarray:
        """Scores of shape (n_spans, n_sources), dtype float64, values in {0, 1}."""
        _check_example(example)
        return np.array(
            [
                [1.0 if _contains(s.text, span.text, self.case_sensitive) else 0.0 for s in example.sources]
                for span in example.spans
            ],
            dtype=np.float64,
        ).reshape(len(example.spans), len(example.sources))

    def score_sentences(
        self, query: str, sources: Sequence[Source], response: str, sentences: Sequence[SentenceUnit]
    ) -> SentenceScores:
        """Per candidate sentence: the longest run of consecutive response words it contains.

        The sentence-level analogue of "verbatim substring": words are lowercase ``\\w+``
        tokens (case-sensitive words with ``case_sensitive=True``), and the score is the
        length in words of the longest word sequence shared by the response and the
        sentence (0 when they share no word).
        """
        split = (lambda t: re.findall(r"\w+", t)) if self.case_sensitive else words
        resp = split(response)
        return SentenceScores(np.array([float(longest_common_run(resp, split(u.text))) for u in sentences]))


def _key(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")


@dataclass(frozen=True, slots=True)
class RandomAttributor:
    """Uniform random scores in [0, 1): the chance baseline.

    Parameters
    ----------
    seed : int or numpy.random.Generator, default=0
        With an int, the scores of an example depend only on (seed, example id, source
        order), so they are the same in any run order, after a resume and under
        ``--limit``. With a Generator, scores are drawn from it in call order.

    Examples
    --------
    >>> from tokenshapley_rag._types import Source
    >>> from tokenshapley_rag.benchmark import AttributionExample, GoldSpan
    >>> ex = AttributionExample("t", "", (Source("a", "x"), Source("b", "y")), "x",
    ...                         (GoldSpan(0, 1, "x", ("a",)),), (), {})
    >>> a = RandomAttributor(seed=7).score_spans(ex)
    >>> a.shape, bool((a == RandomAttributor(seed=7).score_spans(ex)).all())
    ((1, 2), True)
    """

    seed: int | np.random.Generator = 0
    name: str = field(default="random", init=False)

    def __post_init__(self) -> None:
        if isinstance(self.seed, np.random.Generator):
            return
        if isinstance(self.seed, bool) or not isinstance(self.seed, Integral) or self.seed < 0:
            raise InvalidInputError(
                f"seed must be a non-negative int or a numpy.random.Generator, got {self.seed!r}"
            )

    def score_spans(self, example: AttributionExample) -> np.ndarray:
        """Scores of shape (n_spans, n_sources), dtype float64, uniform in [0, 1)."""
        _check_example(example)
        if isinstance(self.seed, np.random.Generator):
            rng = self.seed
        else:
            order = "\x1f".join(example.source_ids)
            rng = np.random.default_rng([int(self.seed), _key(example.id), _key(order)])
        return rng.random((len(example.spans), len(example.sources)))

    def score_sentences(
        self, query: str, sources: Sequence[Source], response: str, sentences: Sequence[SentenceUnit]
    ) -> SentenceScores:
        """Uniform [0, 1) per sentence; with an int seed they depend only on (seed,
        response, candidate list)."""
        if isinstance(self.seed, np.random.Generator):
            rng = self.seed
        else:
            cands = "\x1f".join(f"{u.source_id}:{u.start}:{u.end}" for u in sentences)
            rng = np.random.default_rng([int(self.seed), _key(response), _key(cands)])
        return SentenceScores(rng.random(len(sentences)))


def make_baseline(name: str, *, seed: int = 0, beta: int = 8, loaded: Any = None) -> SpanAttributor:
    """Build a baseline by name.

    Parameters
    ----------
    name : {"lexical", "exact", "random", "hidsim", "embsim", "contextcite"}
    seed : int, default=0
        Used by ``"random"`` only.
    beta : int, default=8
        Number of ablations of ``"contextcite"``.
    loaded : LoadedModel, ResponseLM or None
        The causal LM of ``"hidsim"`` and ``"contextcite"`` (None loads the default
        SmolLM2). ``"embsim"`` always uses the bundled all-MiniLM-L6-v2.

    Examples
    --------
    >>> make_baseline("exact").name
    'exact'
    """
    if name == "lexical":
        return LexicalAttributor()
    if name == "exact":
        return ExactMatchAttributor()
    if name == "random":
        return RandomAttributor(seed=seed)
    if name in MODEL_BASELINE_NAMES:
        from tokenshapley_rag.benchmark import _model_baselines as mb

        if name == "hidsim":
            return mb.HidSimAttributor(loaded)
        if name == "embsim":
            return mb.EmbSimAttributor()
        return mb.ContextCiteAttributor(loaded, beta=beta)
    raise InvalidInputError(
        f"unknown baseline {name!r}; expected one of {list(BASELINE_NAMES + MODEL_BASELINE_NAMES)}"
    )
