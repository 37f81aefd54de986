"""Runnables for a retrieval chain's answer: ``TokenShapleyCitations`` cites its keywords,
``TokenShapleySentenceSources`` names each sentence's document."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig, RunnableSerializable
from pydantic import ConfigDict, Field, PrivateAttr
from tokenshapley_rag import AttributionResult, TokenShapley
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError

from langchain_tokenshapley._convert import (
    attribute_documents,
    check_documents,
    message_text,
    sentence_sources_to_dicts,
)

__all__ = ["TokenShapleyCitations", "TokenShapleySentenceSources"]


class TokenShapleyCitations(RunnableSerializable[dict[str, Any], list[dict[str, Any]]]):
    """Keyword-level citations for the output dict of a retrieval chain.

    Takes the dict a ``create_retrieval_chain``-style chain produces (the query under
    ``input`` or ``question``, the retrieved documents under ``context``, the answer under
    ``answer``) and returns one dict per keyword of the answer, saying which document and
    which sentence of it the keyword came from. Add it to a chain with
    ``chain.assign(citations=TokenShapleyCitations(ts))``.

    The attributed text of a document is its ``page_content`` (what a "stuff" prompt shows
    the LLM; metadata is not part of it). Documents with empty ``page_content`` are skipped,
    and a document repeated with the same id and text counts once.

    Each citation dict has the keys:

    - ``text``, ``start``, ``end``: the keyword and its character offsets into the answer
      (``answer[start:end] == text``).
    - ``doc_id``: ``Document.id`` of the cited document, or its position in ``context`` as a
      string (``"0"``, ``"1"``, ...) when it has no id.
    - ``metadata``: a copy of the cited document's ``metadata``.
    - ``score``: TokenShapley score of the cited document for this keyword, a sum of exact
      Shapley values over the document's sentences of the keyword's game in its answer
      context (``AttributionResult.span_scores``; positive means supporting evidence).
    - ``sentence``, ``sentence_start``, ``sentence_end``: the document's best sentence that
      holds the keyword and its character offsets into the document's ``page_content``.
    - ``supported``: whether some source sentence gives the keyword positive evidence.

    ``doc_id``, ``metadata``, ``score`` and the sentence fields are None when no document
    supports the keyword. An empty answer gives ``[]``; a context without text (the retriever
    found nothing) gives every keyword of the answer as ``unsupported``.

    Attribution runs on CPU in about 0.5 to 2 seconds per answer. ``ainvoke`` and ``batch``
    use LangChain's defaults (a thread pool); calls on one ``TokenShapley`` are serialized.

    Attributes:
        tokenshapley: The attributor to use. None creates a default ``TokenShapley()`` on
            first use (SmolLM2-135M; the first use on a machine converts it, about 30 s).
            Share one instance between runnables and handlers.
        query_keys: Keys tried in order for the user's query.
        context_key: Key of the retrieved documents (a list of ``Document``).
        answer_key: Key of the answer (a ``str`` or a message).
        supported_only: Drop keywords that no document supports.

    Raises:
        InvalidInputError: A required key is missing (the message names it), or two
            documents share an id but differ in text.
        InvalidInputTypeError: The input is not a dict, or a value has the wrong type.
        tokenshapley_rag.errors.TokenShapleyError: Any other failure of the attribution.

    Example:
        .. code-block:: python

            from operator import itemgetter

            from langchain_core.output_parsers import StrOutputParser
            from langchain_core.runnables import RunnablePassthrough
            from langchain_tokenshapley import TokenShapleyCitations
            from tokenshapley_rag import TokenShapley

            ts = TokenShapley()
            chain = (
                RunnablePassthrough.assign(context=itemgetter("input") | retriever)
                .assign(answer=prompt | llm | StrOutputParser())
                .assign(citations=TokenShapleyCitations(ts))
            )
            out = chain.invoke({"input": "How tall is the Eiffel Tower?"})
            [(c["text"], c["doc_id"]) for c in out["citations"]]
            # [('Eiffel Tower', 'eiffel'), ('330 metres', 'eiffel'), ...]

        The README and ``notebooks/langchain_citations.ipynb`` run this with a FAISS
        retriever and a fixed-text LLM.
    """

    tokenshapley: TokenShapley | None = Field(default=None, exclude=True)
    query_keys: tuple[str, ...] = ("input", "question")
    context_key: str = "context"
    answer_key: str = "answer"
    supported_only: bool = False

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _default: TokenShapley | None = PrivateAttr(default=None)
    _init_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, tokenshapley: TokenShapley | None = None, **kwargs: Any) -> None:
        """Create the runnable; ``tokenshapley`` may be given positionally."""
        super().__init__(tokenshapley=tokenshapley, **kwargs)
        if not self.query_keys:
            raise InvalidInputError("query_keys must name at least one key")

    def _attributor(self) -> TokenShapley:
        if self.tokenshapley is not None:
            return self.tokenshapley
        with self._init_lock:
            if self._default is None:
                self._default = TokenShapley()
            return self._default

    def _parse(self, input: Any) -> tuple[str, list[Any], str]:
        """Validate the chain dict and return (query, documents, answer)."""
        if not isinstance(input, Mapping):
            raise InvalidInputTypeError(
                f"{type(self).__name__} expects a dict with {self.query_keys[0]!r}, {self.context_key!r} and "
                f"{self.answer_key!r}, got {type(input).__name__}"
            )
        keys = sorted(map(str, input))
        query_key = next((k for k in self.query_keys if k in input), None)
        if query_key is None:
            names = " or ".join(repr(k) for k in self.query_keys)
            raise InvalidInputError(f"missing the query: expected the key {names}; the input has keys {keys}")
        for key in (self.context_key, self.answer_key):
            if key not in input:
                raise InvalidInputError(f"missing the key {key!r}; the input has keys {keys}")
        query = message_text(input[query_key], query_key)
        documents = check_documents(input[self.context_key], self.context_key)
        answer = message_text(input[self.answer_key], self.answer_key)
        return query, documents, answer

    def attribute(self, input: Mapping[str, Any]) -> AttributionResult | None:
        """The full core result for a chain dict (for ``to_markdown()`` / ``to_html()``).

        Args:
            input: The chain dict, as for :meth:`invoke`.

        Returns:
            The ``AttributionResult`` (every keyword ``unsupported`` when no document has
            text), or None when the answer is empty.
        """
        query, documents, answer = self._parse(input)
        _, result = attribute_documents(self._attributor, query, documents, answer, key=self.context_key)
        return result

    def _cite(self, input: dict[str, Any]) -> list[dict[str, Any]]:
        query, documents, answer = self._parse(input)
        citations, _ = attribute_documents(
            self._attributor, query, documents, answer, supported_only=self.supported_only, key=self.context_key
        )
        return citations

    def invoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """Cite the keywords of ``input[answer_key]``.

        Args:
            input: The chain dict: the query under one of ``query_keys``, the documents
                under ``context_key`` and the answer under ``answer_key``. Other keys are
                ignored.
            config: The usual runnable config (callbacks, tags, run name, ...). The call
                is traced as a ``chain`` run named ``TokenShapleyCitations``.
            **kwargs: Ignored.

        Returns:
            One dict per keyword of the answer, in answer order (see the class docstring).
        """
        return self._call_with_config(self._cite, input, config, run_type="chain")


class TokenShapleySentenceSources(TokenShapleyCitations):
    """The document each sentence of a retrieval chain's answer comes from.

    Takes the same chain dict as :class:`TokenShapleyCitations` and returns one dict per
    answer sentence, in answer order: ``TokenShapley.sentence_sources`` (each answer
    sentence plays the sentence game over every sentence of the documents, and a document
    scores the sum of its sentences' exact Shapley values; it holds up where the answer
    paraphrases its documents). Add it with ``chain.assign(sentence_sources=...)``; next to
    :class:`TokenShapleyCitations` on one ``TokenShapley``, the second attribution of the
    same documents is warm.

    Each dict has the keys ``index, start, end, text`` (the answer sentence; ``answer[start:
    end] == text``), ``doc_id, display_name, page, score, sentence, sentence_start,
    sentence_end`` (the best document and its best sentence, offsets into its
    ``page_content``; None when no document's sentences hold the answer sentence's content
    words), ``sources`` (every document, best first, each with those fields) and
    ``metadata`` (a copy of the best document's ``metadata``, or None). It is the core's
    ``AnswerSentenceSources.to_dict()`` with ``source_id`` named ``doc_id``.

    ``supported_only`` drops the sentences that no document scores above zero. An empty
    answer gives ``[]``; a context without text gives every sentence with no document.

    Example:
        .. code-block:: python

            chain = (
                RunnablePassthrough.assign(context=itemgetter("input") | retriever)
                .assign(answer=prompt | llm | StrOutputParser())
                .assign(sentence_sources=TokenShapleySentenceSources(ts))
            )
            out = chain.invoke({"input": "How tall is the Eiffel Tower?"})
            [(s["text"], s["doc_id"]) for s in out["sentence_sources"]]
            # [('The tower stands 330 metres high.', 'eiffel')]
    """

    def _cite(self, input: dict[str, Any]) -> list[dict[str, Any]]:
        result = self.attribute(input)
        if result is None:
            return []
        rows = sentence_sources_to_dicts(self._attributor(), result)
        return [r for r in rows if r["doc_id"] is not None] if self.supported_only else rows

    def invoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """Name the documents of each sentence of ``input[answer_key]``.

        Args:
            input: The chain dict, as for :meth:`TokenShapleyCitations.invoke`.
            config: The usual runnable config; the call is traced as a ``chain`` run named
                ``TokenShapleySentenceSources``.
            **kwargs: Ignored.

        Returns:
            One dict per answer sentence, in answer order (see the class docstring).
        """
        return self._call_with_config(self._cite, input, config, run_type="chain")
