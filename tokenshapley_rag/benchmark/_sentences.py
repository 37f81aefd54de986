"""Sentence-level attribution: candidate sentences, the attributor protocol, ablation.

NQ, CNN/DailyMail and WiCE are scored on *sentences* of the context, not on keyword spans.
Every method ranks the same candidates, :func:`sentence_units` of the sources, through one
protocol, :class:`SentenceAttributor`. The CNN/DM protocol removes the top-ranked sentences
with :func:`ablate_sentences` and measures how much the response's log-probability drops.

Everything here is pure (no model, no I/O).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from numbers import Integral
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tokenshapley_rag._segment import split_sentences
from tokenshapley_rag._types import Source
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError

__all__ = [
    "SentenceAttributor",
    "SentenceScores",
    "SentenceUnit",
    "ablate_sentences",
    "assign_to_units",
    "rank_sentences",
    "sentence_units",
]


@dataclass(frozen=True, slots=True)
class SentenceUnit:
    """One candidate sentence of the context.

    Parameters
    ----------
    source_id : str
        Id of the source the sentence is in.
    source_index : int
        Position of that source in the ``sources`` sequence.
    start, end : int
        Half-open character offsets into that source's ``Source.text``
        (``source.text[start:end] == text``).
    text : str
        The sentence.

    Examples
    --------
    >>> SentenceUnit("a", 0, 0, 5, "Hello").text
    'Hello'
    """

    source_id: str
    source_index: int
    start: int
    end: int
    text: str

    def as_triple(self) -> tuple[str, int, int]:
        """``(source_id, start, end)``, the form the ranking metrics take."""
        return (self.source_id, self.start, self.end)


@dataclass(frozen=True, slots=True)
class SentenceScores:
    """What a :class:`SentenceAttributor` returns for one response.

    Parameters
    ----------
    scores : ndarray of shape (n_sentences,), dtype float64
        One finite score per candidate sentence, in the order of the ``sentences`` given;
        higher = the sentence explains the response more.
    support : Mapping[str, float], default={}
        Optional per-response support scores (higher = better supported), for the WiCE
        label-separation metric. The runner adds ``"max_sentence"`` (the top sentence
        score) for every method; a method may add its own, e.g. TokenShapley's
        ``"keyword_support_min"`` and ``"keyword_support_mean"``.

    Examples
    --------
    >>> SentenceScores(np.array([0.5, 0.1])).scores.tolist()
    [0.5, 0.1]
    """

    scores: np.ndarray
    support: Mapping[str, float] = field(default_factory=dict)


@runtime_checkable
class SentenceAttributor(Protocol):
    """Anything that scores the candidate sentences of a context for one response.

    Attributes
    ----------
    name : str
        Method name used in reports.

    Methods
    -------
    score_sentences(query, sources, response, sentences) -> SentenceScores
        ``query`` is the question ("" when there is none), ``sources`` the context,
        ``response`` the text to explain and ``sentences`` the candidates
        (:func:`sentence_units` of ``sources``). ``scores[i]`` scores ``sentences[i]``.

    Examples
    --------
    >>> from tokenshapley_rag.benchmark._baselines import LexicalAttributor
    >>> isinstance(LexicalAttributor(), SentenceAttributor)
    True
    """

    name: str

    def score_sentences(
        self, query: str, sources: Sequence[Source], response: str, sentences: Sequence[SentenceUnit]
    ) -> SentenceScores:
        """Per-sentence scores, higher = explains the response more."""
        ...


def sentence_units(sources: Sequence[Source], *, split: bool = True) -> tuple[SentenceUnit, ...]:
    """The candidate sentences of ``sources``, in context order.

    A source's title (``metadata["text_offset"]`` characters at the start of
    ``Source.text``, see :mod:`tokenshapley_rag.benchmark._data`) is context but never a
    candidate: only the text after it is split. With ``split=True`` the text is cut by
    :func:`tokenshapley_rag._segment.split_sentences`, the splitter TokenShapley's
    datastore uses; with ``split=False`` each source's text (whitespace-stripped) is one
    unit (WiCE: every source is already one evidence sentence). Sources with no
    non-space text give no unit.

    Parameters
    ----------
    sources : sequence of Source
    split : bool, default=True

    Returns
    -------
    units : tuple of SentenceUnit
        Offsets index into ``Source.text`` (title included).

    Examples
    --------
    >>> s = Source("1", "Title\\nFirst one. Second one.", {"title": "Title", "text_offset": 6})
    >>> [(u.start, u.end, u.text) for u in sentence_units([s])]
    [(6, 16, 'First one.'), (17, 28, 'Second one.')]
    >>> [u.text for u in sentence_units([s], split=False)]
    ['First one. Second one.']
    """
    if isinstance(sources, (str, bytes)) or not isinstance(sources, Sequence):
        raise InvalidInputTypeError(f"sources must be a sequence of Source, got {type(sources).__name__}")
    out: list[SentenceUnit] = []
    for i, src in enumerate(sources):
        if not isinstance(src, Source):
            raise InvalidInputTypeError(f"sources[{i}] must be a Source, got {type(src).__name__}")
        offset = int(src.metadata.get("text_offset", 0) or 0) if src.metadata else 0
        body = src.text[offset:]
        if split:
            spans = split_sentences(body)
        else:
            stripped = body.strip()
            spans = [] if not stripped else [(len(body) - len(body.lstrip()), len(body.rstrip()))]
        for a, b in spans:
            out.append(SentenceUnit(src.id, i, offset + a, offset + b, body[a:b]))
    return tuple(out)


def check_scores(result: Any, n_sentences: int, method: str) -> SentenceScores:
    """Validate what ``score_sentences`` returned (shape, finiteness, support values)."""
    if not isinstance(result, SentenceScores):
        raise InvalidInputTypeError(
            f"{method}.score_sentences must return SentenceScores, got {type(result).__name__}"
        )
    arr = np.asarray(result.scores, dtype=np.float64)
    if arr.shape != (n_sentences,):
        raise InvalidInputError(
            f"{method}.score_sentences returned scores of shape {arr.shape}, expected ({n_sentences},)"
        )
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError(f"{method}.score_sentences returned non-finite scores")
    support = {}
    for k, v in dict(result.support).items():
        v = float(v)
        if not np.isfinite(v):
            raise InvalidInputError(f"{method}.score_sentences returned a non-finite support {k!r}={v}")
        support[str(k)] = v
    return SentenceScores(arr, support)


def rank_sentences(scores: Any) -> np.ndarray:
    """Indices of the sentences, best first; ties keep context order (stable).

    Examples
    --------
    >>> rank_sentences([0.1, 0.5, 0.5, 0.2]).tolist()
    [1, 2, 3, 0]
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1:
        raise InvalidInputError(f"scores must be 1-D, got shape {s.shape}")
    if not np.all(np.isfinite(s)):
        raise InvalidInputError("scores must be finite")
    return np.argsort(-s, kind="stable")


