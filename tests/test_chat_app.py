"""The chat web app over HTTP: SSE order, error answers, /attribute, concurrency isolation."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the chat extra (starlette) is not installed")
httpx = pytest.importorskip("httpx", reason="httpx (Starlette's TestClient) is not installed")

from starlette.testclient import TestClient  # noqa: E402

from tokenshapley_rag.chat import (  # noqa: E402
    ChatConfig,
    FixedTextGenerator,
    LexicalRetriever,
    LocalModelGenerator,
    chunk_text,
    create_app,
    load_documents,
)

DOCS = Path(__file__).parent / "data" / "chat_docs"

# Eight questions, each answered from its own document; the answers share no proper noun.
ANSWERS = {
    "How tall is the Eiffel Tower?": "The Eiffel Tower is 330 metres tall. It was completed on 31 March 1889.",
    "When was the Elizabeth Tower of Big Ben completed?": "The Elizabeth Tower was completed in 1859. It stands 96 metres tall.",
    "Who designed the Statue of Liberty?": "The Statue of Liberty was designed by Frederic Auguste Bartholdi. It was dedicated on 28 October 1886.",
    "Who made the first ascent of Mount Everest?": "Tenzing Norgay and Edmund Hillary made the first ascent of Everest on 29 May 1953.",
    "How long is the Nile river?": "The Nile is about 6,650 kilometres long. The White Nile and the Blue Nile meet at Khartoum.",
    "Who landed Apollo 11 on the Moon?": "Neil Armstrong and Buzz Aldrin landed the Eagle on 20 July 1969. Michael Collins stayed in orbit.",
    "How long is the Great Wall of China?": "The Great Wall of China measures about 21,196 kilometres. It became a World Heritage Site in 1987.",
    "When did the Titanic sink in the Atlantic Ocean?": "Titanic sank on 15 April 1912 after striking an iceberg. More than 1,500 people died.",
}
TOPIC = {q: doc for q, doc in zip(ANSWERS, ["eiffel.md", "bigben.txt", "liberty.md", "everest.md", "nile.txt", "apollo.md", "greatwall.md", "titanic.txt"])}
EIFFEL_Q = "How tall is the Eiffel Tower?"


def parse_sse(text: str) -> list[tuple[str, dict]]:
    """[(event, data)] of a server-sent event stream."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        event, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            out.append((event, json.loads("\n".join(data))))
    return out


@pytest.fixture(scope="module")
def chunks():
    return load_documents(DOCS)


@pytest.fixture(scope="module")
def app(ts, chunks):
    return create_app(ts, chunks, generator=FixedTextGenerator(ANSWERS, piece=5), config=ChatConfig(max_body_bytes=4096))


@pytest.fixture(scope="module")
def client(app):
    with TestClient(app, base_url="http://localhost") as c:  # runs the lifespan: sentence keys are prepared
        app.state.ready.wait(60)
        yield c


def chat(client, question: str, **extra) -> list[tuple[str, dict]]:
    r = client.post("/chat", json={"question": question, **extra})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    return parse_sse(r.text)


# ---------------------------------------------------------------------- documents, retrieval, generators


def test_documents_are_paragraph_chunks_with_stable_ids(chunks):
    ids = [c.id for c in chunks]
    assert ids[:2] == ["apollo.md#1", "apollo.md#2"]
    assert "eiffel.md#3" in ids and len(set(ids)) == len(ids)
    eiffel2 = next(c for c in chunks if c.id == "eiffel.md#2")
    text = (DOCS / "eiffel.md").read_text(encoding="utf-8")
    assert text[eiffel2.start : eiffel2.end] == eiffel2.text
    assert eiffel2.title == "The Eiffel Tower" and not eiffel2.text.startswith("#")
    assert load_documents(DOCS) == chunks  # same folder, same ids


