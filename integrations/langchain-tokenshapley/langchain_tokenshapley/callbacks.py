"""``TokenShapleyCallbackHandler``: citations for any chain with a retriever and an LLM."""

from __future__ import annotations

import logging
import threading
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult
from tokenshapley_rag import AttributionResult, TokenShapley
from tokenshapley_rag.errors import InvalidInputError

from langchain_tokenshapley._convert import attribute_documents

__all__ = ["TokenShapleyCallbackHandler"]

logger = logging.getLogger(__name__)

#: Warned when a root run generated an answer but no retriever ran under it: the documents
#: came from somewhere the callbacks do not report (a ``RunnableLambda``, a plain function),
#: and the run would otherwise end with no citations and no word of why.
NO_RETRIEVER_WARNING = (
    "TokenShapleyCallbackHandler saw an LLM answer but no retriever run in this chain, so it has no "
    "documents to cite and records no citations for it (handler.citations is not updated). The handler "
    "reads documents only from a retriever's callbacks (on_retriever_end): documents returned by a "
    "RunnableLambda or a plain function are invisible to it. Make the retrieval step a LangChain "
    "BaseRetriever (vectorstore.as_retriever(), or a BaseRetriever subclass around your function), or "
    "cite the chain's output dict with TokenShapleyCitations: "
    "chain.assign(citations=TokenShapleyCitations(ts))."
)


@dataclass
class _Capture:
    """What one root run has produced so far."""

    query: str | None = None
    documents: list[Document] = field(default_factory=list)
    answer: str | None = None
    retrieved: bool = False  # a retriever ended in this root run
    generated: bool = False  # an LLM or chat model ended in this root run


