"""A background attribution service per engine configuration, started on demand:
``tokenshapley attribute --daemon`` (the pattern of mypy's ``dmypy run``).

A new process pays seconds for importing torch and transformers and loading the model
before its first answer (docs/reports/performance.md, "Start-up"). With ``--daemon`` the
first command starts ``tokenshapley serve`` in the background for its engine options (on
127.0.0.1, a free port, a random API token) and sends its answer there; every later command
with the same options finds it and only sends texts. The service stops itself after
``idle_seconds`` without a request (``serve --idle-timeout``).

What a command needs to find it lives in ``<cache>/daemons/<key>.json`` (folder ``0700``,
file ``0600``: it holds the token), ``key`` being a digest of the engine options, so
another model, device or cache is another service. Starting is serialised by a lock file
beside it, so two commands started together start one service. This module imports no
torch: the commands that find a running service stay fast.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tokenshapley_rag._files import default_cache_dir, exclusive_lock, write_json_atomic
from tokenshapley_rag.errors import AttributionServiceError

__all__ = ["DAEMON_IDLE_SECONDS", "Daemon", "daemon_for", "find_daemon", "running_daemon", "stop_daemon"]

#: A background service stops after this long without a request.
DAEMON_IDLE_SECONDS = 900.0
#: How long a command waits for a new service to load its model and warm up (the
#: first-ever conversion of the default model took 49 s on 2 cores).
START_TIMEOUT_SECONDS = 600.0


@dataclass(frozen=True)
class Daemon:
    """A running background service: its process, port and API token."""

    pid: int
    port: int
    token: str
    key: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def daemon_key(serve_args: list[str]) -> str:
    """A digest of the ``tokenshapley serve`` engine options (and this Python), naming the
    service that runs with exactly them.

    >>> daemon_key(["--m", "10"]) == daemon_key(["--m", "10"]) != daemon_key(["--m", "12"])
    True
    """
    text = json.dumps({"python": sys.executable, "serve": serve_args})
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def daemon_folder(cache_dir: str | os.PathLike | None) -> Path:
    """``<cache>/daemons``, created ``0700`` (its files hold API tokens)."""
    folder = (Path(cache_dir).expanduser() if cache_dir else default_cache_dir()) / "daemons"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


def find_daemon(state_file: Path) -> Daemon | None:
    """The service ``state_file`` describes, if its process is alive and it answers
    ``GET /health``; else None (a stale file is removed)."""
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
        daemon = Daemon(int(state["pid"]), int(state["port"]), str(state["token"]), str(state["key"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if _alive(daemon.pid) and _healthy(daemon.url):
        return daemon
    state_file.unlink(missing_ok=True)
    return None


def daemon_for(
    serve_args: list[str], *, cache_dir: str | os.PathLike | None = None, idle_seconds: float = DAEMON_IDLE_SECONDS,
    start_timeout: float = START_TIMEOUT_SECONDS, status: Callable[[str], None] = print,
) -> Daemon:
    """The background service for these ``tokenshapley serve`` engine options: the running
    one, or one started now (``status`` is told, with where its log goes). Raises
    :class:`AttributionServiceError` (``code="daemon_failed"``) when a new one exits or
    does not answer within ``start_timeout`` seconds, quoting the end of its log."""
    key = daemon_key(serve_args)
    state_file = _state_file(key, cache_dir)
    folder = state_file.parent
    with exclusive_lock(folder / f"{key}.lock"):
        daemon = find_daemon(state_file)
        if daemon is not None:
            return daemon
        log = folder / f"{key}.log"
        status(f"Starting a background attribution service (it stops after {idle_seconds:g} s idle; log: {log}) ...")
        daemon = _start(serve_args, key, log, idle_seconds, start_timeout)
        write_json_atomic(state_file, {"pid": daemon.pid, "port": daemon.port, "token": daemon.token, "key": key})
        return daemon


def _state_file(key: str, cache_dir: str | os.PathLike | None) -> Path:
    return daemon_folder(cache_dir) / f"{key}.json"


def running_daemon(serve_args: list[str], *, cache_dir: str | os.PathLike | None = None) -> Daemon | None:
    """The background service of these options, if one runs and answers."""
    return find_daemon(_state_file(daemon_key(serve_args), cache_dir))


def stop_daemon(serve_args: list[str], *, cache_dir: str | os.PathLike | None = None) -> bool:
    """Stop the background service of these options; whether one was running."""
    state_file = _state_file(daemon_key(serve_args), cache_dir)
    daemon = find_daemon(state_file)
    state_file.unlink(missing_ok=True)
    if daemon is None:
        return False
    os.kill(daemon.pid, signal.SIGTERM)  # uvicorn shuts down cleanly
    return True


def _start(serve_args: list[str], key: str, log: Path, idle_seconds: float, start_timeout: float) -> Daemon:
    port = _free_port()
    token = secrets.token_urlsafe(24)
    # The token travels in the environment, not on the command line (which `ps` shows).
    env = {**os.environ, "TOKENSHAPLEY_API_TOKEN": token}
    command = [
        sys.executable, "-m", "tokenshapley_rag.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
        "--idle-timeout", f"{idle_seconds:g}", *serve_args,
    ]
    with open(log, "ab") as out:
        os.chmod(log, 0o600)
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )
    daemon = Daemon(process.pid, port, token, key)
    deadline = time.monotonic() + start_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AttributionServiceError(
                f"the background service exited with status {process.returncode} before answering; its log "
                f"ends:\n{_tail(log)}", status=None, code="daemon_failed",
            )
        if _healthy(daemon.url, ready=True):
            return daemon
        time.sleep(0.2)
    process.terminate()
    raise AttributionServiceError(
        f"the background service did not answer within {start_timeout:g} s; its log ends:\n{_tail(log)}",
        status=None, code="daemon_failed",
    )


def _free_port() -> int:
    """A port the system has free now (the service binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process now holds that pid
        return False
    return True


def _healthy(url: str, *, ready: bool = False) -> bool:
    """Whether ``GET /health`` answers (with ``ready``: and the warm-up is done)."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2.0) as answer:
            body = json.loads(answer.read().decode("utf-8"))
    except (OSError, ValueError, urllib.error.URLError):
        return False
    return body.get("status") == "ok" and (not ready or bool(body.get("ready", True)))


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
