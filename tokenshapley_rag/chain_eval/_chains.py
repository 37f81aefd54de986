"""Run a retrieval chain on one question and read back its answer and retrieved chunks.

Chains are duck-typed so that the core never imports a framework:

* **LlamaIndex query engine**: ``engine.query(question)`` returns a ``Response`` with
  ``.response`` (str or None) and ``.source_nodes`` (``NodeWithScore``: ``.node.node_id``,
  ``.node.get_content(metadata_mode="none")``, ``.node.metadata``, ``.score``). A
  ``StreamingResponse`` is drained with ``get_response()`` first. The attributed text is
  the node's content without its metadata header (``MetadataMode.NONE``, whose value is
  ``"none"``), as in the LlamaIndex integration: the ``key: value`` lines the LLM also
  saw (``file_path: ...``) are labels, not evidence.
* **LangChain runnable**: ``runnable.invoke({"input": q, "question": q})`` returns a dict
  with ``answer`` (str or a message with str ``content``) and ``context`` (``Document``:
  ``.page_content``, ``.metadata``, ``.id``), which is what ``create_retrieval_chain``
  returns. Both input keys are sent so that chains reading either work; pass
  ``input_key`` to send only one.

Retrieval rank is the 1-based position in ``source_nodes`` / ``context``. Chunks with
blank text are skipped (there is nothing in them to cite); a chunk repeated with the same
id and text keeps its first rank; the same id with another text is an error.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tokenshapley_rag._sources import document_name
from tokenshapley_rag._types import Source
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError

__all__ = ["ChainOutput", "build_chain", "chain_kind", "resolve_factory", "run_chain"]


@dataclass(frozen=True, slots=True)
class ChainOutput:
    """What a chain produced for one question.

    ``sources[i]`` was retrieved at rank ``ranks[i]`` (1-based).
    """

    answer: str
    sources: tuple[Source, ...]
    ranks: tuple[int, ...]


def chain_kind(chain: Any) -> str:
    """``"llamaindex"`` (has ``query``) or ``"langchain"`` (has ``invoke``).

    Raises
    ------
    InvalidInputTypeError
        The object has neither method.

    Examples
    --------
    >>> class Engine:
    ...     def query(self, q): ...
    >>> chain_kind(Engine())
    'llamaindex'
    """
    if callable(getattr(chain, "query", None)):
        return "llamaindex"
    if callable(getattr(chain, "invoke", None)):
        return "langchain"
    raise InvalidInputTypeError(
        "chain must be a LlamaIndex query engine (with .query(str)) or a LangChain runnable "
        f"(with .invoke(dict)); got {type(chain).__name__}"
    )


def run_chain(chain: Any, question: str, *, input_key: str | None = None) -> ChainOutput:
    """Ask ``chain`` one question and return its answer and ranked sources.

    Parameters
    ----------
    chain : LlamaIndex query engine or LangChain runnable (see the module docstring)
    question : str
    input_key : str or None, default=None
        LangChain only: the input dict's key. None sends ``{"input": q, "question": q}``.

    Returns
    -------
    ChainOutput

    Raises
    ------
    InvalidInputTypeError
        The chain's output does not have the expected shape (the message says what it got).
    InvalidInputError
        Two retrieved chunks share an id but not their text.
    Exception
        Whatever the chain itself raises, unchanged.
    """
    kind = chain_kind(chain)
    if kind == "llamaindex":
        resp = chain.query(question)
        if getattr(resp, "response", None) is None and callable(getattr(resp, "get_response", None)):
            resp = resp.get_response()  # StreamingResponse: drain the generator
        if not hasattr(resp, "source_nodes"):
            raise InvalidInputTypeError(
                f"query engine returned {type(resp).__name__}, expected a Response with .response and .source_nodes"
            )
        answer = _answer_text(getattr(resp, "response", None), "Response.response")
        items = [_node_source(n, rank) for rank, n in enumerate(resp.source_nodes or [], start=1)]
    else:
        inputs = {"input": question, "question": question} if input_key is None else {input_key: question}
        out = chain.invoke(inputs)
        if not isinstance(out, Mapping):
            raise InvalidInputTypeError(
                f"runnable returned {type(out).__name__}, expected a dict with 'answer' and 'context' "
                "(what create_retrieval_chain returns)"
            )
        missing = [k for k in ("answer", "context") if k not in out]
        if missing:
            raise InvalidInputTypeError(f"runnable output has no {missing} key(s); it has {sorted(map(str, out))}")
        answer = _answer_text(out["answer"], "output['answer']")
        docs = out["context"]
        if isinstance(docs, (str, bytes)) or not isinstance(docs, Sequence):
            raise InvalidInputTypeError(f"output['context'] must be a list of Documents, got {type(docs).__name__}")
        items = [_document_source(d, rank) for rank, d in enumerate(docs, start=1)]
    return _dedupe(answer, items)


def _answer_text(value: Any, what: str) -> str:
    if value is None:
        return ""  # LlamaIndex leaves response None when nothing was generated
    if isinstance(value, str):
        return value
    content = getattr(value, "content", None)  # a chat message (chain without an output parser)
    if isinstance(content, str):
        return content
    raise InvalidInputTypeError(f"{what} must be a str (or a message with str content), got {type(value).__name__}")


def _node_source(nws: Any, rank: int) -> tuple[int, Source | None]:
    node = getattr(nws, "node", nws)
    node_id = getattr(node, "node_id", None) or getattr(node, "id_", None) or str(rank - 1)
    get_content = getattr(node, "get_content", None)
    if callable(get_content):
        text = get_content(metadata_mode="none")  # content only: metadata is not evidence
    else:
        text = getattr(node, "text", None)
    if not isinstance(text, str):
        raise InvalidInputTypeError(f"source node at rank {rank} has no text (got {type(text).__name__})")
    metadata = dict(getattr(node, "metadata", None) or {})
    score = getattr(nws, "score", None)
    if isinstance(score, (int, float)):
        metadata.setdefault("retrieval_score", float(score))
    # the ingested document the node was parsed from
    source = Source(str(node_id), text, metadata, document_name(getattr(node, "ref_doc_id", None)))
    return rank, (source if text.strip() else None)


def _document_source(doc: Any, rank: int) -> tuple[int, Source | None]:
    text = getattr(doc, "page_content", None)
    if not isinstance(text, str):
        raise InvalidInputTypeError(
            f"output['context'][{rank - 1}] must be a Document with str page_content, got {type(doc).__name__}"
        )
    doc_id = getattr(doc, "id", None) or str(rank - 1)
    metadata = dict(getattr(doc, "metadata", None) or {})
    # the file or URL a loader read; splitters copy it into each chunk
    source = Source(str(doc_id), text, metadata, document_name(metadata.get("source")))
    return rank, (source if text.strip() else None)


def _dedupe(answer: str, items: list[tuple[int, Source | None]]) -> ChainOutput:
    """Drop blank chunks and repeats (same id and text); keep the first rank of each."""
    sources: list[Source] = []
    ranks: list[int] = []
    by_id: dict[str, tuple[int, Source]] = {}
    for rank, src in items:
        if src is None:
            continue
        if src.id in by_id:
            first_rank, first = by_id[src.id]
            if first.text == src.text:
                continue
            raise InvalidInputError(
                f"the chunks retrieved at ranks {first_rank} and {rank} share the id {src.id!r} but not their "
                "text; give each chunk a unique id"
            )
        by_id[src.id] = (rank, src)
        sources.append(src)
        ranks.append(rank)
    return ChainOutput(answer=answer, sources=tuple(sources), ranks=tuple(ranks))


def resolve_factory(spec: str | Callable[[], Any]) -> Callable[[], Any]:
    """The zero-argument chain factory named by ``spec``.

    Parameters
    ----------
    spec : str or callable
        ``"package.module:function"`` (imported here; with Ray, inside each actor, so the
        module must be importable on every node), or a zero-argument callable, returned as is.

    Raises
    ------
    InvalidInputError
        ``spec`` is not of the form ``module:function``, or the module has no such attribute.
    ModuleNotFoundError
        The module cannot be imported.

    Examples
    --------
    >>> resolve_factory("collections:OrderedDict")()
    OrderedDict()
    """
    if callable(spec):
        return spec
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise InvalidInputError(f"a chain factory spec must look like 'package.module:function', got {spec!r}")
    module_name, attr = spec.split(":")
    module = importlib.import_module(module_name)
    factory = module
    for part in attr.split("."):
        if not hasattr(factory, part):
            raise InvalidInputError(f"chain factory {spec!r}: {module_name} has no attribute {attr!r}")
        factory = getattr(factory, part)
    if not callable(factory):
        raise InvalidInputTypeError(f"chain factory {spec!r} is a {type(factory).__name__}, not a callable")
    return factory


def build_chain(spec: str | Callable[[], Any]) -> Any:
    """Call the factory named by ``spec`` (see :func:`resolve_factory`) and check the chain's kind."""
    chain = resolve_factory(spec)()
    chain_kind(chain)
    return chain
