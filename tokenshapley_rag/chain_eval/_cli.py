"""``tokenshapley evaluate-chain``: the command-line face of :func:`evaluate_chain`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from tokenshapley_rag._cli_options import int_at_least

__all__ = ["add_evaluate_chain_arguments", "run_evaluate_chain"]


def add_evaluate_chain_arguments(p: argparse.ArgumentParser) -> None:
    """Add the ``evaluate-chain`` options (the model options come from the main CLI)."""
    p.add_argument("questions", help="JSONL: one {question, id?, reference?, sources?, answer?} object a line")
    p.add_argument("--chain", default=None, metavar="MODULE:FUNCTION",
                   help="zero-argument factory returning a LlamaIndex query engine or LangChain runnable "
                        "(omit for pre-computed records with sources and answer)")
    p.add_argument("--out", default="chain-eval", metavar="DIR",
                   help="output folder: rows.jsonl (resumable), report.json, report.md, report.html, PNG plots")
    p.add_argument("--engine", choices=["local", "ray"], default="local")
    p.add_argument("--ray-address", default=None,
                   help="Ray cluster to join (e.g. auto, ray://head:10001); default starts a local Ray")
    p.add_argument("--concurrency", type=int_at_least(1), default=2, help="Ray actors, one model each (default 2)")
    p.add_argument("--num-cpus-per-actor", type=float, default=1.0, help="CPUs reserved per Ray actor (default 1)")
    p.add_argument("--ray-working-dir", default=None, metavar="DIR",
                   help="ship DIR to the cluster as the Ray runtime_env working_dir (for a --chain module that "
                        "is not installed on the nodes)")
    p.add_argument("--app-dir", default=".", metavar="DIR",
                   help="folder put on sys.path to import the --chain module (default: the current folder)")
    p.add_argument("--input-key", default=None,
                   help="LangChain input key (default: send both 'input' and 'question')")
    p.add_argument("--limit", type=int_at_least(1), default=None, help="only the first N questions")
    p.add_argument("--no-resume", dest="resume", action="store_false",
                   help="start DIR/rows.jsonl over instead of reusing its finished questions")
    p.add_argument("--retry-errors", action="store_true", help="on resume, run earlier error rows again")
    p.add_argument("--no-plots", dest="plots", action="store_false", help="skip the matplotlib PNGs")
    p.add_argument("--progress", action="store_true", help="show a progress bar")


def run_evaluate_chain(args: argparse.Namespace) -> int:
    """Run :func:`evaluate_chain` as described by ``args`` and write the report folder.

    Prints the summary JSON to stdout and the written paths to stderr; returns 0.
    """
    from tokenshapley_rag.chain_eval._engine import AttributorConfig
    from tokenshapley_rag.chain_eval._evaluate import evaluate_chain

    if args.chain is not None and args.app_dir:
        # like uvicorn's --app-dir: console scripts do not have the current folder on sys.path
        app_dir = os.path.abspath(args.app_dir)
        if app_dir not in sys.path:
            sys.path.insert(0, app_dir)
    from tokenshapley_rag._cli_options import limit_options, question_embedder_option
    from tokenshapley_rag._defaults import DEFAULT_QUESTION_EMBEDDER

    options = {"dtype": args.dtype} if getattr(args, "dtype", "float32") != "float32" else {}
    if question_embedder_option(args) != DEFAULT_QUESTION_EMBEDDER:  # the engine's default otherwise
        options["question_embedder"] = question_embedder_option(args)
    config = AttributorConfig(
        model=args.model, layer=args.layer, k=args.k, m=args.m,
        cache_dir=str(args.cache_dir) if args.cache_dir is not None else None,
        options={**options, **limit_options(args)},
    )
    init_kwargs = {"runtime_env": {"working_dir": args.ray_working_dir}} if args.ray_working_dir else None
    out = Path(args.out)
    report = evaluate_chain(
        args.questions,
        attributor=config,
        chain_factory=args.chain,
        engine=args.engine,
        output=out / "rows.jsonl",
        resume=args.resume,
        retry_errors=args.retry_errors,
        input_key=args.input_key,
        limit=args.limit,
        concurrency=args.concurrency,
        num_cpus_per_actor=args.num_cpus_per_actor,
        ray_address=args.ray_address,
        ray_init_kwargs=init_kwargs,
        progress=args.progress,
    )
    paths = report.write(out, plots=args.plots)
    print(json.dumps({"summary": report.summary.to_dict(), "timing": report.timing.to_dict()}, indent=2))
    s = report.summary
    print(
        f"{s.n_questions} questions ({s.n_errors} errors, {report.timing.n_resumed} resumed); "
        f"{s.n_supported}/{s.n_keywords} keywords supported; report: {paths['markdown']}",
        file=sys.stderr,
    )
    return 0