def test_long_paragraph_is_cut_at_sentence_ends():
    text = " ".join(f"Sentence number {i} is here." for i in range(40))
    parts = chunk_text("long.txt", text, max_chars=200)
    assert len(parts) > 1 and all(len(p.text) <= 200 for p in parts)
    assert all(p.text.endswith(".") and text[p.start : p.end] == p.text for p in parts)


def test_load_documents_rejects_a_missing_or_empty_folder(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_documents(tmp_path / "nope")
    with pytest.raises(FileNotFoundError):
        load_documents(tmp_path)


def test_lexical_retriever_ranks_the_topic_document_first(chunks):
    r = LexicalRetriever(chunks)
    for q, doc in TOPIC.items():
        hits = r.retrieve(q, 3)
        assert 1 <= len(hits) <= 3 and hits[0].chunk.document == doc, (q, [h.chunk.id for h in hits])
    assert r.retrieve("xyzzy plugh?", 3) == []


def test_fixed_text_generator_yields_the_text_in_pieces():
    gen = FixedTextGenerator({"q": "abcdefg"}, piece=3)
    assert list(gen.generate("q", [])) == ["abc", "def", "g"]
    with pytest.raises(KeyError):
        list(gen.generate("other", []))


# ---------------------------------------------------------------------- the SSE stream


def test_chat_streams_sources_deltas_citations_then_done(client, ts, chunks):
    events = chat(client, EIFFEL_Q)
    names = [e for e, _ in events]
    assert names[0] == "sources" and names[-1] == "done"
    assert set(names) <= {"sources", "delta", "citations", "done"}
    hits = events[0][1]["chunks"]
    assert hits[0]["id"].startswith("eiffel.md#") and len(hits) <= 3
    answer = ANSWERS[EIFFEL_Q]
    received, sentences = "", []
    for name, data in events:
        if name == "delta":
            assert data["offset"] == len(received)
            received += data["text"]
        elif name == "citations":
            # A sentence's citations come after the text that ends it, in sentence order.
            assert data["end"] <= len(received)
            assert data["index"] == len(sentences)
            assert data["text"] == answer[data["start"] : data["end"]]
            for c in data["citations"]:
                assert answer[c["start"] : c["end"]] == c["text"] and data["start"] <= c["start"] < data["end"]
            sentences.append(data)
    assert received == answer
    assert [s["text"] for s in sentences] == ["The Eiffel Tower is 330 metres tall.", "It was completed on 31 March 1889."]
    done = events[-1][1]
    assert done["answer"] == answer and done["citations_available"] and done["error"] is None
    # The streamed citations are those of attribute() on the whole answer.
    expected = ts.attribute(EIFFEL_Q, [next(c for c in chunks if c.id == h["id"]).to_source() for h in hits], answer)
    streamed = [c for s in sentences for c in s["citations"]]
    key = lambda c: (c["text"], c["start"], c["supported"], c["source_id"], c["sentence"])  # noqa: E731
    assert [key(c) for c in streamed] == [key(c.to_dict()) for c in expected.citations]
    assert [key(c) for c in done["citations"]] == [key(c.to_dict()) for c in expected.citations]
    cite = {c["text"]: c for c in streamed}
    assert cite["330 metres"]["source_id"] == "eiffel.md#2"
    assert cite["330 metres"]["sentence"] == "The tower is 330 metres tall, about the same height as an 81-storey building."
    assert cite["31 March 1889"]["sentence"].startswith("Construction was completed on 31 March 1889")


def test_a_sentences_citations_are_sent_while_the_answer_is_still_generating(ts, chunks):
    cited = threading.Event()

    class Watching:  # the engine, noting when a fed delta completed a sentence
        loaded = ts.loaded

        def stream(self, query, sources):
            inner = ts.stream(query=query, sources=sources)

            class S:
                def feed(self, delta):
                    out = inner.feed(delta)
                    if out:
                        cited.set()
                    return out

                finish = inner.finish
                result = property(lambda self: inner.result)

            return S()

    class Waiting:  # generates the rest of the answer only once the first sentence is cited
        def generate(self, question, chunks):
            yield "The Eiffel Tower is 330 metres tall. It"
            assert cited.wait(60)
            yield " was completed on 31 March 1889."

    app = create_app(Watching(), chunks, generator=Waiting(), prepare=False)
    with TestClient(app, base_url="http://localhost") as c:
        events = chat(c, EIFFEL_Q)
    names = [e for e, _ in events]
    assert names == ["sources", "delta", "citations", "delta", "citations", "done"]
    assert events[2][1]["text"] == "The Eiffel Tower is 330 metres tall." and events[2][1]["citations"]


def test_a_question_no_document_matches_still_gets_an_answer(ts, chunks):
    app = create_app(ts, chunks, generator=FixedTextGenerator("I do not know."), prepare=False)
    with TestClient(app, base_url="http://localhost") as c:
        events = chat(c, "xyzzy plugh?")
    assert events[0] == ("sources", {"chunks": []})
    notes = [d for e, d in events if e == "citations_unavailable"]
    assert [n["reason"] for n in notes] == ["no_sources"] and "No document matched" in notes[0]["message"]
    assert events[-1][0] == "done" and events[-1][1]["answer"] == "I do not know."


class _BrokenEngine:
    """A TokenShapley whose streams fail when created, fed or finished."""

    def __init__(self, ts, fail_in: str):
        self.ts, self.fail_in = ts, fail_in
        self.loaded = ts.loaded

    def stream(self, query, sources):
        if self.fail_in == "stream":
            raise RuntimeError("the encoder fell over")
        inner, fail_in = self.ts.stream(query=query, sources=sources), self.fail_in

        class _Stream:
            def feed(self, delta):
                if fail_in == "feed":
                    raise RuntimeError("the encoder fell over in feed")
                return inner.feed(delta)

            def finish(self):
                if fail_in == "finish":
                    raise RuntimeError("the encoder fell over in finish")
                return inner.finish()

            @property
            def result(self):
                return inner.result

        return _Stream()


@pytest.mark.parametrize("fail_in", ["stream", "feed", "finish"])
def test_attribution_failure_never_breaks_the_answer(ts, chunks, fail_in):
    answer = ANSWERS[EIFFEL_Q]
    app = create_app(_BrokenEngine(ts, fail_in), chunks, generator=FixedTextGenerator(answer, piece=2), prepare=False)
    with TestClient(app, base_url="http://localhost") as c:
        events = chat(c, EIFFEL_Q)
    names = [e for e, _ in events]
    assert names.count("citations_unavailable") == 1 and "error" not in names
    note = events[names.index("citations_unavailable")][1]
    assert note["reason"] == "attribution_failed" and "fell over" in note["message"]
    assert "".join(d["text"] for e, d in events if e == "delta") == answer
    assert names[-1] == "done"
    done = events[-1][1]
    assert done["answer"] == answer and not done["citations_available"] and done["citations"] == []
    # Citations sent before the failure stay valid: here, the first sentence's.
    assert names.count("citations") == (1 if fail_in == "finish" else 0)


def test_generator_failure_ends_the_turn_with_an_error_event(ts, chunks):
    class Failing:
        def generate(self, question, chunks):
            yield "The Eiffel Tower is 330 metres tall. It"
            raise RuntimeError("model crashed")

    app = create_app(ts, chunks, generator=Failing(), prepare=False)
    with TestClient(app, base_url="http://localhost") as c:
        events = chat(c, EIFFEL_Q)
    names = [e for e, _ in events]
    assert "error" in names and names[-1] == "done"
    assert "model crashed" in events[names.index("error")][1]["message"]
    done = events[-1][1]
    assert done["answer"] == "The Eiffel Tower is 330 metres tall. It" and "model crashed" in done["error"]
    # What was generated is still cited.
    assert any(e == "citations" for e in names) and done["citations_available"]


class _FakeSentence:
    def __init__(self, index, start, end, text):
        self.index, self.start, self.end, self.text, self.citations = index, start, end, text, ()


class _FakeStream:
    """Follows the AttributionStream interface: a sentence is complete at '. ' (no model)."""

    def __init__(self):
        self.text, self.done = "", 0

    def _complete(self, final):
        out, pos = [], 0
        ends = [i + 1 for i in range(len(self.text)) if self.text[i] == "." and (final or self.text[i + 1 : i + 2] == " ")]
        for i, end in enumerate(ends):
            start = len(self.text[:pos]) + (len(self.text[pos:end]) - len(self.text[pos:end].lstrip()))
            out.append(_FakeSentence(i, start, end, self.text[start:end]))
            pos = end
        new = out[self.done :]
        self.done = len(out)
        return new

    def feed(self, delta):
        self.text += delta
        return self._complete(final=False)

    def finish(self):
        return self._complete(final=True)

    @property
    def result(self):
        class R:
            citations, support, source_scores = [], 0.0, {}

        return R()


def test_any_engine_with_the_stream_interface_plugs_in(chunks):
    class FakeEngine:
        loaded = None

        def stream(self, query, sources):
            return _FakeStream()

    app = create_app(FakeEngine(), chunks, generator=FixedTextGenerator("One. Two. Three.", piece=1), prepare=False)
    with TestClient(app, base_url="http://localhost") as c:
        events = chat(c, EIFFEL_Q)
    cites = [d for e, d in events if e == "citations"]
    assert [(d["index"], d["text"]) for d in cites] == [(0, "One."), (1, "Two."), (2, "Three.")]
    assert events[-1][0] == "done" and events[-1][1]["citations_available"]


# ---------------------------------------------------------------------- concurrency


def test_eight_concurrent_chats_each_get_only_their_own_citations(ts, chunks):
    app = create_app(ts, chunks, generator=FixedTextGenerator(ANSWERS, piece=3, delay=0.004), prepare=False)

    async def one(client, question):
        r = await client.post("/chat", json={"question": question})
        assert r.status_code == 200
        return question, parse_sse(r.text)

    async def run_all():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=120) as client:
            return await asyncio.gather(*(one(client, q) for q in ANSWERS))

    results = asyncio.run(run_all())
    assert len(results) == 8
    by_id = {c.id: c for c in chunks}
    for question, events in results:
        answer = ANSWERS[question]
        retrieved = {c["id"] for c in events[0][1]["chunks"]}
        assert "".join(d["text"] for e, d in events if e == "delta") == answer
        sentences = [d for e, d in events if e == "citations"]
        assert sentences and events[-1][0] == "done" and events[-1][1]["answer"] == answer
        assert events[-1][1]["citations_available"]
        cited_docs = set()
        for s in sentences:
            assert answer[s["start"] : s["end"]] == s["text"]
            for c in s["citations"]:
                assert answer[c["start"] : c["end"]] == c["text"], (question, c["text"])
                for src in c["sources"]:
                    assert src["source_id"] in retrieved, (question, src["source_id"])
                    assert src["sentence"] in by_id[src["source_id"]].text
                if c["supported"]:
                    cited_docs.add(by_id[c["source_id"]].document)
        assert TOPIC[question] in cited_docs, (question, cited_docs)
    assert app.state.chat.active_chats == 0


