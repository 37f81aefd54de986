"""The chat web app: retrieval, streamed generation and citations over server-sent events."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tokenshapley_rag.chat._documents import Chunk, load_documents
from tokenshapley_rag.chat._generators import Generator, LocalModelGenerator
from tokenshapley_rag.chat._retrieve import Hit, LexicalRetriever, Retriever
from tokenshapley_rag._limits import check_context_size
from tokenshapley_rag._text import check_text
from tokenshapley_rag.errors import (
    AttributionCancelledError,
    EmptyTextError,
    InvalidInputError,
    InvalidInputTypeError,
    InvalidTextError,
    TextTooLongError,
)

__all__ = ["ChatConfig", "ChatState", "create_app", "create_service"]

_END = object()  # end of the answer, on the attribution worker's queue


@dataclass(frozen=True)
class ChatConfig:
    """Limits and defaults of one app.

    ``max_concurrent_chats`` is a soft limit: a chat over it gets 503 (each chat holds
    two worker threads, plus the model's for the local generator).
    """

    top_k: int = 3
    max_top_k: int = 10
    max_body_bytes: int = 256 * 1024
    max_question_chars: int = 2000
    max_sources: int = 64
    max_concurrent_chats: int = 16
    title: str = "Ask the documents"
    #: Host names (without port) the server answers to; "*" allows any. The default serves
    #: a local bind only: a page on another site that rebinds its DNS name to 127.0.0.1
    #: sends its own name as Host and is refused (421).
    allowed_hosts: tuple[str, ...] = ("localhost", "127.0.0.1", "::1")
    #: When set, every route but the page and /health needs ``Authorization: Bearer <token>``
    #: (the page passes the token it was opened with: ``http://host:port/#token=...``).
    api_token: str | None = None
    #: POST /attribute: at most this many at once (429 beyond), each within this many
    #: seconds (503 beyond; the attribution then stops at its next checkpoint, as it does
    #: when the client leaves, and holds its slot until it has stopped).
    max_concurrent_attributions: int = 2
    attribute_timeout_s: float = 60.0
    #: Sources over the engine's own limits (``TokenShapley.max_source_chars`` and
    #: ``max_context_chars``) get 413, checked before the request takes a slot; this adds
    #: a stricter cap on the total (None: the engine's limits only).
    max_context_chars: int | None = None


@dataclass
class ChatState:
    """What the app serves from; lives on ``app.state.chat`` (no module globals). The
    attribution service (:func:`create_service`) has no chunks, retriever or generator."""

    ts: Any
    config: ChatConfig
    chunks: list[Chunk] = field(default_factory=list)
    retriever: Retriever | None = None
    generator: Generator | None = None
    by_id: dict[str, Chunk] = field(default_factory=dict)
    documents: dict[str, list[Chunk]] = field(default_factory=dict)
    active_chats: int = 0
    active_attributions: int = 0

    def __post_init__(self) -> None:
        self.by_id = {c.id: c for c in self.chunks}
        for c in self.chunks:
            self.documents.setdefault(c.document, []).append(c)


class ApiError(Exception):
    """A request problem, answered as ``{"error": code, "message": ..., "field": ...}``."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field

    def response(self) -> JSONResponse:
        body: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        return JSONResponse(body, status_code=self.status)


# ---------------------------------------------------------------------- request parsing


async def _json_object(request: Request, limit: int) -> dict[str, Any]:
    """The body as a JSON object, read at most ``limit`` bytes far (413 beyond)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise ApiError(400, "bad_content_length", f"Content-Length {declared!r} is not a number") from None
        if size > limit:
            raise ApiError(413, "body_too_large", f"request body is {size} bytes; the limit is {limit} bytes")
    body = bytearray()
    async for part in request.stream():  # chunked bodies have no Content-Length: count as we read
        body += part
        if len(body) > limit:
            raise ApiError(413, "body_too_large", f"request body exceeds the limit of {limit} bytes")
    if not body.strip():
        raise ApiError(400, "empty_body", "request body is empty: send a JSON object")
    try:
        data = json.loads(bytes(body).decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise ApiError(400, "malformed_json", "request body is not UTF-8 text") from None
    except json.JSONDecodeError as err:
        raise ApiError(400, "malformed_json", f"request body is not valid JSON: {err}") from None
    except RecursionError:
        raise ApiError(400, "malformed_json", "request body is nested too deeply") from None
    if not isinstance(data, dict):
        raise ApiError(422, "wrong_type", f"request body must be a JSON object, got {_json_type(data)}", "")
    return data


def _reject_constant(name: str) -> Any:
    raise ApiError(400, "malformed_json", f"request body holds {name}, which is not JSON (numbers must be finite)")


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


# Near misses of a field's name, told apart from any other unknown field.
_FIELD_HINTS = {"question": "query", "response": "answer", "documents": "sources", "contexts": "sources"}


def _known_fields(data: dict[str, Any], fields: tuple[str, ...]) -> None:
    """Refuse a request with a field the endpoint does not read: a misspelled field would
    otherwise be ignored and the request answered as if it were absent ("question" for
    "query" attributed with no question)."""
    unknown = sorted(set(data) - set(fields))
    if unknown:
        hints = [f"{name!r} (did you mean {_FIELD_HINTS[name]!r}?)" for name in unknown if _FIELD_HINTS.get(name) in fields]
        named = hints or [repr(name) for name in unknown]
        raise ApiError(
            422, "unknown_field", f"unknown field {', '.join(named)}; this endpoint reads {', '.join(map(repr, fields))}",
            unknown[0],
        )


def _text_field(data: dict[str, Any], name: str, *, required: bool, limit: int | None = None) -> str:
    if name not in data or data[name] is None:
        if required:
            raise ApiError(422, "missing_field", f"{name!r} is required (a string)", name)
        return ""
    value = data[name]
    if not isinstance(value, str):
        raise ApiError(422, "wrong_type", f"{name!r} must be a string, got {_json_type(value)}", name)
    if limit is not None and len(value) > limit:
        raise ApiError(400, "too_long", f"{name!r} has {len(value)} characters; the limit is {limit}", name)
    return _valid_text(value, name)


def _valid_text(value: str, name: str) -> str:
    try:
        return check_text(value, name)
    except InvalidTextError as err:
        raise ApiError(422, "invalid_text", str(err), name) from None


def _int_field(data: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = data.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(422, "wrong_type", f"{name!r} must be an integer, got {_json_type(value)}", name)
    if not low <= value <= high:
        raise ApiError(400, "out_of_range", f"{name!r} must be between {low} and {high}, got {value}", name)
    return value


def _sources_field(data: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    if "sources" not in data or data["sources"] is None:
        raise ApiError(422, "missing_field", "'sources' is required (an array of strings or {id, text, metadata?, document?} objects)", "sources")
    raw = data["sources"]
    if not isinstance(raw, list):
        raise ApiError(422, "wrong_type", f"'sources' must be an array, got {_json_type(raw)}", "sources")
    if not raw:
        raise ApiError(400, "empty_sources", "'sources' is empty: give at least one source text", "sources")
    if len(raw) > limit:
        raise ApiError(400, "too_many_sources", f"'sources' has {len(raw)} items; the limit is {limit}", "sources")
    out = []
    for i, item in enumerate(raw):
        where = f"sources[{i}]"
        if isinstance(item, str):
            out.append({"id": str(i), "text": _valid_text(item, where)})
            continue
        if not isinstance(item, dict):
            raise ApiError(422, "wrong_type", f"{where} must be a string or an object, got {_json_type(item)}", where)
        text = item.get("text")
        if not isinstance(text, str):
            raise ApiError(422, "wrong_type", f"{where}.text must be a string, got {_json_type(text)}", f"{where}.text")
        sid = item.get("id", i)
        if isinstance(sid, bool) or not isinstance(sid, (str, int)):
            raise ApiError(422, "wrong_type", f"{where}.id must be a string or an integer, got {_json_type(sid)}", f"{where}.id")
        meta = item.get("metadata") or {}
        if not isinstance(meta, dict):
            raise ApiError(422, "wrong_type", f"{where}.metadata must be an object, got {_json_type(meta)}", f"{where}.metadata")
        document = item.get("document")
        if document is not None and not isinstance(document, str):
            raise ApiError(
                422, "wrong_type", f"{where}.document must be a string, got {_json_type(document)}", f"{where}.document"
            )
        source = {"id": _valid_text(str(sid), f"{where}.id"), "text": _valid_text(text, f"{where}.text"), "metadata": meta}
        if document is not None:
            source["document"] = _valid_text(document, f"{where}.document")
        out.append(source)
    return out


# ---------------------------------------------------------------------- the chat stream


def _sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _sentence_payload(sent: Any) -> dict[str, Any]:
    """One completed sentence: the shape of ``SentenceCitations.to_dict()``, built from
    its documented attributes so that the wire format is fixed here."""
    return {
        "index": int(sent.index),
        "start": int(sent.start),
        "end": int(sent.end),
        "text": sent.text,
        # Engines other than TokenShapley's stream may not give verdicts.
        "verdict": getattr(sent, "verdict", None),
        "score": float(getattr(sent, "score", float("nan"))) if hasattr(sent, "score") else None,
        "citations": [c.to_dict() for c in sent.citations],
    }


def _accepts_cancel(method: Any) -> bool:
    """Whether an engine's ``attribute`` / ``stream`` takes ``cancel=`` (TokenShapley's
    do; a plugged-in engine may not, and then runs to its end)."""
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    return "cancel" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _check_context(state: ChatState, sources: list[dict[str, Any]]) -> None:
    """413 for sources over the engine's size limits or ``ChatConfig.max_context_chars``:
    the same check, and the same message, as ``TokenShapley.attribute``."""
    ts, cap = state.ts, state.config.max_context_chars
    total = getattr(ts, "max_context_chars", None)
    if cap is not None:
        total = cap if total is None else min(total, cap)
    try:
        check_context_size([s["text"] for s in sources], max_source_chars=getattr(ts, "max_source_chars", None),
                           max_context_chars=total, ids=[s["id"] for s in sources])
    except TextTooLongError as err:
        raise ApiError(413, "context_too_large", str(err), err.field) from None


async def _client_gone(request: Request) -> None:
    """Return when the client disconnects (the body has been read: the next ASGI message
    is the disconnect)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _describe(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


class _Chat:
    """One chat turn: a generation worker and an attribution worker (threads, since the
    model calls block), both posting events to this request's asyncio queue.

    The attribution worker owns the turn's own ``AttributionStream``: nothing is shared
    between turns but the thread-safe ``TokenShapley``, so chats cannot see each
    other's citations. Attribution lagging behind never holds up the text: deltas are
    sent as they come and the worker feeds whatever has piled up in one call.
    """

    def __init__(self, state: ChatState, question: str, hits: list[Hit], loop: asyncio.AbstractEventLoop) -> None:
        self.state, self.question, self.hits, self.loop = state, question, hits, loop
        self.events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.stop = threading.Event()
        self.deltas: queue.Queue[Any] = queue.Queue()

    def emit(self, event: str, data: Any) -> None:
        if self.stop.is_set() and not event.startswith("_"):
            return
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, (event, data))
        except RuntimeError:  # the loop is gone (server shutting down): nobody listens
            self.stop.set()

    def start(self) -> None:
        threading.Thread(target=self._generate, name="tokenshapley-chat-gen", daemon=True).start()
        threading.Thread(target=self._attribute, name="tokenshapley-chat-cite", daemon=True).start()

    def _generate(self) -> None:
        offset = 0
        error: str | None = None
        try:
            deltas = self.state.generator.generate(self.question, [h.chunk for h in self.hits])
            try:
                for delta in deltas:
                    if self.stop.is_set():
                        break
                    if not isinstance(delta, str) or not delta:
                        continue
                    self.emit("delta", {"text": delta, "offset": offset})
                    self.deltas.put(delta)
                    offset += len(delta)
            finally:
                close = getattr(deltas, "close", None)
                if callable(close):
                    close()
        except Exception as err:  # the answer stops here; the client is told why
            error = _describe(err)
            self.emit("error", {"stage": "generation", "message": f"generation failed: {error}"})
        finally:
            self.deltas.put((_END, error))

    def _unavailable(self, reason: str, message: str) -> None:
        self.emit("citations_unavailable", {"reason": reason, "message": message})

    def _attribute(self) -> None:
        stream = None
        answer: list[str] = []
        summary: dict[str, Any] = {"citations_available": False, "citations": []}
        error: str | None = None
        try:
            if not self.hits:
                self._unavailable("no_sources", "No document matched the question, so there is nothing to cite.")
            else:
                try:
                    engine = self.state.ts
                    # The turn's stop event cancels the datastore's build and every later feed.
                    extra = {"cancel": self.stop} if _accepts_cancel(engine.stream) else {}
                    stream = engine.stream(query=self.question, sources=[h.chunk.to_source() for h in self.hits], **extra)
                except Exception as err:
                    self._unavailable("attribution_failed", f"citations unavailable: {_describe(err)}")
            ended = False
            while not ended:
                # Feed everything that piled up while the last feed ran, in one call.
                parts: list[str] = []
                item = self.deltas.get()
                while True:
                    if isinstance(item, tuple):  # (_END, generation error or None)
                        error, ended = item[1], True
                        break
                    parts.append(item)
                    try:
                        item = self.deltas.get_nowait()
                    except queue.Empty:
                        break
                text = "".join(parts)
                answer.append(text)
                if stream is not None and text and not self.stop.is_set():
                    try:
                        for sent in stream.feed(text):
                            self.emit("citations", _sentence_payload(sent))
                    except Exception as err:
                        stream = None
                        self._unavailable("attribution_failed", f"citations unavailable: {_describe(err)}")
            full = "".join(answer)
            if stream is not None and not self.stop.is_set():
                if not full.strip():
                    self._unavailable("empty_answer", "The answer is empty, so there is nothing to cite.")
                else:
                    try:
                        for sent in stream.finish():
                            self.emit("citations", _sentence_payload(sent))
                        result = stream.result
                        summary = {
                            "citations_available": True,
                            "citations": [c.to_dict() for c in result.citations],
                            "support": float(result.support),
                            "source_scores": {k: float(v) for k, v in result.source_scores.items()},
                        }
                    except Exception as err:
                        self._unavailable("attribution_failed", f"citations unavailable: {_describe(err)}")
            summary["answer"] = full
        except Exception as err:  # a bug here must still end the turn
            self._unavailable("attribution_failed", f"citations unavailable: {_describe(err)}")
        finally:
            summary.setdefault("answer", "".join(answer))
            summary["error"] = error
            self.emit("_finished", summary)

    async def events_stream(self) -> AsyncIterator[bytes]:
        t0 = time.perf_counter()
        try:
            self.start()
            while True:
                event, data = await self.events.get()
                if event == "_finished":
                    data["elapsed"] = round(time.perf_counter() - t0, 4)
                    yield _sse("done", data)
                    return
                yield _sse(event, data)
        finally:
            self.stop.set()  # client gone or turn over: workers stop at their next step


