"""The warm path outside the search (issue 25): a warm ``attribute()`` on a new source list
(the sentences in the sentence cache's memory tier, the datastore rebuilt), step by step,
at long contexts. Prints one table of median milliseconds per step, the library's own step
marks (``tokenshapley_rag._timing.STEPS``, the sub-steps of ``assemble`` included), the
rest of the call outside any step, and the call against its own encoder pass and against the
same pass timed apart (back to back, after the calls: a pass that follows other work can be
slowed by another thread pool still spinning on the cores).

Contexts are those of ``benchmarks/long_context_bench.py``: the sources of a QuoteSum dev
answer, then NQ dev passages in file order until about the target number of tokens.

Comparing two versions of the library: run this script alternately with each on
``PYTHONPATH`` (``--label`` names the version, ``--json`` keeps the runs), then print
both side by side with ``--compare``; ``--dump`` writes ``AttributionResult.to_dict()`` of
several padded answers, for checking that two versions give the same results.

    HF_HUB_OFFLINE=1 python benchmarks/warm_path_bench.py --data ../shared/data \\
        --sizes 16384 65536 --repeats 5 --label after --json out/after-1.json
    python benchmarks/warm_path_bench.py --compare out/before-*.json out/after-*.json
    HF_HUB_OFFLINE=1 python benchmarks/warm_path_bench.py --data ../shared/data \\
        --sizes 16384 --dump out/after.json --answers 10
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from long_context_bench import keep_in_memory, load_avg, nq_passages, padded, timed_attribute  # noqa: E402

# Steps that contain other steps: their parts are not added again to the call's total.
NESTED = {"distance_product": "candidates", "sentence_facts": "assemble", "holding": "assemble",
          "verbatim": "assemble", "context_games": "assemble", "statuses": "assemble", "citations": "assemble",
          "scores": "assemble", "question_game": "statuses"}


def engine(args):
    import numba
    import torch

    from tokenshapley_rag import TokenShapley

    torch.set_num_threads(args.threads)
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    ts = TokenShapley(cache_dir=args.cache_dir, max_source_chars=None, max_context_chars=None,
                      approximate_above=args.threshold)
    keep_in_memory(ts, 1 << 16)
    return ts


def step_runs(ts, ex, pool, size, repeats) -> dict:
    """``repeats`` warm calls on a new source list: each call's total, its steps and the
    rest outside any step (seconds)."""
    sources = padded(ts, list(ex.sources), pool, size)
    store = ts.build_datastore(sources)  # cold where the cache lacks sentences
    for _ in range(3):  # compile and warm every path before timing
        timed_attribute(ts, ex.question, sources, ex.answer, ts.approximate_above)
    runs = []
    for _ in range(repeats):
        seconds, steps = timed_attribute(ts, ex.question, sources, ex.answer, ts.approximate_above)
        top = sum(v for k, v in steps.items() if k not in NESTED)
        runs.append({"total": seconds, "outside": seconds - top, **steps})
    # The same encoder pass timed apart, back to back: what the call's own pass takes when
    # nothing else has just run on the cores (another pool's spinning threads slow it).
    answer = ts.encoder.tokenize(ex.answer)
    apart = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        ts.encoder.encode_response(ex.question, answer)
        apart.append(time.perf_counter() - t0)
    return {"tokens": int(store.size), "sentences": len(store.sentences), "approximate": bool(store.approximate),
            "runs": runs, "pass_apart": apart, "load": load_avg()}


def dump(ts, args, pool) -> None:
    """``to_dict()`` of the first ``--answers`` QuoteSum and VeriGran dev answers, padded."""
    from tokenshapley_rag.benchmark import load_dataset

    out = {}
    for name in ("quotesum", "verigran"):
        chosen = [ex for ex in load_dataset(name, Path(args.data)) if ex.answer.strip()][: args.answers]
        for size in args.sizes:
            for i, ex in enumerate(chosen):
                sources = padded(ts, list(ex.sources), pool, size)
                ts.pipeline.builder._datastores.clear()
                res = ts.attribute(query=ex.question, sources=sources, response=ex.answer)
                out[f"{name}/{size}/{i}"] = res.to_dict()
        print(f"  {name}: {len(chosen)} answers x {len(args.sizes)} sizes; load {load_avg()}", flush=True)
    Path(args.dump).write_text(json.dumps(out, sort_keys=True))


def compare(outs: list[dict]) -> None:
    """Median ms per step and context size, one column per label (runs of one label pooled)."""
    by_label: dict[str, dict[int, list[dict]]] = {}
    apart: dict[str, dict[int, list[float]]] = {}
    loads: dict[str, list[str]] = {}
    for out in outs:
        for row in out["rows"]:
            by_label.setdefault(out["label"], {}).setdefault(row["tokens"], []).extend(row["runs"])
            apart.setdefault(out["label"], {}).setdefault(row["tokens"], []).extend(row.get("pass_apart", []))
            loads.setdefault(out["label"], []).append(row["load"])
    labels = list(by_label)
    sizes = sorted({t for runs in by_label.values() for t in runs})
    steps = ["total", "encode_answer", "segment", "sentence_classes", "index", "answer_classes", "candidates",
             "games", "assemble", *[k for k in NESTED if NESTED[k] == "assemble"], "outside"]
    for size in sizes:
        calls = ", ".join(f"{lab}: {len(by_label[lab].get(size, []))} calls" for lab in labels)
        print(f"\n{size:,} context tokens: median ms ({calls})\n")
        print("| step | " + " | ".join(labels) + " |")
        print("|---|" + "---|" * len(labels))
        for s in steps:
            cells = []
            for lab in labels:
                runs = by_label[lab].get(size, [])
                cells.append(f"{1e3 * statistics.median(r.get(s, 0.0) for r in runs):.2f}" if runs else "")
            name = f"· {s}" if NESTED.get(s) == "assemble" else s
            print(f"| {name} | " + " | ".join(cells) + " |")
        cells = []
        for lab in labels:
            runs = by_label[lab].get(size, [])
            cells.append(f"{statistics.median(r['total'] / r['encode_answer'] for r in runs):.2f}x" if runs else "")
        print("| total / its encoder pass | " + " | ".join(cells) + " |")
        cells = []
        for lab in labels:
            passes = apart[lab].get(size, [])
            cells.append(f"{1e3 * statistics.median(passes):.2f}" if passes else "")
        print("| the pass timed apart | " + " | ".join(cells) + " |")
        cells = []
        for lab in labels:
            runs, passes = by_label[lab].get(size, []), apart[lab].get(size, [])
            cells.append(f"{statistics.median(r['total'] for r in runs) / statistics.median(passes):.2f}x"
                         if runs and passes else "")
        print("| total / the pass timed apart | " + " | ".join(cells) + " |")
    for lab in labels:
        print(f"\nload (1/5/15) of the {lab} runs: " + "; ".join(loads[lab]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.environ.get("TOKENSHAPLEY_DATA"))
    ap.add_argument("--sizes", type=int, nargs="+", default=[16384, 65536])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threshold", type=int, default=None,
                    help="approximate_above (default: the library's)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--label", default="run")
    ap.add_argument("--json", default=None)
    ap.add_argument("--dump", default=None, help="write to_dict() of padded answers here and stop")
    ap.add_argument("--answers", type=int, default=10, help="answers per set for --dump")
    ap.add_argument("--compare", nargs="+", default=None, help="JSON files of earlier runs: print them side by side")
    args = ap.parse_args(argv)
    if args.compare:
        compare([json.loads(Path(p).read_text()) for p in args.compare])
        return 0
    if not args.data:
        ap.error("no data folder: give --data PATH (the folder holding the sets' folders, e.g. ../shared/data) "
                 "or set TOKENSHAPLEY_DATA")
    if args.threshold is None:
        from tokenshapley_rag._defaults import DEFAULT_APPROXIMATE_ABOVE

        args.threshold = DEFAULT_APPROXIMATE_ABOVE
    from tokenshapley_rag.benchmark import load_dataset

    ts = engine(args)
    data = Path(args.data)
    pool = nq_passages(data)
    if args.dump:
        dump(ts, args, pool)
        return 0
    ex = load_dataset("quotesum", data)[0]
    out = {"label": args.label, "threshold": args.threshold, "load_start": load_avg(), "rows": []}
    for size in args.sizes:
        row = step_runs(ts, ex, pool, size, args.repeats)
        out["rows"].append(row)
        med = lambda s: 1e3 * statistics.median(r.get(s, 0.0) for r in row["runs"])  # noqa: E731
        print(f"  {row['tokens']:,} tokens ({'approximate' if row['approximate'] else 'exact'} search): "
              f"total {med('total'):.1f} ms, its pass {med('encode_answer'):.1f} ms, assemble {med('assemble'):.1f}, "
              f"segment {med('segment'):.1f}, outside steps {med('outside'):.1f}; load {row['load']}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out))
    compare([out])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
