"""generate_chat / stream_chat: greedy chat generation with the bundled model (the encoder's own weights)."""

from __future__ import annotations

import threading
import time

import pytest

from tokenshapley_rag import generate_chat, stream_chat
from tokenshapley_rag.errors import (
    InvalidInputError,
    InvalidInputTypeError,
    InvalidTextError,
    TextTooLongError,
)

PASSAGES = (
    "Answer the question in one or two sentences using only the passages.\n\n"
    "Passage eiffel: The Eiffel Tower is a wrought-iron lattice tower in Paris. It is 330 metres tall.\n"
    "Passage bigben: Big Ben is a bell in London. It was completed in 1859.\n\n"
    "Question: How tall is the Eiffel Tower?"
)
MESSAGES = [{"role": "user", "content": PASSAGES}]


@pytest.fixture(scope="module")
def reply(ts) -> str:
    return generate_chat(ts, MESSAGES, max_new_tokens=40)


@pytest.mark.slow
def test_greedy_reply_answers_from_the_passages(ts, reply):
    assert reply.strip()
    assert "330 metres" in reply, f"greedy SmolLM2 output changed: {reply!r}"
    # greedy: the same reply again, and the same through the LoadedModel
    assert generate_chat(ts.loaded, MESSAGES, max_new_tokens=40) == reply


@pytest.mark.slow
def test_stream_concatenates_to_the_reply(ts, reply):
    deltas = list(stream_chat(ts, MESSAGES, max_new_tokens=40))
    assert "".join(deltas) == reply
    assert len(deltas) > 3 and all(deltas)
    # whole words: every delta but the last ends where the next word begins
    assert all(d[-1].isspace() or d[-1] in ".,;:!?" for d in deltas[:-1]), deltas


@pytest.mark.slow
def test_max_new_tokens_bounds_the_reply(ts, reply):
    short = generate_chat(ts, MESSAGES, max_new_tokens=3)
    assert reply.startswith(short) and len(short) < len(reply)
    assert len(ts.loaded.tokenizer.encode(short, add_special_tokens=False)) <= 3
    assert "".join(stream_chat(ts, MESSAGES, max_new_tokens=3)) == short


@pytest.mark.slow
def test_stop_strings_end_the_reply_before_them(ts, reply):
    cut = reply.index("330")
    stopped = generate_chat(ts, MESSAGES, max_new_tokens=40, stop=["metres", "330"])
    assert stopped == reply[:cut]
    deltas = list(stream_chat(ts, MESSAGES, max_new_tokens=40, stop=["330"]))
    assert "".join(deltas) == reply[:cut]
    # a stop string that is never written changes nothing
    assert generate_chat(ts, MESSAGES, max_new_tokens=40, stop=["@@@"]) == reply


@pytest.mark.slow
def test_closing_the_stream_stops_generating(ts):
    deltas = stream_chat(ts, MESSAGES, max_new_tokens=200)
    first = next(deltas)
    assert first.strip()
    deltas.close()
    deadline = time.monotonic() + 30
    while any(t.name == "tokenshapley-generate" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(t.name == "tokenshapley-generate" for t in threading.enumerate())


def test_arguments_are_checked_before_generating(ts):
    with pytest.raises(InvalidInputTypeError, match="TokenShapley or a LoadedModel"):
        generate_chat(object(), MESSAGES)
    with pytest.raises(InvalidInputTypeError, match="sequence of"):
        generate_chat(ts, "How tall is it?")
    with pytest.raises(InvalidInputError, match="messages is empty"):
        stream_chat(ts, [])
    with pytest.raises(InvalidInputTypeError, match=r"messages\[0\] must be a mapping"):
        generate_chat(ts, [("user", "hi")])
    with pytest.raises(InvalidInputError, match=r"messages\[1\]\['role'\] must be one of system, user, assistant; got 'tool'"):
        generate_chat(ts, [{"role": "user", "content": "hi"}, {"role": "tool", "content": "x"}])
    with pytest.raises(InvalidInputError, match="the last message is the assistant's"):
        generate_chat(ts, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello"}])
    with pytest.raises(InvalidTextError, match=r"messages\[0\]\['content'\] holds a lone surrogate"):
        generate_chat(ts, [{"role": "user", "content": "bad \ud800 text"}])
    with pytest.raises(InvalidInputTypeError, match=r"messages\[0\]\['content'\] must be a str"):
        generate_chat(ts, [{"role": "user", "content": None}])
    with pytest.raises(InvalidInputError, match="max_new_tokens must be >= 1, got 0"):
        stream_chat(ts, MESSAGES, max_new_tokens=0)
    with pytest.raises(InvalidInputTypeError, match="max_new_tokens must be an int"):
        generate_chat(ts, MESSAGES, max_new_tokens=True)
    with pytest.raises(InvalidInputTypeError, match="stop must be a sequence of strings"):
        generate_chat(ts, MESSAGES, stop="\n")
    with pytest.raises(InvalidInputError, match=r"stop\[1\] is empty"):
        generate_chat(ts, MESSAGES, stop=["\n", ""])
    long = [{"role": "user", "content": "word " * (ts.loaded.max_length + 10)}]
    with pytest.raises(TextTooLongError, match=f"the model's context is {ts.loaded.max_length} tokens"):
        stream_chat(ts, long)
