"""The compiled (numba) kernels of the attribution pipeline: the token game's per-sentence
values and the context game's span rows. Each has a numpy oracle in the tests; the callers
that check their input and pick serial or parallel are in ``_token_game`` and
``_context_game`` (the datastore's search kernels stay in ``_datastore``, the Shapley
closed form in ``shapley``)."""

from __future__ import annotations

import numba
import numpy as np

from tokenshapley_rag.shapley import _shapley_row

__all__ = ["sentence_value_row", "sentence_value_rows", "sentence_value_rows_serial", "span_game_rows"]


@numba.njit(cache=True, nogil=True)
def span_game_rows(scores, carries, sentence_source, n_sources, answer_sentence, flat, bounds, weight, scale, verbatim,
                   use_verbatim, word_tokens, word_bounds, word_of_span, result, own, holds):
    """:func:`~tokenshapley_rag._context_game.span_games`, one span (row) at a time; what
    each step means is spelled out in the numpy oracle of tests/test_context_game.py."""
    n_tok, n_sent = scores.shape
    in_context = np.zeros(n_sent)
    weights = np.zeros(n_tok)
    member = np.zeros(n_tok, dtype=np.bool_)
    candidate_source = np.zeros(n_sources, dtype=np.bool_)
    word_held = np.zeros(n_sources, dtype=np.bool_)
    count = np.zeros(n_sources, dtype=np.int64)
    for r in range(bounds.shape[0] - 1):
        a, b = bounds[r], bounds[r + 1]
        if a == b:
            continue  # an empty span: every value 0, no candidate
        member[:] = False
        for i in range(a, b):
            member[flat[i]] = True
        # own: the span tokens' values; holds: the sentences carrying one of its tokens.
        for t in range(n_tok):
            if member[t]:
                for s in range(n_sent):
                    own[r, s] += scores[t, s]
                    if carries[t, s]:
                        holds[r, s] = True
        exact = False
        if use_verbatim:
            for s in range(n_sent):
                if verbatim[r, s]:
                    exact = True
            if exact:
                for s in range(n_sent):
                    holds[r, s] = verbatim[r, s]
        # The context game: weight 1 on the span's tokens, weight * exp(-d / scale) on the
        # other tokens of its answer sentence (d: tokens to the nearest end of the span).
        if weight > 0:
            first, last = flat[a], flat[b - 1]
            for t in range(n_tok):
                if member[t]:
                    weights[t] = 1.0
                elif answer_sentence[t] == answer_sentence[first]:
                    weights[t] = weight * np.exp(-min(abs(t - first), abs(t - last)) / scale)
                else:
                    weights[t] = 0.0
            in_context[:] = 0.0
            for t in range(n_tok):
                if weights[t] != 0.0:
                    for s in range(n_sent):
                        in_context[s] += weights[t] * scores[t, s]
        else:
            in_context[:] = own[r]
        # Candidate sources: those holding the span (verbatim when any does); for a span no
        # source holds verbatim, with its words given, those holding the most of its words.
        candidate_source[:] = False
        if not exact and word_of_span[r + 1] > word_of_span[r]:
            count[:] = 0
            for w in range(word_of_span[r], word_of_span[r + 1]):
                word_held[:] = False
                for i in range(word_bounds[w], word_bounds[w + 1]):
                    t = word_tokens[i]
                    for s in range(n_sent):
                        if carries[t, s]:
                            word_held[sentence_source[s]] = True
                for src in range(n_sources):
                    if word_held[src]:
                        count[src] += 1
            most = 0
            for src in range(n_sources):
                most = max(most, count[src])
            for src in range(n_sources):
                candidate_source[src] = most > 0 and count[src] == most
        else:
            for s in range(n_sent):
                if holds[r, s]:
                    candidate_source[sentence_source[s]] = True
        for s in range(n_sent):
            if candidate_source[sentence_source[s]]:
                result[r, s] = in_context[s]
            elif exact:
                result[r, s] = -np.inf
            else:
                result[r, s] = own[r, s]


@numba.njit(cache=True, nogil=True)
def sentence_value_row(d2, idx, cls, classes, sentence_of, k, auto, gamma, out):
    """One answer token's game (its candidates' squared distances ``d2`` and entries ``idx``,
    nearest first; its class ``cls``), its Shapley values added to ``out`` per sentence."""
    m = d2.shape[0]
    if m == 0:
        return
    g = gamma
    if auto:
        # The row is sorted (nearest first): its median is its middle, as np.median gives
        # it (the mean of the two middle values for an even m).
        mid = m // 2
        med = np.float64(d2[mid]) if m % 2 else (np.float64(d2[mid - 1]) + np.float64(d2[mid])) / 2
        g = 1.0 / med if med > 0 else 1.0
    nearest = np.float64(d2[0])
    sims = np.empty(m)
    matches = np.empty(m, dtype=np.bool_)
    phi = np.empty(m)
    for j in range(m):
        sims[j] = np.exp(-g * (np.float64(d2[j]) - nearest))
        matches[j] = classes[idx[j]] == cls
    _shapley_row(sims, matches, k, True, phi)
    for j in range(m):
        out[sentence_of[idx[j]]] += phi[j]


@numba.njit(cache=True, parallel=True, nogil=True)
def sentence_value_rows(d2, idx, game_classes, use_piece, token_class, piece_class, sentence_of, k, auto, gamma, out):
    for t in numba.prange(d2.shape[0]):
        classes = piece_class if use_piece[t] else token_class
        sentence_value_row(d2[t], idx[t], game_classes[t], classes, sentence_of, k, auto, gamma, out[t])


@numba.njit(cache=True, nogil=True)
def sentence_value_rows_serial(d2, idx, game_classes, use_piece, token_class, piece_class, sentence_of, k, auto, gamma, out):
    for t in range(d2.shape[0]):
        classes = piece_class if use_piece[t] else token_class
        sentence_value_row(d2[t], idx[t], game_classes[t], classes, sentence_of, k, auto, gamma, out[t])
