"""Start-up (issue 25, item 2): what a new process pays before its first citation, and what
a call to a running service pays instead. Prints one table; every step is a fresh process
timed from outside (wall clock), so the figures include interpreter start and imports.

Steps, each ``--repeats`` times (medians reported, every run listed):

* ``import tokenshapley_rag`` (target ≤ 0.5 s);
* ``tokenshapley --help`` (the CLI's parser, no engine);
* ``tokenshapley attribute`` standalone on two one-line files, caches warm (target ≤ 2 s);
* ``tokenshapley serve`` started once (its time to "Serving"), then ``tokenshapley
  attribute --server`` against it (target ≤ 2 s);
* ``tokenshapley attribute --daemon``: the first call (it starts the background service)
  once, then the later calls, which find it (target ≤ 2 s); the service is stopped after;
* in one fresh process after ``tokenshapley warmup``: the model load, the first
  attribution and the second (target: the first ≤ 2 s beyond the model load);
* with ``--conversion``: the first-ever ``TokenShapley()`` on an empty cache folder (the
  embedded GGUF converted), once.

The load average is printed beside every row: on a shared machine absolute seconds are
inflated, and only a quiet machine's figures speak to the targets.

    HF_HUB_OFFLINE=1 python benchmarks/startup_bench.py --repeats 3 --conversion
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUERY = "How tall is the Eiffel Tower?"
SOURCES = {
    "eiffel.txt": "The Eiffel Tower is 330 metres tall. It was completed in 1889.",
    "louvre.txt": "The Louvre is the world's most visited museum.",
}
ANSWER = "The Eiffel Tower is 330 metres tall."

FIRST_CALLS = """
import json, sys, time
t0 = time.perf_counter()
from tokenshapley_rag import Source, TokenShapley
ts = TokenShapley(cache_dir=sys.argv[1])
t1 = time.perf_counter()
sources = [Source(k, v) for k, v in json.loads(sys.argv[2]).items()]
ts.attribute(sys.argv[3], sources, sys.argv[4])
t2 = time.perf_counter()
ts.attribute(sys.argv[3], sources, sys.argv[4])
t3 = time.perf_counter()
print(json.dumps({"load": t1 - t0, "first": t2 - t1, "second": t3 - t2}))
"""


def load_avg() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... failed ({done.returncode}): {done.stderr[-800:]}")
    return seconds, done.stdout


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "tokenshapley_rag.cli", *args]


def row(name: str, runs: list[float], target: float | None, note: str = "") -> dict:
    med = statistics.median(runs)
    verdict = "" if target is None else ("MET" if med <= target else "NOT MET")
    return {"step": name, "runs": runs, "median": med, "target": target, "verdict": verdict, "note": note, "load": load_avg()}


def start_service(cache: str, port: int, env: dict[str, str], log: Path) -> tuple[subprocess.Popen, float]:
    """``tokenshapley serve`` in a subprocess (its output to ``log``), and the seconds until
    it says it is serving."""
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cli("serve", "--port", str(port), "--cache-dir", cache), stdout=out, stderr=out, env=env)
    while True:
        time.sleep(0.1)
        if "Serving" in log.read_text():
            return proc, time.perf_counter() - t0
        if proc.poll() is not None or time.perf_counter() - t0 > 600:
            raise RuntimeError(f"tokenshapley serve did not start: {log.read_text()[-800:]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cache-dir", default=None, help="model and sentence cache (default: the library's)")
    ap.add_argument("--port", type=int, default=8799)
    ap.add_argument("--conversion", action="store_true", help="also time the first-ever model conversion (empty cache)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    cache = args.cache_dir or os.environ.get("TOKENSHAPLEY_CACHE") or str(Path.home() / ".cache" / "tokenshapley-rag")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for name, text in SOURCES.items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
            files.append(str(Path(tmp) / name))
        attribute = ["attribute", "--query", QUERY, "--source", *files, "--response", ANSWER]
        timed(cli("warmup", "--cache-dir", cache), env)  # model converted, kernels compiled, sentences cached
        timed(cli(*attribute, "--cache-dir", cache), env)
        rows.append(row("`import tokenshapley_rag`", [timed([sys.executable, "-c", "import tokenshapley_rag"], env)[0]
                                                      for _ in range(args.repeats)], 0.5))
        rows.append(row("`tokenshapley --help`", [timed(cli("--help"), env)[0] for _ in range(args.repeats)], None))
        rows.append(row("`tokenshapley attribute` (new process, caches warm)",
                        [timed(cli(*attribute, "--cache-dir", cache), env)[0] for _ in range(args.repeats)], 2.0))
        proc, ready = start_service(cache, args.port, env, Path(tmp) / "serve.log")
        try:
            server = ["--server", f"http://127.0.0.1:{args.port}"]
            rows.append(row("`tokenshapley attribute --server` (a running `tokenshapley serve`)",
                            [timed(cli(*attribute, *server), env)[0] for _ in range(args.repeats)], 2.0,
                            f"the service took {ready:.1f} s to start (model load and warm-up), once"))
        finally:
            proc.terminate()
            proc.wait(30)
        daemon = [*attribute, "--daemon", "--cache-dir", cache]
        try:
            started = timed(cli(*daemon), env)[0]
            rows.append(row("`tokenshapley attribute --daemon` (its service running)",
                            [timed(cli(*daemon), env)[0] for _ in range(args.repeats)], 2.0,
                            f"the first call, which started it, took {started:.1f} s"))
        finally:
            timed(cli("daemon", "stop", "--cache-dir", cache), env)
        first = [json.loads(timed([sys.executable, "-c", FIRST_CALLS, cache, json.dumps(SOURCES), QUERY, ANSWER], env)[1])
                 for _ in range(args.repeats)]
        rows.append(row("model load in a new process (`TokenShapley()`, converted model)", [f["load"] for f in first], None))
        rows.append(row("its first attribution (kernels from `tokenshapley warmup`)", [f["first"] for f in first], 2.0))
        rows.append(row("its second attribution", [f["second"] for f in first], None))
        if args.conversion:
            with tempfile.TemporaryDirectory() as empty:
                code = f"from tokenshapley_rag import TokenShapley\nTokenShapley(cache_dir={empty!r})"
                rows.append(row("first-ever `TokenShapley()` (empty cache: the GGUF converted)", [timed([sys.executable, "-c", code], env)[0]], None))
    print("| step | runs (s) | median (s) | target | verdict | load (1/5/15) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        runs = " / ".join(f"{x:.2f}" for x in r["runs"])
        target = "" if r["target"] is None else f"≤ {r['target']:g} s"
        note = f" ({r['note']})" if r["note"] else ""
        print(f"| {r['step']}{note} | {runs} | {r['median']:.2f} | {target} | {r['verdict']} | {r['load']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
