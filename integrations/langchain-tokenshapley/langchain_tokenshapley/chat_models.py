"""The bundled model as a LangChain chat model: a fully local chain writes and cites with one model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ChatMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field, PrivateAttr
from tokenshapley_rag import TokenShapley, generate_chat, stream_chat
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError

__all__ = ["ChatTokenShapley"]

_CHAT_ROLES = {"system": "system", "user": "user", "human": "user", "assistant": "assistant", "ai": "assistant"}


def _chat_messages(messages: list[BaseMessage]) -> list[dict[str, str]]:
    out = []
    for i, m in enumerate(messages):
        if isinstance(m, SystemMessage):
            role: str | None = "system"
        elif isinstance(m, HumanMessage):
            role = "user"
        elif isinstance(m, AIMessage):
            role = "assistant"
        elif isinstance(m, ChatMessage):
            role = _CHAT_ROLES.get(m.role)
        else:
            role = None
        if role is None:
            raise InvalidInputError(
                f"messages[{i}] is a {type(m).__name__} (type {m.type!r}): ChatTokenShapley takes system, human and "
                "AI messages (the bundled model has no tool calling)"
            )
        out.append({"role": role, "content": str(m.text)})
    return out


class ChatTokenShapley(BaseChatModel):
    """The causal LM of a ``tokenshapley_rag.TokenShapley`` as a LangChain chat model.

    By default that is the bundled SmolLM2-135M-Instruct, so a retrieval chain with this
    model and ``TokenShapleyCitations`` over the same ``TokenShapley`` loads one model,
    offline, for both writing and citing the answer. Decoding is greedy, in the model's
    chat template; ``stop`` strings end the answer before them. ``stream`` yields whole
    words as they are generated, and the chunks add up to what ``invoke`` returns.
    ``ainvoke`` / ``astream`` / ``batch`` use LangChain's defaults (the model runs in a
    worker thread). A 135M model answers short, extractive questions over a few passages;
    use a larger model for anything else (citations work with any model).

    Args:
        token_shapley: Whose model generates (``ts.loaded``); None loads
            ``TokenShapley()``. Pass the one your ``TokenShapleyCitations`` uses to load
            it once.
        **kwargs: ``max_new_tokens`` (most tokens per answer, 256 by default; a call may
            override it: ``invoke(..., max_new_tokens=20)``) and other ``BaseChatModel``
            fields (``callbacks``, ``tags``, ...).

    Raises:
        tokenshapley_rag.errors.InvalidInputError: A tool or function message, or the
            last message is the AI's.
        tokenshapley_rag.errors.InvalidInputTypeError: An unknown call keyword.
        tokenshapley_rag.errors.TextTooLongError: The prompt fills the model's context.

    Examples:
        >>> from tokenshapley_rag import TokenShapley
        >>> ts = TokenShapley()  # doctest: +SKIP
        >>> llm = ChatTokenShapley(ts, max_new_tokens=32)  # doctest: +SKIP
        >>> llm.invoke("What is the capital of France?").content  # doctest: +SKIP
        'The capital of France is Paris.'
        >>> "".join(c.content for c in llm.stream("What is the capital of France?"))  # doctest: +SKIP
        'The capital of France is Paris.'
    """

    max_new_tokens: int = Field(default=256, gt=0)
    """Most tokens to generate per answer."""

    _ts: TokenShapley = PrivateAttr()

    def __init__(self, token_shapley: TokenShapley | None = None, **kwargs: Any) -> None:
        """Generate with ``token_shapley``'s model (``TokenShapley()`` when None)."""
        if token_shapley is not None and not isinstance(token_shapley, TokenShapley):
            raise InvalidInputTypeError(
                f"token_shapley must be a tokenshapley_rag.TokenShapley or None, got {type(token_shapley).__name__}"
            )
        super().__init__(**kwargs)
        self._ts = token_shapley if token_shapley is not None else TokenShapley()

    @property
    def token_shapley(self) -> TokenShapley:
        """The ``TokenShapley`` whose model generates."""
        return self._ts

    @property
    def _llm_type(self) -> str:
        return "tokenshapley-local"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self._ts.loaded.name, "max_new_tokens": self.max_new_tokens}

    def _options(self, kwargs: dict[str, Any]) -> int:
        unknown = sorted(set(kwargs) - {"max_new_tokens"})
        if unknown:
            raise InvalidInputTypeError(f"ChatTokenShapley takes max_new_tokens and stop, not {', '.join(unknown)}")
        return kwargs.get("max_new_tokens", self.max_new_tokens)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = generate_chat(self._ts, _chat_messages(messages), max_new_tokens=self._options(kwargs), stop=stop)
        message = AIMessage(content=text, response_metadata={"model_name": self._ts.loaded.name})
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        deltas = stream_chat(self._ts, _chat_messages(messages), max_new_tokens=self._options(kwargs), stop=stop)
        # the model name rides on the first chunk only: merging chunks concatenates string metadata
        metadata: dict[str, Any] = {"model_name": self._ts.loaded.name}
        try:
            for delta in deltas:
                chunk = ChatGenerationChunk(message=AIMessageChunk(content=delta, response_metadata=metadata))
                metadata = {}
                if run_manager is not None:
                    run_manager.on_llm_new_token(delta, chunk=chunk)
                yield chunk
        finally:
            deltas.close()  # type: ignore[attr-defined]  # a consumer that stops early stops the model
