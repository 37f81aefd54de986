"""A reference chat web app whose answers stream with keyword citation footnotes.

Optional extra (``pip install "tokenshapley-rag[chat]"``: starlette, uvicorn); the core
never imports it. ``tokenshapley chat --docs FOLDER`` serves it; in code:

>>> from tokenshapley_rag import TokenShapley
>>> from tokenshapley_rag.chat import create_app
>>> app = create_app(TokenShapley(), "my_docs/")  # doctest: +SKIP
>>> import uvicorn; uvicorn.run(app, host="127.0.0.1", port=8000)  # doctest: +SKIP

Every part is injected: ``create_app(ts, documents, generator=..., retriever=...)``. A
generator is anything with ``generate(question, chunks) -> Iterator[str]``, a retriever
anything with ``retrieve(question, k) -> list[Hit]``. :func:`create_service` is the
attribution service alone (``POST /attribute``; ``tokenshapley serve``).
"""

from tokenshapley_rag.chat._app import ChatConfig, ChatState, create_app, create_service
from tokenshapley_rag.chat._documents import Chunk, chunk_text, load_documents
from tokenshapley_rag.chat._generators import FixedTextGenerator, Generator, LocalModelGenerator
from tokenshapley_rag.chat._retrieve import Hit, LexicalRetriever, Retriever

__all__ = [
    "ChatConfig",
    "ChatState",
    "Chunk",
    "FixedTextGenerator",
    "Generator",
    "Hit",
    "LexicalRetriever",
    "LocalModelGenerator",
    "Retriever",
    "chunk_text",
    "create_app",
    "create_service",
    "load_documents",
]
