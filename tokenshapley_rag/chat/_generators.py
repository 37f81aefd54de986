"""Generators: text deltas of an answer to a question over retrieved chunks."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from tokenshapley_rag.chat._documents import Chunk

__all__ = ["Generator", "FixedTextGenerator", "LocalModelGenerator"]


@runtime_checkable
class Generator(Protocol):
    """Anything with ``generate(question, chunks) -> Iterator[str]`` of text deltas.

    It runs in a worker thread and may block between deltas. When the client goes away
    the app stops iterating and calls the iterator's ``close()`` (a generator function
    gets ``GeneratorExit`` at its ``yield``), so release resources in a ``finally``.
    """

    def generate(self, question: str, chunks: Sequence[Chunk]) -> Iterator[str]: ...


class FixedTextGenerator:
    """Yields a given answer in small pieces, optionally with a delay between them: a
    stand-in for a model in tests and demos.

    ``answers`` is one text for every question, a mapping from question to text (a
    question not in it raises ``KeyError``), or a function ``(question, chunks) -> text``.

    Examples
    --------
    >>> gen = FixedTextGenerator("It is in Paris.", piece=6)
    >>> list(gen.generate("Where?", []))
    ['It is ', 'in Par', 'is.']
    """

    def __init__(
        self,
        answers: str | Mapping[str, str] | Callable[[str, Sequence[Chunk]], str],
        *,
        piece: int = 4,
        delay: float = 0.0,
    ) -> None:
        if piece < 1:
            raise ValueError(f"piece must be >= 1, got {piece}")
        self.answers, self.piece, self.delay = answers, piece, delay

    def answer_for(self, question: str, chunks: Sequence[Chunk]) -> str:
        if isinstance(self.answers, str):
            return self.answers
        if isinstance(self.answers, Mapping):
            if question not in self.answers:
                raise KeyError(f"FixedTextGenerator has no answer for {question!r}")
            return self.answers[question]
        return self.answers(question, chunks)

    def generate(self, question: str, chunks: Sequence[Chunk]) -> Iterator[str]:
        text = self.answer_for(question, chunks)
        for i in range(0, len(text), self.piece):
            if self.delay and i:
                time.sleep(self.delay)
            yield text[i : i + self.piece]


class LocalModelGenerator:
    """Greedy streaming generation with a local causal LM (by default the encoder model
    of a :class:`~tokenshapley_rag.TokenShapley`, ``ts.loaded``).

    The question and the numbered chunks go in the user turn of the chat template (see
    :func:`tokenshapley_rag._generate.rag_prompt`), as the instruct model answers
    sensibly only that way; :func:`tokenshapley_rag.stream_chat` runs ``model.generate``
    in its own thread and hands over the text as it decodes.

    Examples
    --------
    >>> gen = LocalModelGenerator(ts.loaded, max_new_tokens=48)  # doctest: +SKIP
    >>> "".join(gen.generate("How tall is it?", chunks))  # doctest: +SKIP
    'The Eiffel Tower is 330 metres tall.'
    """

    def __init__(self, loaded: Any, *, max_new_tokens: int = 160, timeout: float = 120.0) -> None:
        self.loaded = loaded
        self.max_new_tokens = max_new_tokens
        self.timeout = timeout

    def generate(self, question: str, chunks: Sequence[Chunk]) -> Iterator[str]:
        from tokenshapley_rag._generate import rag_prompt, stream_chat

        content = rag_prompt(question, [c.to_source() for c in chunks])
        deltas = stream_chat(
            self.loaded,
            [{"role": "user", "content": content}],
            max_new_tokens=self.max_new_tokens,
            timeout=self.timeout,
        )
        started = False
        try:
            for text in deltas:
                if not started:
                    # Like generate_answer's strip(): the answer starts at its first character.
                    text = text.lstrip()
                    started = bool(text)
                if text:
                    yield text
        finally:
            deltas.close()  # a client that went away stops the generation