class TokenShapleyCallbackHandler(BaseCallbackHandler):
    """Cite the keywords of a chain's generated answer from the documents its retriever returned.

    Pass it in the config of a chain call, ``chain.invoke(x, config={"callbacks": [handler]})``
    (also ``ainvoke``, ``batch``, ``abatch``, ``stream``, ``astream``). During the run it
    records the retriever's query (``on_retriever_start``), the retrieved documents
    (``on_retriever_end``; several retriever calls are pooled) and the generated text
    (``on_llm_end``, for LLMs and chat models; the last generation of the run wins). When
    the root run ends, it attributes the text to the documents with TokenShapley and stores
    the citations (the same dicts as :class:`~langchain_tokenshapley.TokenShapleyCitations`
    returns) under the root run id. Streaming runs are attributed once the stream is
    exhausted.

    **Run keying.** In an LCEL chain the retriever and the LLM are siblings (their parents
    are different sub-chains), so the handler maps every run id to its root run id as runs
    start and keys everything by the root: the run with no parent, i.e. the id you can set
    with ``config={"run_id": ...}``, one per input of ``batch``. If the handler is attached
    below the root (``sub_chain.with_config(callbacks=[handler])``), the key is the topmost
    run it sees. The retriever and the LLM must run under one such run.

    **Errors.** The handler never breaks the chain: ``raise_error`` is False, and any
    exception from the attribution is caught, logged as a warning on the
    ``langchain_tokenshapley.callbacks`` logger and stored in :attr:`errors_by_run`
    (that run then has no entry in :attr:`citations_by_run`). A root run that itself fails
    is not attributed. A root run without both a retriever and an LLM under it is ignored
    (nothing is stored); one whose retriever returned nothing, or whose answer is empty,
    gets ``[]``.

    **No retriever.** A root run whose LLM or chat model answered while no retriever ran
    under it (documents from a ``RunnableLambda``, a common LCEL pattern) cannot be cited:
    the handler sees documents only through retriever callbacks. It then warns, a
    ``UserWarning`` once per such root run, naming the fixes: a ``BaseRetriever`` for the
    retrieval step, or :class:`~langchain_tokenshapley.TokenShapleyCitations` on the
    chain's output.

    **Offsets** ``start`` / ``end`` index into the LLM's generated text (the
    ``response`` of :attr:`results_by_run`), which is the chain's answer as long as the
    output parser does not rewrite it (``StrOutputParser`` does not).

    **Threads.** Bookkeeping is guarded by a lock (``batch`` runs callbacks in a thread
    pool); attribution runs in the thread that ends the root run, so ``invoke`` returns
    after the citations are stored. Under ``ainvoke`` LangChain runs this synchronous
    handler in an executor, off the event loop.

    Args:
        tokenshapley: The attributor. None creates a default ``TokenShapley()`` on first
            use; share one instance with ``TokenShapleyCitations`` when you use both.
        supported_only: Drop keywords that no document supports.
        max_runs: How many finished runs to keep (oldest dropped first); None keeps all.

    Example:
        .. code-block:: python

            handler = TokenShapleyCallbackHandler(ts)
            answer = rag_chain.invoke({"input": "How tall is the Eiffel Tower?"},
                                      config={"callbacks": [handler]})
            handler.citations                   # citations of the last finished run
            handler.citations_by_run[run_id]    # by root run id

        The README and ``notebooks/langchain_citations.ipynb`` run this end to end.
    """

    # Explicit: an exception raised here would be re-raised into the user's chain if this
    # were True. Attribution errors are caught below in any case; this covers the rest.
    raise_error: bool = False
    # Not inline: under ainvoke LangChain then runs the (blocking) attribution in an
    # executor instead of on the event loop.
    run_inline: bool = False

    def __init__(
        self,
        tokenshapley: TokenShapley | None = None,
        *,
        supported_only: bool = False,
        max_runs: int | None = 1024,
    ) -> None:
        """Create the handler (see the class docstring for the arguments)."""
        super().__init__()
        if max_runs is not None and (isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1):
            raise InvalidInputError(f"max_runs must be a positive integer or None, got {max_runs!r}")
        self.tokenshapley = tokenshapley
        self.supported_only = supported_only
        self.max_runs = max_runs
        self._lock = threading.Lock()  # guards the tables below, never held while attributing
        self._init_lock = threading.Lock()  # guards the lazy default TokenShapley
        self._root_of: dict[UUID, UUID] = {}
        self._members: dict[UUID, list[UUID]] = {}
        self._captures: dict[UUID, _Capture] = {}
        self._citations: OrderedDict[UUID, list[dict[str, Any]]] = OrderedDict()
        self._results: OrderedDict[UUID, AttributionResult] = OrderedDict()
        self._errors: OrderedDict[UUID, Exception] = OrderedDict()
        self._last_run_id: UUID | None = None

    # ------------------------------------------------------------------ results

    @property
    def citations(self) -> list[dict[str, Any]]:
        """Citations of the last root run that finished (``[]`` before any, or if it failed)."""
        with self._lock:
            if self._last_run_id is None:
                return []
            return list(self._citations.get(self._last_run_id, []))

    @property
    def citations_by_run(self) -> dict[UUID, list[dict[str, Any]]]:
        """Citations by root run id, oldest first (a snapshot)."""
        with self._lock:
            return dict(self._citations)

    @property
    def results_by_run(self) -> dict[UUID, AttributionResult]:
        """Full core results by root run id (for ``to_markdown()`` / ``to_html()``); a snapshot.

        A run whose answer is empty has no result; one whose retriever found no document with
        text has a result with every keyword ``unsupported``.
        """
        with self._lock:
            return dict(self._results)

    @property
    def errors_by_run(self) -> dict[UUID, Exception]:
        """The exception of every root run whose attribution failed, by root run id (a snapshot)."""
        with self._lock:
            return dict(self._errors)

    @property
    def last_run_id(self) -> UUID | None:
        """Root run id of the last run that finished and was attributed (or failed to be)."""
        with self._lock:
            return self._last_run_id

    def clear(self) -> None:
        """Forget all finished runs (runs in progress are kept)."""
        with self._lock:
            self._citations.clear()
            self._results.clear()
            self._errors.clear()
            self._last_run_id = None

    # ------------------------------------------------------------------ bookkeeping

    def _root(self, run_id: UUID, parent_run_id: UUID | None) -> UUID:
        """Root run id of ``run_id``, registering it if it is new. Caller holds the lock."""
        root = self._root_of.get(run_id)
        if root is not None:
            return root
        root = self._root_of.get(parent_run_id, run_id) if parent_run_id is not None else run_id
        self._root_of[run_id] = root
        self._members.setdefault(root, []).append(run_id)
        return root

    def _start(self, run_id: UUID, parent_run_id: UUID | None) -> _Capture:
        with self._lock:
            root = self._root(run_id, parent_run_id)
            return self._captures.setdefault(root, _Capture())

    def _end(self, run_id: UUID, *, failed: bool) -> None:
        """Attribute and forget the root run if ``run_id`` is one."""
        with self._lock:
            if self._root_of.get(run_id) != run_id:
                return
            for member in self._members.pop(run_id, ()):
                self._root_of.pop(member, None)
            capture = self._captures.pop(run_id, None)
        if failed or capture is None:
            return
        if capture.generated and not capture.retrieved:
            # Checked when the root ends, not at on_llm_end: a retriever may still run after
            # a first LLM call (a query rewrite, an agent's tool). Without this the run
            # silently leaves no citations, as for a chain with no retrieval at all.
            warnings.warn(NO_RETRIEVER_WARNING, UserWarning, stacklevel=2)
            return
        if not (capture.retrieved and capture.generated):
            logger.debug("run %s had no retriever or no LLM under it: nothing to attribute", run_id)
            return
        self._attribute(run_id, capture)

    def _attributor(self) -> TokenShapley:
        ts = self.tokenshapley
        if ts is None:
            with self._init_lock:
                if self.tokenshapley is None:
                    self.tokenshapley = TokenShapley()
                ts = self.tokenshapley
        return ts

    def _attribute(self, root: UUID, capture: _Capture) -> None:
        try:
            citations, result = attribute_documents(
                self._attributor,
                capture.query or "",
                capture.documents,
                capture.answer or "",
                supported_only=self.supported_only,
                key="documents",
            )
        except Exception as err:  # never break the user's chain: record and log
            logger.warning("TokenShapley attribution failed for run %s: %r", root, err)
            self._record(root, error=err)
            return
        self._record(root, citations=citations, result=result)

    def _record(
        self,
        root: UUID,
        *,
        citations: list[dict[str, Any]] | None = None,
        result: AttributionResult | None = None,
        error: Exception | None = None,
    ) -> None:
        """Store the outcome of a finished run (replacing any earlier one under the same id)
        and drop the oldest runs beyond ``max_runs``."""
        with self._lock:
            tables: list[tuple[OrderedDict[UUID, Any], Any]] = [
                (self._citations, citations),
                (self._results, result),
                (self._errors, error),
            ]
            for table, value in tables:
                table.pop(root, None)
                if value is not None:
                    table[root] = value
                if self.max_runs is not None:
                    while len(table) > self.max_runs:
                        table.popitem(last=False)
            self._last_run_id = root

    # ------------------------------------------------------------------ callbacks

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: dict[str, Any] | Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Register the run under its root."""
        self._start(run_id, parent_run_id)

    def on_chain_end(
        self, outputs: dict[str, Any] | Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """Attribute when the root run ends."""
        self._end(run_id, failed=False)

    def on_chain_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """Forget a failed root run without attributing."""
        self._end(run_id, failed=True)

    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Register the run under its root (retrievers may run inside tools)."""
        self._start(run_id, parent_run_id)

    def on_tool_end(self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        """End the run (a root only when the tool was called on its own)."""
        self._end(run_id, failed=False)

    def on_tool_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """Forget the run if it is a root."""
        self._end(run_id, failed=True)

    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Record the retriever's query (the first one of the root run). ``serialized`` is None for retrievers."""
        capture = self._start(run_id, parent_run_id)
        with self._lock:
            if capture.query is None and isinstance(query, str):
                capture.query = query

    def on_retriever_end(
        self, documents: Sequence[Document], *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """Add the retrieved documents to the root run's context."""
        capture = self._start(run_id, parent_run_id)
        with self._lock:
            capture.retrieved = True
            capture.documents.extend(d for d in documents if isinstance(d, Document))
        self._end(run_id, failed=False)

    def on_retriever_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """Forget the run if it is a root."""
        self._end(run_id, failed=True)

    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Register the LLM run under its root."""
        self._start(run_id, parent_run_id)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Register the chat model run under its root (the base class would raise NotImplementedError)."""
        self._start(run_id, parent_run_id)

    def on_llm_end(
        self, response: LLMResult, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """Record the generated text (first generation of the first prompt; chat models too)."""
        capture = self._start(run_id, parent_run_id)
        generations = getattr(response, "generations", None)
        text = generations[0][0].text if generations and generations[0] else None
        with self._lock:
            capture.generated = True
            if isinstance(text, str):
                capture.answer = text
        self._end(run_id, failed=False)

    def on_llm_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """Forget the run if it is a root."""
        self._end(run_id, failed=True)