async def _chat_body(state: ChatState, question: str, top_k: int) -> AsyncIterator[bytes]:
    state.active_chats += 1
    try:
        try:
            hits = await run_in_threadpool(state.retriever.retrieve, question, top_k)
        except Exception as err:
            yield _sse("error", {"stage": "retrieval", "message": f"retrieval failed: {_describe(err)}"})
            yield _sse("done", {"answer": "", "citations_available": False, "citations": [], "error": _describe(err)})
            return
        hits = list(hits)[:top_k]
        yield _sse("sources", {"chunks": [{"n": i + 1, "score": float(h.score), **h.chunk.to_dict()} for i, h in enumerate(hits)]})
        chat = _Chat(state, question, hits, asyncio.get_running_loop())
        async for part in chat.events_stream():
            yield part
    finally:
        state.active_chats -= 1


# ---------------------------------------------------------------------- endpoints


def _state(request: Request) -> ChatState:
    return request.app.state.chat


def _page(title: str) -> str:
    import html

    text = resources.files("tokenshapley_rag.chat").joinpath("_page.html").read_text(encoding="utf-8")
    return text.replace("{{TITLE}}", html.escape(title))


# Inline script and style only: the page needs nothing from the network.
_CSP = "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:"


async def _index(request: Request) -> Response:
    return HTMLResponse(request.app.state.page, headers={"Content-Security-Policy": _CSP, "Cache-Control": "no-cache"})


