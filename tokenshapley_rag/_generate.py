"""Generate with a local causal LM: the demo's answers, and a chat interface to the bundled model.

Attribution never needs this: it re-encodes any answer. It exists so that the demo, the
chat app and the generation-based benchmarks (NQ, CNN/DM) can run with nothing but the
embedded model, and so that the framework integrations can offer that model as an LLM
(:func:`generate_chat`, :func:`stream_chat`).
"""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Generator, Mapping, Sequence
from typing import Any

import torch

from tokenshapley_rag._models import LoadedModel
from tokenshapley_rag._text import check_text
from tokenshapley_rag._types import Source
from tokenshapley_rag.errors import (
    InvalidInputError,
    InvalidInputTypeError,
    TextTooLongError,
)

__all__ = ["rag_prompt", "generate_answer", "generate_chat", "stream_chat"]


def rag_prompt(query: str, sources: Sequence[Source]) -> str:
    """The user turn given to the generator: numbered passages, then the question.

    Examples
    --------
    >>> print(rag_prompt("Who?", [Source("a", "Ann did it.")]))
    Answer the question in one or two sentences using only the passages.
    <BLANKLINE>
    Passage a: Ann did it.
    <BLANKLINE>
    Question: Who?
    """
    passages = "\n".join(f"Passage {s.id}: {s.text}" for s in sources)
    return (
        "Answer the question in one or two sentences using only the passages.\n\n"
        f"{passages}\n\nQuestion: {query}"
    )


@torch.inference_mode()
def generate_answer(loaded: LoadedModel, query: str, sources: Sequence[Source], *, max_new_tokens: int = 64) -> str:
    """Greedy answer of ``loaded`` with the question (and passages) in the user turn of the
    chat template (the instruct model answers sensibly only that way)."""
    tok = loaded.tokenizer
    content = rag_prompt(query, sources)
    if getattr(tok, "chat_template", None):
        ids = tok.apply_chat_template(
            [{"role": "user", "content": content}], add_generation_prompt=True, return_tensors="pt", return_dict=True
        )["input_ids"]
    else:
        ids = tok(content + "\nAnswer:", return_tensors="pt")["input_ids"]
    ids = ids.to(loaded.model.device)
    out = loaded.model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
    )
    return tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True).strip()


# ---------------------------------------------------------------------------- chat generation

_ROLES = ("system", "user", "assistant")
_PARTIAL_WORD = re.compile(r"\S*$")


def _loaded_of(model: Any) -> LoadedModel:
    loaded = getattr(model, "loaded", model)  # a TokenShapley carries its LoadedModel
    if not isinstance(loaded, LoadedModel):
        raise InvalidInputTypeError(
            f"model must be a tokenshapley_rag.TokenShapley or a LoadedModel, got {type(model).__name__}"
        )
    return loaded


def _check_messages(messages: Any) -> list[dict[str, str]]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidInputTypeError(
            "messages must be a sequence of {'role': ..., 'content': ...} mappings, "
            f"got {type(messages).__name__}"
        )
    if not messages:
        raise InvalidInputError("messages is empty: give at least one user message")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise InvalidInputTypeError(
                f"messages[{i}] must be a mapping with 'role' and 'content', got {type(m).__name__}"
            )
        role = m.get("role")
        if role not in _ROLES:
            raise InvalidInputError(f"messages[{i}]['role'] must be one of {', '.join(_ROLES)}; got {role!r}")
        out.append({"role": role, "content": check_text(m.get("content"), f"messages[{i}]['content']")})
    if out[-1]["role"] == "assistant":
        raise InvalidInputError("the last message is the assistant's: the model answers a user (or system) message")
    return out


def _check_options(max_new_tokens: Any, stop: Any) -> tuple[str, ...]:
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
        raise InvalidInputTypeError(f"max_new_tokens must be an int, got {type(max_new_tokens).__name__}")
    if max_new_tokens < 1:
        raise InvalidInputError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if stop is None:
        return ()
    if isinstance(stop, str) or not isinstance(stop, Sequence):
        raise InvalidInputTypeError(f"stop must be a sequence of strings or None, got {type(stop).__name__}")
    for i, s in enumerate(stop):
        if not check_text(s, f"stop[{i}]"):
            raise InvalidInputError(f"stop[{i}] is empty")
    return tuple(stop)


