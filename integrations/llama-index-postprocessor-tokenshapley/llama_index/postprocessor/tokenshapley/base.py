"""TokenShapley keyword citations for LlamaIndex query and chat engines.

A node postprocessor never sees the answer (``RetrieverQueryEngine.retrieve()`` runs it
before synthesis), so the work is split in two:

* :class:`TokenShapleyPostprocessor` sees the retrieved nodes and the query, encodes and
  caches their sentence keys (``TokenShapley.prepare``) and records them for the running
  query. It passes the nodes on unchanged (or only the ``top_n`` best).
* :class:`TokenShapleyCallbackHandler` (callback manager, query engines) or
  :class:`TokenShapleySpanHandler` (instrumentation dispatcher, query *and* chat engines)
  sees the synthesized answer, attributes it to the recorded nodes and writes the
  citations into the response's ``metadata``.

What a response gets (``response.metadata``):

``"citations"``
    list of dicts, one per keyword of the answer: the core's citation schema
    (``KeywordCitation.to_dict()``: ``text, start, end, kind, status, supported, support,
    node_id, display_name, page, score, sentence, sentence_start, sentence_end,
    keyword_start, keyword_end, sources, conflict``) with ``source_id`` named ``node_id``. ``status`` is ``"supported"``, ``"unsupported"`` or ``"contradicted"``
    (``conflict`` is then the contradicting node sentence). ``start`` /
    ``end`` are character offsets into the answer text (``str(response)``; for streaming
    responses the concatenated stream), so ``answer[start:end] == text``. ``node_id`` is
    the best supporting node (None when no node supports the keyword, ``supported`` is then
    False). ``sentence_start`` / ``sentence_end`` are character offsets into the node's
    content, ``node.get_content(metadata_mode=MetadataMode.NONE)`` (``node.text`` for text
    nodes), so ``node.start_char_idx + sentence_start`` is the sentence in the document the
    node was parsed from. The ``key: value`` metadata header that LlamaIndex puts before
    the content in the LLM's prompt is never evidence (see :func:`_node_sources`);
    ``display_name`` and ``page`` still come from ``node.metadata``. ``score`` is the summed exact Shapley value
    of that sentence for the keyword's tokens (see ``tokenshapley_rag.TokenShapley``);
    ``sources`` lists every supporting sentence, best first.
``"attribution"``
    the full :class:`tokenshapley_rag.AttributionResult` (renderers, token scores).
``"sentence_verdicts"``
    one dict per answer sentence: ``index, start, end, text, verdict, score, n_keywords``
    (``verdict``: supported / partly / unsupported / contradicted).
``"sentence_sources"``
    only with ``TokenShapleyPostprocessor(sentence_sources=True)``: one dict per answer
    sentence saying which node it comes from, in the citations' schema
    (``AnswerSentenceSources.to_dict(id_key="node_id")``: ``index, start, end, text,
    node_id, display_name, page, score, sentence, sentence_start, sentence_end, sources``;
    ``node_id`` None when no node's sentences hold the sentence's content words). It is the
    sentence game of ``TokenShapley.sentence_sources``, which holds up where the answer
    paraphrases the nodes; it costs about half the attribution on top. If it fails, the key
    is absent, the keyword citations stay and the error is logged.
``"cited_nodes"``
    the ``NodeWithScore`` objects the answer cites, in footnote order:
    ``cited_nodes[n - 1]`` is the node of footnote ``[^n]`` in
    :func:`render_response_markdown` (numbered by first citation in the answer, so the
    numbering is stable for an answer). A node whose sentences only contradict the
    answer is not cited (it is in the ``conflict`` of a citation). With it a query
    engine replaces ``CitationQueryEngine`` without asking the LLM for ``[n]`` markers.

``"citations_error"``
    only when attribution failed: ``"<ExceptionType>: <message>"``. ``"citations"`` is
    then ``[]``. The answer itself is never touched or lost; the error is also logged on
    the ``llama_index.postprocessor.tokenshapley`` logger.

Per-query state lives in a :class:`contextvars.ContextVar` of the postprocessor, opened
by the handler at the start of each query (one per trace / root span), so concurrent
queries (threads, ``asyncio.gather``) never share it.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import (
    AsyncStreamingResponse,
    PydanticResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks.base_handler import BaseCallbackHandler
from llama_index.core.callbacks.schema import CBEventType, EventPayload
from llama_index.core.chat_engine.types import (
    AgentChatResponse,
    BaseChatEngine,
    StreamingAgentChatResponse,
)
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.span import BaseSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from tokenshapley_rag import AttributionResult, KeywordCitation, Source, TokenScores, TokenShapley, footnote_numbers
from tokenshapley_rag._sources import document_name

__all__ = [
    "TokenShapleyPostprocessor",
    "TokenShapleyCallbackHandler",
    "TokenShapleySpanHandler",
    "render_response_markdown",
    "render_response_html",
]

logger = logging.getLogger("llama_index.postprocessor.tokenshapley")

CITATIONS_KEY = "citations"
SENTENCE_SOURCES_KEY = "sentence_sources"
ATTRIBUTION_KEY = "attribution"
ERROR_KEY = "citations_error"
VERDICTS_KEY = "sentence_verdicts"
CITED_NODES_KEY = "cited_nodes"

_SYNC_TEXT_TYPES = (Response, PydanticResponse, AgentChatResponse)


# ---------------------------------------------------------------------------- helpers


def citation_to_dict(citation: KeywordCitation) -> Dict[str, Any]:
    """One keyword citation as the plain dict stored in ``metadata["citations"]``.

    Exactly the core's ``KeywordCitation.to_dict()`` (the one citation schema, see the
    core's docs), with ``source_id`` renamed to ``node_id`` at top level, in ``sources``
    and in ``conflict``; nothing else changes.
    """
    return citation.to_dict(id_key="node_id")


def _node_sources(nodes: List[NodeWithScore]) -> List[Source]:
    """Core sources for nodes: id = node_id, text = the node's content without its
    metadata (``get_content(metadata_mode=MetadataMode.NONE)``), metadata = the node's
    ``metadata`` (for ``display_name`` and ``page``), document = the node's ``ref_doc_id``
    (the document it was parsed from). Duplicate node ids keep the first; nodes whose
    content is blank are skipped (nothing to cite).

    The LLM's prompt also holds the metadata header (``MetadataMode.LLM``: the
    ``key: value`` lines of ``metadata_template``, less ``excluded_llm_metadata_keys``),
    but that header is a label of the document, not evidence for a claim: cited, a
    ``file_path: /data/report_2021.txt`` line "supported" a wrong year 2021 in the
    answer, and a ``title:`` line could contradict a correct number. Only the content
    can support or contradict a keyword, whichever keys the LLM saw. Offsets then
    index the document's own text (``node.text``), which is what citations quote, and
    ``prepare`` caches no header line (sentence keys depend on their sentence alone, so
    the content's keys are the same as in the LLM text).
    """
    out: List[Source] = []
    seen: set = set()
    for n in nodes:
        node_id = n.node.node_id
        if node_id in seen:
            continue
        text = n.node.get_content(metadata_mode=MetadataMode.NONE)
        if not isinstance(text, str) or not text.strip():
            continue
        seen.add(node_id)
        # Chunks of one ingested document back each other when support is checked.
        out.append(Source(id=node_id, text=text, metadata=dict(n.node.metadata or {}), document=document_name(n.node.ref_doc_id)))
    return out


def _query_text(query: Any) -> Optional[str]:
    if isinstance(query, QueryBundle):
        return query.query_str
    if isinstance(query, str):
        return query
    return None


@dataclass
class _Outcome:
    citations: List[Dict[str, Any]]
    result: Optional[AttributionResult] = None
    error: Optional[str] = None
    cited_nodes: List[NodeWithScore] = field(default_factory=list)
    sentence_sources: Optional[List[Dict[str, Any]]] = None


def _cited_nodes(result: AttributionResult, nodes: List[NodeWithScore]) -> List[NodeWithScore]:
    """The cited nodes in footnote order: element ``n - 1`` is the node of footnote ``[^n]``."""
    by_id: Dict[str, NodeWithScore] = {}
    for n in nodes:
        by_id.setdefault(n.node.node_id, n)
    numbers = footnote_numbers(result)
    return [by_id[node_id] for node_id in sorted(numbers, key=numbers.__getitem__)]


@dataclass(eq=False)
class _Run:
    """State of one query / chat turn (one trace or root span)."""

    owner: Any
    query: Optional[str] = None
    nodes: List[NodeWithScore] = field(default_factory=list)
    token: Optional[contextvars.Token] = None
    closed: bool = False
    stream_text: Optional[str] = None  # the wrapped stream's full text, once consumed
    targets: List[Any] = field(default_factory=list)  # response objects (kept alive: ids stay unique)
    delivered: set = field(default_factory=set)
    outcomes: Dict[str, _Outcome] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def record(self, query: Optional[str], nodes: List[NodeWithScore]) -> None:
        with self.lock:
            if query is not None:
                self.query = query  # the postprocessor's query bundle: what the LLM was asked
            known = {n.node.node_id for n in self.nodes}
            self.nodes.extend(n for n in nodes if n.node.node_id not in known)


# ---------------------------------------------------------------------------- postprocessor


class TokenShapleyPostprocessor(BaseNodePostprocessor):
    """Prepare TokenShapley datastores for the retrieved nodes and remember them for the
    handler that attributes the answer.

    The nodes are passed on unchanged (same objects, same order), or, with ``top_n``, only
    the ``top_n`` highest-scoring ones (stable on ties). Their content
    (``node.get_content(metadata_mode=MetadataMode.NONE)``: the metadata header the LLM
    also saw is not evidence, see :func:`_node_sources`) is encoded and cached with
    ``TokenShapley.prepare``, so the attribution after synthesis only encodes the answer.
    If preparing fails the error is logged and the nodes still pass; attribution then
    reports the error in ``metadata["citations_error"]``.

    Citations reach the response only with a handler installed:
    :class:`TokenShapleyCallbackHandler` (query engines) or
    :class:`TokenShapleySpanHandler` (query and chat engines).

    Args:
        token_shapley: The attributor; None builds ``TokenShapley()`` (the default
            SmolLM2-135M encoder; the first use ever converts it, ~30 s).
        top_n: Keep only this many nodes (best score first); None keeps all.
        sentence_sources: Also write ``metadata["sentence_sources"]``: each answer
            sentence's node (``TokenShapley.sentence_sources``).
        callback_manager: Passed to ``BaseNodePostprocessor`` (engines overwrite it).

    Examples:
        >>> from llama_index.core import Settings
        >>> from llama_index.core.callbacks import CallbackManager
        >>> pp = TokenShapleyPostprocessor()  # doctest: +SKIP
        >>> Settings.callback_manager = CallbackManager([TokenShapleyCallbackHandler(pp)])  # doctest: +SKIP
        >>> qe = index.as_query_engine(node_postprocessors=[pp], similarity_top_k=3)  # doctest: +SKIP
        >>> resp = qe.query("How tall is the Eiffel Tower?")  # doctest: +SKIP
        >>> [(c["text"], c["node_id"]) for c in resp.metadata["citations"]]  # doctest: +SKIP
    """

    top_n: Optional[int] = Field(
        default=None, description="Keep only the top_n highest-scoring nodes (None: keep all).", ge=1
    )
    sentence_sources: bool = Field(
        default=False, description='Also write metadata["sentence_sources"]: the node each answer sentence comes from.'
    )

    _ts: TokenShapley = PrivateAttr()
    _run_var: contextvars.ContextVar = PrivateAttr()
    _warned_no_handler: bool = PrivateAttr(default=False)
    _span_handler: Any = PrivateAttr(default=None)

    def __init__(
        self,
        token_shapley: Optional[TokenShapley] = None,
        *,
        top_n: Optional[int] = None,
        sentence_sources: bool = False,
        **kwargs: Any,
    ) -> None:
        if token_shapley is not None and not isinstance(token_shapley, TokenShapley):
            raise TypeError(
                f"token_shapley must be a tokenshapley_rag.TokenShapley or None, got {type(token_shapley).__name__}"
            )
        if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
            raise ValueError(f"top_n must be a positive integer or None, got {top_n!r}")
        if not isinstance(sentence_sources, bool):
            raise TypeError(f"sentence_sources must be a bool, got {type(sentence_sources).__name__}")
        super().__init__(top_n=top_n, sentence_sources=sentence_sources, **kwargs)
        self._ts = token_shapley if token_shapley is not None else TokenShapley()
        self._run_var = contextvars.ContextVar(f"tokenshapley_run_{id(self):x}", default=None)

    @classmethod
    def class_name(cls) -> str:
        return "TokenShapleyPostprocessor"

    @property
    def token_shapley(self) -> TokenShapley:
        """The :class:`tokenshapley_rag.TokenShapley` used to prepare and attribute."""
        return self._ts

    # ------------------------------------------------------------------ node postprocessing

    def _select(self, nodes: List[NodeWithScore]) -> List[NodeWithScore]:
        if self.top_n is None or len(nodes) <= self.top_n:
            return nodes
        ranked = sorted(nodes, key=lambda n: n.score if n.score is not None else float("-inf"), reverse=True)
        return ranked[: self.top_n]

    def _postprocess_nodes(
        self,
        nodes: List[NodeWithScore],
        query_bundle: Optional[QueryBundle] = None,
    ) -> List[NodeWithScore]:
        if query_bundle is None:
            raise ValueError("TokenShapleyPostprocessor needs the query: pass query_bundle or query_str")
        if not nodes:
            return []
        kept = self._select(nodes)
        sources = _node_sources(kept)
        if sources:
            try:
                self._ts.prepare(sources)
            except Exception:  # the user's query goes on; attribution will report the error
                logger.warning("TokenShapley could not prepare the datastore of %d nodes", len(sources), exc_info=True)
        run = self._current_run()
        if run is not None:
            run.record(query_bundle.query_str, kept)
        elif not self._warned_no_handler:
            # No handler opened a run for this query: the response would silently carry no
            # citations (a handler set on Settings after the engine was built, or none).
            self._warned_no_handler = True
            warnings.warn(
                "TokenShapleyPostprocessor ran but no TokenShapley handler is attached, so responses get no "
                "citations. Build the postprocessor with TokenShapleyPostprocessor.with_citations() (it attaches a "
                "TokenShapleySpanHandler to LlamaIndex's root dispatcher, for every engine built before or after), "
                "or attach TokenShapleySpanHandler(pp).attach() yourself.",
                UserWarning,
                stacklevel=2,
            )
        return kept

    @classmethod
    def with_citations(
        cls, token_shapley: Optional[TokenShapley] = None, *, top_n: Optional[int] = None, sentence_sources: bool = False
    ) -> "TokenShapleyPostprocessor":
        """The postprocessor with its :class:`TokenShapleySpanHandler` already attached to
        the root dispatcher: the one-call set-up, which no engine or ``Settings`` order can
        break (query engines, chat engines, streaming, async). :meth:`detach` removes it.

        Examples:
            >>> pp = TokenShapleyPostprocessor.with_citations()  # doctest: +SKIP
            >>> qe = index.as_query_engine(node_postprocessors=[pp])  # doctest: +SKIP
            >>> qe.query("How tall is the Eiffel Tower?").metadata["citations"]  # doctest: +SKIP
        """
        pp = cls(token_shapley, top_n=top_n, sentence_sources=sentence_sources)
        pp._span_handler = TokenShapleySpanHandler(pp).attach()
        return pp

    def detach(self) -> None:
        """Detach the handler :meth:`with_citations` attached (no-op otherwise)."""
        if self._span_handler is not None:
            self._span_handler.detach()
            self._span_handler = None

    # ------------------------------------------------------------------ per-query runs (handlers)

    def _current_run(self) -> Optional[_Run]:
        run = self._run_var.get()
        return run if run is not None and not run.closed else None

    def _open_run(self, owner: Any, query: Optional[str] = None) -> Optional[_Run]:
        """Open a run in the current context unless one is already open there."""
        if self._current_run() is not None:
            return None
        run = _Run(owner=owner, query=query)
        run.token = self._run_var.set(run)
        return run

    def _close_run(self, run: _Run) -> None:
        run.closed = True
        token, run.token = run.token, None
        if token is None:
            return
        try:
            self._run_var.reset(token)
        except (ValueError, RuntimeError):  # closed from another context
            if self._run_var.get() is run:
                self._run_var.set(None)

    def _attribute(self, run: _Run, text: Optional[str], fallback_nodes: List[NodeWithScore]) -> _Outcome:
        """Attribute ``text`` to the run's nodes; never raises."""
        if text is None or not text.strip():
            return _Outcome([])
        try:
            nodes = run.nodes or list(fallback_nodes or [])
            sources = _node_sources(nodes)
            if not sources:
                return _Outcome([])
            result = self._ts.attribute(query=run.query or "", sources=sources, response=text)
            by_sentence = None
            if self.sentence_sources:
                try:
                    by_sentence = [a.to_dict(id_key="node_id") for a in self._ts.sentence_sources(result)]
                except Exception:  # the keyword citations stand without it
                    logger.warning("TokenShapley sentence sources failed; the response has no sentence_sources", exc_info=True)
            return _Outcome(
                [citation_to_dict(c) for c in result.citations], result, None, _cited_nodes(result, nodes), by_sentence
            )
        except Exception as e:  # never lose the user's answer
            logger.warning("TokenShapley attribution failed; the response has no citations", exc_info=True)
            return _Outcome([], None, f"{type(e).__name__}: {e}")

    def _outcome_for(self, run: _Run, text: Optional[str], fallback_nodes: List[NodeWithScore]) -> _Outcome:
        with run.lock:
            key = text or ""
            outcome = run.outcomes.get(key)
            if outcome is None:
                outcome = self._attribute(run, text, fallback_nodes)
                run.outcomes[key] = outcome
            return outcome

    @staticmethod
    def _target_text(run: _Run, target: Any) -> tuple[bool, Optional[str]]:
        """(ready, answer text) of a response object."""
        if isinstance(target, (StreamingResponse, AsyncStreamingResponse)):
            if target.response_txt is not None:
                return True, target.response_txt
            return run.stream_text is not None, run.stream_text
        if isinstance(target, StreamingAgentChatResponse):
            # its final ``response`` is the stripped stream (ContextChatEngine)
            return (run.stream_text is not None, run.stream_text.strip() if run.stream_text is not None else None)
        if isinstance(target, PydanticResponse):
            return True, str(target) if target.response is not None else None
        return True, target.response

    def _deliver(self, run: _Run) -> None:
        """Write citations into every target whose answer text is known."""
        with run.lock:
            for target in run.targets:
                if id(target) in run.delivered:
                    continue
                ready, text = self._target_text(run, target)
                if not ready:
                    continue
                outcome = self._outcome_for(run, text, getattr(target, "source_nodes", None) or [])
                _write_metadata(target, outcome)
                run.delivered.add(id(target))

    def _add_response(self, run: _Run, response: Any) -> None:
        """Track a response object of the run: attribute it now, or once its stream ends."""
        if not isinstance(
            response, (*_SYNC_TEXT_TYPES, StreamingResponse, AsyncStreamingResponse, StreamingAgentChatResponse)
        ):
            return
        with run.lock:
            if any(t is response for t in run.targets):
                return
            if isinstance(response, (StreamingResponse, AsyncStreamingResponse)):
                if response.metadata is None:  # get_response() copies this dict reference
                    response.metadata = {}
                if response.response_txt is None and response.response_gen is not None:
                    if isinstance(response, StreamingResponse):
                        response.response_gen = self._wrap_stream(run, response.response_gen)
                    else:
                        response.response_gen = self._wrap_astream(run, response.response_gen)
            run.targets.append(response)
        self._deliver(run)

    def _stream_done(self, run: _Run, text: str) -> None:
        try:
            with run.lock:
                run.stream_text = text
            self._deliver(run)
        except Exception:
            logger.warning("TokenShapley could not attach citations to a streamed response", exc_info=True)

    def _wrap_stream(self, run: _Run, gen: Iterator[str]) -> Iterator[str]:
        parts: List[str] = []
        for token in gen:
            parts.append(token)
            yield token
        self._stream_done(run, "".join(parts))

    async def _wrap_astream(self, run: _Run, agen: AsyncIterator[str]) -> AsyncIterator[str]:
        parts: List[str] = []
        async for token in agen:
            parts.append(token)
            yield token
        # attribution takes ~1 s of CPU: keep it off the event loop
        await asyncio.to_thread(self._stream_done, run, "".join(parts))


def _write_metadata(target: Any, outcome: _Outcome) -> None:
    metadata = getattr(target, "metadata", None)
    if metadata is None:
        metadata = {}
        # StreamingAgentChatResponse has no metadata field; it is a plain dataclass
        target.metadata = metadata
    metadata[CITATIONS_KEY] = outcome.citations
    metadata[CITED_NODES_KEY] = outcome.cited_nodes
    if outcome.sentence_sources is not None:
        metadata[SENTENCE_SOURCES_KEY] = outcome.sentence_sources
    else:
        metadata.pop(SENTENCE_SOURCES_KEY, None)
    if outcome.result is not None:
        metadata[ATTRIBUTION_KEY] = outcome.result
        metadata[VERDICTS_KEY] = [v.to_dict() for v in outcome.result.sentences]
    else:
        metadata.pop(ATTRIBUTION_KEY, None)
        metadata.pop(VERDICTS_KEY, None)
    if outcome.error is not None:
        metadata[ERROR_KEY] = outcome.error
    else:
        metadata.pop(ERROR_KEY, None)


def _safe(what: str):
    """Decorator: log and swallow any exception (a handler must never abort the query)."""

    def deco(fn):
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except Exception:
                logger.warning("TokenShapley %s failed; the query goes on without citations", what, exc_info=True)
                return None

        wrapper.__name__ = fn.__name__
        wrapper.__doc__ = fn.__doc__
        return wrapper

    return deco


# ---------------------------------------------------------------------------- callback handler


class TokenShapleyCallbackHandler(BaseCallbackHandler):
    """Attribute each query engine answer and attach the citations to the response.

    Install it in the engine's callback manager (``Settings.callback_manager`` before the
    engine is built, or ``RetrieverQueryEngine.from_args(..., callback_manager=...)``;
    ``index.as_query_engine(callback_manager=...)`` does not work, it also passes the
    keyword to the retriever) and put the same postprocessor in ``node_postprocessors``. For ``query``/``aquery`` the citations are in
    ``response.metadata`` when the call returns; for streaming responses once the stream
    has been consumed (``response_gen`` exhausted, ``str(response)``, ``get_response()``,
    ``print_response_stream()``); a stream abandoned early gets none.

    It opens one run per ``"query"`` trace (a context variable: concurrent queries in
    threads or asyncio tasks stay apart), attributes at the ``SYNTHESIZE``/``QUERY`` end
    events and never raises: the callback manager does not guard handlers, so a failure
    here would abort the user's query. Failures go to ``metadata["citations_error"]`` and
    the log instead. Chat engines drop the synthesizer's metadata; use
    :class:`TokenShapleySpanHandler` for them.

    Args:
        postprocessor: The :class:`TokenShapleyPostprocessor` in the engine's
            ``node_postprocessors`` (its recorded nodes are the sources; without it the
            response's ``source_nodes`` are used and nothing is prepared ahead).
        trace_ids: Trace names that open a run (``"query"`` for query engines).

    Examples:
        >>> from llama_index.core.callbacks import CallbackManager
        >>> from llama_index.core.query_engine import RetrieverQueryEngine
        >>> pp = TokenShapleyPostprocessor()  # doctest: +SKIP
        >>> qe = RetrieverQueryEngine.from_args(index.as_retriever(similarity_top_k=3), node_postprocessors=[pp],
        ...     callback_manager=CallbackManager([TokenShapleyCallbackHandler(pp)]))  # doctest: +SKIP
        >>> qe.query("How tall is the Eiffel Tower?").metadata["citations"][0]["node_id"]  # doctest: +SKIP
    """

    def __init__(self, postprocessor: TokenShapleyPostprocessor, *, trace_ids: tuple = ("query",)) -> None:
        if not isinstance(postprocessor, TokenShapleyPostprocessor):
            raise TypeError(
                f"postprocessor must be a TokenShapleyPostprocessor, got {type(postprocessor).__name__}"
            )
        super().__init__(event_starts_to_ignore=[], event_ends_to_ignore=[])
        self.postprocessor = postprocessor
        self.trace_ids = tuple(trace_ids)

    @classmethod
    def class_name(cls) -> str:
        return "TokenShapleyCallbackHandler"

    @_safe("start_trace")
    def start_trace(self, trace_id: Optional[str] = None) -> None:
        if trace_id in self.trace_ids:
            self.postprocessor._open_run(owner=self)

    @_safe("end_trace")
    def end_trace(
        self,
        trace_id: Optional[str] = None,
        trace_map: Optional[Dict[str, List[str]]] = None,
    ) -> None:
        run = self.postprocessor._current_run()
        if run is not None and run.owner is self:
            self.postprocessor._close_run(run)

    def on_event_start(
        self,
        event_type: CBEventType,
        payload: Optional[Dict[str, Any]] = None,
        event_id: str = "",
        parent_id: str = "",
        **kwargs: Any,
    ) -> str:
        self._on_start(event_type, payload)
        return event_id

    @_safe("on_event_start")
    def _on_start(self, event_type: CBEventType, payload: Optional[Dict[str, Any]]) -> None:
        if event_type == CBEventType.QUERY and payload:
            run = self.postprocessor._current_run()
            if run is not None and run.query is None:
                run.query = _query_text(payload.get(EventPayload.QUERY_STR))

    @_safe("on_event_end")
    def on_event_end(
        self,
        event_type: CBEventType,
        payload: Optional[Dict[str, Any]] = None,
        event_id: str = "",
        **kwargs: Any,
    ) -> None:
        if event_type not in (CBEventType.SYNTHESIZE, CBEventType.QUERY) or not payload:
            return
        response = payload.get(EventPayload.RESPONSE)
        run = self.postprocessor._current_run()
        if response is not None and run is not None:
            self.postprocessor._add_response(run, response)


# ---------------------------------------------------------------------------- span handler


class TokenShapleySpanHandler(BaseSpanHandler[BaseSpan]):
    """The same as :class:`TokenShapleyCallbackHandler`, through LlamaIndex's
    instrumentation spans; needed for chat engines.

    A run opens when a query engine or chat engine method is entered with no run open in
    the current context (``query``, ``aquery``, ``chat``, ``achat``, ``stream_chat``,
    ``astream_chat`` ...) and closes when that root span exits or is dropped; nested spans
    belong to it. The root span's ``result`` is the object the user gets, so this handler
    reaches the ``AgentChatResponse`` a ``ContextChatEngine`` /
    ``CondensePlusContextChatEngine`` builds after synthesis (its ``metadata`` is None
    there: a dict is created). Streams are wrapped at the synthesizer's span exit, before
    the chat engine consumes them; a ``StreamingAgentChatResponse`` (which has no
    ``metadata`` field) gets a ``metadata`` attribute once its stream is consumed, with
    offsets into its final (stripped) ``response``.

    The dispatcher swallows span-handler exceptions; this handler logs them too.
    Attach it to the root dispatcher with :meth:`attach` (or
    ``get_dispatcher().add_span_handler(h)``) and remove it with :meth:`detach`.

    Args:
        postprocessor: The :class:`TokenShapleyPostprocessor` in the engine's
            ``node_postprocessors``.

    Examples:
        >>> pp = TokenShapleyPostprocessor()  # doctest: +SKIP
        >>> handler = TokenShapleySpanHandler(pp).attach()  # doctest: +SKIP
        >>> chat = index.as_chat_engine(chat_mode="context", node_postprocessors=[pp])  # doctest: +SKIP
        >>> chat.chat("How tall is the Eiffel Tower?").metadata["citations"]  # doctest: +SKIP
        >>> handler.detach()  # doctest: +SKIP
    """

    _pp: TokenShapleyPostprocessor = PrivateAttr()
    _dispatchers: list = PrivateAttr(default_factory=list)

    def __init__(self, postprocessor: TokenShapleyPostprocessor) -> None:
        if not isinstance(postprocessor, TokenShapleyPostprocessor):
            raise TypeError(
                f"postprocessor must be a TokenShapleyPostprocessor, got {type(postprocessor).__name__}"
            )
        super().__init__(open_spans={}, completed_spans=[], dropped_spans=[], current_span_ids={})
        self._pp = postprocessor
        self._dispatchers = []

    @classmethod
    def class_name(cls) -> str:
        return "TokenShapleySpanHandler"

    @property
    def postprocessor(self) -> TokenShapleyPostprocessor:
        return self._pp

    def attach(self, dispatcher: Any = None) -> "TokenShapleySpanHandler":
        """Add this handler to ``dispatcher`` (default: the root dispatcher); returns self."""
        d = dispatcher if dispatcher is not None else get_dispatcher()
        if not any(h is self for h in d.span_handlers):
            d.add_span_handler(self)
            self._dispatchers.append(d)
        return self

    def detach(self) -> None:
        """Remove this handler from every dispatcher :meth:`attach` added it to."""
        for d in self._dispatchers:
            d.span_handlers[:] = [h for h in d.span_handlers if h is not self]
        self._dispatchers.clear()

    @_safe("span_enter")
    def new_span(
        self,
        id_: str,
        bound_args: Any,
        instance: Optional[Any] = None,
        parent_span_id: Optional[str] = None,
        tags: Optional[Dict[str, Any]] = None,
        **kwargs: Any,
    ) -> Optional[BaseSpan]:
        if isinstance(instance, (BaseQueryEngine, BaseChatEngine)):
            args = getattr(bound_args, "arguments", {}) or {}
            query = _query_text(args.get("str_or_query_bundle", args.get("message")))
            self._pp._open_run(owner=id_, query=query)
        return None  # no span bookkeeping: state lives in the postprocessor's run

    @_safe("span_exit")
    def prepare_to_exit_span(
        self,
        id_: str,
        bound_args: Any,
        instance: Optional[Any] = None,
        result: Optional[Any] = None,
        **kwargs: Any,
    ) -> Optional[BaseSpan]:
        run = self._pp._current_run()
        if run is None:
            return None
        try:
            if result is not None:
                self._pp._add_response(run, result)
        finally:
            if run.owner == id_:
                self._pp._close_run(run)
        return None

    @_safe("span_drop")
    def prepare_to_drop_span(
        self,
        id_: str,
        bound_args: Any,
        instance: Optional[Any] = None,
        err: Optional[BaseException] = None,
        **kwargs: Any,
    ) -> Optional[BaseSpan]:
        run = self._pp._current_run()
        if run is not None and run.owner == id_:
            self._pp._close_run(run)
        return None


# ---------------------------------------------------------------------------- rendering


def _response_text(response: Any) -> str:
    if isinstance(response, (StreamingResponse, AsyncStreamingResponse)):
        return response.response_txt or ""
    if isinstance(response, PydanticResponse):
        return str(response)
    text = getattr(response, "response", None)
    return text if isinstance(text, str) else ""


def _result_of(response: Any) -> AttributionResult:
    metadata = getattr(response, "metadata", None)
    if not isinstance(metadata, dict) or CITATIONS_KEY not in metadata:
        if isinstance(response, (StreamingResponse, AsyncStreamingResponse, StreamingAgentChatResponse)):
            raise ValueError(
                "this streaming response has no citations yet: consume its stream first "
                "(citations are attached when the stream is exhausted)"
            )
        raise ValueError(
            "the response has no TokenShapley citations: install TokenShapleyCallbackHandler "
            "(query engines) or TokenShapleySpanHandler (chat engines) with the postprocessor"
        )
    result = metadata.get(ATTRIBUTION_KEY)
    if isinstance(result, AttributionResult):
        return result
    # nothing was attributed (no sources, empty answer, or an error): the plain answer
    return AttributionResult(
        query="",
        response=_response_text(response),
        sources=[],
        citations=[],
        source_scores={},
        sentence_scores=[],
        tokens=TokenScores.empty(),
    )


def render_response_markdown(response: Any) -> str:
    """The answer with ``[^n]`` footnote markers after cited keywords and the footnotes
    quoting each cited node sentence, labelled with the node's display name and page
    (metadata ``title``, ``file_name``, ... else the node id), from
    ``metadata["attribution"]`` (``AttributionResult.to_markdown``). Footnote ``[^n]`` is
    the node ``metadata["cited_nodes"][n - 1]``.

    A response whose attribution produced nothing (no nodes, blank answer, or an error in
    ``metadata["citations_error"]``) renders as its plain text.

    Raises:
        ValueError: The response was never attributed (no handler installed, or a stream
            not consumed yet).

    Examples:
        >>> print(render_response_markdown(qe.query("How tall is the Eiffel Tower?")))  # doctest: +SKIP
        The Eiffel Tower is 330 metres[^1] tall.
        <BLANKLINE>
        [^1]: Eiffel Tower: "The Eiffel Tower is 330 metres tall."
    """
    return _result_of(response).to_markdown()


def render_response_html(response: Any, *, title: str = "Answer with citations") -> str:
    """A self-contained HTML page of the answer: cited keywords highlighted, hovering or
    focusing one shows its node sentence (``tokenshapley_rag.render_html``). Show it in a
    notebook with ``IPython.display.HTML(render_response_html(resp))``.

    Raises:
        ValueError: As :func:`render_response_markdown`.

    Examples:
        >>> from IPython.display import HTML  # doctest: +SKIP
        >>> HTML(render_response_html(resp))  # doctest: +SKIP
    """
    from tokenshapley_rag import render_html

    return render_html(_result_of(response), title=title)
