"""Turning what a user passes as sources into validated :class:`Source` objects (no model,
no torch: the CLI and chain evaluation check their inputs before loading one)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

from tokenshapley_rag._text import check_text
from tokenshapley_rag._types import Source
from tokenshapley_rag.errors import DuplicateSourceIdError, EmptyTextError, InvalidInputTypeError

__all__ = ["coerce_sources", "demo_passages", "document_index", "document_name"]


def coerce_sources(sources: Iterable[Any]) -> list[Source]:
    """Turn strings, :class:`Source` objects, mappings or objects with ``id``/``text``
    attributes into a validated list of :class:`Source` (ids ``"0"``, ``"1"``, ... for
    plain strings).

    Raises
    ------
    InvalidInputTypeError
        ``sources`` is a string, or an item is not one of the accepted kinds.
    EmptyTextError
        No sources, or a source whose text is empty or only whitespace.
    DuplicateSourceIdError
        Two sources share an id.

    Examples
    --------
    >>> [s.id for s in coerce_sources(["a.", {"id": "x", "text": "b."}])]
    ['0', 'x']
    """
    if isinstance(sources, (str, bytes)):
        raise InvalidInputTypeError("sources must be a list of texts or Source objects, not a single string")
    if not isinstance(sources, Iterable):
        raise InvalidInputTypeError(f"sources must be a list, got {type(sources).__name__}")
    out: list[Source] = []
    for i, item in enumerate(sources):
        if isinstance(item, Source):
            src = item
        elif isinstance(item, str):
            src = Source(id=str(i), text=item)
        elif isinstance(item, Mapping) and "text" in item:
            sid = item.get("id")
            src = Source(
                id=str(i) if sid is None else sid, text=item["text"], metadata=dict(item.get("metadata") or {}),
                document=item.get("document"),
            )
        elif hasattr(item, "text") and hasattr(item, "id"):
            src = Source(
                id=item.id, text=item.text, metadata=dict(getattr(item, "metadata", None) or {}),
                document=getattr(item, "document", None),
            )
        else:
            raise InvalidInputTypeError(
                f"sources[{i}] must be a str, a Source, a mapping with 'text' or an object with id and text; "
                f"got {type(item).__name__}"
            )
        check_text(src.text, f"sources[{i}].text")
        if not isinstance(src.id, str):
            # Ids are compared as strings: 1 and "1" are the same source (to_dict writes both as "1").
            if isinstance(src.id, bool) or not isinstance(src.id, (int, str)):
                raise InvalidInputTypeError(f"sources[{i}].id must be a str or an int, got {type(src.id).__name__}")
            src = Source(id=str(src.id), text=src.text, metadata=src.metadata, document=src.document)
        check_text(src.id, f"sources[{i}].id")
        if src.document is not None:
            if not isinstance(src.document, str):
                raise InvalidInputTypeError(
                    f"sources[{i}].document must be a str or None, got {type(src.document).__name__}"
                )
            check_text(src.document, f"sources[{i}].document")
        if not src.text.strip():
            raise EmptyTextError(f"sources[{i}] (id {src.id!r}) is empty or only whitespace")
        out.append(src)
    if not out:
        raise EmptyTextError("sources is empty: give at least one source text to attribute to")
    seen: dict[str, int] = {}
    for i, src in enumerate(out):
        if src.id in seen:
            raise DuplicateSourceIdError(f"source id {src.id!r} is used by sources[{seen[src.id]}] and sources[{i}]")
        seen[src.id] = i
    return out


def document_name(value: Any) -> str | None:
    """``value`` as a :attr:`Source.document`: a non-blank string, else None. How the
    integrations read a chunk's document (LlamaIndex's ``ref_doc_id``, LangChain's
    ``metadata["source"]``): a chunk naming none is a document of its own.

    >>> document_name("docs/eiffel.md"), document_name("  "), document_name(None), document_name(7)
    ('docs/eiffel.md', None, None, None)
    """
    return value if isinstance(value, str) and value.strip() else None


def document_index(sources: list[Source]) -> list[int]:
    """Each source's document as an index: sources naming the same ``document`` share
    one, and a source without one is a document of its own.

    >>> document_index([Source("a#1", "x", document="a"), Source("b", "y"), Source("a#2", "z", document="a")])
    [0, 1, 0]
    """
    index: dict[object, int] = {}
    # A source without a document is keyed by its position, which no document name equals.
    return [index.setdefault(("doc", s.document) if s.document is not None else ("pos", i), len(index))
            for i, s in enumerate(sources)]


def demo_passages() -> tuple[str, list[Source]]:
    """The bundled demo question and its passages (``tokenshapley demo``, the warm-up).

    >>> question, sources = demo_passages(); [s.id for s in sources]
    ['eiffel', 'statue', 'bigben']
    """
    data = json.loads(resources.files("tokenshapley_rag.data").joinpath("demo_passages.json").read_text(encoding="utf-8"))
    return data["question"], coerce_sources(data["sources"])
