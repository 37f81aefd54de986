"""The sentence game: answer sentence -> source sentence evidence that holds up when the
answer paraphrases (docs/method.md §9).

The token game (§3) keys every datastore entry by the hidden state before one token, so a
source sentence earns value only through answer tokens whose nearest entries it holds. Where
an answer paraphrases, few of its tokens have such entries. The sentence game keys each
*source sentence* by an embedding of the whole sentence and queries it with the embedding of
the whole answer sentence; the values are still those of a KNN vote on the answer's words:

for each answer sentence ``a`` and each distinct content word ``w`` of ``a`` (a ``\\w+`` run,
NFKC + case folded, not a stopword or filler of :mod:`._segment`), the players are the
candidate source sentences ``j = 1..N``, ranked by cosine similarity ``cos(e_a, e_j)``
(ties: lower index first), with ``s_j = exp(cos(e_a, e_j) - max_j cos)``; player ``j``
*matches* when sentence ``j`` holds ``w`` as a word; the utility is the weighted KNN vote of
:mod:`tokenshapley_rag.shapley` (``U(S) = 1[sum over the top min(K, |S|) of S of +-s_j >= 0]``).
A sentence's value is the sum of its exact Shapley values over every (sentence, word) game,
so it is the exact Shapley value of the summed game. With ``K = 1`` a word credits the
nearest sentences that hold it and charges the nearer ones that do not.

The embeddings come from the caller (the benchmark uses the bundled all-MiniLM-L6-v2); the
game itself is pure numpy.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

import numpy as np

from tokenshapley_rag._segment import FILLERS, STOPWORDS
from tokenshapley_rag.errors import InvalidInputError
from tokenshapley_rag.shapley import knn_shapley_batch

__all__ = ["content_words", "evidence_scores", "sentence_game_values", "unit_rows"]

_WORD = re.compile(r"\w+")
_NON_CONTENT = STOPWORDS | FILLERS


def _words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def content_words(text: str) -> list[str]:
    """The distinct content words of ``text``, in order (``\\w+``, NFKC + case folded,
    stopwords and fillers left out).

    >>> content_words("The Eiffel tower is in Paris, the tower.")
    ['eiffel', 'tower', 'paris']
    """
    return list(dict.fromkeys(w for w in _words(text) if w not in _NON_CONTENT))


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Each row of ``x`` divided by its length (a zero row stays zero)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def sentence_game_values(
    answer_sentences: Sequence[str],
    answer_embeddings: np.ndarray,
    sentences: Sequence[str],
    sentence_embeddings: np.ndarray,
    *,
    k: int = 1,
) -> np.ndarray:
    """Each source sentence's exact Shapley value in the sentence game (module docstring).

    Parameters
    ----------
    answer_sentences : sequence of str
        The answer's sentences.
    answer_embeddings : ndarray of shape (len(answer_sentences), d)
    sentences : sequence of str
        The candidate source sentences (the players).
    sentence_embeddings : ndarray of shape (len(sentences), d)
    k : int, default=1
        Neighbours that vote.

    Returns
    -------
    values : ndarray of shape (len(sentences),), float64

    Examples
    --------
    Sentence 0 is nearest to the answer but lacks "paris"; sentence 2 holds it. With K = 1
    (the closed form of Jia et al., 2019) the holder gains 1/2 and the nearer non-holder loses 1/2:

    >>> e = np.eye(3)
    >>> sentence_game_values(["Paris."], np.array([[1.0, 0.0, 0.5]]), ["Rome is big.", "Lyon.", "Paris!"], e).tolist()
    [-0.5, 0.0, 0.5]
    """
    a = np.asarray(answer_embeddings, dtype=np.float64)
    u = np.asarray(sentence_embeddings, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != len(answer_sentences):
        raise InvalidInputError(f"answer_embeddings must have shape ({len(answer_sentences)}, d), got {a.shape}")
    if u.ndim != 2 or u.shape[0] != len(sentences) or (len(sentences) and u.shape[1] != a.shape[1]):
        raise InvalidInputError(f"sentence_embeddings must have shape ({len(sentences)}, {a.shape[1]}), got {u.shape}")
    out = np.zeros(len(sentences), dtype=np.float64)
    if not len(sentences):
        return out
    holders: dict[str, list[int]] = {}
    for j, text in enumerate(sentences):
        for w in set(_words(text)):
            holders.setdefault(w, []).append(j)
    cos = unit_rows(a) @ unit_rows(u).T  # (n_answer_sentences, N)
    rows_sims, rows_match = [], []
    for i, text in enumerate(answer_sentences):
        words = [w for w in content_words(text) if w in holders]
        if not words:
            continue
        sims = np.exp(cos[i] - cos[i].max())
        for w in words:
            match = np.zeros(len(sentences), dtype=bool)
            match[holders[w]] = True
            rows_sims.append(sims)
            rows_match.append(match)
    if rows_sims:
        # one game per row (the batch is row-wise equal to knn_shapley, tests/test_shapley.py)
        out += knn_shapley_batch(np.stack(rows_sims), np.stack(rows_match), k).sum(axis=0)
    return out


def evidence_scores(
    keyword_scores: np.ndarray,
    game_values: np.ndarray,
    sources: Sequence[int],
    *,
    weight: float,
    passage: float,
) -> np.ndarray:
    """The evidence ranking rule: ``r_j = keyword_score_j + weight * sentence_game_j``, then
    ``evidence_j = r_j + passage * max(r over the sentences of j's source)``.

    The second term ranks the sentences of the source that holds the best evidence first
    (evidence as passages: NQ's gold is the passage); ``passage=0`` ranks sentences alone.

    >>> evidence_scores(np.array([1.0, 0.0, 0.5]), np.array([0.0, 1.0, 0.0]), [0, 0, 1], weight=2.0, passage=1.0).tolist()
    [3.0, 4.0, 1.0]
    """
    kw = np.asarray(keyword_scores, dtype=np.float64)
    gv = np.asarray(game_values, dtype=np.float64)
    src = np.asarray(sources, dtype=np.int64)
    if kw.shape != gv.shape or kw.shape != src.shape or kw.ndim != 1:
        raise InvalidInputError(f"keyword_scores, game_values and sources must be 1-D of one length, got {kw.shape}, {gv.shape}, {src.shape}")
    r = kw + float(weight) * gv
    if passage and len(r):
        best = np.full(src.max() + 1, -np.inf)
        np.maximum.at(best, src, r)
        r = r + float(passage) * best[src]
    return r
