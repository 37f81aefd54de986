"""Retrievers: which chunks a question is answered from."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from tokenshapley_rag._segment import STOPWORDS
from tokenshapley_rag.chat._documents import Chunk

__all__ = ["Hit", "Retriever", "LexicalRetriever"]

_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class Hit:
    """A retrieved chunk and its retrieval score (higher is better)."""

    chunk: Chunk
    score: float


@runtime_checkable
class Retriever(Protocol):
    """Anything with ``retrieve(question, k) -> list[Hit]`` (best first, at most ``k``).

    It is called from a worker thread, so it may block (a vector store, a web API).
    """

    def retrieve(self, question: str, k: int) -> list[Hit]: ...


def _terms(text: str) -> list[str]:
    # Casefolded words minus stopwords; a crude plural strip lets "towers" find "tower".
    out = []
    for w in _WORD.findall(text.casefold()):
        if w in STOPWORDS:
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.append(w)
    return out


class LexicalRetriever:
    """Okapi BM25 over the chunks' words (no model, no index files).

    Chunks with no query word score 0 and are never returned, so an off-topic question
    gets no sources rather than random ones.

    Examples
    --------
    >>> from tokenshapley_rag.chat import chunk_text
    >>> r = LexicalRetriever(chunk_text("a.md", "Paris is in France.\\n\\nBerlin is in Germany."))
    >>> [h.chunk.id for h in r.retrieve("Where is Berlin?", 3)]
    ['a.md#2']
    """

    def __init__(self, chunks: Sequence[Chunk], *, k1: float = 1.5, b: float = 0.75) -> None:
        self.chunks = list(chunks)
        self.k1, self.b = k1, b
        self._tf = [Counter(_terms(f"{c.title}\n{c.text}" if c.title else c.text)) for c in self.chunks]
        self._len = [sum(tf.values()) for tf in self._tf]
        self._avg = (sum(self._len) / len(self._len)) if self._len else 1.0
        df: Counter[str] = Counter()
        for tf in self._tf:
            df.update(tf.keys())
        n = len(self.chunks)
        self._idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}

    def retrieve(self, question: str, k: int) -> list[Hit]:
        terms = set(_terms(question))
        hits = []
        for i, tf in enumerate(self._tf):
            score = 0.0
            norm = self.k1 * (1 - self.b + self.b * self._len[i] / (self._avg or 1.0))
            for t in terms:
                f = tf.get(t, 0)
                if f:
                    score += self._idf[t] * f * (self.k1 + 1) / (f + norm)
            if score > 0:
                hits.append(Hit(self.chunks[i], score))
        hits.sort(key=lambda h: -h.score)  # stable: ties keep document order
        return hits[:k]
