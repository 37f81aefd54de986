"""``tokenshapley serve --idle-timeout`` and the daemon's bookkeeping, without a model."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tokenshapley_rag._daemon import daemon_key
from tokenshapley_rag.cli import build_parser, serve_options


class _Server:
    should_exit = False


def _idle_watch():
    pytest.importorskip("uvicorn", reason="the idle watch lives with the service (the chat extra)")
    from tokenshapley_rag.chat._cli import IdleWatch

    return IdleWatch


def test_the_server_is_asked_to_exit_once_idle_and_not_during_a_request():
    IdleWatch = _idle_watch()
    release = asyncio.Event()
    started = threading.Event()

    async def slow_app(scope, receive, send):
        started.set()
        await release.wait()

    watched = IdleWatch(slow_app)
    server = _Server()
    loop = asyncio.new_event_loop()
    request = threading.Thread(target=loop.run_until_complete, args=(watched({"type": "http"}, None, None),))
    request.start()
    started.wait(5)
    watcher = threading.Thread(target=watched.stop_when_idle, args=(server, 0.3), kwargs={"poll": 0.05})
    watcher.start()
    time.sleep(0.6)  # twice the timeout, but a request is running: not idle
    assert not server.should_exit and watched.idle_for() == 0.0
    loop.call_soon_threadsafe(release.set)
    request.join(5)
    watcher.join(5)
    assert server.should_exit and not watcher.is_alive()
    loop.close()


def test_lifespan_messages_pass_through_and_do_not_count_as_requests():
    IdleWatch = _idle_watch()
    seen = []

    async def app(scope, receive, send):
        seen.append(scope["type"])

    watched = IdleWatch(app)
    before = watched.last
    asyncio.run(watched({"type": "lifespan"}, None, None))
    assert seen == ["lifespan"] and watched.last == before


def test_serve_options_name_what_differs_from_the_defaults_in_a_fixed_order():
    parser = build_parser()
    args = parser.parse_args(["attribute", "--query", "q", "--source", "a", "--response", "r", "--m", "12",
                              "--no-disk-cache", "--device", "cuda", "--max-context-chars", "0"])
    assert serve_options(args) == ["--m", "12", "--device", "cuda", "--no-disk-cache", "--max-context-chars", "0"]
    default = parser.parse_args(["attribute", "--query", "q", "--source", "a", "--response", "r"])
    assert serve_options(default) == []
    assert daemon_key(serve_options(args)) != daemon_key(serve_options(default))
    # The parser takes them back: the daemon is started with exactly these.
    serve = parser.parse_args(["serve", *serve_options(args)])
    assert (serve.m, serve.device, serve.no_disk_cache, serve.engine_max_context_chars) == (12, "cuda", True, 0)


@pytest.mark.parametrize("bad", ["0", "-3", "soon"])
def test_idle_timeout_must_be_positive_seconds(bad, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--idle-timeout", bad])
    assert "expected a number of seconds > 0" in capsys.readouterr().err


def test_the_cache_folder_names_one_service_however_it_is_spelled(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSHAPLEY_CACHE", str(tmp_path / "cache"))
    parser = build_parser()
    base = ["attribute", "--query", "q", "--source", "a", "--response", "r"]
    assert serve_options(parser.parse_args([*base, "--cache-dir", str(tmp_path / "cache")])) == []
    other = serve_options(parser.parse_args([*base, "--cache-dir", str(tmp_path / "x" / ".." / "other")]))
    assert other == ["--cache-dir", str((tmp_path / "other").resolve())]
