"""The ``tokenshapley`` command: attribute an answer, run the demo, evaluate."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from tokenshapley_rag._cli_options import (
    QUESTION_EMBEDDER_CHOICES,
    add_limit_options,
    limit_options,
    positive_seconds,
    question_embedder_option,
)
from tokenshapley_rag._defaults import DEFAULT_LAYER, DEFAULT_QUESTION_EMBEDDER
from tokenshapley_rag.errors import InvalidInputError, TokenShapleyError

__all__ = ["main"]


def _read_text_arg(value: str, option: str) -> str:
    """A literal text, or the contents of the file it names (UTF-8; anything else is a
    typed error naming the option)."""
    from tokenshapley_rag._text import check_text, decode_utf8

    path = Path(value)
    try:
        if len(value) < 4096 and path.is_file():
            return decode_utf8(path.read_bytes(), f"{option} file {value!r}")
    except (OSError, ValueError):  # ValueError: a name Python cannot pass to the OS
        pass
    return check_text(value, option)


def _status(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _engine(args: argparse.Namespace) -> Any:
    from tokenshapley_rag._attribution import TokenShapley

    _status(f"Loading the encoder ({args.model or 'default SmolLM2-135M-Instruct'}) ...")
    t0 = time.perf_counter()
    ts = TokenShapley(
        model=args.model, layer=args.layer, k=args.k, m=args.m, dtype=args.dtype, cache_dir=args.cache_dir,
        device=args.device, use_disk_cache=not getattr(args, "no_disk_cache", False),
        question_embedder=question_embedder_option(args), **limit_options(args),
    )
    _status(f"  ready in {time.perf_counter() - t0:.1f} s")
    return ts


def _emit(result: Any, fmt: str, out: str | None) -> None:
    text = {"markdown": result.to_markdown, "json": lambda: json.dumps(result.to_dict(), indent=2, ensure_ascii=False), "html": result.to_html}[fmt]()
    _write(text, out)


def _check_no_engine_options(args: argparse.Namespace) -> None:
    """With ``--server`` the service's engine attributes: an engine option given here
    would be silently ignored, so it is refused, named."""
    given = [f"--{name.replace('_', '-')}" for name, default in ENGINE_DEFAULTS.items() if getattr(args, name) != default]
    given += [f"--{key.replace('_', '-')}" for key in limit_options(args)]
    if given:
        raise InvalidInputError(
            f"{', '.join(given)} cannot be used with --server: the service's engine attributes "
            "(give them to `tokenshapley serve` instead)"
        )


def _attribute_on_server(
    base: str, token: str | None, args: argparse.Namespace, query: str, sources: list[Any], response: str
) -> int:
    """Send the texts to the attribution service at ``base`` and write what it answers: the
    same markdown, JSON or HTML a local run writes, without loading torch or the model here."""
    from tokenshapley_rag._client import ACCEPT, attribute_remote

    _status(f"Attributing on {base} ...")
    text = attribute_remote(base, query=query, sources=sources, response=response, accept=ACCEPT[args.format], token=token)
    if args.format == "json":  # laid out as a local run lays it out
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    _write(text, args.output)
    return 0


def _write(text: str, out: str | None) -> None:
    if out:
        Path(out).write_text(text, encoding="utf-8")
        _status(f"Wrote {out}")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _cmd_attribute(args: argparse.Namespace) -> int:
    from tokenshapley_rag._text import decode_utf8
    from tokenshapley_rag._types import Source

    server = args.server or os.environ.get("TOKENSHAPLEY_SERVER") or None
    if server and args.daemon:
        raise InvalidInputError("--daemon starts its own service: it cannot be used with --server or $TOKENSHAPLEY_SERVER")
    if server:
        _check_no_engine_options(args)
    sources = []
    for i, name in enumerate(args.source):
        path = Path(name)
        if not path.is_file():
            raise FileNotFoundError(f"--source {name!r} is not a file")
        text = decode_utf8(path.read_bytes(), f"--source {name!r}")
        # Footnotes name the file whatever the ids are (display_name reads "file_name").
        sources.append(Source(id=path.name if args.ids_from_names else str(i), text=text, metadata={"file_name": path.name}))
    # Every input is read and checked before the model loads: bad text fails in a moment.
    query, response = _read_text_arg(args.query, "--query"), _read_text_arg(args.response, "--response")
    if not response.strip():
        from tokenshapley_rag.errors import EmptyTextError

        raise EmptyTextError("--response is empty or only whitespace: there is nothing to attribute")
    if server:
        from tokenshapley_rag._client import service_url

        base = service_url(server, "--server" if args.server else "$TOKENSHAPLEY_SERVER")
        token = args.api_token or os.environ.get("TOKENSHAPLEY_API_TOKEN") or None
        return _attribute_on_server(base, token, args, query, sources, response)
    if args.daemon:
        from tokenshapley_rag._daemon import daemon_for

        daemon = daemon_for(serve_options(args), cache_dir=args.cache_dir, status=_status)
        return _attribute_on_server(daemon.url, daemon.token, args, query, sources, response)
    ts = _engine(args)
    _check_source_files(ts, sources, args.source)  # over a size limit: refused before any encoding
    _status("Encoding the sources (sentence keys are cached for next time) ...")
    ts.prepare(sources, progress=True)
    _status("Attributing ...")
    result = ts.attribute(query=query, sources=sources, response=response)
    _emit(result, args.format, args.output)
    return 0


def _check_source_files(ts: Any, sources: list[Any], names: list[str]) -> None:
    """``ts.check_context(sources)``, its size errors restated in the command's terms (the
    file and the option that raises the limit)."""
    from tokenshapley_rag.errors import TextTooLongError

    try:
        ts.check_context(sources)
    except TextTooLongError as err:
        if err.field == "sources":
            what, option = f"the --source files hold {err.size} characters in all", "--max-context-chars"
        else:
            index = int((err.field or "sources[0]").split("[", 1)[1].split("]", 1)[0])
            what, option = f"--source {names[index]!r} has {err.size} characters", "--max-source-chars"
        raise TextTooLongError(
            f"{what}, over the limit of {err.limit} ({option} N raises it, 0 disables it)",
            field=err.field, size=err.size, limit=err.limit,
        ) from None


def _cmd_warmup(args: argparse.Namespace) -> int:
    from tokenshapley_rag._warmup import warm_up

    ts = _engine(args)
    _status("Compiling the kernels (cached on disk; the next process loads them) ...")
    report = warm_up(ts)
    _status(
        f"  attribute {report.attribute_seconds:.1f} s, stream {report.stream_seconds:.1f} s, "
        f"question embedder {report.embedder_seconds:.1f} s"
    )
    print(f"ready: {report.n_citations} citations on the warm-up answer")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from tokenshapley_rag._sources import demo_passages
    from tokenshapley_rag._generate import generate_answer

    question, sources = demo_passages()
    query = args.question or question
    ts = _engine(args)
    _status(f"Question: {query}")
    _status(f"Generating an answer with the local model (up to {args.max_new_tokens} tokens) ...")
    t0 = time.perf_counter()
    answer = generate_answer(ts.loaded, query, sources, max_new_tokens=args.max_new_tokens)
    _status(f"  generated in {time.perf_counter() - t0:.1f} s")
    whole = _complete_sentences(answer)
    if whole != answer:
        _status(f"  (the answer hit --max-new-tokens; its unfinished last sentence is dropped: {answer[len(whole):].strip()!r})")
        answer = whole
    _status("Attributing every keyword of the answer to the passages ...")
    t0 = time.perf_counter()
    result = ts.attribute(query=query, sources=sources, response=answer)
    _status(f"  attributed in {time.perf_counter() - t0:.1f} s\n")
    print(result.to_markdown())
    for c in result.citations:
        best = f"source {c.best.source_id}, sentence {c.best.sentence_index} (score {c.best.score:.2f})" if c.best else "-"
        print(f"  {c.text!r:<28} {'supported' if c.supported else 'UNSUPPORTED':<12} {best}")
    Path(args.html).write_text(result.to_html(), encoding="utf-8")
    _status(f"\nWrote the HTML view to {args.html}")
    return 0


def _complete_sentences(text: str) -> str:
    """``text`` without an unfinished last sentence (one not ending in . ! ? or a closing
    quote), when there is at least one finished sentence before it."""
    from tokenshapley_rag._segment import split_sentences

    spans = split_sentences(text)
    if len(spans) < 2 or text.rstrip()[-1:] in ".!?\"')]»”":
        return text
    return text[: spans[-2][1]].rstrip()


def _cmd_eval(args: argparse.Namespace) -> int:
    from tokenshapley_rag.benchmark._cli import run_eval
    from tokenshapley_rag.benchmark._methods import make_attributor, make_response_lm

    return run_eval(args, make_attributor, make_response_lm)


def _serve_http(args: argparse.Namespace, runner: str, what: str) -> int:
    """Run ``tokenshapley_rag.chat._cli.<runner>`` (the ``chat`` extra: starlette, uvicorn),
    or say what to install."""
    try:
        from tokenshapley_rag.chat import _cli
    except ImportError as err:
        print(f'tokenshapley: error: {what} needs the "chat" extra ({err}); pip install "tokenshapley-rag[chat]"', file=sys.stderr)
        return 2
    return int(getattr(_cli, runner)(args, _engine))


def _cmd_chat(args: argparse.Namespace) -> int:
    return _serve_http(args, "run_chat", "the chat app")


def _cmd_serve(args: argparse.Namespace) -> int:
    return _serve_http(args, "run_service", "the service")


def _cmd_daemon(args: argparse.Namespace) -> int:
    from tokenshapley_rag._daemon import running_daemon, stop_daemon

    options = serve_options(args)
    if args.action == "stop":
        stopped = stop_daemon(options, cache_dir=args.cache_dir)
        _status("Stopped the background service." if stopped else "No background service runs with these options.")
        return 0
    daemon = running_daemon(options, cache_dir=args.cache_dir)
    if daemon is None:
        print("not running")
        return 3
    print(f"running: pid {daemon.pid}, {daemon.url}")
    return 0


def serve_options(args: argparse.Namespace) -> list[str]:
    """The engine options of ``args`` that differ from the defaults, as ``tokenshapley
    serve`` arguments, in a fixed order (``--daemon`` starts its service with them, and
    they name it)."""
    from tokenshapley_rag._files import default_cache_dir

    out: list[str] = []
    for name, default in ENGINE_DEFAULTS.items():
        value = getattr(args, name)
        if name == "cache_dir" and value is not None:
            # One folder, one service, however it is spelled (the default one named included).
            value = str(Path(value).expanduser().resolve())
            if value == str(default_cache_dir().expanduser().resolve()):
                value = None
        if value == default:
            continue
        flag = f"--{name.replace('_', '-')}"
        out += [flag] if isinstance(value, bool) else [flag, str(value)]
    for key, value in limit_options(args).items():
        out += [f"--{key.replace('_', '-')}", str(value or 0)]
    return out


#: The engine options and their defaults (``--server`` refuses any other value of them).
ENGINE_DEFAULTS: dict[str, Any] = {
    "model": None, "layer": DEFAULT_LAYER, "k": 1, "m": 10, "dtype": "float32", "cache_dir": None, "device": "cpu",
    "no_disk_cache": False, "question_embedder": DEFAULT_QUESTION_EMBEDDER,
}


def _add_server_options(p: argparse.ArgumentParser, *, port: int, token_env: str, token_note: str = "") -> None:
    """``--host``, ``--port``, ``--allowed-hosts`` and ``--api-token`` of a command that serves HTTP."""
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=port, help=f"port (default {port})")
    p.add_argument(
        "--allowed-hosts", default=None, metavar="NAMES",
        help="comma-separated Host names to answer besides the local ones and the bind address ('*': any)",
    )
    p.add_argument(
        "--api-token", default=None, metavar="TOKEN",
        help=f"require 'Authorization: Bearer TOKEN' (default ${token_env}{token_note})",
    )


def _add_engine_options(p: argparse.ArgumentParser) -> None:
    d = ENGINE_DEFAULTS
    p.add_argument("--model", default=d["model"], help="encoder model: alias, local path or cached hub name (default: embedded SmolLM2)")
    p.add_argument("--layer", type=int, default=d["layer"], help=f"hidden layer for keys and queries (default {d['layer']})")
    p.add_argument("--k", type=int, default=d["k"], help=f"neighbours that vote (default {d['k']})")
    p.add_argument("--m", type=int, default=d["m"], help=f"candidates per answer token (default {d['m']})")
    p.add_argument(
        "--dtype", choices=["float32", "bfloat16", "float16"], default=d["dtype"],
        help="encoder weights (default float32; bfloat16 gives the same citations and is faster on some CPUs, slower on others)",
    )
    p.add_argument("--cache-dir", default=d["cache_dir"], help="model and datastore cache (default $TOKENSHAPLEY_CACHE or ~/.cache/tokenshapley-rag)")
    p.add_argument(
        "--device", default=d["device"],
        help="where the encoder runs: cpu (default), cuda, cuda:1, mps; on CUDA a context over 2,048 tokens is "
        "searched there too; the Shapley values stay on the CPU",
    )
    p.add_argument(
        "--no-disk-cache", action="store_true",
        help="keep the sources' sentence keys in memory only (nothing about the sources is written to disk)",
    )
    p.add_argument(
        "--question-embedder", choices=QUESTION_EMBEDDER_CHOICES, default=d["question_embedder"],
        help="judge a bare answer to a question that names nothing against the documents that state the question, "
        f"found by this sentence embedder (default: {DEFAULT_QUESTION_EMBEDDER}; none: the question's token game alone)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tokenshapley", description="Keyword-level citations for RAG answers (TokenShapley).")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("attribute", help="attribute an answer to source files")
    p.add_argument("--query", required=True, help="the question (text or a file)")
    p.add_argument("--source", nargs="+", required=True, metavar="FILE", help="source files, one chunk each")
    p.add_argument("--response", required=True, help="the answer (text or a file)")
    p.add_argument("--format", choices=["markdown", "json", "html"], default="markdown")
    p.add_argument("--output", "-o", default=None, help="write here instead of stdout")
    p.add_argument("--ids-from-names", action="store_true", help="use file names as source ids (default: 0, 1, ...)")
    p.add_argument(
        "--server", default=None, metavar="URL",
        help="attribute on a running `tokenshapley serve` (e.g. http://127.0.0.1:8765; default $TOKENSHAPLEY_SERVER): "
        "no model loads here, so the command takes about the time of the attribution",
    )
    p.add_argument(
        "--api-token", default=None, metavar="TOKEN",
        help="with --server: the service's API token (default $TOKENSHAPLEY_API_TOKEN)",
    )
    p.add_argument(
        "--daemon", action="store_true",
        help="attribute on a background service for these engine options, started by the first such call "
        "(it loads the model once; later calls take about the time of the attribution) and stopped after "
        "15 minutes without a request, or by `tokenshapley daemon stop`",
    )
    _add_engine_options(p)
    add_limit_options(p)
    p.set_defaults(func=_cmd_attribute)

    p = sub.add_parser("daemon", help="the background service of `attribute --daemon` for these engine options")
    p.add_argument("action", choices=["status", "stop"], help="status: is it running (exit 3 when not); stop: stop it")
    _add_engine_options(p)
    add_limit_options(p)
    p.set_defaults(func=_cmd_daemon)

    p = sub.add_parser(
        "serve",
        help="serve attribution over HTTP (POST /attribute) from one loaded engine, for repeated "
        "`tokenshapley attribute --server` calls and other programs",
    )
    _add_server_options(p, port=8765, token_env="TOKENSHAPLEY_API_TOKEN")
    p.add_argument(
        "--idle-timeout", type=positive_seconds, default=None, metavar="SECONDS",
        help="stop after this many seconds without a request (default: serve until interrupted)",
    )
    _add_engine_options(p)
    add_limit_options(p)
    p.set_defaults(func=_cmd_serve)

    p = sub.add_parser("demo", help="answer a question over bundled passages with the local model and cite it")
    p.add_argument("--question", default=None, help="ask something else about the bundled passages")
    p.add_argument("--html", default="tokenshapley-demo.html", help="where to write the HTML view")
    p.add_argument("--max-new-tokens", type=int, default=64, help="longest answer, in tokens (default 64)")
    _add_engine_options(p)
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser(
        "warmup", help="load the encoder (converting it on first use) and compile the kernels once, ahead of the first answer"
    )
    _add_engine_options(p)
    p.set_defaults(func=_cmd_warmup)

    try:
        from tokenshapley_rag.benchmark._cli import add_eval_arguments
    except ImportError:  # evaluation extras missing: the other commands still work
        add_eval_arguments = None
    if add_eval_arguments is not None:
        p = sub.add_parser("eval", help="evaluate attribution on the benchmark sets")
        add_eval_arguments(p)
        _add_engine_options(p)
        p.add_argument("--candidates", choices=["nearest", "mixed"], default=None, help="TokenShapley candidate set")
        p.add_argument("--match", choices=["word", "word_or_token", "normalized", "exact"], default=None, help="TokenShapley token matching rule")
        p.add_argument("--context-weight", type=float, default=None, help="weight of the answer-context game (0: the paper's aggregation)")
        p.add_argument("--context-scale", type=float, default=None, help="decay length, in tokens, of the answer-context weights")
        p.add_argument(
            "--verbatim", action=argparse.BooleanOptionalAction, default=None,
            help="restrict a span's candidate sources to those holding it word for word when any does, else to those "
            "holding the most of its words (default: on)",
        )
        p.set_defaults(func=_cmd_eval)

    from tokenshapley_rag.chain_eval._cli import add_evaluate_chain_arguments, run_evaluate_chain

    p = sub.add_parser("evaluate-chain", help="run a retrieval chain over questions, attribute every answer, report (local or Ray)")
    add_evaluate_chain_arguments(p)
    _add_engine_options(p)
    add_limit_options(p)
    p.set_defaults(func=run_evaluate_chain)

    # The chat app's options live here rather than in the "chat" extra, so that without the
    # extra `tokenshapley chat` says what to install instead of vanishing.
    p = sub.add_parser("chat", help="serve a chat web app over a folder of documents; footnotes stream with the answer")
    p.add_argument("--docs", required=True, metavar="FOLDER", help="folder of .txt/.md files; each paragraph is a chunk")
    p.add_argument("--top-k", type=int, default=3, help="chunks retrieved per question (default 3)")
    _add_server_options(p, port=8000, token_env="TOKENSHAPLEY_CHAT_TOKEN", token_note="; open the page as /#token=TOKEN")
    p.add_argument("--max-new-tokens", type=int, default=160, help="longest answer of the local model, in tokens")
    _add_engine_options(p)
    add_limit_options(p)
    p.set_defaults(func=_cmd_chat)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (TokenShapleyError, OSError) as err:  # OSError: a missing, unreadable or unwritable path
        print(f"tokenshapley: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
