"""Bounded work (the hardening issue): what one cold ``attribute()`` costs against the size of
its sources, to set ``max_source_chars`` / ``max_context_chars``.

    .venv/bin/python benchmarks/bounds_bench.py 50000            # one 50,000-character source
    .venv/bin/python benchmarks/bounds_bench.py 120000 --sources 12
    for n in 5000 20000 50000 100000 200000; do .venv/bin/python benchmarks/bounds_bench.py $n; done

One process per size (so that each memory peak is its own): the default model is loaded
with the limits lifted and the disk cache off, a tiny attribution warms the compiled
kernels, then one cold ``attribute()`` runs over ``N`` characters of distinct sentences
(nothing cached) and a warm one repeats it. Prints one JSON line: characters, sources,
context tokens, cold wall-clock and CPU seconds, warm seconds, the peak RSS during the cold
call minus the RSS before it (sampled every 50 ms), and the 1-minute load average at the
end. On a shared machine wall-clock seconds follow the load; CPU seconds much less so.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time

CITIES = ["Paris", "Lyon", "Berlin", "Madrid", "Lisbon", "Vienna", "Prague", "Oslo", "Rome", "Dublin", "Warsaw", "Athens"]
WORDS = ["bridge", "tower", "museum", "station", "library", "cathedral", "market", "harbour", "castle", "theatre"]


def sentence(i: int) -> str:
    """The i-th distinct source sentence (a number, a year and a height each)."""
    return (f"The {WORDS[i % 10]} of {CITIES[i % 12]} number {i} was completed in {1700 + (i * 37) % 320} "
            f"and stands {10 + (i * 13) % 490} metres tall, with {i * 7 % 900} visitors a day.")


def make_sources(n_chars: int, n_sources: int) -> list[str]:
    """``n_sources`` sources of about ``n_chars / n_sources`` characters, whole sentences."""
    per, i, out = n_chars // n_sources, 0, []
    for _ in range(n_sources):
        buf = ""
        while len(buf) < per:
            buf += sentence(i) + " "
            i += 1
        out.append(buf[:per].rsplit(". ", 1)[0] + ".")
    return out


def rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chars", type=int, help="total characters of the sources")
    parser.add_argument("--sources", type=int, default=1, help="split them into this many sources (default 1)")
    parser.add_argument("--cache-dir", default=None, help="model cache (default: $TOKENSHAPLEY_CACHE or ~/.cache)")
    args = parser.parse_args()

    from tokenshapley_rag import TokenShapley

    ts = TokenShapley(cache_dir=args.cache_dir, use_disk_cache=False, max_source_chars=None, max_context_chars=None)
    ts.attribute("q?", ["The Eiffel Tower is in Paris. It is 330 metres tall."], "It is 330 metres tall.")
    sources = make_sources(args.chars, args.sources)
    query = "When was it completed?"
    answer = f"The {WORDS[3]} of {CITIES[3]} number 3 was completed in {1700 + 111} and stands {10 + 39} metres tall."

    peak, stop = [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss_kib())
            stop.wait(0.05)

    before = rss_kib()
    sampler = threading.Thread(target=sample)
    sampler.start()
    t0, c0 = time.perf_counter(), time.process_time()
    ts.attribute(query, sources, answer)
    cold, cpu = time.perf_counter() - t0, time.process_time() - c0
    stop.set()
    sampler.join()
    after = max(peak[0], rss_kib())
    t1 = time.perf_counter()
    ts.attribute(query, sources, answer)
    warm = time.perf_counter() - t1
    tokens = sum(len(ts.encoder.tokenize(s).ids) for s in sources)
    print(json.dumps({
        "chars": sum(len(s) for s in sources), "sources": len(sources), "tokens": tokens,
        "cold_s": round(cold, 2), "cpu_s": round(cpu, 1), "warm_s": round(warm, 3),
        "rss_before_mb": round(before / 1024), "growth_mb": round((after - before) / 1024),
        "load_1min": round(os.getloadavg()[0], 1),
    }))


if __name__ == "__main__":
    main()
