"""The sentence game: answer sentence -> source sentence evidence that holds up when the
answer paraphrases (docs/method.md §9).

The token game (§3) keys every datastore entry by the hidden state before one token, so a
source sentence earns value only through answer tokens whose nearest entries it holds. Where
an answer paraphrases, few of its tokens have such entries. The sentence game keys each
*source sentence* by an embedding of the whole sentence and queries it with the embedding of
the whole answer sentence; the values are still those of a KNN vote on the answer's words:

for each answer sentence ``a`` and each distinct content word ``w`` of ``a``
(:func:`content_words`: a ``\\w+`` run or a CJK unit, NFKC + case folded, not a stopword or
filler of :mod:`._segment`), the players are the candidate source sentences ``j = 1..N``,
ranked by cosine similarity ``cos(e_a, e_j)`` (ties: lower index first), with
``s_j = exp(cos(e_a, e_j) - max_j cos)``; player ``j`` *matches* when sentence ``j`` holds
``w`` as a word; the utility is the weighted KNN vote of :mod:`tokenshapley_rag.shapley`
(``U(S) = 1[sum over the top min(K, |S|) of S of +-s_j >= 0]``).
A sentence's value is the sum of its exact Shapley values over every (sentence, word) game,
so it is the exact Shapley value of the summed game. With ``K = 1`` a word credits the
nearest sentences that hold it and charges the nearer ones that do not.

The embeddings come from the caller (``TokenShapley.rank_evidence`` and the benchmark use the
bundled all-MiniLM-L6-v2); the game itself is pure numpy.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence

import numpy as np

from tokenshapley_rag._segment import (
    _CJK_CHARS,
    _CJK_STOPWORDS,
    _HAN,
    _HIRAGANA,
    _KATAKANA,
    FILLERS,
    STOPWORDS,
    split_sentences,
)
from tokenshapley_rag.errors import InvalidInputError
from tokenshapley_rag.shapley import knn_shapley_batch

__all__ = [
    "EVIDENCE_PASSAGE", "EVIDENCE_RULES", "EVIDENCE_WEIGHT", "QUESTION_EVIDENCE_WEIGHT", "content_words",
    "evidence_ranking", "evidence_scores", "sentence_game_values", "sentence_source_scores", "sentences_covered", "unit_rows",
]

# A word: a run of word characters outside the scripts written without spaces, or one unit
# of those scripts as the keywords split them (_segment._CJK_UNIT: each Han character, a run
# of hiragana, a run of katakana), so "大本钟在伦敦" gives its characters, not one word.
_WORD = re.compile(rf"[{_HAN}]|[{_HIRAGANA}]+|[{_KATAKANA}]+|(?:(?![{_CJK_CHARS}])\w)+")
_HIRAGANA_RUN = re.compile(f"[{_HIRAGANA}]+")
_NON_CONTENT = STOPWORDS | FILLERS | _CJK_STOPWORDS


def _words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def content_words(text: str) -> list[str]:
    """The distinct content words of ``text``, in order: runs of word characters, a CJK run
    split as the keywords split it; NFKC + case folded; stopwords, fillers, Chinese function
    characters and hiragana runs (particles and endings) left out.

    >>> content_words("The Eiffel Tower is in Paris, the tower.")
    ['eiffel', 'tower', 'paris']
    >>> content_words("大本钟在伦敦。東京タワーは高い")
    ['大', '本', '钟', '伦', '敦', '東', '京', 'タワー', '高']
    """
    return list(dict.fromkeys(w for w in _words(text) if w not in _NON_CONTENT and not _HIRAGANA_RUN.fullmatch(w)))


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
    games, _owners = _word_games(answer_sentences, answer_embeddings, sentences, sentence_embeddings, k)
    return games.sum(axis=0) if len(games) else np.zeros(len(sentences), dtype=np.float64)


def _word_games(
    answer_sentences: Sequence[str],
    answer_embeddings: np.ndarray,
    sentences: Sequence[str],
    sentence_embeddings: np.ndarray,
    k: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Every (answer sentence, content word) game of the sentence game: the players' exact
    Shapley values, one row per game (``(G, len(sentences))``, answer sentence by answer
    sentence, so each one's games are contiguous), and the answer sentence of each row."""
    a = np.asarray(answer_embeddings, dtype=np.float64)
    u = np.asarray(sentence_embeddings, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != len(answer_sentences):
        raise InvalidInputError(f"answer_embeddings must have shape ({len(answer_sentences)}, d), got {a.shape}")
    if u.ndim != 2 or u.shape[0] != len(sentences) or (len(sentences) and u.shape[1] != a.shape[1]):
        raise InvalidInputError(f"sentence_embeddings must have shape ({len(sentences)}, {a.shape[1]}), got {u.shape}")
    empty = np.zeros((0, len(sentences)), dtype=np.float64), np.zeros(0, dtype=np.int64)
    if not len(sentences):
        return empty
    holders: dict[str, list[int]] = {}
    for j, text in enumerate(sentences):
        for w in set(_words(text)):
            holders.setdefault(w, []).append(j)
    cos = unit_rows(a) @ unit_rows(u).T  # (n_answer_sentences, N)
    rows_sims, rows_match, owners = [], [], []
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
            owners.append(i)
    if not rows_sims:
        return empty
    # one game per row (the batch is row-wise equal to knn_shapley, tests/test_shapley.py)
    return knn_shapley_batch(np.stack(rows_sims), np.stack(rows_match), k), np.asarray(owners, dtype=np.int64)


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


#: The evidence rules (docs/method.md §9): ``keyword`` ranks by ``keyword_score`` alone;
#: ``sentence-game`` by :func:`evidence_scores` with each answer sentence's game;
#: ``question-sentence-game`` by the same rule with each answer sentence's claim read with
#: its question ("The question's claim").
EVIDENCE_RULES: tuple[str, ...] = ("keyword", "sentence-game", "question-sentence-game")
#: The sentence game's weight in the evidence rule, chosen on dev (docs/reports/paraphrase.md):
#: 4 for the answer's sentences (WiCE claims 1-20 and NQ questions 1-40), 64 for the claim
#: read with its question (NQ questions 1-40).
EVIDENCE_WEIGHT = 4.0
QUESTION_EVIDENCE_WEIGHT = 64.0
#: The passage term's weight (the best score of the sentence's source).
EVIDENCE_PASSAGE = 1.0


def evidence_ranking(
    keyword_scores: Sequence[float],
    sentences: Sequence[str],
    sources: Sequence[int],
    response: str,
    query: str,
    embed: Callable[[Sequence[str]], np.ndarray],
    *,
    rule: str,
    weight: float | None = None,
    passage: float = EVIDENCE_PASSAGE,
) -> tuple[np.ndarray, np.ndarray]:
    """Each candidate sentence's evidence score under ``rule`` (:data:`EVIDENCE_RULES`),
    higher ranking first, and its value in the sentence game (zeros under ``keyword``): two
    arrays of shape ``(len(sentences),)``.

    ``keyword``: the ``keyword_scores`` themselves. ``sentence-game``: :func:`evidence_scores`
    of them and the sentence game of ``response``'s sentences (each queried with its own
    embedding), ``weight`` defaulting to :data:`EVIDENCE_WEIGHT`.
    ``question-sentence-game``: the game of the claim each answer sentence makes with its
    question (queried with the embedding of ``query`` and ``response`` together, over the
    words of both: a bare answer, "Taylor Swift", says what it says only with its question),
    ``weight`` defaulting to :data:`QUESTION_EVIDENCE_WEIGHT`; with an empty ``query`` it is
    ``sentence-game``, weight included. ``sources``: each sentence's source (the passage
    term's groups); ``embed``: texts to one row per text (all-MiniLM-L6-v2 chose the weights).

    The sentence nearest "Paris." holds "paris": it wins the word's game (value 1), weighted
    4, plus the passage term (the best score of its source, itself):

    >>> table = {"Paris.": [1.0, 0.0], "Paris is in France.": [1.0, 0.1], "Rome is in Italy.": [0.0, 1.0]}
    >>> embed = lambda texts: np.array([table[t] for t in texts])
    >>> scores, game = evidence_ranking([0.0, 0.0], ["Rome is in Italy.", "Paris is in France."], [0, 1],
    ...                                 "Paris.", "", embed, rule="sentence-game")
    >>> scores.tolist(), game.tolist()
    ([0.0, 8.0], [0.0, 1.0])
    """
    if rule not in EVIDENCE_RULES:
        raise InvalidInputError(f"rule must be one of {', '.join(map(repr, EVIDENCE_RULES))}, got {rule!r}")
    keyword = np.asarray(keyword_scores, dtype=np.float64)
    if rule == "keyword" or not len(sentences):
        return keyword.copy(), np.zeros(len(keyword))
    parts = [response[a:b] for a, b in split_sentences(response)] or [response]
    question = query.strip()
    if rule == "question-sentence-game" and question:
        parts = [f"{question} {part}" for part in parts]
        queries = np.repeat(embed([f"{question} {response}".strip()]), len(parts), axis=0)
        default_weight = QUESTION_EVIDENCE_WEIGHT
    else:
        queries = embed(parts)
        default_weight = EVIDENCE_WEIGHT
    game = sentence_game_values(parts, queries, sentences, embed(list(sentences)))
    scores = evidence_scores(keyword, game, sources, weight=default_weight if weight is None else weight, passage=passage)
    return scores, game


def sentence_source_scores(
    answer_sentences: Sequence[str],
    answer_embeddings: np.ndarray,
    sentences: Sequence[str],
    sentence_embeddings: np.ndarray,
    sources: Sequence[int],
    n_sources: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Each answer sentence's score for each source, and each source sentence's value in each
    answer sentence's game: the sentence game of that one answer sentence
    (:func:`sentence_game_values`, ``K = 1``) with every source sentence as a player, summed
    over each source's sentences (docs/method.md §11). Every game is played in one batch.

    A sum of exact Shapley values over players is the Shapley value of the coalition, so a
    source's score is the value its sentences add, together, to the answer sentence's votes.

    Parameters
    ----------
    answer_sentences : sequence of str
    answer_embeddings : ndarray of shape (len(answer_sentences), d)
    sentences : sequence of str
        Every source sentence (the players).
    sentence_embeddings : ndarray of shape (len(sentences), d)
    sources : sequence of int
        The source (``0 .. n_sources - 1``) of each sentence.
    n_sources : int

    Returns
    -------
    source_scores : ndarray of shape (len(answer_sentences), n_sources)
    sentence_values : ndarray of shape (len(answer_sentences), len(sentences))

    Examples
    --------
    Sentence 0 (source 0) is nearest to "Paris." but lacks "paris"; sentence 2 (source 1)
    holds it. Source 1 gains what sentence 2 gains, source 0 loses what sentence 0 loses:

    >>> e = np.eye(3)
    >>> scores, values = sentence_source_scores(["Paris."], np.array([[1.0, 0.0, 0.5]]),
    ...                                         ["Rome is big.", "Lyon.", "In Paris."], e, [0, 0, 1], 2)
    >>> scores.tolist(), values.tolist()
    ([[-0.5, 0.5]], [[-0.5, 0.0, 0.5]])
    """
    src = np.asarray(sources, dtype=np.int64)
    if src.shape != (len(sentences),) or (len(src) and (src.min() < 0 or src.max() >= n_sources)):
        raise InvalidInputError(
            f"sources must give one source in [0, {n_sources}) for each of the {len(sentences)} sentences, got {list(sources)!r}"
        )
    games, owners = _word_games(answer_sentences, answer_embeddings, sentences, sentence_embeddings, 1)
    values = np.zeros((len(answer_sentences), len(sentences)), dtype=np.float64)
    scores = np.zeros((len(answer_sentences), n_sources), dtype=np.float64)
    for i in np.unique(owners).tolist():  # an answer sentence with no game keeps zeros
        values[i] = games[owners == i].sum(axis=0)
        # bincount adds each source's sentences in index order (deterministic sums).
        scores[i] = np.bincount(src, weights=values[i], minlength=n_sources)
    return scores, values


def sentences_covered(answer: str, sentences: Sequence[tuple[int, int]], start: int, end: int) -> list[int]:
    """The answer sentences that ``answer[start:end]`` states whole: the indices of the
    sentences it overlaps when it holds every content word of them (:func:`content_words`),
    else ``[]``. Such a span is a claim, not a keyword: its source is the answer sentence's
    source (docs/method.md §11).

    >>> a = "Paris is in France. It has 2 million people."
    >>> sentences_covered(a, [(0, 19), (20, 45)], 20, 45), sentences_covered(a, [(0, 19), (20, 45)], 27, 36)
    ([1], [])
    >>> sentences_covered(a, [(0, 19), (20, 45)], 0, 45)
    [0, 1]
    """
    overlapped = [i for i, (a, b) in enumerate(sentences) if a < end and b > start]
    needed = {w for i in overlapped for w in content_words(answer[sentences[i][0]:sentences[i][1]])}
    return overlapped if needed and needed <= set(content_words(answer[start:end])) else []
