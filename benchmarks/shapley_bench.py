"""Throughput of the exact KNN-Shapley engine (issue 3).

Prints a markdown table for K in {1, 3, 5} x M in {10, 30, 100, 1000}, T = 2000 rows of
random similarities (uniform [0, 1), 30% matches), on one numba thread and on all threads,
and the brute-force oracle's time per row where enumerating 2^M coalitions is feasible
(M = 10), with the largest absolute difference between the two. A cell whose run would
exceed ``--budget`` seconds runs as many rows as fit and extrapolates to T (marked "est.").

Run: ``python benchmarks/shapley_bench.py [--rows 2000] [--budget 20] [--out docs/reports/shapley_benchmark_table.md]``
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time

import numba
import numpy as np

from tokenshapley_rag.shapley import knn_shapley_batch, knn_shapley_brute_force

# Above this many prefix sets per row (C(M, K-1)) not even one row fits in a budget; the
# cell is extrapolated from the measured cost per prefix of the previous cell instead.
MAX_PREFIXES_PER_ROW = 5e7

TARGETS = {(1, 1000): (2000, 1.0), (5, 10): (2000, 1.0), (3, 30): (200, 3.0)}


def time_engine(sims, matches, k, budget):
    """Seconds for all rows, extrapolated from a prefix of rows if the budget would be exceeded."""
    knn_shapley_batch(sims[:2], matches[:2], k)  # compile / warm
    rows = sims.shape[0]
    done, elapsed, chunk = 0, 0.0, 1
    while done < rows:
        n = min(chunk, rows - done)
        t0 = time.perf_counter()
        knn_shapley_batch(sims[done : done + n], matches[done : done + n], k)
        elapsed += time.perf_counter() - t0
        done += n
        if elapsed > budget and done < rows:
            return elapsed * rows / done, done
        chunk *= 2
    return elapsed, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--budget", type=float, default=20.0, help="seconds per cell before extrapolating")
    ap.add_argument("--out", default=None, help="also write the table (markdown) to this file")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    lines = [
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, numba {numba.__version__}, "
        f"T = {args.rows} rows, sims ~ U[0,1), 30% matches, weighted votes.",
        "",
        "| K | M | 1 thread (s) | all threads (s) | rows/s (1 thread) | brute force s/row | max abs diff vs brute force | target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    all_threads = numba.config.NUMBA_NUM_THREADS
    for k in (1, 3, 5):
        per_prefix = None
        for m in (10, 30, 100, 1000):
            prefixes = sum(math.comb(m, q) for q in range(k)) * math.log2(m)
            if prefixes > MAX_PREFIXES_PER_ROW and per_prefix is not None:
                est = per_prefix * prefixes * args.rows
                row = (
                    f"| {k} | {m} | {est:,.0f} (est. from prefix count) | {est / all_threads:,.0f} (est.) | "
                    f"{args.rows / est:.2g} | n/a | n/a | |"
                )
                lines.append(row)
                print(row, flush=True)
                continue
            sims = rng.random((args.rows, m))
            matches = rng.random((args.rows, m)) < 0.3
            numba.set_num_threads(1)
            t1, done1 = time_engine(sims, matches, k, args.budget)
            per_prefix = t1 / args.rows / prefixes
            numba.set_num_threads(all_threads)
            tn, donen = time_engine(sims, matches, k, args.budget)
            brute, diff = "n/a (2^M too many)", "n/a"
            if m <= 12:
                n_check = 20
                t0 = time.perf_counter()
                ref = np.stack([knn_shapley_brute_force(sims[i], matches[i], k) for i in range(n_check)])
                brute = f"{(time.perf_counter() - t0) / n_check:.4f}"
                diff = f"{np.abs(ref - knn_shapley_batch(sims[:n_check], matches[:n_check], k)).max():.1e}"
            target = ""
            if (k, m) in TARGETS:
                rows_t, limit = TARGETS[(k, m)]
                t_target = t1 * rows_t / args.rows
                target = f"T={rows_t}: {t_target:.3f} s vs < {limit:g} s: {'met' if t_target < limit else 'MISSED'}"
            est1 = "" if done1 == args.rows else f" (est. from {done1} rows)"
            estn = "" if donen == args.rows else f" (est. from {donen} rows)"
            row = (
                f"| {k} | {m} | {t1:.4f}{est1} | {tn:.4f}{estn} | {args.rows / t1:,.0f} | {brute} | {diff} | {target} |"
            )
            lines.append(row)
            print(row, flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