def test_a_chat_over_the_limit_gets_503(ts, chunks):
    release = threading.Event()

    class Slow:
        def generate(self, question, chunks):
            release.wait(10)
            yield "Done."

    app = create_app(ts, chunks, generator=Slow(), config=ChatConfig(max_concurrent_chats=1), prepare=False)

    async def run():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=30) as client:
            first = asyncio.create_task(client.post("/chat", json={"question": EIFFEL_Q}))
            for _ in range(200):
                if app.state.chat.active_chats:
                    break
                await asyncio.sleep(0.01)
            second = await client.post("/chat", json={"question": EIFFEL_Q})
            release.set()
            return second, await first

    second, first = asyncio.run(run())
    assert second.status_code == 503 and second.json()["error"] == "busy"
    assert first.status_code == 200 and parse_sse(first.text)[-1][0] == "done"


def test_a_client_that_goes_away_stops_its_generator(ts, chunks):
    uvicorn = pytest.importorskip("uvicorn")
    import socket
    import time

    closed, sent = threading.Event(), []

    class Endless:
        def generate(self, question, chunks):
            try:
                for i in range(10_000):
                    sent.append(i)
                    yield f"Word{i} "
                    time.sleep(0.01)
            finally:
                closed.set()

    app = create_app(ts, chunks, generator=Endless(), prepare=False)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.02)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            with client.stream("POST", "/chat", json={"question": EIFFEL_Q}) as r:
                for line in r.iter_lines():
                    if line.startswith("event: delta"):
                        break  # hang up mid-answer
        assert closed.wait(10), "the generator was not closed after the client left"
        n = len(sent)
        time.sleep(0.2)
        assert len(sent) <= n + 1 and n < 1000
        deadline = time.monotonic() + 5
        while app.state.chat.active_chats and time.monotonic() < deadline:
            time.sleep(0.02)
        assert app.state.chat.active_chats == 0
    finally:
        server.should_exit = True
        thread.join(10)


