"""ChatTokenShapley: the bundled SmolLM2 (the encoder's own weights) as a LangChain chat model, run for real."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from tokenshapley_rag import generate_chat
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError

from langchain_tokenshapley import ChatTokenShapley

PROMPT = (
    "Answer the question in one sentence using only the passage.\n\n"
    "Passage: The Eiffel Tower is a wrought-iron lattice tower in Paris. It is 330 metres tall.\n\n"
    "Question: How tall is the Eiffel Tower?"
)
SYSTEM = "You answer in one short sentence."


@pytest.fixture(scope="module")
def llm(ts) -> ChatTokenShapley:
    return ChatTokenShapley(ts, max_new_tokens=16)


@pytest.fixture(scope="module")
def reply(llm) -> AIMessage:
    return llm.invoke([SystemMessage(SYSTEM), HumanMessage(PROMPT)])


class TokenRecorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.tokens: list[str] = []

    def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
        self.tokens.append(token)


def test_identity_and_validation(ts, llm):
    assert llm._llm_type == "tokenshapley-local"
    assert llm._identifying_params == {"model_name": ts.loaded.name, "max_new_tokens": 16}
    assert llm.token_shapley is ts
    with pytest.raises(InvalidInputTypeError, match="TokenShapley"):
        ChatTokenShapley("smollm2")
    with pytest.raises(ValueError, match="max_new_tokens"):
        ChatTokenShapley(ts, max_new_tokens=0)
    with pytest.raises(InvalidInputError, match=r"messages\[1\] is a ToolMessage"):
        llm.invoke([HumanMessage("hi"), ToolMessage("42", tool_call_id="t1")])
    with pytest.raises(InvalidInputError, match="the last message is the assistant's"):
        llm.invoke([HumanMessage("hi"), AIMessage("Hello")])
    with pytest.raises(InvalidInputTypeError, match="not temperature"):
        llm.invoke("hi", temperature=0.7)


@pytest.mark.slow
def test_invoke_is_the_greedy_chat_reply(ts, reply):
    assert isinstance(reply, AIMessage) and "Eiffel Tower" in reply.content, reply.content
    assert reply.response_metadata["model_name"] == ts.loaded.name
    # the system and human messages went through the chat template as system and user turns
    expected = generate_chat(
        ts, [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}], max_new_tokens=16
    )
    assert reply.content == expected


@pytest.mark.slow
def test_stream_adds_up_to_invoke_and_reports_tokens(ts, llm, reply):
    recorder = TokenRecorder()
    chunks = list(llm.stream([SystemMessage(SYSTEM), HumanMessage(PROMPT)], config={"callbacks": [recorder]}))
    assert len([c for c in chunks if c.content]) > 1
    assert "".join(c.content for c in chunks) == reply.content
    merged = chunks[0]
    for c in chunks[1:]:
        merged += c
    assert merged.content == reply.content and merged.response_metadata["model_name"] == ts.loaded.name
    assert "".join(recorder.tokens) == reply.content and len(recorder.tokens) > 1


@pytest.mark.slow
def test_stop_and_max_new_tokens_per_call(llm, reply):
    words = reply.content.split(" ")
    stop = " " + words[2]
    cut = reply.content.index(stop)
    assert llm.invoke([SystemMessage(SYSTEM), HumanMessage(PROMPT)], stop=[stop]).content == reply.content[:cut]
    streamed = "".join(c.content for c in llm.stream([SystemMessage(SYSTEM), HumanMessage(PROMPT)], stop=[stop]))
    assert streamed == reply.content[:cut]
    short = llm.invoke([SystemMessage(SYSTEM), HumanMessage(PROMPT)], max_new_tokens=3).content
    assert short and reply.content.startswith(short) and len(short) < len(reply.content)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_ainvoke_and_batch(llm, reply):
    messages = [SystemMessage(SYSTEM), HumanMessage(PROMPT)]
    assert (await llm.ainvoke(messages)).content == reply.content
    assert "".join([c.content async for c in llm.astream(messages)]) == reply.content
    other = [HumanMessage("What is the capital of France?")]
    outs = llm.batch([messages, other])
    assert [o.content for o in outs] == [reply.content, llm.invoke(other).content]
