"""Each answer sentence's source (``TokenShapley.sentence_sources``, docs/method.md §11) on the
support-sentences check (``tokenshapley eval --dataset support-sentences``): the rule's variants
replayed on one ``attribute()`` per answer, and its warm cost next to ``attribute()``.

``--variants``: every answer of the check is attributed once with the defaults; for each gold
sentence the script keeps each source's span score (§5), the keyword citations inside the
sentence, the sentence game of the sentence (K = 1 and 3, and read with its question) over every
source sentence, and the MiniLM cosines. It prints, per rule, the accuracy on answers 1-30,
31-61 and all: the expectation over tied sources (a sentence tied between ``t`` sources, ``g`` of
them gold, counts ``g / t``), in the check's source order.

``--cost``: the first ``--answers`` answers, each attributed and its sentences sourced once to
warm the datastore and the sentence rows, then twice more, timed, with the answer's own rows
forgotten before each ``sentence_sources`` (a new answer is embedded); torch on ``--threads``.
Prints the medians.

    HF_HUB_OFFLINE=1 python benchmarks/sentence_sources_bench.py --data ../shared/data --variants
    HF_HUB_OFFLINE=1 python benchmarks/sentence_sources_bench.py --data ../shared/data --cost --answers 20
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def _per_source(n_sources, sentence_sources, values, how="sum"):
    out = np.full(n_sources, 0.0 if how == "sum" else -np.inf)
    for j, v in zip(sentence_sources, values):
        out[j] = out[j] + v if how == "sum" else max(out[j], v)
    out[~np.isfinite(out)] = 0.0
    return out


def _expected_accuracy(ids, gold, scores):
    scores = np.asarray(scores, dtype=float)
    top = np.flatnonzero(np.isclose(scores, scores.max(), rtol=0, atol=1e-12))
    return sum(ids[t] in gold for t in top) / len(top)


def _finite(x):
    x = np.asarray(x, dtype=float).copy()
    x[~np.isfinite(x)] = -1e9  # a source that is not a span's candidate ranks last
    return x


def records(ts, examples):
    """One record per gold sentence: what each rule reads (module docstring)."""
    from tokenshapley_rag._sentence_game import sentence_game_values, unit_rows

    embed = ts.pipeline.question_embedder
    out = []
    for n, ex in enumerate(examples):
        res = ts.attribute(query=ex.question, sources=list(ex.sources), response=ex.answer)
        ids = [s.id for s in ex.sources]
        texts = [s.sentence for s in res.sentence_scores]
        where = [ids.index(s.source_id) for s in res.sentence_scores]
        rows = embed(texts)
        for span in ex.spans:
            text = ex.answer[span.start:span.end]
            query, with_question = embed([text]), embed([f"{ex.question} {text}"])
            keyword = dict.fromkeys(ids, 0.0)
            for c in res.citations:
                if span.start <= c.start and c.end <= span.end:
                    for s in c.sources:
                        keyword[s.source_id] += s.score
            span_scores = res.span_scores(span.start, span.end)
            out.append({
                "answer": n, "ids": ids, "gold": set(span.source_ids), "where": where,
                "span_scores": _finite([span_scores[i] for i in ids]), "keywords": np.array([keyword[i] for i in ids]),
                "game": sentence_game_values([text], query, texts, rows),
                "game_k3": sentence_game_values([text], query, texts, rows, k=3),
                "game_question": sentence_game_values([f"{ex.question} {text}"], with_question, texts, rows),
                "cosine": unit_rows(rows) @ unit_rows(query)[0],
            })
    return out


RULES = {
    "span scores (§5), summed over the sentence": lambda r, ps: r["span_scores"],
    "the keywords inside the sentence: their citations summed per source": lambda r, ps: r["keywords"],
    "sentence game, sum per source (shipped)": lambda r, ps: ps(r["game"]),
    "sentence game, best sentence per source": lambda r, ps: ps(r["game"], "max"),
    "sentence game, K = 3, sum": lambda r, ps: ps(r["game_k3"]),
    "sentence game of the sentence read with its question, sum": lambda r, ps: ps(r["game_question"]),
    "span scores + 4 × sentence game (sum)": lambda r, ps: r["span_scores"] + 4 * ps(r["game"]),
    "span scores + 16 × sentence game (sum)": lambda r, ps: r["span_scores"] + 16 * ps(r["game"]),
    "MiniLM cosine, best sentence per source (EmbSim-like)": lambda r, ps: ps(r["cosine"], "max"),
}


def variants(ts, examples, first_half=30):
    recs = records(ts, examples)
    halves = {"1-30": [r for r in recs if r["answer"] < first_half], "31-": [r for r in recs if r["answer"] >= first_half],
              "all": recs}
    print(f"| rule, per source | answers 1–{first_half} ({len(halves['1-30'])}) | answers {first_half + 1}– "
          f"({len(halves['31-'])}) | all ({len(recs)}) |")
    print("|---|---|---|---|")
    for name, rule in RULES.items():
        cells = []
        for part in halves.values():
            accs = [
                _expected_accuracy(r["ids"], r["gold"],
                                   rule(r, lambda v, how="sum", r=r: _per_source(len(r["ids"]), r["where"], v, how)))
                for r in part
            ]
            cells.append(f"{100 * np.mean(accs):.1f}" if accs else "n/a")
        print(f"| {name} | " + " | ".join(cells) + " |")


def _forget(ts, texts):
    """Drop the remembered MiniLM rows of ``texts`` (the answer's sentences), so the timed
    call embeds them as it would a new answer; the source sentences' rows stay remembered,
    as across the calls of a service. (The engine's embedder keeps its rows in a private
    least-recently-used memo; the benchmark reaches into it for this alone.)"""
    memo = ts._evidence_embedder._rows
    with memo._lock:
        for t in texts:
            if t in memo._items:
                del memo._items[t]
                memo._weight -= memo._weights.pop(t)


def cost(ts, examples, threads):
    import torch

    torch.set_num_threads(threads)
    timings = []
    for ex in examples:
        sources = list(ex.sources)
        ts.sentence_sources(ts.attribute(ex.question, sources, ex.answer))  # warm: datastore, sentence rows
        for _ in range(2):
            t0 = time.perf_counter()
            res = ts.attribute(ex.question, sources, ex.answer)
            t1 = time.perf_counter()
            _forget(ts, [v.text for v in res.sentences])
            t2 = time.perf_counter()
            ts.sentence_sources(res)
            t3 = time.perf_counter()
            timings.append((t1 - t0, t3 - t2, len(res.sentences), len(res.sentence_scores)))
    attribute_ms = 1000 * statistics.median(t[0] for t in timings)
    sources_ms = 1000 * statistics.median(t[1] for t in timings)
    print("| calls | answer sentences (median) | source sentences (median) | `attribute()` ms | "
          "`sentence_sources` ms | ratio of medians |")
    print("|---|---|---|---|---|---|")
    print(f"| {len(timings)} | {statistics.median(t[2] for t in timings)} | {statistics.median(t[3] for t in timings)} | "
          f"{attribute_ms:.1f} | {sources_ms:.1f} | {sources_ms / attribute_ms:.2f}× |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None, help="folder holding support/ (default: $TOKENSHAPLEY_DATA)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--variants", action="store_true", help="replay the rule's variants (a table)")
    what.add_argument("--cost", action="store_true", help="time sentence_sources against attribute() (a table)")
    parser.add_argument("--answers", type=int, default=20, help="--cost: the first N answers (default 20)")
    parser.add_argument("--threads", type=int, default=1, help="--cost: torch threads (default 1)")
    args = parser.parse_args(argv)

    from tokenshapley_rag import TokenShapley
    from tokenshapley_rag.benchmark._paraphrase import load_support_sentences_set

    ts = TokenShapley()
    if args.variants:
        variants(ts, load_support_sentences_set(args.data))
    else:
        cost(ts, load_support_sentences_set(args.data, limit=args.answers), args.threads)


if __name__ == "__main__":
    main()
