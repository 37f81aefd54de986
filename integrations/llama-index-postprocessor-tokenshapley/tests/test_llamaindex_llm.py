"""TokenShapleyLLM: the bundled SmolLM2 (the encoder's own weights) as a LlamaIndex LLM, run for real."""

from __future__ import annotations

import pytest
from llama_index.core.llms import ChatMessage, MessageRole

from llama_index.postprocessor.tokenshapley import TokenShapleyLLM
from tokenshapley_rag import generate_chat
from tokenshapley_rag.errors import InvalidInputError

PROMPT = (
    "Answer the question in one sentence using only the passage.\n\n"
    "Passage: The Eiffel Tower is a wrought-iron lattice tower in Paris. It is 330 metres tall.\n\n"
    "Question: How tall is the Eiffel Tower?"
)
SYSTEM = "You answer in one short sentence."


@pytest.fixture(scope="module")
def llm(ts) -> TokenShapleyLLM:
    return TokenShapleyLLM(ts, max_new_tokens=16)


def chat_messages() -> list[ChatMessage]:
    return [ChatMessage(role=MessageRole.SYSTEM, content=SYSTEM), ChatMessage(role=MessageRole.USER, content=PROMPT)]


def test_metadata_and_validation(ts, llm):
    assert TokenShapleyLLM.class_name() == "TokenShapleyLLM"
    meta = llm.metadata
    assert meta.is_chat_model and not meta.is_function_calling_model
    assert (meta.context_window, meta.num_output, meta.model_name) == (ts.loaded.max_length, 16, ts.loaded.name)
    assert llm.token_shapley is ts
    with pytest.raises(TypeError, match="TokenShapley"):
        TokenShapleyLLM("smollm2")
    with pytest.raises(ValueError, match="max_new_tokens must be a positive integer, got 0"):
        TokenShapleyLLM(ts, max_new_tokens=0)
    with pytest.raises(InvalidInputError, match=r"messages\[1\] has role 'tool'"):
        llm.chat([ChatMessage(role=MessageRole.USER, content="hi"), ChatMessage(role=MessageRole.TOOL, content="42")])


@pytest.mark.slow
def test_complete_and_its_stream(ts, llm):
    text = llm.complete(PROMPT).text
    assert "Eiffel Tower" in text, f"greedy SmolLM2 output changed: {text!r}"
    # complete() is one user turn of the chat template
    assert text == generate_chat(ts, [{"role": "user", "content": PROMPT}], max_new_tokens=16)
    chunks = list(llm.stream_complete(PROMPT))
    assert len(chunks) > 1
    assert "".join(c.delta for c in chunks) == text == chunks[-1].text
    assert all(b.text == a.text + b.delta for a, b in zip(chunks, chunks[1:]))  # text is cumulative


@pytest.mark.slow
def test_chat_and_its_stream(ts, llm):
    reply = llm.chat(chat_messages())
    assert reply.message.role == MessageRole.ASSISTANT and reply.message.content.strip()
    # the system message goes through the chat template as a system turn
    expected = generate_chat(
        ts, [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}], max_new_tokens=16
    )
    assert reply.message.content == expected
    chunks = list(llm.stream_chat(chat_messages()))
    assert "".join(c.delta for c in chunks) == expected == chunks[-1].message.content


@pytest.mark.slow
@pytest.mark.asyncio
async def test_async_methods_give_the_same_text(llm):
    text = llm.complete(PROMPT).text
    assert (await llm.acomplete(PROMPT)).text == text
    assert "".join([c.delta async for c in await llm.astream_complete(PROMPT)]) == text
    reply = (await llm.achat(chat_messages())).message.content
    assert reply and "".join([c.delta async for c in await llm.astream_chat(chat_messages())]) == reply
