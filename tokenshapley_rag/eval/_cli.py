"""Command-line glue for the evaluation: arguments and one ``run_eval`` entry point.

The project CLI owns the parser and the models; it calls :func:`add_eval_arguments` on its
``eval`` sub-parser and :func:`run_eval` with a factory that builds the attributor, so this
module never imports model code.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenshapley_rag.eval._data import (
    DATASETS,
    SPAN_DATASETS,
    default_data_dir,
    load_dataset,
)
from tokenshapley_rag.eval._runner import run_span_eval

if TYPE_CHECKING:
    from tokenshapley_rag._baselines import SpanAttributor

__all__ = ["add_eval_arguments", "partial_path", "run_eval"]

_PROTOCOL = {
    "nq": "sentence ranking (precision/recall/F1 @ k, see ranking_metrics)",
    "wice": "evidence recall @ k and label separation (see ranking_metrics, auroc)",
    "cnndm": "top-k ablation log-prob drop (see mean_logprob_drop)",
}


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the evaluation options to ``parser``.

    Options (namespace attribute in brackets): ``--dataset`` (``dataset``, required, one of
    quotesum, verigran, kv, nq, cnndm, wice), ``--data PATH`` (``data``, default None =
    ``../shared/data`` next to the project), ``--limit N`` (``limit``), ``--method NAME``
    (``method``, default ``lexical``), ``--beta B`` (``beta``, int, default 8, handed to the
    attributor factory), ``--json OUT`` (``json``), ``--no-order-control``
    (``order_control``, default True), ``--resume`` (``resume``).

    Examples
    --------
    >>> p = argparse.ArgumentParser()
    >>> add_eval_arguments(p)
    >>> a = p.parse_args(["--dataset", "kv", "--limit", "3", "--no-order-control"])
    >>> a.dataset, a.limit, a.method, a.beta, a.order_control, a.resume, a.json
    ('kv', 3, 'lexical', 8, False, False, None)
    """
    parser.add_argument("--dataset", required=True, choices=DATASETS, help="evaluation set")
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"folder holding the set folders (default: {default_data_dir()})",
    )
    parser.add_argument("--limit", type=_positive_int, default=None, metavar="N", help="first N examples only")
    parser.add_argument("--method", default="lexical", metavar="NAME", help="attribution method (default: lexical)")
    parser.add_argument("--beta", type=_positive_int, default=8, metavar="B", help="method parameter beta (default: 8)")
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="OUT",
        help="write the report here; per-example rows go to OUT.partial.jsonl",
    )
    parser.add_argument(
        "--no-order-control",
        dest="order_control",
        action="store_false",
        help="skip the 3 permuted source orders (4x fewer method calls)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="reuse finished examples from OUT.partial.jsonl (needs --json)",
    )


def partial_path(json_out: str | Path) -> Path:
    """The per-example partial file of a ``--json OUT`` report: ``OUT.partial.jsonl``.

    Examples
    --------
    >>> partial_path("out/qs.json").name
    'qs.json.partial.jsonl'
    """
    p = Path(json_out)
    return p.with_name(p.name + ".partial.jsonl")


def run_eval(args: argparse.Namespace, attributor_factory: Callable[[str, Any], SpanAttributor]) -> int:
    """Run the evaluation described by ``args`` (from :func:`add_eval_arguments`).

    Prints the report JSON to stdout and writes it to ``--json`` when given. With
    ``--json OUT`` the per-example rows are appended to ``OUT.partial.jsonl``; without
    ``--resume`` an existing partial file is deleted first, with ``--resume`` its finished
    examples are reused.

    Parameters
    ----------
    args : argparse.Namespace
    attributor_factory : callable ``(method_name, args) -> SpanAttributor``
        Builds the method; called once, after the data loaded.

    Returns
    -------
    exit_code : int
        0 on success, 2 on a usage error (message on stderr).

    Raises
    ------
    NotImplementedError
        For ``nq``, ``wice`` and ``cnndm``: their protocols are not wired into ``run_eval``
        yet (the loaders and metrics exist).
    """
    if args.dataset not in SPAN_DATASETS:
        raise NotImplementedError(
            f"--dataset {args.dataset}: the {_PROTOCOL[args.dataset]} protocol is not wired into "
            f"run_eval yet; run_eval handles the span sets {', '.join(SPAN_DATASETS)}. "
            f"load_dataset({args.dataset!r}) and the metrics in tokenshapley_rag.eval exist."
        )
    json_out = getattr(args, "json", None)
    if args.resume and json_out is None:
        print("error: --resume needs --json OUT (the partial file is OUT.partial.jsonl)", file=sys.stderr)
        return 2
    examples = load_dataset(args.dataset, args.data, limit=args.limit)
    attributor = attributor_factory(args.method, args)
    resume = None
    if json_out is not None:
        resume = partial_path(json_out)
        if not args.resume and resume.exists():
            resume.unlink()
    data_dir = Path(args.data) if args.data is not None else default_data_dir()
    report = run_span_eval(
        args.dataset,
        attributor,
        examples,
        order_control=args.order_control,
        progress=True,
        resume_path=resume,
        extra_config={
            "data": str(data_dir),
            "split": "dev",
            "limit": args.limit,
            "method_arg": args.method,
            "beta": args.beta,
            **({"method_config": attributor.config} if hasattr(attributor, "config") else {}),
        },
    )
    out = report.to_json()
    text = json.dumps(out, indent=2, ensure_ascii=False)
    if json_out is not None:
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(json_out).write_text(text + "\n", encoding="utf-8")
    print(text)
    m = out["metrics"]
    oc = m["accuracy_order_controlled"]
    print(
        f"{args.dataset}/{report.method}: n={report.n} spans={m['n_spans']} "
        f"accuracy={m['accuracy']:.3f}" + (f" order-controlled={oc:.3f}" if oc is not None else ""),
        file=sys.stderr,
    )
    return 0
