"""Adapt LangChain objects (``Document``, messages) to tokenshapley-rag inputs and back.

Everything numeric and all text segmentation stay in ``tokenshapley_rag``; this module only
converts and validates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from tokenshapley_rag import AttributionResult, KeywordCitation, SentenceVerdict, Source, TokenShapley
from tokenshapley_rag._citations import result_without_sources
from tokenshapley_rag._sources import document_name
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError

__all__ = [
    "CITATION_KEYS",
    "SENTENCE_SOURCE_KEYS",
    "sentence_sources_to_dicts",
    "attribute_documents",
    "citation_to_dict",
    "documents_to_sources",
    "message_text",
]

#: Keys of every citation dict, in order: the core's ``KeywordCitation.to_dict()`` with
#: ``source_id`` named ``doc_id``, plus the cited document's ``metadata`` and the verdict
#: of the answer sentence holding the keyword.
CITATION_KEYS = (
    "text",
    "start",
    "end",
    "kind",
    "status",
    "supported",
    "support",
    "doc_id",
    "display_name",
    "page",
    "score",
    "sentence",
    "sentence_start",
    "sentence_end",
    "keyword_start",
    "keyword_end",
    "sources",
    "conflict",
    "metadata",
    "answer_sentence",
)


#: Keys of every answer-sentence dict of :class:`TokenShapleySentenceSources`: the core's
#: ``AnswerSentenceSources.to_dict()`` with ``source_id`` named ``doc_id``, plus the best
#: document's ``metadata``.
SENTENCE_SOURCE_KEYS = (
    "index",
    "start",
    "end",
    "text",
    "doc_id",
    "display_name",
    "page",
    "score",
    "sentence",
    "sentence_start",
    "sentence_end",
    "sources",
    "metadata",
)


def sentence_sources_to_dicts(attributor: TokenShapley, result: AttributionResult) -> list[dict[str, Any]]:
    """One dict per answer sentence of ``result`` (keys :data:`SENTENCE_SOURCE_KEYS`): the
    documents it comes from, best first (``TokenShapley.sentence_sources``), with
    ``source_id`` named ``doc_id`` (also in ``sources``) and the best document's ``metadata``
    (the copy :func:`documents_to_sources` gave its source; None, like the best-document
    fields, when no document's sentences hold the answer sentence's content words)."""
    metadata = {s.id: s.metadata for s in result.sources}
    out = []
    for answer_sentence in attributor.sentence_sources(result):
        row = answer_sentence.to_dict(id_key="doc_id")
        doc_id = row["doc_id"]
        row["metadata"] = dict(metadata[doc_id]) if doc_id is not None else None
        out.append({key: row[key] for key in SENTENCE_SOURCE_KEYS})
    return out


def message_text(value: Any, key: str) -> str:
    """The text of a ``str`` or a message (``BaseMessage.text``) found under ``key``.

    Raises:
        InvalidInputTypeError: ``value`` is neither a ``str`` nor a ``BaseMessage``.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, BaseMessage):
        return value.text
    raise InvalidInputTypeError(f"{key!r} must be a str or a message (BaseMessage), got {type(value).__name__}")


def check_documents(value: Any, key: str) -> list[Document]:
    """Check that ``value`` is a list (or tuple) of ``Document`` and return it as a list.

    Raises:
        InvalidInputTypeError: ``value`` is not a list or tuple, or an item is not a ``Document``.
    """
    if not isinstance(value, (list, tuple)):
        raise InvalidInputTypeError(f"{key!r} must be a list of Document, got {type(value).__name__}")
    for i, doc in enumerate(value):
        if not isinstance(doc, Document):
            raise InvalidInputTypeError(f"{key}[{i}] must be a Document, got {type(doc).__name__}")
    return list(value)


