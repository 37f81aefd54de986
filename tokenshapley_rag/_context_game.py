"""The answer-context game: a span's per-sentence score is the weighted sum of its answer
tokens' Shapley values, weight 1 on its own tokens and ``weight * exp(-d / scale)`` on the
other tokens of its answer sentence, for the sentences of its candidate sources (Shapley
values are linear, so this is the exact value of the weighted game)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tokenshapley_rag._kernels import span_game_rows

__all__ = ["context_scores", "context_weight_rows", "context_weights", "span_games"]


def context_scores(
    scores: np.ndarray,
    carries: np.ndarray,
    sentence_source: np.ndarray,
    answer_sentence: np.ndarray,
    members: np.ndarray,
    weight: float,
    scale: float,
    verbatim: np.ndarray | None = None,
    words: Sequence[np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-sentence scores of the span made of the answer tokens ``members``.

    Parameters
    ----------
    scores : (T, n_sentences) token Shapley values per sentence
    carries : (T, n_sentences) bool, whether the sentence holds an entry of the token's class
    sentence_source : (n_sentences,) source index of each sentence
    answer_sentence : (T,) answer sentence of each token
    members : indices of the span's tokens
    weight, scale : the context weights (:func:`context_weights`)
    verbatim : (n_sentences,) bool, optional
        Whether each sentence holds the span word for word (its token classes in a row,
        :func:`sentences_with_sequence`, or its text, :meth:`SentenceTexts.holding`).
    words : list of int arrays, optional
        The span's words, each as the answer tokens it is made of (:func:`span_words`).
        With them, a span that no source holds word for word has as candidates the
        sources that hold the most of its words, instead of every source holding one.

    Returns
    -------
    (in_context, own) : two (n_sentences,) arrays. ``own`` sums the span tokens' Shapley
    values (the paper's aggregation). ``in_context`` is the context game's value
    (``context_weights(...) @ scores``) for the sentences of the candidate sources. When
    some source holds the span verbatim, the candidates are those sources, and every other
    sentence gets ``-inf`` (it is not a candidate): a phrase found word for word is not
    outvoted by sources that share only some of its words. Otherwise the candidates are
    the sources that hold at least one of the span's tokens (with ``words``: the sources
    that hold the most of the span's words, a word being held when one of the source's
    sentences carries one of its tokens), and the others keep ``own``: context decides
    between the sources that carry the span and cannot pull it to one that does not.
    """
    in_context, own, _ = span_games(
        scores, carries, sentence_source, answer_sentence, [np.sort(np.asarray(members, dtype=np.int64))], weight, scale,
        None if verbatim is None else np.asarray(verbatim, bool)[None, :],
        None if words is None else [[np.asarray(w, dtype=np.int64) for w in words]],
    )
    return in_context[0], own[0]