async def _chat(request: Request) -> Response:
    state = _state(request)
    cfg = state.config
    data = await _json_object(request, cfg.max_body_bytes)
    _known_fields(data, ("question", "top_k"))
    question = _text_field(data, "question", required=True, limit=cfg.max_question_chars)
    if not question.strip():
        raise ApiError(400, "empty_question", "'question' is empty: ask something", "question")
    top_k = _int_field(data, "top_k", cfg.top_k, 1, cfg.max_top_k)
    if state.active_chats >= cfg.max_concurrent_chats:
        raise ApiError(503, "busy", f"{state.active_chats} chats are running (the limit is {cfg.max_concurrent_chats}); retry shortly")
    return StreamingResponse(
        _chat_body(state, question.strip(), top_k),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _attribute(request: Request) -> Response:
    state = _state(request)
    cfg = state.config
    data = await _json_object(request, cfg.max_body_bytes)
    _known_fields(data, ("query", "answer", "sources"))
    query = _text_field(data, "query", required=False)
    answer = _text_field(data, "answer", required=True)
    sources = _sources_field(data, cfg.max_sources)
    if not answer.strip():
        raise ApiError(400, "empty_answer", "'answer' is empty: there is nothing to attribute", "answer")
    _check_context(state, sources)
    if state.active_attributions >= cfg.max_concurrent_attributions:
        raise ApiError(429, "busy", f"{state.active_attributions} attributions are running (the limit is "
                       f"{cfg.max_concurrent_attributions}); retry shortly")
    cancel = threading.Event()
    extra = {"cancel": cancel} if _accepts_cancel(state.ts.attribute) else {}
    state.active_attributions += 1
    # A plain executor future: a time-out or a disconnect does not wait for the thread; the
    # thread stops at its next checkpoint once ``cancel`` is set, and frees its slot then.
    work = asyncio.get_running_loop().run_in_executor(
        None, lambda: state.ts.attribute(query, sources, answer, **extra)
    )

    def release(done: asyncio.Future[Any]) -> None:
        state.active_attributions -= 1
        if not done.cancelled():
            done.exception()  # retrieved here, so a cancelled run is not logged as unhandled

    work.add_done_callback(release)
    gone = asyncio.ensure_future(_client_gone(request))
    try:
        await asyncio.wait({work, gone}, timeout=cfg.attribute_timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not work.done():
        cancel.set()
        if gone.done() and not gone.cancelled():
            return Response(status_code=499)  # nginx's "client closed request"; nobody reads it
        raise ApiError(503, "timeout", f"the attribution took longer than {cfg.attribute_timeout_s:g} s; it was stopped")
    try:
        result = work.result()
    except AttributionCancelledError as err:
        raise ApiError(503, "cancelled", str(err)) from None
    except InvalidTextError as err:
        raise ApiError(422, "invalid_text", str(err)) from None
    except InvalidInputTypeError as err:
        raise ApiError(422, "wrong_type", str(err), "sources") from None
    except TextTooLongError as err:
        code = "context_too_large" if (err.field or "").startswith("sources") else "text_too_long"
        raise ApiError(413, code, str(err), err.field) from None
    except EmptyTextError as err:
        raise ApiError(400, "empty_text", str(err), "sources") from None  # the answer was checked above
    except InvalidInputError as err:  # duplicate source ids and the like
        raise ApiError(400, "invalid_input", str(err), "sources") from None
    return _rendered(result, request.headers.get("accept", ""))


#: What ``POST /attribute`` answers for each ``Accept`` type: the result's own renderings,
#: so a thin client (``tokenshapley attribute --server``) prints what a local run prints.
_RENDERINGS = {
    "text/markdown": lambda r: Response(r.to_markdown(), media_type="text/markdown; charset=utf-8"),
    "text/html": lambda r: HTMLResponse(r.to_html(), headers={"Content-Security-Policy": _CSP}),
}


def _rendered(result: Any, accept: str) -> Response:
    """``result`` as the first type of ``accept`` (an ``Accept`` header) that the app
    renders; JSON (``AttributionResult.to_dict()``) for anything else."""
    for part in accept.split(","):
        kind = part.split(";", 1)[0].strip().lower()
        if kind in _RENDERINGS:
            return _RENDERINGS[kind](result)
        if kind in ("application/json", "*/*"):
            break
    return JSONResponse(result.to_dict())


async def _documents(request: Request) -> Response:
    state = _state(request)
    return JSONResponse({"documents": [{"name": name, "chunks": [c.id for c in cs]} for name, cs in state.documents.items()]})


async def _document(request: Request) -> Response:
    state = _state(request)
    name = request.path_params["name"]
    if name not in state.documents:
        raise ApiError(404, "unknown_document", f"no document named {name!r}; GET /documents lists them", "name")
    return JSONResponse({"name": name, "chunks": [c.to_dict() for c in state.documents[name]]})


async def _chunk(request: Request) -> Response:
    state = _state(request)
    cid = request.path_params["chunk_id"]
    chunk = state.by_id.get(cid)
    if chunk is None:
        raise ApiError(404, "unknown_chunk", f"no chunk with id {cid!r} (ids look like 'file.md#2'; '#' is '%23' in a URL)", "chunk_id")
    return JSONResponse(chunk.to_dict())


async def _health(request: Request) -> Response:
    state = _state(request)
    return JSONResponse({
        "status": "ok", "chunks": len(state.chunks), "active_chats": state.active_chats,
        "active_attributions": state.active_attributions, "ready": request.app.state.ready.is_set(),
    })


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    codes = {404: "not_found", 405: "method_not_allowed"}
    return JSONResponse(
        {"error": codes.get(exc.status_code, "http_error"), "message": f"{exc.detail}: {request.method} {request.url.path}"},
        status_code=exc.status_code,
        headers=getattr(exc, "headers", None),
    )


class _Guard:
    """ASGI middleware for a server on a shared machine: the Host header must name an
    allowed host (DNS rebinding), POST bodies must be ``application/json`` (a cross-site
    form post cannot send that without a CORS preflight, which this app never grants),
    and with an API token every route but the page and /health needs it."""

    _OPEN = frozenset({"/", "/health"})

    def __init__(self, app: Any, config: ChatConfig) -> None:
        self.app = app
        self.hosts = frozenset(h.lower().strip("[]") for h in config.allowed_hosts)
        self.token = config.api_token

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        problem = self._problem(scope, headers)
        if problem is None:
            return await self.app(scope, receive, send)
        await problem.response()(scope, receive, send)

    def _problem(self, scope: Any, headers: dict[str, str]) -> ApiError | None:
        if "*" not in self.hosts:
            host = headers.get("host", "")
            name = host.rsplit(":", 1)[0] if not host.startswith("[") else host[1:].split("]", 1)[0]
            if name.lower() not in self.hosts:
                return ApiError(421, "host_not_allowed", f"Host {host!r} is not served here (allowed: "
                                f"{', '.join(sorted(self.hosts))}; see --allowed-hosts)")
        if self.token is not None and scope["path"] not in self._OPEN:
            import hmac

            given = headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
                return ApiError(401, "unauthorized", "this server needs 'Authorization: Bearer <token>'")
        if scope["method"] == "POST":
            kind = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if kind != "application/json":
                return ApiError(415, "unsupported_media_type",
                                f"POST bodies must be application/json, got {kind or 'no Content-Type'!r}")
        return None


def create_app(
    ts: Any,
    documents: str | os.PathLike[str] | Sequence[Chunk],
    *,
    generator: Generator | None = None,
    retriever: Retriever | Callable[[Sequence[Chunk]], Retriever] | None = None,
    config: ChatConfig | None = None,
    prepare: bool = True,
) -> Starlette:
    """The chat app (ASGI) over ``documents``.

    Parameters
    ----------
    ts : TokenShapley
        Attribution engine (thread-safe; shared by all chats, each of which opens its own
        ``ts.stream``).
    documents : folder path or list of :class:`Chunk`
        A folder of .txt/.md files (split by :func:`load_documents`) or ready chunks.
    generator : Generator, optional
        Yields the answer's text deltas; default :class:`LocalModelGenerator` on
        ``ts.loaded`` (the encoder model also writes the answer).
    retriever : Retriever or a factory ``chunks -> Retriever``, optional
        Default :class:`LexicalRetriever` (BM25) over the chunks.
    config : ChatConfig, optional
        ``top_k`` (3), body and question limits, concurrent chat and attribution limits,
        the allowed ``Host`` names (local ones by default), an optional API token, page title.
    prepare : bool, default True
        Encode every chunk's sentence keys in a background thread at startup, so the
        first chats do not pay for it (``GET /health`` says when it is ``ready``).

    Notes
    -----
    Routes: ``GET /`` (the page), ``POST /chat`` (server-sent events ``sources``,
    ``delta``, ``citations``, ``citations_unavailable``, ``error``, ``done``), ``POST
    /attribute`` (``{query, sources, answer}`` -> ``AttributionResult.to_dict()``), ``GET
    /documents``, ``GET /documents/{name}``, ``GET /chunks/{id}``, ``GET /health``.

    Examples
    --------
    >>> from tokenshapley_rag import TokenShapley
    >>> from tokenshapley_rag.chat import create_app, FixedTextGenerator
    >>> app = create_app(TokenShapley(), "tests/data/chat_docs",
    ...                  generator=FixedTextGenerator("The tower is 330 metres tall."))  # doctest: +SKIP
    >>> import uvicorn; uvicorn.run(app, port=8000)  # doctest: +SKIP
    """
    chunks = load_documents(documents) if isinstance(documents, (str, os.PathLike)) else list(documents)
    if not chunks:
        raise ValueError("documents holds no chunks")
    if len({c.id for c in chunks}) != len(chunks):
        raise ValueError("chunk ids must be unique")
    cfg = config or ChatConfig()
    if retriever is None:
        retriever = LexicalRetriever(chunks)
    elif isinstance(retriever, type) or not hasattr(retriever, "retrieve"):
        retriever = retriever(chunks)  # a factory (e.g. the LexicalRetriever class itself)
    state = ChatState(
        ts=ts,
        chunks=chunks,
        retriever=retriever,
        generator=generator if generator is not None else LocalModelGenerator(ts.loaded),
        config=cfg,
    )
    ready = threading.Event()

    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if prepare and hasattr(ts, "prepare"):
            def warm() -> None:
                try:
                    # Sentence keys land in the engine's cache, so a chat's stream() finds them.
                    ts.prepare([c.to_source() for c in chunks])
                except Exception:
                    pass  # a chunk that cannot be encoded fails again, visibly, in its chat
                finally:
                    ready.set()

            threading.Thread(target=warm, name="tokenshapley-chat-prepare", daemon=True).start()
        else:
            ready.set()
        yield

    from contextlib import asynccontextmanager

    app = Starlette(
        routes=[
            Route("/", _index, methods=["GET"]),
            Route("/chat", _chat, methods=["POST"]),
            Route("/attribute", _attribute, methods=["POST"]),
            Route("/documents", _documents, methods=["GET"]),
            Route("/documents/{name:path}", _document, methods=["GET"]),
            Route("/chunks/{chunk_id:path}", _chunk, methods=["GET"]),
            Route("/health", _health, methods=["GET"]),
        ],
        exception_handlers={ApiError: _api_error, HTTPException: _http_error},
        lifespan=asynccontextmanager(lifespan),
    )
    app.state.chat = state
    app.add_middleware(_Guard, config=cfg)
    app.state.ready = ready
    app.state.page = _page(cfg.title)
    return app


def create_service(ts: Any, *, config: ChatConfig | None = None) -> Starlette:
    """The attribution service (ASGI): the chat app's ``POST /attribute`` and ``GET
    /health`` alone, over an engine loaded once.

    A process that keeps the model and the compiled kernels loaded answers in the time of
    the attribution itself, where a new process first imports torch and loads the model
    (seconds; docs/reports/performance.md, "Start-up"). ``tokenshapley serve`` runs it and
    ``tokenshapley attribute --server URL`` sends it its files.

    ``POST /attribute`` takes ``{"query", "sources": [{"id", "text", "metadata"?,
    "document"?}], "answer"}`` and answers by the request's ``Accept`` type: JSON
    (``AttributionResult.to_dict()``, the default), ``text/markdown`` (``to_markdown()``)
    or ``text/html`` (``to_html()``). Errors are JSON ``{"error": code, "message", "field"?}``
    with the status codes of the chat app (400, 413, 422, 429, 503). ``config`` sets the
    allowed ``Host`` names (local ones by default), an optional API token, body, source
    and concurrency limits (:class:`ChatConfig`; its chat fields are unused).

    Examples
    --------
    >>> from tokenshapley_rag import TokenShapley
    >>> from tokenshapley_rag.chat import create_service
    >>> app = create_service(TokenShapley())  # doctest: +SKIP
    >>> import uvicorn; uvicorn.run(app, host="127.0.0.1", port=8765)  # doctest: +SKIP
    """
    cfg = config or ChatConfig()
    app = Starlette(
        routes=[
            Route("/attribute", _attribute, methods=["POST"]),
            Route("/health", _health, methods=["GET"]),
        ],
        exception_handlers={ApiError: _api_error, HTTPException: _http_error},
    )
    app.state.chat = ChatState(ts=ts, config=cfg)
    app.add_middleware(_Guard, config=cfg)
    app.state.ready = threading.Event()
    app.state.ready.set()
    return app
