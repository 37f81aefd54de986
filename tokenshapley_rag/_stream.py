"""Attribution of an answer while it streams: each sentence is cited as soon as it ends.

The answer is encoded causally, so the state of a token depends only on the query and
the tokens before it: once a sentence is complete, its tokens' states, neighbours and
Shapley values are final. Keyword scores use only the tokens of their own answer
sentence (the answer-context game), so a sentence's citations are final too.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tokenshapley_rag._encoder import TokenizedText
from tokenshapley_rag._limits import check_cancel_event, checkpoint
from tokenshapley_rag._segment import split_sentences
from tokenshapley_rag._text import check_text
from tokenshapley_rag._timing import step
from tokenshapley_rag._token_game import TokenValues
from tokenshapley_rag._types import SentenceCitations
from tokenshapley_rag.errors import EmptyTextError, StreamStateError

if TYPE_CHECKING:
    from tokenshapley_rag._attribution import TokenShapley
    from tokenshapley_rag._result import AttributionResult

__all__ = ["AttributionStream"]


class AttributionStream:
    """Keyword citations of an answer that arrives as text deltas (see :meth:`TokenShapley.stream`).

    A sentence counts as complete once text that is not whitespace follows it (the next
    sentence has begun) or the answer ends. Each completed sentence is returned once,
    with its citations; they are the citations the final :attr:`result` has for it as
    long as the sentence splitter does not change its mind about earlier boundaries when
    more text arrives (it decides from the next characters, which are known by then).

    One stream follows one answer; calls on it are serialised, and streams of different
    answers may run in parallel threads on one :class:`TokenShapley`.

    ``cancel`` (a :class:`threading.Event`, optional) stops the datastore's build at the
    encoder's next forward pass, and any later :meth:`feed` or :meth:`finish` before or
    between its steps, with :class:`~tokenshapley_rag.errors.AttributionCancelledError`.

    Examples
    --------
    >>> stream = ts.stream(query="How tall is the Eiffel Tower?",
    ...                    sources=["The Eiffel Tower is 330 metres tall.", "Big Ben is 96 metres tall."])  # doctest: +SKIP
    >>> done = stream.feed("It is 330 metres")  # doctest: +SKIP
    >>> done  # the sentence has not ended yet  # doctest: +SKIP
    []
    >>> done = stream.feed(" tall. Big")  # doctest: +SKIP
    >>> [(c.text, c.best.source_id) for c in done[0].citations]  # doctest: +SKIP
    [('330 metres', '0')]
    >>> rest = stream.finish()  # the last sentence, "Big"  # doctest: +SKIP
    >>> stream.result.response  # doctest: +SKIP
    'It is 330 metres tall. Big'
    """

    def __init__(self, ts: TokenShapley, query: str, sources: Sequence[Any], *, cancel: Any = None) -> None:
        check_text(query, "query")
        self._cancel = check_cancel_event(cancel)
        # The same pipeline steps as TokenShapley.attribute, run sentence by sentence.
        self._pipeline, self._encoder, self._config = ts.pipeline, ts.encoder, ts.config
        self.query = query
        self.sources = ts.check_context(sources)
        checkpoint(cancel, "starting")
        self._store = self._pipeline.datastore_for(self.sources, cancel=cancel)
        self._encoding = self._encoder.response_encoding(query)
        # The question's states come from the answer's encoding (its prompt's pass).
        self._question_game = self._pipeline.question_game_for(
            self._store, query, lambda: self._encoder.question_states(query, self._encoding.prompt_states)
        )
        self._text = ""
        self._n_sentences = 0  # sentences returned so far
        n_sent = len(self._store.sentences)
        # Per-token scores of the tokens of the returned sentences (final: see module doc).
        self._scores = np.zeros((0, n_sent))
        self._carries = np.zeros((0, n_sent), dtype=bool)
        self._classes = np.zeros(0, dtype=np.int64)
        self._scored_ids = np.zeros(0, dtype=np.int64)
        self._result: AttributionResult | None = None
        self._lock = threading.Lock()

    @property
    def text(self) -> str:
        """The answer received so far."""
        return self._text

    @property
    def result(self) -> AttributionResult:
        """The attribution of the whole answer, after :meth:`finish`."""
        if self._result is None:
            raise StreamStateError("the stream has no result yet: call finish() when the answer has ended")
        return self._result

    def feed(self, delta: str) -> list[SentenceCitations]:
        """Append ``delta`` to the answer; return the sentences it completed (often none)."""
        check_text(delta, "delta")
        with self._lock:
            if self._result is not None:
                raise StreamStateError("the stream is finished: start a new one for another answer")
            checkpoint(self._cancel, "streaming")
            self._text += delta
            spans = split_sentences(self._text)
            # The last span may still grow; the ones before it are followed by text.
            complete = spans[:-1]
            if len(complete) <= self._n_sentences:
                return []
            return self._cite(complete)

    def finish(self) -> list[SentenceCitations]:
        """End the answer: attribute it whole (:attr:`result`) and return the sentences not
        returned yet.

        Raises
        ------
        EmptyTextError
            Nothing but whitespace was fed.
        """
        with self._lock:
            if self._result is not None:
                raise StreamStateError("finish() was already called")
            text = self._text
            if not text.strip():
                raise EmptyTextError("the streamed answer is empty or only whitespace: there is nothing to attribute")
            checkpoint(self._cancel, "finishing the stream")
            tok = self._encoder.tokenize(text)
            with step("encode_answer"):
                states = self._encoding.states(tok.ids)
            checkpoint(self._cancel, "scoring the answer")
            self._result = self._pipeline.attribute(
                self.query, text, self.sources, self._store, tok, states, self._config, self._question_game
            )
            spans = split_sentences(text)
            out = [self._sentence(i, spans[i], self._result) for i in range(self._n_sentences, len(spans))]
            self._n_sentences = len(spans)
            return out

    # ------------------------------------------------------------------ internals

    def _cite(self, complete: list[tuple[int, int]]) -> list[SentenceCitations]:
        text = self._text
        end = complete[-1][1]
        tok = self._encoder.tokenize(text)
        # Tokens that end inside the completed sentences; later text cannot change them
        # (it starts after whitespace or punctuation), and if it ever did, the encoding
        # notices and starts over (ResponseEncoding.states).
        n = int(np.searchsorted(tok.offsets[:, 1], end, side="right")) if len(tok.ids) else 0
        ids, offsets = tok.ids[:n], tok.offsets[:n]
        with step("encode_answer"):
            states = self._encoding.states(ids)
        checkpoint(self._cancel, "scoring the answer")
        done = len(self._scored_ids)
        if done > n or not np.array_equal(self._scored_ids, ids[:done]):
            done = 0  # the text was tokenized differently after all: score it all again
            self._scores, self._carries, self._classes = self._scores[:0], self._carries[:0], self._classes[:0]
        self._scored_ids = ids.copy()
        if n > done:
            new = TokenizedText(ids[done:], offsets[done:])
            scores, carries, classes = self._pipeline.score_tokens(self._store, text[:end], new, states[done:])
            self._scores = np.concatenate([self._scores, scores])
            self._carries = np.concatenate([self._carries, carries])
            self._classes = np.concatenate([self._classes, classes])
        partial = self._pipeline.assemble_citations(
            self.query, text[:end], self.sources, self._store, TokenizedText(ids, offsets),
            TokenValues(self._scores, self._carries, self._classes), self._config, self._question_game,
        )
        out = [self._sentence(i, complete[i], partial) for i in range(self._n_sentences, len(complete))]
        self._n_sentences = len(complete)
        return out

    def _sentence(self, index: int, span: tuple[int, int], result: AttributionResult) -> SentenceCitations:
        start, end = span
        verdict = next((v for v in result.sentences if v.start == start and v.end == end), None)
        return SentenceCitations(
            index=index,
            start=start,
            end=end,
            text=self._text[start:end],
            citations=tuple(c for c in result.citations if start <= c.start < end),
            verdict=verdict.verdict if verdict is not None else "supported",
            score=verdict.score if verdict is not None else 1.0,
        )
