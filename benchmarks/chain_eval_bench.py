"""Time ``evaluate_chain`` on pre-computed records from the shared sets, locally and with Ray.

Records are the first ``--limit`` dev examples of ``quotesum`` or ``nq`` (question, sources
in file order = rank, the set's answer; a source with a title is attributed over
``title + "\\n" + text``, as in tokenshapley_rag.benchmark). Prints one markdown table row per
engine plus the summary metrics, and checks that the Ray rows equal the local rows
(timing excluded). For nq it also reports the share of citations that go to the gold
passage (the set's ``gold`` source), which the library itself does not know about.

    OMP_NUM_THREADS=1 python benchmarks/chain_eval_bench.py --set nq --limit 30 --engines local ray
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from tokenshapley_rag.chain_eval import AttributorConfig, evaluate_chain

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def records(name: str, limit: int) -> tuple[list[dict], dict[str, str]]:
    out, gold = [], {}
    with (DATA / name / "dev.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            ex = json.loads(line)
            srcs = [{"id": s["id"], "text": (s["title"] + "\n" + s["text"]) if s.get("title") else s["text"]}
                    for s in ex["sources"]]
            out.append({"id": ex["id"], "question": ex["question"], "sources": srcs, "answer": ex["answer"]})
            if ex.get("gold"):
                gold[ex["id"]] = ex["gold"][0]["source_id"]
            if len(out) == limit:
                break
    return out, gold


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", choices=["quotesum", "nq"], default="nq")
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--engines", nargs="+", default=["local", "ray"])
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--cache-dir", default=None, help="parent of the fresh per-engine caches (default /tmp)")
    args = ap.parse_args()
    recs, gold = records(args.set, args.limit)
    models = Path(__file__).resolve().parents[1] / ".cache" / "models"

    def fresh_cache(engine: str) -> str:
        """A cold datastore per engine that reuses the repo's converted model."""
        path = f"{args.cache_dir or '/tmp'}/chain-eval-bench-{os.getpid()}-{engine}"
        os.makedirs(path, exist_ok=True)
        if models.exists() and not os.path.exists(f"{path}/models"):
            os.symlink(models, f"{path}/models")
        return path

    reports = {}
    print(f"set {args.set}, n={len(recs)}, {os.cpu_count()} CPUs, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, "
          f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f} at start")
    print("| engine | datastore cache | n | s/question mean | median | p90 | wall s (incl. model load / Ray start) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for engine in args.engines:
        cache = fresh_cache(engine)
        for cache_state in ("cold", "warm"):
            t0 = time.perf_counter()
            rep = evaluate_chain(
                recs, attributor=AttributorConfig(cache_dir=cache), engine=engine, concurrency=args.concurrency,
                ray_init_kwargs={"num_cpus": args.concurrency, "include_dashboard": False} if engine == "ray" else None,
            )
            wall = time.perf_counter() - t0
            t = rep.timing
            print(f"| {engine}{f' x{args.concurrency}' if engine == 'ray' else ''} | {cache_state} | {t.n} | "
                  f"{t.seconds_mean:.3f} | {t.seconds_median:.3f} | {t.seconds_p90:.3f} | {wall:.1f} |", flush=True)
            reports[(engine, cache_state)] = rep
    base = next(iter(reports.values())).to_dict(timing=False, config=False)
    same = all(r.to_dict(timing=False, config=False) == base for r in reports.values())
    print(f"\nall runs give identical rows and summary (timing excluded): {same}")
    rep = next(iter(reports.values()))
    s = rep.summary
    print(json.dumps({k: v for k, v in s.to_dict().items() if k != "utilization"}, indent=1))
    print("utilization by rank:", [(u.rank, round(u.utilization or 0, 3)) for u in s.utilization])
    if gold:
        to_gold = sum(src.n_citations for r in rep.rows if r.ok for src in r.sources if src.id == gold.get(r.id))
        print(f"citations to the gold passage: {to_gold}/{s.n_citations}")


if __name__ == "__main__":
    main()
