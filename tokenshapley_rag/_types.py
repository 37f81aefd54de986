"""Input and result types of the public API (frozen dataclasses, JSON-friendly)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "display_name", "page_of", "AnswerSentenceSources", "EvidenceSentence", "Source", "SourceAttribution",
    "KeywordCitation", "SentenceCitations", "SentenceScore", "SentenceSource", "SentenceVerdict",
]


@dataclass(frozen=True, slots=True)
class Source:
    """One retrieved chunk to attribute over.

    Parameters
    ----------
    id : str
        Unique id of the chunk (a node id, a document id, or its position).
    text : str
        The text the generator saw. Citation offsets (``sentence_start`` /
        ``sentence_end``) index into this string.
    metadata : Mapping, default={}
        Carried through to results untouched (title, url, page, ...).
    document : str or None, default=None
        The document the chunk was cut from (LlamaIndex's ``ref_doc_id``, a file path).
        Chunks of one document back each other when support is checked: a claim may
        take its subject from one chunk and its date from the next ("The Eiffel Tower
        is ..." / "Construction was completed on 31 March 1889"). None: the chunk is a
        document of its own.

    Examples
    --------
    >>> Source(id="doc-1", text="Paris is the capital of France.").id
    'doc-1'
    >>> Source("eiffel.md#2", "Construction was completed in 1889.", document="eiffel.md").document
    'eiffel.md'
    """

    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    document: str | None = None


#: Metadata keys that name a source for a reader, in order of preference (LlamaIndex
#: readers set ``file_name``, LangChain loaders ``source``; ``title`` wins when given).
DISPLAY_KEYS = ("title", "file_name", "source", "url")
PAGE_KEYS = ("page_label", "page")


def display_name(source_id: str, metadata: Mapping[str, Any], document: str | None = None) -> str:
    """How a reader should see a source: its metadata's ``title``, ``file_name``,
    ``source`` (a path's last part) or ``url``, else the document it was cut from (a
    LlamaIndex node's ``ref_doc_id``: "bank", not the chunk's random node id), else its id.

    >>> display_name("3f2c", {"file_name": "eiffel.md"}), display_name("3f2c", {"source": "/data/docs/nile.txt"})
    ('eiffel.md', 'nile.txt')
    >>> display_name("3f2c", {}), display_name("3f2c", {}, document="bank")
    ('3f2c', 'bank')
    """
    for key in DISPLAY_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            value = value.strip()
            if key == "source" and "://" not in value:
                value = value.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] or value
            return value
    if isinstance(document, str) and document.strip():
        return document.strip()
    return source_id


def page_of(metadata: Mapping[str, Any]) -> str | None:
    """The source's page as written: ``page_label`` (LlamaIndex, LangChain's PDF loaders:
    the printed label), else ``page`` as given (LangChain's is 0-based), else None."""
    for key in PAGE_KEYS:
        value = metadata.get(key)
        if value is not None and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()
    return None


def _sentence_fields(cited: Any, id_key: str) -> dict[str, Any]:
    """The fields a cited source sentence has wherever it appears (a keyword's source, an
    answer sentence's source), in the schema's order."""
    return {
        id_key: cited.source_id,
        "display_name": cited.display_name,
        "page": cited.page,
        "score": float(cited.score),
        "sentence": cited.sentence,
        "sentence_start": int(cited.sentence_start),
        "sentence_end": int(cited.sentence_end),
    }


def _best_fields(best: Any, id_key: str) -> dict[str, Any]:
    """:func:`_sentence_fields` of the best source, flat at the top of a citation; None in
    each field when there is none."""
    if best is None:
        return dict.fromkeys((id_key, "display_name", "page", "score", "sentence", "sentence_start", "sentence_end"))
    return _sentence_fields(best, id_key)


@dataclass(frozen=True, slots=True)
class SourceAttribution:
    """How much one source explains a keyword, and the sentence of it that is cited.

    ``score`` is a sum of exact Shapley values (see ``docs/method.md``): the value that
    the source's datastore entries contribute to the keyword's game (its tokens' games
    "does the nearest evidence carry this token?", plus the other tokens of its answer
    sentence with decaying weights), i.e. ``AttributionResult.span_scores`` of the
    keyword for this source. Positive means the source supports the keyword in its
    context. ``sentence`` is the source's best-scoring sentence among those holding the
    keyword (any sentence if none does); ``sentence_start`` / ``sentence_end`` are
    character offsets into the source's text, and ``keyword_start`` / ``keyword_end``
    the keyword's own range there when the sentence holds it (None otherwise).
    ``display_name`` and ``page`` come from the source's metadata (:func:`display_name`,
    :func:`page_of`).
    """

    source_id: str
    score: float
    sentence: str
    sentence_start: int
    sentence_end: int
    sentence_index: int
    display_name: str = ""
    page: str | None = None
    keyword_start: int | None = None
    keyword_end: int | None = None

    def __post_init__(self) -> None:
        if not self.display_name:
            object.__setattr__(self, "display_name", self.source_id)

    def to_dict(self, *, id_key: str = "source_id") -> dict[str, Any]:
        """Plain JSON-serializable dict of the fields (``id_key``: the name of the id field,
        e.g. ``"node_id"`` in LlamaIndex)."""
        return {
            **_sentence_fields(self, id_key),
            "sentence_index": int(self.sentence_index),
            "keyword_start": None if self.keyword_start is None else int(self.keyword_start),
            "keyword_end": None if self.keyword_end is None else int(self.keyword_end),
        }


@dataclass(frozen=True, slots=True)
class KeywordCitation:
    """A keyword of the answer, whether the sources support it, and the sentences it came from.

    ``start`` / ``end`` are character offsets into the answer (``answer[start:end] ==
    text``); ``kind`` is ``"number"``, ``"date"``, ``"name"`` or ``"word"``.

    ``status`` is one of:

    * ``"supported"``: a source sentence holds the keyword's value (numbers by value,
      dates by their parts, names by their words, words by stem) in a source that agrees
      with the rest of the claim; ``sources`` lists the supporting sources, best first,
      each with the sentence it is cited by;
    * ``"contradicted"``: the source that states the claim (its subject and predicate)
      holds a *different* value; ``conflict`` is that source sentence and ``sources`` is
      empty (the conflicting sentence is never presented as support);
    * ``"unsupported"``: no source holds the keyword; ``sources`` is empty.

    ``supported`` is ``status == "supported"``. ``support`` is the keyword's own exact
    Shapley value per token in its best citable sentence (0.0 when it has none). The
    rule is in docs/method.md §8.
    """

    text: str
    start: int
    end: int
    sources: tuple[SourceAttribution, ...]
    supported: bool
    support: float = 0.0
    status: str = ""
    kind: str = "word"
    conflict: SourceAttribution | None = None

    def __post_init__(self) -> None:
        if not self.status:
            object.__setattr__(self, "status", "supported" if self.supported else "unsupported")
        elif self.status not in ("supported", "unsupported", "contradicted"):
            raise ValueError(f"status must be 'supported', 'unsupported' or 'contradicted', got {self.status!r}")
        if (self.status == "supported") != bool(self.supported):
            raise ValueError(f"supported={self.supported!r} disagrees with status={self.status!r}")

    @property
    def best(self) -> SourceAttribution | None:
        """The highest-scoring source sentence, or None when nothing supports the keyword."""
        return self.sources[0] if self.sources else None

    def to_dict(self, *, id_key: str = "source_id") -> dict[str, Any]:
        """Flat dict: the best source's fields at top level, all sources under ``sources``.

        ``id_key`` names the source id field everywhere in it (``"node_id"``, ``"doc_id"``:
        the integrations rename it and change nothing else).

        Keys: ``text, start, end, kind, status, supported, support, source_id,
        display_name, page, score, sentence, sentence_start, sentence_end, keyword_start,
        keyword_end, sources, conflict``. The best-source keys are None when the keyword
        has no supporting source; ``sources`` lists every supporting source (best first,
        each a :meth:`SourceAttribution.to_dict`); ``conflict`` is the contradicting
        source sentence (a dict) or None.
        """
        best = self.best
        return {
            "text": self.text,
            "start": int(self.start),
            "end": int(self.end),
            "kind": self.kind,
            "status": self.status,
            "supported": bool(self.supported),
            "support": float(self.support),
            **_best_fields(best, id_key),
            "keyword_start": best.keyword_start if best else None,
            "keyword_end": best.keyword_end if best else None,
            "sources": [s.to_dict(id_key=id_key) for s in self.sources],
            "conflict": self.conflict.to_dict(id_key=id_key) if self.conflict is not None else None,
        }


@dataclass(frozen=True, slots=True)
class SentenceVerdict:
    """The verdict on one sentence of the answer, built from its keywords' statuses.

    ``verdict`` is ``"contradicted"`` if any keyword is contradicted, ``"supported"`` if
    all are supported (or the sentence has no keyword), ``"unsupported"`` if none is, and
    ``"partly"`` otherwise. ``score`` (in [-1, 1], higher is better supported) is the mean
    over the keywords of ``0.5 + 0.5 * clip(support, 0, 1)`` for a supported keyword, 0 for
    an unsupported and -1 for a contradicted one (1.0 without keywords). Offsets are into
    the answer.
    """

    index: int
    start: int
    end: int
    text: str
    verdict: str
    score: float
    n_keywords: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serializable dict of the fields."""
        return {
            "index": int(self.index),
            "start": int(self.start),
            "end": int(self.end),
            "text": self.text,
            "verdict": self.verdict,
            "score": float(self.score),
            "n_keywords": int(self.n_keywords),
        }


@dataclass(frozen=True, slots=True)
class SentenceScore:
    """Attribution of the answer to one source sentence.

    ``score`` sums the Shapley values of every answer token (stopwords included) for the
    sentence's entries. ``keyword_score`` sums, over the answer's cited keywords, each
    keyword's context-game value for the sentence (0 where its source is not one of the
    keyword's candidates): what the keywords cite from it, the score to rank sentences by
    (docs/method.md §5).
    """

    source_id: str
    sentence_index: int
    sentence: str
    sentence_start: int
    sentence_end: int
    score: float
    keyword_score: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serializable dict of the fields."""
        return {
            "source_id": self.source_id,
            "sentence_index": int(self.sentence_index),
            "sentence": self.sentence,
            "sentence_start": int(self.sentence_start),
            "sentence_end": int(self.sentence_end),
            "score": float(self.score),
            "keyword_score": float(self.keyword_score),
        }


@dataclass(frozen=True, slots=True)
class EvidenceSentence:
    """One source sentence of an evidence ranking (:meth:`TokenShapley.rank_evidence`).

    ``score`` is the ranking rule's score (higher ranks first); ``keyword_score`` is the
    sentence's :attr:`SentenceScore.keyword_score`, and ``game`` its value in the sentence
    game of the answer (0 under the ``keyword`` rule), the two terms the rule combines
    (docs/method.md §9).
    """

    source_id: str
    sentence_index: int
    sentence: str
    sentence_start: int
    sentence_end: int
    score: float
    keyword_score: float
    game: float

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serializable dict of the fields (built with plain ints and floats)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class SentenceSource:
    """One source's attribution of one answer sentence (:meth:`TokenShapley.sentence_sources`).

    ``score`` is the sum of the exact Shapley values of the source's sentences in the
    sentence game of the answer sentence (docs/method.md §11): positive when the source's
    sentences, nearest in meaning first, hold the answer sentence's content words.
    ``sentence`` is the source's sentence with the highest value (the first of equals),
    ``sentence_value`` that value; ``sentence_start`` / ``sentence_end`` are character
    offsets into the source's text. ``display_name`` and ``page`` come from the source's
    metadata, as a keyword's (:class:`SourceAttribution`).
    """

    source_id: str
    score: float
    sentence_index: int
    sentence: str
    sentence_start: int
    sentence_end: int
    sentence_value: float
    display_name: str = ""
    page: str | None = None

    def __post_init__(self) -> None:
        if not self.display_name:
            object.__setattr__(self, "display_name", self.source_id)

    def to_dict(self, *, id_key: str = "source_id") -> dict[str, Any]:
        """Plain JSON-serializable dict of the fields (``id_key``: the name of the id field,
        e.g. ``"node_id"`` in LlamaIndex)."""
        return {
            **_sentence_fields(self, id_key),
            "sentence_index": int(self.sentence_index),
            "sentence_value": float(self.sentence_value),
        }


@dataclass(frozen=True, slots=True)
class AnswerSentenceSources:
    """The sources of one answer sentence, best first (:meth:`TokenShapley.sentence_sources`).

    ``index`` / ``start`` / ``end`` / ``text`` are those of the answer sentence (the same
    sentences as :attr:`AttributionResult.sentences`; offsets into the answer); ``sources``
    holds every source (or the first ``top_k``) by descending score, ties in source order.
    """

    index: int
    start: int
    end: int
    text: str
    sources: tuple[SentenceSource, ...]

    @property
    def best(self) -> SentenceSource | None:
        """The top source when its score is positive; None when no source's sentences hold
        any content word of the answer sentence ahead of those that lack it."""
        return self.sources[0] if self.sources and self.sources[0].score > 0 else None

    def to_dict(self, *, id_key: str = "source_id") -> dict[str, Any]:
        """Flat dict, as a keyword's (:meth:`KeywordCitation.to_dict`): the answer sentence,
        the best source's fields at top level (None without one), every source under
        ``sources``. ``id_key`` names the source id field everywhere in it.

        Keys: ``index, start, end, text, source_id, display_name, page, score, sentence,
        sentence_start, sentence_end, sources``.
        """
        best = self.best
        return {
            "index": int(self.index),
            "start": int(self.start),
            "end": int(self.end),
            "text": self.text,
            **_best_fields(best, id_key),
            "sources": [s.to_dict(id_key=id_key) for s in self.sources],
        }


@dataclass(frozen=True)
class SentenceCitations:
    """The keyword citations of one sentence of an answer, as soon as the sentence ended
    (see :meth:`TokenShapley.stream`), with the sentence's verdict and score
    (:class:`SentenceVerdict`). Offsets are into the whole answer."""

    index: int
    start: int
    end: int
    text: str
    citations: tuple[KeywordCitation, ...]
    verdict: str = "supported"
    score: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "start": self.start,
            "end": self.end,
            "text": self.text,
            "verdict": self.verdict,
            "score": float(self.score),
            "citations": [c.to_dict() for c in self.citations],
        }