def _prompt_ids(loaded: LoadedModel, messages: list[dict[str, str]]) -> torch.Tensor:
    """The messages in the model's chat template (a model without one gets their contents,
    one per line, then ``Answer:``), ending with the assistant's turn."""
    tok = loaded.tokenizer
    if getattr(tok, "chat_template", None):
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)[
            "input_ids"
        ]
    else:
        ids = tok("\n".join(m["content"] for m in messages) + "\nAnswer:", return_tensors="pt")["input_ids"]
    if ids.shape[1] >= loaded.max_length:
        raise TextTooLongError(
            f"the prompt is {ids.shape[1]} tokens; the model's context is {loaded.max_length} tokens"
        )
    return ids.to(loaded.model.device)


def _decode(tok: Any, ids: Any) -> str:
    return str(tok.decode(ids, skip_special_tokens=True))


def _first_stop(text: str, stop: tuple[str, ...]) -> int | None:
    found = [i for i in (text.find(s) for s in stop) if i >= 0]
    return min(found) if found else None


def _generate_kwargs(
    loaded: LoadedModel, ids: torch.Tensor, max_new_tokens: int, stop: tuple[str, ...], halt: threading.Event | None
) -> dict[str, Any]:
    from transformers import StoppingCriteria, StoppingCriteriaList

    tok = loaded.tokenizer
    n_prompt = ids.shape[1]

    class _Stop(StoppingCriteria):
        # Ends generation once a stop string is written or the consumer stopped reading.
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            done = halt is not None and halt.is_set()
            if not done and stop:
                done = _first_stop(_decode(tok, input_ids[0, n_prompt:]), stop) is not None
            # On the ids' device: generate() combines it with CUDA tensors on a GPU.
            return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)

    return {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "max_new_tokens": min(max_new_tokens, loaded.max_length - n_prompt),
        "do_sample": False,
        "pad_token_id": tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
        "stopping_criteria": StoppingCriteriaList([_Stop()]),
    }


def generate_chat(
    model: Any,
    messages: Sequence[Mapping[str, str]],
    *,
    max_new_tokens: int = 256,
    stop: Sequence[str] | None = None,
) -> str:
    """The model's greedy reply to a chat.

    Generates with a local causal LM, by default the one a :class:`TokenShapley` encodes
    with (the bundled SmolLM2-135M-Instruct), so a fully local RAG pipeline loads one
    model for writing and citing. The messages go through the model's chat template.

    Parameters
    ----------
    model : TokenShapley or LoadedModel
        ``ts`` (its ``ts.loaded`` model) or a :class:`LoadedModel`.
    messages : sequence of mapping
        ``{"role": "system" | "user" | "assistant", "content": str}``, oldest first,
        the last one not the assistant's.
    max_new_tokens : int, default=256
        Most tokens to generate (fewer when the context window ends first).
    stop : sequence of str, optional
        The reply ends before the first occurrence of any of these strings.

    Returns
    -------
    str
        The reply, special tokens removed, not stripped. Equal to the concatenation of
        :func:`stream_chat`'s deltas for the same arguments.

    Raises
    ------
    InvalidInputTypeError
        ``model`` is neither, a message is not a mapping, ``stop`` is a bare string.
    InvalidInputError
        No messages, an unknown role, an assistant message last, ``max_new_tokens < 1``.
    TextTooLongError
        The prompt fills the model's context window.

    Examples
    --------
    >>> from tokenshapley_rag import TokenShapley, generate_chat
    >>> ts = TokenShapley()  # doctest: +SKIP
    >>> generate_chat(ts, [{"role": "user", "content": "What is the capital of France?"}],
    ...               max_new_tokens=12)  # doctest: +SKIP
    'The capital of France is Paris.'
    """
    loaded = _loaded_of(model)
    msgs = _check_messages(messages)
    stops = _check_options(max_new_tokens, stop)
    ids = _prompt_ids(loaded, msgs)
    with torch.inference_mode():
        out = loaded.model.generate(**_generate_kwargs(loaded, ids, max_new_tokens, stops, None))
    text = _decode(loaded.tokenizer, out[0, ids.shape[1] :])
    cut = _first_stop(text, stops)
    return text if cut is None else text[:cut]


