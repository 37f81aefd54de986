"""Train the coarse quantiser that the approximate candidate search uses above its size
threshold (``TokenShapley(approximate_above=...)``, docs/method.md §3) and write it next to
the package's data, named after the encoder's cache key.

Training text: the first CNN/DailyMail dev articles (news, none of the evaluation sets'
passages), encoded by the library's own sentence path; the keys are clustered with faiss's
k-means (fixed seed). The centroids ship rounded to float16, so every machine uses the same
bits: the list assignments and the probes are then deterministic (``_quantiser``).

    python benchmarks/train_quantiser.py --data /work/shared/data --tokens 60000 --lists 256
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.environ.get("TOKENSHAPLEY_DATA"))
    ap.add_argument("--tokens", type=int, default=60_000, help="training keys (context tokens)")
    ap.add_argument("--lists", type=int, default=256)
    ap.add_argument("--iterations", type=int, default=25)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--out", default=None, help="default: tokenshapley_rag/data/quantisers/<cache key>.npz")
    args = ap.parse_args(argv)
    if not args.data:
        ap.error("no data folder: give --data PATH (the folder holding the sets' folders, e.g. ../shared/data) "
                 "or set TOKENSHAPLEY_DATA")

    import faiss

    from tokenshapley_rag import TokenShapley
    from tokenshapley_rag._quantiser import quantiser_path

    ts = TokenShapley(cache_dir=args.cache_dir, max_source_chars=None, max_context_chars=None)
    articles = [json.loads(line)["article"] for line in open(Path(args.data) / "cnndm" / "dev.jsonl")]
    chunks, total = [], 0
    for text in articles:
        chunks.append(text)
        total += len(ts.encoder.tokenize(text).ids)
        if total >= args.tokens:
            break
    t0 = time.perf_counter()
    store = ts.build_datastore(chunks)
    keys = np.unique(store.keys, axis=0)  # shared-prefix keys once (the BOS state is in every sentence)
    print(f"{store.size} keys ({len(keys)} distinct) from {len(chunks)} articles in {time.perf_counter() - t0:.0f} s")
    km = faiss.Kmeans(keys.shape[1], args.lists, niter=args.iterations, seed=args.seed, verbose=False)
    km.train(np.ascontiguousarray(keys, dtype=np.float32))
    centroids = km.centroids.astype(np.float16)
    out = Path(args.out) if args.out else quantiser_path(ts.encoder.cache_key)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, centroids=centroids, training_keys=np.array([store.size], dtype=np.int64))
    sizes = np.bincount(km.index.search(keys, 1)[1].ravel(), minlength=args.lists)
    print(f"wrote {out}: {args.lists} lists, sizes min {sizes.min()} median {int(np.median(sizes))} max {sizes.max()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
