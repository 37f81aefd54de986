"""Generators: text deltas of an answer to a question over retrieved chunks."""

from __future__ import annotations

import threading
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
    sensibly only that way; ``model.generate`` runs in its own thread and a
    ``TextIteratorStreamer`` hands over the text as it decodes.

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

    def _prompt_ids(self, question: str, chunks: Sequence[Chunk]) -> Any:
        from tokenshapley_rag._generate import rag_prompt

        tok = self.loaded.tokenizer
        content = rag_prompt(question, [c.to_source() for c in chunks])
        if getattr(tok, "chat_template", None):
            return tok.apply_chat_template(
                [{"role": "user", "content": content}], add_generation_prompt=True, return_tensors="pt", return_dict=True
            )["input_ids"]
        return tok(content + "\nAnswer:", return_tensors="pt")["input_ids"]

    def generate(self, question: str, chunks: Sequence[Chunk]) -> Iterator[str]:
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer

        tok = self.loaded.tokenizer
        model = self.loaded.model
        ids = self._prompt_ids(question, chunks).to(model.device)
        stop = threading.Event()
        failure: list[BaseException] = []

        class _StopWhenAsked(StoppingCriteria):
            # Lets close() end generation early instead of burning CPU for a gone client.
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                # On the ids' device: generate() combines it with CUDA tensors on a GPU.
                return torch.full((input_ids.shape[0],), stop.is_set(), dtype=torch.bool, device=input_ids.device)

        streamer = TextIteratorStreamer(tok, skip_prompt=True, skip_special_tokens=True, timeout=self.timeout)

        def run() -> None:
            try:
                model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=self.max_new_tokens,
                    do_sample=False,
                    pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
                    streamer=streamer,
                    stopping_criteria=StoppingCriteriaList([_StopWhenAsked()]),
                )
            except BaseException as err:  # re-raised in the consumer's thread below
                failure.append(err)
                streamer.end()

        thread = threading.Thread(target=run, name="tokenshapley-chat-generate", daemon=True)
        thread.start()
        started = False
        try:
            for text in streamer:
                if not started:
                    # Like generate_answer's strip(): the answer starts at its first character.
                    text = text.lstrip()
                    started = bool(text)
                if text:
                    yield text
            if failure:
                raise failure[0]
        finally:
            stop.set()
            thread.join(timeout=self.timeout)