class _IdStreamer:
    """A ``generate(streamer=...)`` target: hands each step's new token ids to a queue."""

    def __init__(self) -> None:
        self.queue: queue.Queue[list[int] | None] = queue.Queue()
        self._prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if not self._prompt_seen:  # generate() first puts the prompt
            self._prompt_seen = True
            return
        self.queue.put(value.reshape(-1).tolist())

    def end(self) -> None:
        self.queue.put(None)


def _held_back(text: str, stop: tuple[str, ...]) -> int:
    """How much of ``text``'s end must wait for the next tokens: an unfinished character,
    an unfinished word, or the start of a stop string."""
    safe = len(text.rstrip("\ufffd"))  # a multi-byte character split across tokens
    word = _PARTIAL_WORD.search(text, 0, safe)  # always matches (possibly empty, at ``safe``)
    safe = word.start() if word is not None else safe
    for s in stop:
        for k in range(min(len(s) - 1, safe), 0, -1):
            if text.endswith(s[:k], 0, safe):
                safe -= k
                break
    return safe


def stream_chat(
    model: Any,
    messages: Sequence[Mapping[str, str]],
    *,
    max_new_tokens: int = 256,
    stop: Sequence[str] | None = None,
    timeout: float = 120.0,
) -> Generator[str, None, None]:
    """:func:`generate_chat`'s reply as text deltas, while it is generated.

    ``model.generate`` runs in its own thread; the deltas are whole words (a word is
    sent once the text after it has begun) and never reach into a stop string.
    ``"".join(stream_chat(...)) == generate_chat(...)`` for the same arguments.
    Closing the iterator early (``break``, ``close()``) stops the generation.

    Parameters
    ----------
    model, messages, max_new_tokens, stop
        As :func:`generate_chat`; they are checked before the first delta.
    timeout : float, default=120.0
        Seconds to wait for the next token before raising ``TimeoutError``.

    Yields
    ------
    str
        Non-empty text deltas of the reply (a generator: ``close()`` it to stop early).

    Examples
    --------
    >>> from tokenshapley_rag import TokenShapley, stream_chat
    >>> ts = TokenShapley()  # doctest: +SKIP
    >>> for delta in stream_chat(ts, [{"role": "user", "content": "Say hello."}], max_new_tokens=8):
    ...     print(delta, end="")  # doctest: +SKIP
    Hello! How can I help you today?
    """
    loaded = _loaded_of(model)
    msgs = _check_messages(messages)
    stops = _check_options(max_new_tokens, stop)
    ids = _prompt_ids(loaded, msgs)  # errors surface here, before the generator starts
    return _stream(loaded, ids, max_new_tokens, stops, timeout)


def _stream(
    loaded: LoadedModel, ids: torch.Tensor, max_new_tokens: int, stop: tuple[str, ...], timeout: float
) -> Generator[str, None, None]:
    tok = loaded.tokenizer
    halt = threading.Event()
    streamer = _IdStreamer()
    failure: list[BaseException] = []
    kwargs = _generate_kwargs(loaded, ids, max_new_tokens, stop, halt)

    def run() -> None:
        try:
            with torch.inference_mode():
                loaded.model.generate(**kwargs, streamer=streamer)
        except BaseException as err:  # re-raised in the consumer's thread below
            failure.append(err)
            streamer.end()

    thread = threading.Thread(target=run, name="tokenshapley-generate", daemon=True)
    thread.start()
    generated: list[int] = []
    sent = 0
    try:
        while True:
            try:
                step = streamer.queue.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"the model produced no token in {timeout} s") from None
            if step is None:
                break
            generated.extend(step)
            text = _decode(tok, generated)
            cut = _first_stop(text, stop)
            end = cut if cut is not None else _held_back(text, stop)
            if end > sent:
                yield text[sent:end]
                sent = end
            if cut is not None:
                return
        if failure:
            raise failure[0]
        text = _decode(tok, generated)
        cut = _first_stop(text, stop)
        text = text if cut is None else text[:cut]
        if len(text) > sent:
            yield text[sent:]
    finally:
        halt.set()
        thread.join(timeout=timeout)