def ablate_sentences(
    sources: Sequence[Source], sentences: Sequence[SentenceUnit], remove: Iterable[int]
) -> tuple[Source, ...]:
    """The sources with the sentences ``remove`` (indices into ``sentences``) taken out.

    Each source is rebuilt as ContextCite's partitioner rebuilds an ablated context: the
    text before its first unit (e.g. the title) is kept, then every kept unit in order,
    each preceded by the separator that preceded it in the original text (except the
    first kept unit, which follows the prefix directly). Text between units that is not
    a separator of a kept unit is dropped. Ids and metadata are unchanged; a source whose
    units are all removed keeps only its prefix (possibly the empty string). Sources
    with no unit are returned unchanged.

    Parameters
    ----------
    sources : sequence of Source
    sentences : sequence of SentenceUnit
        Units of ``sources`` (``sentence_units(sources, ...)``).
    remove : iterable of int
        Indices into ``sentences``.

    Returns
    -------
    sources : tuple of Source

    Examples
    --------
    >>> src = [Source("a", "One. Two. Three.")]
    >>> units = sentence_units(src)
    >>> ablate_sentences(src, units, [1])[0].text
    'One. Three.'
    >>> ablate_sentences(src, units, [0])[0].text
    'Two. Three.'
    """
    n = len(sentences)
    drop = set()
    for i in remove:
        if isinstance(i, bool) or not isinstance(i, Integral) or not 0 <= int(i) < n:
            raise InvalidInputError(f"sentence index {i!r} out of range [0, {n})")
        drop.add(int(i))
    by_source: dict[int, list[tuple[int, SentenceUnit]]] = {}
    for j, u in enumerate(sentences):
        if not 0 <= u.source_index < len(sources) or sources[u.source_index].id != u.source_id:
            raise InvalidInputError(f"sentence {j} ({u.source_id!r}) does not belong to the sources given")
        by_source.setdefault(u.source_index, []).append((j, u))
    out: list[Source] = []
    for si, src in enumerate(sources):
        units = by_source.get(si)
        if not units:
            out.append(src)
            continue
        units.sort(key=lambda x: x[1].start)
        text = src.text[: units[0][1].start]
        prev_end = None
        first = True
        for j, u in units:
            sep = "" if prev_end is None else src.text[prev_end : u.start]
            prev_end = u.end
            if j in drop:
                continue
            text += (sep if not first else "") + src.text[u.start : u.end]
            first = False
        out.append(replace(src, text=text))
    return tuple(out)


def assign_to_units(
    sentences: Sequence[SentenceUnit], pieces: Iterable[tuple[str, int, int, float]]
) -> np.ndarray:
    """Sum scores given on other segmentations onto the candidate units.

    Each piece ``(source_id, start, end, score)`` (offsets into ``Source.text``) is added
    to the unit of the same source it overlaps most (ties -> the first); pieces that
    overlap no unit (a title, say) are dropped. TokenShapley scores its own sentences
    (long ones cut in pieces), which this maps onto the shared candidates.

    Examples
    --------
    >>> units = sentence_units([Source("a", "One. Two.")])
    >>> assign_to_units(units, [("a", 0, 4, 1.0), ("a", 5, 7, 0.5), ("a", 7, 9, 0.25), ("b", 0, 3, 9.0)]).tolist()
    [1.0, 0.75]
    """
    out = np.zeros(len(sentences), dtype=np.float64)
    by_source: dict[str, list[int]] = {}
    for j, u in enumerate(sentences):
        by_source.setdefault(u.source_id, []).append(j)
    for sid, start, end, score in pieces:
        best, best_overlap = -1, 0
        for j in by_source.get(sid, ()):
            u = sentences[j]
            overlap = min(u.end, end) - max(u.start, start)
            if overlap > best_overlap:
                best, best_overlap = j, overlap
        if best >= 0:
            out[best] += float(score)
    return out
