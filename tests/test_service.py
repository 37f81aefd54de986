"""The attribution service (``tokenshapley serve``) and its thin client
(``tokenshapley attribute --server``), over a real uvicorn server and the default model."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("starlette", reason="the service needs the chat extra (starlette)")
pytest.importorskip("uvicorn", reason="the service needs the chat extra (uvicorn)")

from tokenshapley_rag import Source  # noqa: E402
from tokenshapley_rag._client import ACCEPT, attribute_remote  # noqa: E402
from tokenshapley_rag.chat import ChatConfig, create_service  # noqa: E402
from tokenshapley_rag.cli import main  # noqa: E402
from tokenshapley_rag.errors import AttributionServiceError, InvalidInputError  # noqa: E402

pytestmark = pytest.mark.slow

QUERY = "How tall is the Eiffel Tower and when was it completed?"
EIFFEL = "The Eiffel Tower is in Paris. It is 330 metres tall and was completed in 1889."
BIGBEN = "Big Ben is a clock tower in London. It was completed in 1859."
ANSWER = "The Eiffel Tower is 330 metres tall. It was completed in 1889 by Zorblat."
SOURCES = [Source("eiffel.txt", EIFFEL), Source("bigben.txt", BIGBEN)]


@pytest.fixture(scope="module")
def url(ts, local_server):
    with local_server(create_service(ts)) as address:
        yield address.rstrip("/")


@pytest.fixture
def source_files(tmp_path):
    paths = []
    for source in SOURCES:
        path = tmp_path / source.id
        path.write_text(source.text, encoding="utf-8")
        paths.append(str(path))
    return paths


def _cli(url, source_files, *extra):
    return main(["attribute", "--server", url, "--query", QUERY, "--source", *source_files,
                 "--response", ANSWER, "--ids-from-names", *extra])


def test_the_service_answers_what_a_local_attribution_gives(ts, url):
    local = ts.attribute(QUERY, SOURCES, ANSWER)
    remote = json.loads(attribute_remote(url, query=QUERY, sources=SOURCES, response=ANSWER))
    assert [(c["text"], c["status"], c["source_id"]) for c in remote["citations"]] == [
        (c.text, c.status, c.best.source_id if c.best else None) for c in local.citations
    ]
    assert {c["text"]: c["source_id"] for c in remote["citations"]}["330 metres"] == "eiffel.txt"
    assert {c["text"]: c["status"] for c in remote["citations"]}["Zorblat"] == "unsupported"  # no source says who
    assert [s["verdict"] for s in remote["sentences"]] == [s.verdict for s in local.sentences]
    assert remote["sentences"][0]["verdict"] == "supported"
    for got, want in zip(remote["citations"], local.citations):
        assert got["support"] == pytest.approx(want.support, abs=1e-9)


def test_the_accept_type_picks_the_rendering(ts, url):
    local = ts.attribute(QUERY, SOURCES, ANSWER)
    assert attribute_remote(url, query=QUERY, sources=SOURCES, response=ANSWER, accept=ACCEPT["markdown"]) == local.to_markdown()
    html = attribute_remote(url, query=QUERY, sources=SOURCES, response=ANSWER, accept=ACCEPT["html"])
    assert html.startswith("<!DOCTYPE html>") and "Zorblat" in html


def test_cli_with_server_prints_what_the_local_cli_prints(url, source_files, cache_root, capsys):
    assert _cli(url, source_files, "--format", "json") == 0
    remote = capsys.readouterr().out
    assert main(["attribute", "--query", QUERY, "--source", *source_files, "--response", ANSWER,
                 "--ids-from-names", "--format", "json", "--cache-dir", str(cache_root)]) == 0
    local = capsys.readouterr().out
    strip = lambda text: [(c["text"], c["status"], c["source_id"]) for c in json.loads(text)["citations"]]  # noqa: E731
    assert strip(remote) == strip(local)
    assert remote.startswith('{\n  "query"')  # laid out as the local command lays it out


def test_cli_takes_the_server_from_the_environment(url, source_files, capsys, monkeypatch):
    monkeypatch.setenv("TOKENSHAPLEY_SERVER", url)
    assert main(["attribute", "--query", QUERY, "--source", *source_files, "--response", ANSWER]) == 0
    out = capsys.readouterr()
    assert "330 metres tall[^1]" in out.out and "Zorblat[^?]" in out.out and f"Attributing on {url}" in out.err


def test_engine_options_with_server_are_refused_by_name(url, source_files, capsys):
    assert _cli(url, source_files, "--k", "3", "--max-source-chars", "10") == 2
    err = capsys.readouterr().err
    assert "--k, --max-source-chars cannot be used with --server" in err


def test_no_server_is_a_clear_error(source_files, local_server, capsys):
    with local_server(create_service(object())) as address:
        pass  # the port was served once and is closed now
    assert _cli(address, source_files) == 2
    err = capsys.readouterr().err
    assert f"no attribution service answers at {address.rstrip('/')}" in err and "tokenshapley serve" in err


def test_service_errors_come_back_typed(url):
    with pytest.raises(AttributionServiceError) as info:
        attribute_remote(url, query=QUERY, sources=SOURCES, response="   ")
    assert (info.value.status, info.value.code, info.value.field) == (400, "empty_answer", "answer")
    with pytest.raises(InvalidInputError, match="--server must be an http"):
        attribute_remote("localhost:8765", query=QUERY, sources=SOURCES, response=ANSWER)


def test_a_service_with_a_token_refuses_a_client_without_it(ts, local_server):
    service = create_service(ts, config=ChatConfig(api_token="s3cret"))
    with local_server(service) as address:
        with pytest.raises(AttributionServiceError) as info:
            attribute_remote(address, query=QUERY, sources=SOURCES, response=ANSWER)
        assert (info.value.status, info.value.code) == (401, "unauthorized")
        text = attribute_remote(address, query=QUERY, sources=SOURCES, response=ANSWER, token="s3cret")
        assert json.loads(text)["response"] == ANSWER


def test_the_service_serves_no_chat_routes(url):
    import urllib.error
    import urllib.request

    with urllib.request.urlopen(f"{url}/health") as answer:
        assert json.loads(answer.read())["status"] == "ok"
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{url}/")
    assert info.value.code == 404


def test_daemon_starts_once_serves_later_calls_and_stops(source_files, cache_root, capsys):
    # The first --daemon call starts a background service (the model loads there); the
    # second finds it through the state file and only sends texts; both print what a local
    # run prints; `daemon stop` ends the process.
    import os
    import time

    from tokenshapley_rag._daemon import daemon_folder, daemon_key, find_daemon

    argv = ["attribute", "--daemon", "--cache-dir", str(cache_root), "--query", QUERY, "--source", *source_files,
            "--response", ANSWER, "--ids-from-names", "--format", "json"]
    state_file = daemon_folder(cache_root) / f"{daemon_key(['--cache-dir', str(cache_root.resolve())])}.json"
    try:
        assert main(argv) == 0
        first = capsys.readouterr()
        assert "Starting a background attribution service" in first.err
        assert (state_file.stat().st_mode & 0o777) == 0o600  # it holds the API token
        daemon = find_daemon(state_file)
        assert daemon is not None
        assert main(argv) == 0
        second = capsys.readouterr()
        assert "Starting" not in second.err and f"Attributing on {daemon.url}" in second.err
        assert json.loads(second.out)["citations"] == json.loads(first.out)["citations"]
        assert main(["attribute", "--cache-dir", str(cache_root), "--query", QUERY, "--source", *source_files,
                     "--response", ANSWER, "--ids-from-names", "--format", "json"]) == 0
        local = json.loads(capsys.readouterr().out)
        assert [(c["text"], c["status"], c["source_id"]) for c in json.loads(first.out)["citations"]] == [
            (c["text"], c["status"], c["source_id"]) for c in local["citations"]
        ]
        # Without its token the service refuses to attribute.
        with pytest.raises(AttributionServiceError) as refused:
            attribute_remote(daemon.url, query=QUERY, sources=SOURCES, response=ANSWER)
        assert refused.value.status == 401
        assert main(["daemon", "status", "--cache-dir", str(cache_root)]) == 0
        assert f"pid {daemon.pid}" in capsys.readouterr().out
    finally:
        main(["daemon", "stop", "--cache-dir", str(cache_root)])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(daemon.pid, 0)
        except ProcessLookupError:
            break
        try:  # our child's zombie, if it is one
            os.waitpid(daemon.pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.2)
    else:
        raise AssertionError("the background service did not stop")
    assert not state_file.exists()
    assert main(["daemon", "status", "--cache-dir", str(cache_root)]) == 3


def test_daemon_refuses_a_server_too(source_files, capsys):
    assert main(["attribute", "--daemon", "--server", "http://127.0.0.1:9", "--query", QUERY, "--source",
                 *source_files, "--response", ANSWER]) == 2
    assert "--daemon starts its own service" in capsys.readouterr().err
