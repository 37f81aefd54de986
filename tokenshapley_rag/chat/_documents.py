"""A folder of .txt/.md files split into paragraph chunks with stable ids."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenshapley_rag._segment import split_sentences
from tokenshapley_rag._types import Source

__all__ = ["Chunk", "chunk_text", "load_documents"]

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One paragraph of a document: what is retrieved, shown and attributed to.

    ``id`` is ``"<document>#<n>"`` (``n`` counts the document's chunks from 1), so it
    stays the same as long as the paragraphs before it do. ``start``/``end`` are
    character offsets into the document (``document_text[start:end] == text``).
    ``title`` is the markdown heading the paragraph sits under ("" if none): it helps
    retrieval but is not part of ``text``, so no citation quotes a heading.

    Examples
    --------
    >>> [(c.id, c.title, c.text) for c in chunk_text("guide.md", "# Guide\\nIntro.\\n\\nMore.")]
    [('guide.md#1', 'Guide', 'Intro.'), ('guide.md#2', 'Guide', 'More.')]
    """

    id: str
    document: str
    text: str
    start: int
    end: int
    title: str = ""

    def to_source(self) -> Source:
        """The chunk as a :class:`tokenshapley_rag.Source` (the id is the chunk id)."""
        return Source(
            id=self.id, text=self.text, metadata={"document": self.document, "title": self.title}, document=self.document
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "document": self.document,
            "title": self.title,
            "text": self.text,
            "start": self.start,
            "end": self.end,
        }


def _paragraphs(text: str) -> list[tuple[int, int]]:
    """(start, end) of the paragraphs (blank-line separated), stripped of outer space."""
    spans, pos = [], 0
    for m in _PARAGRAPH_BREAK.finditer(text):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(text)))
    out = []
    for a, b in spans:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            out.append((a, b))
    return out


def _split_long(text: str, a: int, b: int, max_chars: int) -> Iterable[tuple[int, int]]:
    """Cut a paragraph longer than ``max_chars`` at sentence ends (a single longer
    sentence stays whole: attribution cuts it further if the model needs it)."""
    if b - a <= max_chars:
        yield a, b
        return
    start = end = a
    for s, e in split_sentences(text[a:b]):
        if end > start and a + e - start > max_chars:
            yield start, end
            start = a + s
        end = a + e
    if end > start:
        yield start, end


def chunk_text(document: str, text: str, *, max_chars: int = 1200) -> list[Chunk]:
    """Split one document into paragraph chunks (blank-line separated).

    Markdown heading lines (``# ...``) are taken out of the chunks and become the
    ``title`` of the paragraphs under them. Paragraphs over ``max_chars`` are cut at
    sentence ends.
    """
    chunks: list[Chunk] = []
    title = ""
    for a, b in _paragraphs(text):
        # Leading heading lines of the paragraph set the title; the body starts after them.
        while a < b:
            nl = text.find("\n", a, b)
            line_end = b if nl < 0 else nl
            if not _HEADING.match(text[a:line_end]):
                break
            title = text[a:line_end].strip().lstrip("#").strip()
            a = line_end
            while a < b and text[a].isspace():
                a += 1
        if a >= b:
            continue
        for s, e in _split_long(text, a, b, max_chars):
            chunks.append(Chunk(f"{document}#{len(chunks) + 1}", document, text[s:e], s, e, title))
    return chunks


def load_documents(folder: str | os.PathLike[str], *, max_chars: int = 1200) -> list[Chunk]:
    """Chunks of every ``.txt`` / ``.md`` file under ``folder`` (recursively, in path
    order). Document names are paths relative to ``folder`` with ``/`` separators.

    Raises
    ------
    FileNotFoundError
        ``folder`` is not a directory, or holds no non-empty .txt/.md file.

    Examples
    --------
    >>> chunks = load_documents("tests/data/chat_docs")  # doctest: +SKIP
    >>> chunks[0].id  # doctest: +SKIP
    'eiffel.md#1'
    """
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"--docs {str(folder)!r} is not a folder")
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in (".txt", ".md"))
    chunks: list[Chunk] = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        chunks.extend(chunk_text(path.relative_to(root).as_posix(), text, max_chars=max_chars))
    if not chunks:
        raise FileNotFoundError(f"no non-empty .txt or .md file under {str(folder)!r}")
    return chunks