def documents_to_sources(
    documents: Sequence[Document], key: str = "context"
) -> tuple[list[Source], dict[str, Document]]:
    """One ``Source`` per distinct document, and the documents by source id.

    The source id is ``Document.id``, or the document's position in ``documents`` as a
    string when it has no id. The attributed text is ``page_content`` (metadata is not
    part of it). Documents whose ``page_content`` is empty or whitespace are skipped (there
    is nothing in them to cite). A document repeated with the same id and the same
    ``page_content`` (two retrievers, or one retriever called twice) is kept once.
    ``metadata["source"]`` (the file or URL a loader read, which text splitters copy into
    every chunk) is the source's ``document``: chunks of one file back each other when
    support is checked.

    Raises:
        InvalidInputError: two documents share an id but differ in ``page_content``.
    """
    sources: list[Source] = []
    by_id: dict[str, Document] = {}
    position: dict[str, int] = {}
    for i, doc in enumerate(documents):
        doc_id = doc.id if doc.id else str(i)
        if doc_id in by_id:
            if by_id[doc_id].page_content == doc.page_content:
                continue
            raise InvalidInputError(
                f"{key}[{position[doc_id]}] and {key}[{i}] share the id {doc_id!r} but have different "
                "page_content; give each document a unique Document.id"
            )
        if not doc.page_content.strip():
            continue
        by_id[doc_id] = doc
        position[doc_id] = i
        sources.append(
            Source(id=doc_id, text=doc.page_content, metadata=dict(doc.metadata), document=document_of(doc.metadata))
        )
    return sources, by_id


def document_of(metadata: Mapping[str, Any]) -> str | None:
    """The document a LangChain chunk was cut from: its ``metadata["source"]`` when that is
    a non-blank string (loaders set it, splitters copy it), else None."""
    return document_name(metadata.get("source"))


def citation_to_dict(
    citation: KeywordCitation, documents: Mapping[str, Document], verdict: SentenceVerdict | None = None
) -> dict[str, Any]:
    """The plain dict of one keyword citation (keys :data:`CITATION_KEYS`).

    ``start`` / ``end`` index into the answer, ``sentence_start`` / ``sentence_end`` into
    the cited document's ``page_content``. It is the core's citation schema
    (``KeywordCitation.to_dict()``) with ``source_id`` named ``doc_id`` (also in
    ``sources`` and ``conflict``), plus the best document's ``metadata`` and
    ``answer_sentence``: the verdict on the answer sentence holding the keyword
    (``index``, ``verdict``, ``score``). The best-source fields are None when no
    document supports the keyword.
    """
    out = citation.to_dict(id_key="doc_id")
    doc_id = out["doc_id"]
    out["metadata"] = dict(documents[doc_id].metadata) if doc_id is not None else None
    out["answer_sentence"] = None if verdict is None else {
        "index": verdict.index, "verdict": verdict.verdict, "score": verdict.score,
    }
    return {key: out[key] for key in CITATION_KEYS}


def attribute_documents(
    attributor: Callable[[], TokenShapley],
    query: str,
    documents: Sequence[Document],
    answer: str,
    *,
    supported_only: bool = False,
    key: str = "context",
) -> tuple[list[dict[str, Any]], AttributionResult | None]:
    """Attribute ``answer`` to ``documents`` and return the citation dicts and the core result.

    ``attributor`` returns the ``TokenShapley`` to use; it is only called when there is
    something to attribute, so an empty answer gives ``([], None)`` without loading a model.
    An answer with no document that has text (the retriever found nothing) has every keyword
    ``unsupported``: nothing was retrieved that supports it (no model runs either).
    """
    sources, by_id = documents_to_sources(documents, key)
    if not answer.strip():
        return [], None
    if sources:
        # TokenShapley is safe to share between threads (batch runs callbacks in a pool).
        result = attributor().attribute(query=query, sources=sources, response=answer)
    else:
        result = result_without_sources(query, answer)
    citations = [
        citation_to_dict(c, by_id, next((v for v in result.sentences if v.start <= c.start < v.end), None))
        for c in result.citations
        if c.supported or not supported_only
    ]
    return citations, result