# ---------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ({"question": ""}, 400, "empty_question", "question"),
        ({"question": "   \n"}, 400, "empty_question", "question"),
        ({}, 422, "missing_field", "question"),
        ({"question": 42}, 422, "wrong_type", "question"),
        ({"question": ["a"]}, 422, "wrong_type", "question"),
        ({"question": "Why?", "top_k": "3"}, 422, "wrong_type", "top_k"),
        ({"question": "Why?", "top_k": True}, 422, "wrong_type", "top_k"),
        ({"question": "Why?", "top_k": 0}, 400, "out_of_range", "top_k"),
        ({"question": "x" * 2001}, 400, "too_long", "question"),
        ({"question": "Why?", "k": 3}, 422, "unknown_field", "k"),
    ],
)
def test_chat_rejects_bad_fields(client, body, status, code, field):
    r = client.post("/chat", json=body)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    assert r.json()["error"] == code and r.json()["field"] == field
    assert field in r.json()["message"]


@pytest.mark.parametrize("path", ["/chat", "/attribute"])
def test_malformed_empty_and_non_object_bodies(client, path):
    r = client.post(path, content=b'{"question": "Why?",', headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "malformed_json" and "not valid JSON" in r.json()["message"]
    r = client.post(path, content=b"\xff\xfe", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "malformed_json"
    r = client.post(path, content=b"", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "empty_body"
    r = client.post(path, json=["Why?"])
    assert r.status_code == 422 and r.json()["error"] == "wrong_type" and "JSON object" in r.json()["message"]


@pytest.mark.parametrize("path", ["/chat", "/attribute"])
def test_oversized_bodies_get_413(client, path):
    big = json.dumps({"question": "x" * 5000, "query": "", "answer": "x" * 5000, "sources": ["y"]}).encode()
    r = client.post(path, content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"] == "body_too_large" and "4096" in r.json()["message"]

    def chunked():  # no Content-Length: the limit is enforced while reading
        for i in range(0, len(big), 1000):
            yield big[i : i + 1000]

    r = client.post(path, content=chunked(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"] == "body_too_large"


def test_unknown_document_chunk_and_route_get_json_404(client):
    r = client.get("/chunks/nope.md%231")
    assert r.status_code == 404 and r.json()["error"] == "unknown_chunk" and "nope.md#1" in r.json()["message"]
    r = client.get("/documents/nope.md")
    assert r.status_code == 404 and r.json()["error"] == "unknown_document"
    r = client.get("/no/such/route")
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    r = client.get("/chat")
    assert r.status_code == 405 and r.json()["error"] == "method_not_allowed"


def test_documents_and_chunks_endpoints(client):
    docs = client.get("/documents").json()["documents"]
    assert {"name": "nile.txt", "chunks": ["nile.txt#1", "nile.txt#2"]} in docs
    r = client.get("/chunks/eiffel.md%232")
    assert r.status_code == 200 and r.json()["text"].startswith("Construction was completed on 31 March 1889")
    r = client.get("/documents/eiffel.md")
    assert [c["id"] for c in r.json()["chunks"]] == ["eiffel.md#1", "eiffel.md#2", "eiffel.md#3"]
    assert client.get("/health").json()["chunks"] == 17


def test_the_page_is_self_contained(client):
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in r.headers["content-security-policy"]
    page = r.text
    assert "http://" not in page and "https://" not in page and "<link" not in page and " src=" not in page
    assert "<title>Ask the documents</title>" in page


# ---------------------------------------------------------------------- a shared machine


def test_foreign_host_headers_are_refused(client):
    # DNS rebinding: a page on evil.example whose name now resolves to 127.0.0.1.
    for path in ("/documents", "/health", "/"):
        r = client.get(path, headers={"host": "evil.example"})
        assert r.status_code == 421 and r.json()["error"] == "host_not_allowed", path
    r = client.post("/attribute", json={"answer": "x", "sources": ["x"]}, headers={"host": "evil.example:8000"})
    assert r.status_code == 421
    for host in ("localhost:8000", "127.0.0.1", "[::1]:8000"):
        assert client.get("/health", headers={"host": host}).status_code == 200, host


@pytest.mark.parametrize("path", ["/chat", "/attribute"])
def test_cross_site_form_posts_are_refused(client, path):
    body = json.dumps({"question": "Why?", "answer": "x", "sources": ["x"]})
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        r = client.post(path, content=body, headers={"content-type": kind})
        assert r.status_code == 415 and r.json()["error"] == "unsupported_media_type", kind


@pytest.mark.parametrize(
    "content, message",
    [
        (b'{"answer": "x", "sources": [{"id": "a", "text": "x", "metadata": {"x": NaN}}]}', "NaN"),
        (b'{"answer": "x", "sources": ["x"], "query": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested"),
    ],
)
def test_non_json_numbers_and_deep_nesting_get_400(ts, chunks, content, message):
    app = create_app(ts, chunks, generator=FixedTextGenerator(ANSWERS), config=ChatConfig(max_body_bytes=400_000), prepare=False)
    with TestClient(app, base_url="http://localhost") as c:
        r = c.post("/attribute", content=content, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "malformed_json" and message in r.json()["message"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"answer": "It is \ud800 ok.", "sources": ["x"]}, "answer"),
        ({"answer": "ok", "sources": ["x \udfff"]}, "sources[0]"),
        ({"answer": "ok", "sources": [{"id": "\ud800", "text": "x"}]}, "sources[0].id"),
        ({"question": "Why \ud800?"}, "question"),
    ],
)
def test_lone_surrogates_get_a_422_naming_the_field(client, body, field):
    path = "/chat" if "question" in body else "/attribute"
    # json.dumps writes lone surrogates as \u escapes, as a browser's JSON.stringify does.
    r = client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["error"] == "invalid_text" and r.json()["field"] == field


def test_attribution_limits_answer_413_429_503(ts, chunks):
    class Slow:
        loaded = None

        def attribute(self, query, sources, response):
            import time

            time.sleep(2.0)
            return ts.attribute(query, sources, response)

    body = {"answer": "It is 330 metres tall.", "sources": ["The tower is 330 metres tall."]}
    cfg = ChatConfig(max_context_chars=20, attribute_timeout_s=0.2)
    app = create_app(Slow(), chunks, generator=FixedTextGenerator(ANSWERS), config=cfg, prepare=False)
    with TestClient(app, base_url="http://localhost") as c:
        r = c.post("/attribute", json=body)
        assert r.status_code == 413 and r.json()["error"] == "context_too_large"
        r = c.post("/attribute", json={**body, "sources": ["330 metres."]})
        assert r.status_code == 503 and r.json()["error"] == "timeout"
        assert c.get("/health").status_code == 200
    app = create_app(ts, chunks, generator=FixedTextGenerator(ANSWERS), config=ChatConfig(max_concurrent_attributions=0),
                     prepare=False)
    with TestClient(app, base_url="http://localhost") as c:
        r = c.post("/attribute", json=body)
        assert r.status_code == 429 and r.json()["error"] == "busy"


def test_api_token_guards_every_route_but_the_page_and_health(ts, chunks):
    app = create_app(ts, chunks, generator=FixedTextGenerator(ANSWERS), config=ChatConfig(api_token="s3cret"),
                     prepare=False)
    body = {"answer": "It is 330 metres tall.", "sources": ["The tower is 330 metres tall."]}
    with TestClient(app, base_url="http://localhost") as c:
        assert c.get("/").status_code == 200 and c.get("/health").status_code == 200
        assert c.get("/documents").status_code == 401
        assert c.post("/attribute", json=body, headers={"authorization": "Bearer wrong"}).status_code == 401
        ok = c.post("/attribute", json=body, headers={"authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.json()["citations"]


def test_cli_allowed_hosts():
    from tokenshapley_rag.chat._cli import allowed_hosts

    assert allowed_hosts("127.0.0.1", None) == ("localhost", "127.0.0.1", "::1")
    assert allowed_hosts("192.168.1.5", "chat.lan") == ("localhost", "127.0.0.1", "::1", "192.168.1.5", "chat.lan")
    assert allowed_hosts("0.0.0.0", "*")[-1] == "*"


# ---------------------------------------------------------------------- POST /attribute

SOURCES = [
    {"id": "eiffel", "text": "The Eiffel Tower is in Paris. The tower is 330 metres tall.", "metadata": {"title": "Eiffel"}},
    {"id": "bigben", "text": "Big Ben is in London. The tower was completed in 1859."},
]


def test_attribute_returns_the_attribution_result_dict(client, ts):
    body = {"query": "How tall is it?", "sources": SOURCES, "answer": "It is 330 metres tall; Big Ben dates from 1859."}
    r = client.post("/attribute", json=body)
    assert r.status_code == 200, r.text
    expected = ts.attribute(body["query"], SOURCES, body["answer"]).to_dict()
    assert r.json() == json.loads(json.dumps(expected))
    cites = {c["text"]: c for c in r.json()["citations"]}
    assert cites["330 metres"]["source_id"] == "eiffel" and cites["1859"]["source_id"] == "bigben"
    # Plain strings are sources too (ids "0", "1", ...), and the query is optional.
    r = client.post("/attribute", json={"sources": [s["text"] for s in SOURCES], "answer": "It is 330 metres tall."})
    assert r.status_code == 200 and r.json()["citations"][0]["source_id"] == "0"
    # Chunks name their document: it reaches the engine and comes back in the result.
    chunked = [{**s, "document": s["id"] + ".md"} for s in SOURCES]
    r = client.post("/attribute", json={**body, "sources": chunked})
    assert r.status_code == 200 and [s["document"] for s in r.json()["sources"]] == ["eiffel.md", "bigben.md"]


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ({"sources": SOURCES}, 422, "missing_field", "answer"),
        ({"sources": SOURCES, "answer": 3}, 422, "wrong_type", "answer"),
        ({"sources": SOURCES, "answer": "x", "query": {"q": 1}}, 422, "wrong_type", "query"),
        ({"answer": "x"}, 422, "missing_field", "sources"),
        ({"sources": "The Eiffel Tower.", "answer": "x"}, 422, "wrong_type", "sources"),
        ({"sources": [1], "answer": "x"}, 422, "wrong_type", "sources[0]"),
        ({"sources": [{"id": "a"}], "answer": "x"}, 422, "wrong_type", "sources[0].text"),
        ({"sources": [{"id": ["a"], "text": "t"}], "answer": "x"}, 422, "wrong_type", "sources[0].id"),
        ({"sources": [{"text": "t", "metadata": 5}], "answer": "x"}, 422, "wrong_type", "sources[0].metadata"),
        ({"sources": [{"text": "t", "document": 5}], "answer": "x"}, 422, "wrong_type", "sources[0].document"),
        ({"sources": [], "answer": "x"}, 400, "empty_sources", "sources"),
        ({"sources": SOURCES, "answer": "  "}, 400, "empty_answer", "answer"),
        # a misspelled field was ignored: "question" for "query" attributed with no question
        ({"sources": SOURCES, "answer": "x", "question": "Why?"}, 422, "unknown_field", "question"),
    ],
)
def test_attribute_rejects_bad_fields(client, body, status, code, field):
    r = client.post("/attribute", json=body)
    assert r.status_code == status, r.text
    assert r.json()["error"] == code and r.json()["field"] == field


def test_attribute_names_the_field_meant(client):
    r = client.post("/attribute", json={"sources": SOURCES, "answer": "x", "question": "Why?"})
    assert "did you mean 'query'" in r.json()["message"] and "'sources'" in r.json()["message"]


def test_attribute_reports_the_engines_input_errors(client):
    r = client.post("/attribute", json={"sources": [{"id": "a", "text": "x."}, {"id": "a", "text": "y."}], "answer": "x"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_input" and "'a'" in r.json()["message"]
    assert r.json()["field"] == "sources"
    r = client.post("/attribute", json={"sources": ["  "], "answer": "x"})
    assert r.status_code == 400 and r.json()["error"] == "empty_text"


# ---------------------------------------------------------------------- the real model


@pytest.mark.slow
def test_chat_with_the_default_local_model_generating(ts, chunks):
    app = create_app(ts, chunks, generator=LocalModelGenerator(ts.loaded, max_new_tokens=40), prepare=False)
    with TestClient(app, base_url="http://localhost") as c:
        events = chat(c, "When was the Eiffel Tower completed?")
    names = [e for e, _ in events]
    assert names[0] == "sources" and names[-1] == "done" and "error" not in names, events[-1]
    done = events[-1][1]
    answer = done["answer"]
    assert answer.strip() and answer == "".join(d["text"] for e, d in events if e == "delta")
    assert done["citations_available"] and done["citations"]
    retrieved = {c["id"] for c in events[0][1]["chunks"]}
    for e, d in events:
        if e == "citations":
            for c in d["citations"]:
                assert answer[c["start"] : c["end"]] == c["text"]
                assert all(s["source_id"] in retrieved for s in c["sources"])
    assert any(c["supported"] and c["source_id"].startswith("eiffel.md#") for c in done["citations"]), answer


# ---------------------------------------------------------------------- the command


def test_chat_command_serves_the_folder(ts, monkeypatch, capsys):
    import uvicorn

    from tokenshapley_rag.cli import build_parser, main

    served = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.update(app=app, **kw))
    args = build_parser().parse_args(["chat", "--docs", str(DOCS), "--port", "8123", "--top-k", "2"])
    assert (args.docs, args.port, args.top_k, args.host) == (str(DOCS), 8123, 2, "127.0.0.1")
    from tokenshapley_rag.chat._cli import run_chat

    assert run_chat(args, lambda a: ts) == 0  # the session's engine instead of loading another
    app = served["app"]
    assert served["port"] == 8123 and served["host"] == "127.0.0.1"
    assert app.state.chat.config.top_k == 2 and len(app.state.chat.chunks) == 17
    assert isinstance(app.state.chat.generator, LocalModelGenerator)
    assert main(["chat", "--docs", str(DOCS / "missing")]) == 2
    assert "is not a folder" in capsys.readouterr().err
