"""The chat server's bounded work: the core's size limits answer 413, and a request whose
client leaves (or whose time budget runs out) stops its attribution at the next checkpoint.

The ASGI app is driven directly, with a ``receive`` that disconnects once the engine has
started: every wait is on an event (with a generous safety timeout), never a timing bet.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the chat extra (starlette) is not installed")
pytest.importorskip("httpx", reason="httpx (Starlette's TestClient) is not installed")

from starlette.testclient import TestClient  # noqa: E402

from tokenshapley_rag.chat import ChatConfig, FixedTextGenerator, create_app, load_documents  # noqa: E402
from tokenshapley_rag.errors import AttributionCancelledError  # noqa: E402

DOCS = Path(__file__).parent / "data" / "chat_docs"
SAFETY_S = 60  # only ever reached if the behaviour under test is broken


@pytest.fixture(scope="module")
def chunks():
    return load_documents(DOCS)


class Blocking:
    """An engine that works until cancelled, checking its event between blocks of work
    like TokenShapley's checkpoints; counts the blocks done and records what stopped it."""

    max_source_chars = None
    max_context_chars = None

    def __init__(self) -> None:
        self.started = threading.Event()
        self.finished = threading.Event()
        self.blocks = 0
        self.stopped_by_cancel: bool | None = None

    def _work(self, cancel: threading.Event) -> None:
        self.started.set()
        try:
            for _ in range(10_000):  # 10,000 blocks would take SAFETY_S * 10,000 / 100: never reached
                if cancel.wait(SAFETY_S / 100):
                    self.stopped_by_cancel = True
                    raise AttributionCancelledError("cancelled")
                self.blocks += 1
            self.stopped_by_cancel = False
        finally:
            self.finished.set()

    def attribute(self, query, sources, response, *, cancel=None):
        self._work(cancel)
        raise AssertionError("not reached")

    def stream(self, query, sources, *, cancel=None):
        self._work(cancel)
        raise AssertionError("not reached")


def _scope(path: str, body: bytes) -> dict:
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [(b"host", b"localhost"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
    }


async def _leave_once_started(app, path: str, payload: dict, engine: Blocking) -> list[dict]:
    """POST ``payload``; the client disconnects as soon as the engine has started."""
    body = json.dumps(payload).encode()
    sent = False

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.to_thread(engine.started.wait, SAFETY_S)
        return {"type": "http.disconnect"}

    messages: list[dict] = []

    async def send(message):
        messages.append(message)

    await asyncio.wait_for(app(_scope(path, body), receive, send), SAFETY_S)
    return messages


async def _until(predicate) -> bool:
    for _ in range(SAFETY_S * 100):
        if predicate():
            return True
        await asyncio.sleep(0.01)
    return False


def test_a_client_that_leaves_stops_its_attribution(chunks):
    engine = Blocking()
    app = create_app(engine, chunks, generator=FixedTextGenerator("x"), prepare=False)
    state = app.state.chat

    async def run():
        messages = await _leave_once_started(app, "/attribute", {"answer": "It is tall.", "sources": ["It is tall."]}, engine)
        # The worker stops at its next checkpoint and only then gives its slot back.
        await asyncio.to_thread(engine.finished.wait, SAFETY_S)
        freed = await _until(lambda: state.active_attributions == 0)
        return messages, freed

    messages, freed = asyncio.run(run())
    assert engine.started.is_set() and engine.finished.is_set()
    assert engine.stopped_by_cancel is True and engine.blocks < 10_000
    assert freed
    assert messages[0]["status"] == 499  # client closed request: nobody reads it


def test_a_request_past_its_time_budget_gets_503_and_stops(chunks):
    engine = Blocking()
    app = create_app(engine, chunks, generator=FixedTextGenerator("x"), prepare=False,
                     config=ChatConfig(attribute_timeout_s=0.05))
    with TestClient(app, base_url="http://localhost") as c:
        r = c.post("/attribute", json={"answer": "It is tall.", "sources": ["It is tall."]})
        assert r.status_code == 503 and r.json()["error"] == "timeout" and "it was stopped" in r.json()["message"]
        assert engine.finished.wait(SAFETY_S)
    assert engine.stopped_by_cancel is True


def test_a_chat_whose_client_leaves_cancels_its_stream(chunks):
    engine = Blocking()
    app = create_app(engine, chunks, generator=FixedTextGenerator("The tower is 330 metres tall.", piece=5), prepare=False)

    async def run():
        messages = await _leave_once_started(app, "/chat", {"question": "How tall is the Eiffel Tower?"}, engine)
        await asyncio.to_thread(engine.finished.wait, SAFETY_S)
        return messages

    asyncio.run(run())
    assert engine.finished.is_set() and engine.stopped_by_cancel is True


@pytest.mark.slow
def test_sources_over_the_engines_limit_get_the_cores_413(ts, chunks):
    from tokenshapley_rag import TextTooLongError

    app = create_app(ts, chunks, generator=FixedTextGenerator("x"), prepare=False,
                     config=ChatConfig(max_body_bytes=1 << 20))
    big = "The tower is 330 metres tall. " * 2000  # 60,000 characters, one source
    with pytest.raises(TextTooLongError) as core:
        ts.check_context([{"id": "big", "text": big}])
    with TestClient(app, base_url="http://localhost") as c:
        r = c.post("/attribute", json={"answer": "It is 330 metres tall.", "sources": [{"id": "big", "text": big}]})
        assert r.status_code == 413
        assert r.json() == {"error": "context_too_large", "message": str(core.value), "field": "sources[0].text"}
        # A stricter server cap on the total applies on top of the engine's limits.
        app.state.chat.config = ChatConfig(max_context_chars=20)
        r = c.post("/attribute", json={"answer": "It is 330 metres tall.", "sources": ["The tower is 330 metres tall."]})
        assert r.status_code == 413 and "max_context_chars=20" in r.json()["message"] and r.json()["field"] == "sources"
