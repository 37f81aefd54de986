"""The span rule at several weights on the same attributions, with the order control of
``tokenshapley eval`` (the runner's own rows and metric): each example, and each of its 3
permuted source orders, is attributed once; every weight's span scores are read off that one
result (``--span-rule sentence-game --span-weight W``; weight 0 is the shipped context game).
Writes one JSONL of runner rows per weight (resumable) and prints the runner's metrics per
weight, over all answers and over the first and second half of the set.

    python benchmarks/span_rule_eval.py verigran out/span-rule-verigran 0 0.5 4
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

from tokenshapley_rag import TokenShapley
from tokenshapley_rag.benchmark._data import load_dataset
from tokenshapley_rag.benchmark._methods import TokenShapleyAttributor
from tokenshapley_rag.benchmark._metrics import SOURCE_PERMUTATION_SEEDS
from tokenshapley_rag.benchmark._runner import _metrics, _score_example


class _Shared(TokenShapleyAttributor):
    """The attributor with one weight, sharing its results and embeddings with the others."""

    def __init__(self, ts, cache, weight, embedder_of):
        super().__init__(ts, span_rule="sentence-game" if weight else "context", span_weight=weight or 1.0)
        self._cache, self._embedder_of = cache, embedder_of

    def _embed(self, texts):
        return self._embedder_of(texts)

    def score_spans(self, example):
        key = tuple(s.id for s in example.sources)
        ts = self.ts
        if key not in self._cache:
            self._cache[key] = ts.attribute(query=example.question, sources=example.sources, response=example.answer)
        res = self._cache[key]
        self.ts = type("Memo", (), {"attribute": lambda _self, **_: res, "config": ts.config, "loaded": None})()
        try:
            return super().score_spans(example)
        finally:
            self.ts = ts


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    dataset, out, weights = argv[0], Path(argv[1]), [float(w) for w in argv[2:]] or [0.0]
    out.mkdir(parents=True, exist_ok=True)
    every = load_dataset(dataset, os.environ.get("TOKENSHAPLEY_DATA"))
    examples = [(n, e) for n, e in enumerate(every) if e.spans]  # n: the statement's place in the file
    ts = TokenShapley()
    holder = TokenShapleyAttributor(ts)
    cache: dict = {}
    attributors = {w: _Shared(ts, cache, w, holder._embed) for w in weights}
    files = {w: out / f"w{w:g}.jsonl" for w in weights}
    done = {w: {json.loads(line)["id"] for line in open(f)} if f.exists() else set() for w, f in files.items()}
    for n, ex in examples:
        cache.clear()
        for w in weights:
            if ex.id in done[w]:
                continue
            row = _score_example(attributors[w], ex, SOURCE_PERMUTATION_SEEDS)
            row["n"] = n
            with open(files[w], "a") as fh:
                fh.write(json.dumps(row) + "\n")
        print(n, ex.id, flush=True)
    half = len(every) // 2  # the first half of the file chose, the second checks
    for w in weights:
        rows = [json.loads(line) for line in open(files[w])]
        for name, part in (("all", rows), ("first half", [r for r in rows if r["n"] < half]),
                           ("second half", [r for r in rows if r["n"] >= half])):
            m = _metrics(part, len(SOURCE_PERMUTATION_SEEDS))
            pc = {k: (v["n"], round(100 * v["accuracy_order_controlled"], 1) if v["n"] else None) for k, v in m["per_class"].items()}
            print(f"w={w:g} {name}: answers {m['n_answers']} spans {m['n_spans']} acc {100 * m['accuracy']:.2f} "
                  f"OC {100 * m['accuracy_order_controlled']:.2f} per class OC {pc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
