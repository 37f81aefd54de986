"""``tokenshapley chat`` and ``tokenshapley serve``: the chat app over a folder of
documents, and the attribution service alone.

The options are declared in :mod:`tokenshapley_rag.cli` (so the command exists, and says
what to install, without the ``chat`` extra); this module runs it.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["run_chat", "run_service", "allowed_hosts"]

_LOCAL = ("127.0.0.1", "localhost", "::1")


def allowed_hosts(bind: str, extra: str | None) -> tuple[str, ...]:
    """The Host names the server answers to: the local names, the bind address unless it
    is a wildcard, and the comma-separated ``extra`` (``--allowed-hosts``; "*" allows any).

    >>> allowed_hosts("127.0.0.1", None)
    ('localhost', '127.0.0.1', '::1')
    >>> allowed_hosts("0.0.0.0", "chat.example.org, 10.0.0.5")
    ('localhost', '127.0.0.1', '::1', 'chat.example.org', '10.0.0.5')
    """
    hosts = ["localhost", "127.0.0.1", "::1"]
    if bind not in ("0.0.0.0", "::", "") and bind not in hosts:
        hosts.append(bind)
    for name in (extra or "").split(","):
        if name.strip() and name.strip() not in hosts:
            hosts.append(name.strip())
    return tuple(hosts)


def _access(args: argparse.Namespace, token_env: str, exposed: str) -> tuple[tuple[str, ...], str | None]:
    """The allowed Host names and the API token (``--api-token``, else ``$token_env``); a
    warning when a non-local bind has no token (anyone reaching the port could ``exposed``)."""
    token = args.api_token or os.environ.get(token_env) or None
    if args.host not in _LOCAL and token is None:
        print(f"tokenshapley: warning: serving on {args.host} without an API token: anyone who can reach the port "
              f"can {exposed} (set --api-token or {token_env})", file=sys.stderr)
    return allowed_hosts(args.host, args.allowed_hosts), token


def run_chat(args: argparse.Namespace, make_engine: Callable[[argparse.Namespace], Any]) -> int:
    """Load the documents, then the engine (``make_engine(args)``), and serve until
    interrupted. Returns 2 with a hint when uvicorn (the ``chat`` extra) is missing."""
    try:
        import uvicorn
    except ImportError as err:
        print(f"tokenshapley: error: the chat app needs the 'chat' extra ({err}); "
              'pip install "tokenshapley-rag[chat]"', file=sys.stderr)
        return 2
    from tokenshapley_rag.chat import ChatConfig, LocalModelGenerator, create_app, load_documents

    if args.top_k < 1:
        print(f"tokenshapley: error: --top-k must be at least 1, got {args.top_k}", file=sys.stderr)
        return 2
    chunks = load_documents(args.docs)  # before the model loads: a bad folder fails fast
    print(f"Loaded {len(chunks)} chunks from {args.docs}", file=sys.stderr)
    hosts, token = _access(args, "TOKENSHAPLEY_CHAT_TOKEN", "read the documents")
    ts = make_engine(args)
    app = create_app(
        ts,
        chunks,
        generator=LocalModelGenerator(ts.loaded, max_new_tokens=args.max_new_tokens),
        config=ChatConfig(top_k=args.top_k, max_top_k=max(10, args.top_k), allowed_hosts=hosts, api_token=token),
    )
    fragment = "#token=<your token>" if token else ""
    print(f"Serving on http://{args.host}:{args.port}/{fragment} (Ctrl+C stops)", file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def run_service(args: argparse.Namespace, make_engine: Callable[[argparse.Namespace], Any]) -> int:
    """Load the engine (``make_engine(args)``), run one warm-up attribution so the first
    request finds every kernel loaded, and serve ``POST /attribute`` until interrupted.
    Returns 2 with a hint when uvicorn (the ``chat`` extra) is missing."""
    try:
        import uvicorn
    except ImportError as err:
        print(f"tokenshapley: error: the service needs the 'chat' extra ({err}); "
              'pip install "tokenshapley-rag[chat]"', file=sys.stderr)
        return 2
    from tokenshapley_rag._warmup import warm_up
    from tokenshapley_rag.chat import ChatConfig, create_service

    hosts, token = _access(args, "TOKENSHAPLEY_API_TOKEN", "use the engine")
    ts = make_engine(args)
    warm_up(ts)
    app = create_service(ts, config=ChatConfig(allowed_hosts=hosts, api_token=token))
    idle = getattr(args, "idle_timeout", None)
    stop = f"; it stops after {idle:g} s without a request" if idle else " (Ctrl+C stops)"
    print(f"Serving attribution on http://{args.host}:{args.port}/attribute{stop}; "
          f"`tokenshapley attribute --server http://{args.host}:{args.port} ...` uses it", file=sys.stderr, flush=True)
    served = IdleWatch(app) if idle else app
    server = uvicorn.Server(uvicorn.Config(served, host=args.host, port=args.port, log_level="warning"))
    if idle:
        threading.Thread(target=served.stop_when_idle, args=(server, idle), daemon=True).start()
    server.run()
    return 0


class IdleWatch:
    """An ASGI app around ``app`` that notes when the last HTTP request began and ended, so
    a service started for a command line (``tokenshapley attribute --daemon``) can stop
    itself when no one has used it for a while instead of running until the machine stops."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.last = time.monotonic()
        self.active = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.active += 1
        self.last = time.monotonic()
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1
            self.last = time.monotonic()

    def idle_for(self) -> float:
        """Seconds since the last request ended (0 while one runs)."""
        return 0.0 if self.active else time.monotonic() - self.last

    def stop_when_idle(self, server: Any, seconds: float, poll: float = 1.0) -> None:
        """Ask ``server`` (a ``uvicorn.Server``) to exit once no request came for ``seconds``."""
        while not server.should_exit:
            if self.idle_for() >= seconds:
                server.should_exit = True
                return
            time.sleep(min(poll, seconds))
