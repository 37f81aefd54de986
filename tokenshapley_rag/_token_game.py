"""The token game: each answer token's exact Shapley values over its datastore candidates,
summed per source sentence (docs/method.md §2-§4), and the match classes that decide when a
datastore token "equals" an answer token."""

from __future__ import annotations

import math
import threading
import unicodedata
from typing import Any, NamedTuple

import numpy as np

from tokenshapley_rag._datastore import Datastore
from tokenshapley_rag._kernels import sentence_value_rows, sentence_value_rows_serial
from tokenshapley_rag._segment import token_words
from tokenshapley_rag._timing import step
from tokenshapley_rag.shapley import _PARALLEL_WORK

__all__ = ["MATCH_MODES", "CANDIDATE_MODES", "TokenClasses", "TokenValues", "score_tokens", "sentence_values"]

MATCH_MODES = ("word", "word_or_token", "normalized", "exact")
CANDIDATE_MODES = ("nearest", "mixed")


class TokenClasses:
    """Match classes of tokens under one ``match`` mode (see :class:`TokenShapley`): equal
    class <=> tokens "equal". The tables grow as texts are seen and are shared by every
    datastore and answer of one TokenShapley, so classes compare across them.

    One instance may be used by several threads: class ids are handed out as the table's
    length under a lock, so concurrent calls never give one id to two different texts
    (that would make unrelated tokens match).
    """

    def __init__(self, tokenizer: Any, match: str) -> None:
        self.tokenizer, self.match = tokenizer, match
        self._of_id: dict[int, int] = {}
        self._of_text: dict[str, int] = {}
        self._of_word: dict[tuple[int, str], int] = {}
        self._lock = threading.Lock()

    def of(self, ids: np.ndarray, text: str, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Map tokens to match classes.

        Returns ``(classes, piece_classes)``: the second is each token's normalized text
        (what ``match="word_or_token"`` falls back to), equal to the first unless words
        are matched. ``text`` and ``offsets`` (the tokens' char offsets into it) give each
        token's word.
        """
        if self.match == "exact":
            exact = ids.astype(np.int64)
            return exact, exact
        words = token_words(text, offsets) if self.match in ("word", "word_or_token") else None
        pieces = []
        with self._lock:
            of_id = self._of_id
            for tid in ids.tolist():
                norm = of_id.get(tid)
                if norm is None:
                    piece = unicodedata.normalize("NFKC", self.tokenizer.decode([tid])).casefold().strip()
                    norm = self._of_text.setdefault(piece, len(self._of_text))
                    of_id[tid] = norm
                pieces.append(norm)
            if words is None:
                return np.array(pieces, dtype=np.int64), np.array(pieces, dtype=np.int64)
            of_word = self._of_word
            out = [
                of_word.setdefault((norm, word), len(of_word))
                for norm, word in zip(pieces, (unicodedata.normalize("NFKC", w) for w in words))
            ]
        return np.array(out, dtype=np.int64), np.array(pieces, dtype=np.int64)


class TokenValues(NamedTuple):
    """What the token game gives an answer (``T`` tokens, ``n_sentences`` datastore sentences)."""

    scores: np.ndarray  # (T, n_sentences) float64: Shapley values summed per sentence
    carries: np.ndarray  # (T, n_sentences) bool: the sentence holds a token matching the answer token
    classes: np.ndarray  # (T,) int64: the answer tokens' match classes


def score_tokens(
    store: Datastore,
    states: np.ndarray,
    classes: np.ndarray,
    piece_classes: np.ndarray,
    *,
    k: int,
    m: int,
    gamma: float | str,
    match: str,
    candidates: str,
) -> TokenValues:
    """Play every answer token's game (``states``: the answer tokens' encoder states,
    ``classes`` / ``piece_classes``: :meth:`TokenClasses.of` of them) over ``store``."""
    n_tok, n_sent = len(classes), len(store.sentences)
    if store.size == 0 or n_tok == 0:
        return TokenValues(np.zeros((n_tok, n_sent)), np.zeros((n_tok, n_sent), dtype=bool), classes)
    pieces = None
    game_classes = classes
    if match == "word_or_token":
        # A word that no source has is matched token by token (its sub-word pieces are
        # the only evidence a paraphrase or an inflection leaves).
        pieces = np.array([len(store.members_of_class(c)) == 0 for c in classes.tolist()], dtype=bool)
        game_classes = np.where(pieces, piece_classes, classes)
    m = min(m, store.size)
    n_match = m // 2 if candidates == "mixed" and m >= 2 else 0
    with step("candidates"):
        d2, idx, carries = store.game_candidates(states, game_classes, m, n_match, pieces)
    with step("games"):
        return TokenValues(sentence_values(d2, idx, game_classes, store, k, gamma, pieces), carries, classes)


def sentence_values(
    d2: np.ndarray, idx: np.ndarray, classes: np.ndarray, store: Datastore, k: int, gamma: float | str,
    pieces: np.ndarray | None = None,
) -> np.ndarray:
    """``(T, n_sentences)``: each answer token's exact Shapley values summed per sentence.

    ``d2``, ``idx``: the players' squared distances and entries, nearest first
    (:meth:`Datastore.game_candidates`). Similarities ``exp(-gamma * (d2 - d2_nearest))``,
    with ``gamma = 1 / median(d2)`` per token for "auto" (so that a token's values do not
    depend on the rest of the answer, which lets a streamed sentence be attributed before
    the answer ends); a player matches when its entry carries the token's class (its
    piece class where ``pieces``). One compiled pass per token; the numpy spelling is the
    oracle in tests/test_game_candidates.py.
    """
    n_tok, m = d2.shape
    out = np.zeros((n_tok, len(store.sentences)))
    if not n_tok or not m:
        return out
    use_piece = np.zeros(n_tok, dtype=bool) if pieces is None else np.ascontiguousarray(pieces, dtype=bool)
    work = n_tok * m * math.comb(m, min(k, m) - 1)
    rows = sentence_value_rows if work >= _PARALLEL_WORK else sentence_value_rows_serial
    rows(np.ascontiguousarray(d2), np.ascontiguousarray(idx, dtype=np.int64), np.ascontiguousarray(classes, dtype=np.int64),
         use_piece, store.token_class, store.piece_class, store.sentence_of, int(k), gamma == "auto",
         1.0 if gamma == "auto" else float(gamma), out)
    return out