def span_games(
    scores: np.ndarray,
    carries: np.ndarray,
    sentence_source: np.ndarray,
    answer_sentence: np.ndarray,
    spans: Sequence[np.ndarray],
    weight: float,
    scale: float,
    verbatim: np.ndarray | None = None,
    words: Sequence[Sequence[np.ndarray]] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`context_scores` of several spans at once (``spans``: each span's token
    indices, ascending; ``verbatim``: ``(len(spans), n_sentences)``; ``words``: per span,
    its words as arrays of token indices, or None to skip the most-words rule for it), and
    the sentences that hold each span: those holding it word for word when any does,
    otherwise those holding at least one of its tokens.

    Returns ``(in_context, own, holds)``, three ``(len(spans), n_sentences)`` arrays.
    """
    n_tok, n_sent = scores.shape
    scores = np.ascontiguousarray(scores, dtype=np.float64)
    spans = [np.asarray(m, dtype=np.int64).ravel() for m in spans]
    flat = np.concatenate(spans) if spans else np.zeros(0, np.int64)
    bounds = np.zeros(len(spans) + 1, dtype=np.int64)
    np.cumsum([len(m) for m in spans], out=bounds[1:])
    # The words of the most-words rule, flattened: span r's words are word_of_span[r] to
    # word_of_span[r + 1] - 1, word i's tokens word_tokens[word_bounds[i]:word_bounds[i + 1]].
    per_span = [list(words[r] or ()) if words is not None else [] for r in range(len(spans))]
    word_list = [np.asarray(w, dtype=np.int64).ravel() for ws in per_span for w in ws]
    word_tokens = np.concatenate(word_list) if word_list else np.zeros(0, np.int64)
    word_bounds = np.zeros(len(word_list) + 1, dtype=np.int64)
    np.cumsum([len(w) for w in word_list], out=word_bounds[1:])
    word_of_span = np.zeros(len(spans) + 1, dtype=np.int64)
    np.cumsum([len(ws) for ws in per_span], out=word_of_span[1:])
    shape = (len(spans), n_sent)
    # The compiled pass does not check indices: bad input is refused here, by name.
    for name, array, want in (("carries", carries, (n_tok, n_sent)), ("sentence_source", sentence_source, (n_sent,)),
                              ("answer_sentence", answer_sentence, (n_tok,)),
                              ("verbatim", shape if verbatim is None else verbatim, shape)):
        got = array if isinstance(array, tuple) else np.shape(array)
        if tuple(got) != want:
            raise ValueError(f"{name} must have shape {want} for scores of shape {scores.shape}, got {tuple(got)}")
    for name, tokens in (("spans", flat), ("words", word_tokens)):
        if len(tokens) and (tokens.min() < 0 or tokens.max() >= n_tok):
            raise ValueError(f"{name} hold token indices outside [0, {n_tok}): {tokens.min()}..{tokens.max()}")
    result, own, holds = np.zeros(shape), np.zeros(shape), np.zeros(shape, dtype=bool)
    if n_sent == 0:
        return result, own, holds
    span_game_rows(
        scores, np.ascontiguousarray(carries, dtype=bool), np.ascontiguousarray(sentence_source, dtype=np.int64),
        int(sentence_source.max()) + 1, np.ascontiguousarray(answer_sentence, dtype=np.int64), flat, bounds,
        float(weight), float(scale),
        np.zeros((len(spans), n_sent), dtype=bool) if verbatim is None else np.ascontiguousarray(verbatim, dtype=bool),
        verbatim is not None, word_tokens, word_bounds, word_of_span, result, own, holds,
    )
    return result, own, holds

def context_weights(answer_sentence: np.ndarray, members: np.ndarray, weight: float, scale: float) -> np.ndarray:
    """Weights of the answer tokens in the game of a span made of the tokens ``members``.

    1 for the span's own tokens; ``weight * exp(-d / scale)`` for the other tokens of the
    same answer sentence, ``d`` their distance in tokens to the nearest span token; 0
    elsewhere. A span's score is the weighted sum of its tokens' Shapley values, which is
    the exact Shapley value of the same weighted sum of token games (Shapley values are
    linear), so the neighbouring words of the answer break ties between sources that all
    hold the span.

    >>> context_weights(np.array([0, 0, 0, 0, 1]), np.array([1]), 0.5, 1.0).round(3).tolist()
    [0.184, 1.0, 0.184, 0.068, 0.0]
    """
    return context_weight_rows(answer_sentence, [np.sort(np.asarray(members, dtype=np.int64))], weight, scale)[0]


def context_weight_rows(answer_sentence: np.ndarray, spans: Sequence[np.ndarray], weight: float, scale: float) -> np.ndarray:
    """:func:`context_weights` of each span (its token indices ascending), one row per span."""
    n_tok = len(answer_sentence)
    w = np.zeros((len(spans), n_tok))
    filled = [r for r, m in enumerate(spans) if len(m)]
    if weight > 0 and filled:
        first = np.array([spans[r][0] for r in filled])
        last = np.array([spans[r][-1] for r in filled])
        t = np.arange(n_tok)[None, :]
        d = np.minimum(np.abs(t - first[:, None]), np.abs(t - last[:, None]))
        same = answer_sentence[None, :] == answer_sentence[first][:, None]
        w[filled] = np.where(same, weight * np.exp(-d / scale), 0.0)
    for r in filled:
        w[r, spans[r]] = 1.0
    return w
