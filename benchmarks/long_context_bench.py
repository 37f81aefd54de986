"""Long contexts (issue 25, item 1): the warm attribution of a new source list at 16k-128k
context tokens against its own encoder pass, exact search against the approximate search
(``approximate_above``), with the steps that grow with the context; and the agreement of
the approximate search's keyword citations with exact search on QuoteSum and VeriGran dev
answers whose sources are padded with NQ dev passages.

Timing: every repeat runs, in alternating order, ``attribute()`` with the approximate and
with the exact search on the same sources (the sentence keys in the cache's memory tier,
the datastore memo emptied first, so the datastore is rebuilt: a new source list); each
call's own encoder pass is the ``encode_answer`` step inside it. Medians over repeats. The
load average is printed beside every row (the machine may be shared).

Agreement: for each answer the datastore is built once; the token games and citations are
computed with the approximate search and again with the same datastore searched exactly.
A keyword citation agrees when its status, and its cited (source, sentence) pairs, are the
same.

    HF_HUB_OFFLINE=1 python benchmarks/long_context_bench.py --data /work/shared/data \
        --sizes 16384 65536 --search-sizes 8192 16384 65536 --repeats 5 --agreement 0
    HF_HUB_OFFLINE=1 python benchmarks/long_context_bench.py --data /work/shared/data \
        --sizes --search-sizes --agreement 30 --agreement-sizes 16384
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np


def load_avg() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def nq_passages(data: Path) -> list[str]:
    rows = [json.loads(line) for line in open(data / "nq" / "dev.jsonl")]
    seen, out = set(), []
    for ex in rows:
        for s in ex["sources"]:
            text = (s.get("title") or "") + "\n" + s["text"] if s.get("title") else s["text"]
            if text not in seen:
                seen.add(text)
                out.append(text)
    return out


def keep_in_memory(ts, items: int) -> None:
    """Room for ``items`` sentences in the sentence cache's memory tier and the pipeline's
    memos: a long context holds more sentences than their defaults, and a warm rebuild
    should find them all in memory."""
    ts.cache.memory_items = items
    for memo in (ts.pipeline.builder._splits_of_source, ts.pipeline.builder._classes_of_sentence,
                 ts.pipeline._facts_of_sentence):
        memo.size = items


def padded(ts, own: list, pool: list[str], target: int) -> list:
    """``own`` sources, then NQ passages in file order until about ``target`` tokens."""
    from tokenshapley_rag._types import Source

    sources = list(own)
    total = sum(len(ts.encoder.tokenize(s.text).ids) for s in sources)
    for i, text in enumerate(pool):
        n = len(ts.encoder.tokenize(text).ids)
        if total + n > target:
            break
        sources.append(Source(f"nq-{i}", text))
        total += n
    return sources


def timed_attribute(ts, query, sources, answer, approximate_above):
    """One warm ``attribute()`` on a new source list: (seconds, its steps)."""
    from tokenshapley_rag._timing import record_steps

    ts.pipeline.builder._datastores.clear()
    ts.pipeline.builder.approximate_above = approximate_above
    with record_steps() as steps:
        t0 = time.perf_counter()
        ts.attribute(query=query, sources=sources, response=answer)
        seconds = time.perf_counter() - t0
    return seconds, dict(steps.seconds)


def speed_rows(ts, ex, pool, sizes, repeats, threshold):
    from tokenshapley_rag._timing import record_steps

    rows = []
    for size in sizes:
        sources = padded(ts, list(ex.sources), pool, size)
        ts.pipeline.builder.approximate_above = threshold
        t0 = time.perf_counter()
        store = ts.build_datastore(sources)  # cold where the cache lacks sentences; lists assigned
        print(f"  {store.size} context tokens, {len(store.sentences)} sentences, prepared in "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        for mode in (threshold, None):  # compile / warm both paths before timing
            timed_attribute(ts, ex.question, sources, ex.answer, mode)
        runs = {"approximate": [], "exact": [], "pass": []}
        for r in range(repeats):
            order = [("approximate", threshold), ("exact", None)]
            for name, mode in order if r % 2 == 0 else order[::-1]:
                runs[name].append(timed_attribute(ts, ex.question, sources, ex.answer, mode))
            tok = ts.encoder.tokenize(ex.answer)
            with record_steps() as steps:
                from tokenshapley_rag._timing import step

                with step("encode_answer"):
                    ts.encoder.encode_response(ex.question, tok)
            runs["pass"].append(steps.seconds["encode_answer"])
        row = {"tokens": int(store.size), "sentences": len(store.sentences), "load": load_avg(),
               "pass_apart": statistics.median(runs["pass"]), "answer_tokens": int(len(ts.encoder.tokenize(ex.answer).ids))}
        for name in ("approximate", "exact"):
            calls = runs[name]
            med = lambda f: statistics.median(f(c) for c in calls)  # noqa: E731
            row[name] = {
                "total": med(lambda c: c[0]),
                "own_pass": med(lambda c: c[1].get("encode_answer", 0.0)),
                "ratio": med(lambda c: c[0] / c[1]["encode_answer"]),
                "rebuild": med(lambda c: c[1].get("segment", 0.0) + c[1].get("sentence_classes", 0.0) + c[1].get("index", 0.0)),
                "index": med(lambda c: c[1].get("index", 0.0)),
                "search": med(lambda c: c[1].get("candidates", 0.0)),
                "assemble": med(lambda c: c[1].get("assemble", 0.0)),
            }
        rows.append(row)
        a, e = row["approximate"], row["exact"]
        print(f"  {row['tokens']}: approximate {a['total']*1e3:.1f} ms ({a['ratio']:.2f}x its pass), exact "
              f"{e['total']*1e3:.1f} ms ({e['ratio']:.2f}x); search {a['search']*1e3:.1f} vs {e['search']*1e3:.1f} ms; "
              f"load {row['load']}", flush=True)
    return rows


def search_rows(ts, ex, pool, sizes, repeats):
    """The candidate search alone (``Datastore.game_candidates`` of one answer's tokens),
    exact against approximate on the same datastore, interleaved: where the threshold
    goes. Also the share of players that differ."""
    rows = []
    tok = ts.encoder.tokenize(ex.answer)
    states = ts.encoder.encode_response(ex.question, tok)
    classes, pieces = ts.pipeline.classes.of(tok.ids, ex.answer, tok.offsets)
    use_piece = np.zeros(len(classes), dtype=bool)
    n_match = ts.m // 2 if ts.candidates == "mixed" else 0
    for size in sizes:
        sources = padded(ts, list(ex.sources), pool, size)
        ts.pipeline.builder.approximate_above = 0
        store = ts.pipeline.build_datastore(sources)
        stores = {"approximate": store, "exact": store.searched_exactly()}
        times = {"exact": [], "approximate": []}
        results = {}
        for r in range(repeats + 1):
            order = ["approximate", "exact"] if r % 2 == 0 else ["exact", "approximate"]
            for name in order:
                t0 = time.perf_counter()
                results[name] = stores[name].game_candidates(states, classes, ts.m, n_match, use_piece)
                if r:  # the first round compiles and warms up
                    times[name].append(time.perf_counter() - t0)
        same_players = float(np.mean(np.all(np.sort(results["exact"][1], 1) == np.sort(results["approximate"][1], 1), 1)))
        row = {"tokens": int(store.size), "exact": statistics.median(times["exact"]),
               "approximate": statistics.median(times["approximate"]), "same_players": same_players,
               "load": load_avg()}
        rows.append(row)
        print(f"  search @ {row['tokens']}: exact {row['exact']*1e3:.2f} ms, approximate {row['approximate']*1e3:.2f} ms, "
              f"tokens with the same players {100*same_players:.0f}%; load {row['load']}", flush=True)
    return rows


def cold_peak(args) -> dict:
    """One fresh process (run by :func:`cold_peak_rows`): the default TokenShapley, the
    sentence cache in memory only, a cold ``attribute()`` of a QuoteSum dev answer over its
    sources padded with NQ passages, then a warm one on a new source list (the datastore
    memo emptied). Peak = ``ru_maxrss`` after both minus the RSS after loading the model."""
    import resource

    import numba
    import psutil
    import torch

    from tokenshapley_rag import TokenShapley
    from tokenshapley_rag.benchmark import load_dataset

    torch.set_num_threads(args.threads)
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    ts = TokenShapley(use_disk_cache=False, max_source_chars=None, max_context_chars=None)
    keep_in_memory(ts, 1 << 17)
    data = Path(args.data)
    ex = load_dataset("quotesum", data)[0]
    sources = padded(ts, list(ex.sources), nq_passages(data), args.cold_peak)
    ts.attribute(query="q", sources=["A warm-up sentence. Another one."], response="A warm-up.")
    loaded = psutil.Process().memory_info().rss
    t0 = time.perf_counter()
    ts.attribute(query=ex.question, sources=sources, response=ex.answer)
    cold = time.perf_counter() - t0
    warm, steps = timed_attribute(ts, ex.question, sources, ex.answer, ts.approximate_above)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    store = ts.build_datastore(sources)
    return {"tokens": int(store.size), "approximate": bool(store.approximate), "cold": cold, "warm": warm,
            "warm_pass": steps.get("encode_answer", 0.0), "peak_above_loaded": peak - loaded, "loaded": loaded,
            "load": load_avg()}


def citation_keys(res) -> dict:
    """Per keyword: (status, its cited (source, sentence) pairs in order)."""
    return {
        (c.text, c.start): (c.status, tuple((s.source_id, s.sentence_index) for s in c.sources))
        for c in res.citations
    }


def best(value):
    """(status, the first cited (source, sentence)): the citation a reader sees first."""
    return value[0], value[1][:1]


def agreement(ts, examples, pool, size, threshold):
    """Per keyword: whether the approximate search's citation (status, cited sources and
    their sentences) equals exact search's, over the same datastore."""
    same = same_best = same_status = total = answers = 0
    for ex in examples:
        sources = padded(ts, list(ex.sources), pool, size)
        ts.pipeline.builder.approximate_above = threshold
        store = ts.pipeline.build_datastore(sources)
        if not store.approximate:
            continue
        tok = ts.encoder.tokenize(ex.answer)
        states = ts.encoder.encode_response(ex.question, tok)
        got = citation_keys(ts.pipeline.attribute(ex.question, ex.answer, sources, store, tok, states, ts.config))
        exact = store.searched_exactly()  # the same datastore, every entry searched
        want = citation_keys(ts.pipeline.attribute(ex.question, ex.answer, sources, exact, tok, states, ts.config))
        answers += 1
        for key, value in want.items():
            total += 1
            same += got.get(key) == value
            same_best += key in got and best(got[key]) == best(value)
            same_status += got.get(key, (None,))[0] == value[0]
    return {"answers": answers, "keywords": total, "same": same, "same_best": same_best, "same_status": same_status,
            "best_share": same_best / total if total else float("nan"),
            "share": same / total if total else float("nan"), "status_share": same_status / total if total else float("nan")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.environ.get("TOKENSHAPLEY_DATA"))
    ap.add_argument("--sizes", type=int, nargs="*", default=[16384, 65536])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--agreement", type=int, default=40, help="answers per set and size (0: skip)")
    ap.add_argument("--agreement-sizes", type=int, nargs="+", default=None)
    ap.add_argument("--search-sizes", type=int, nargs="*", default=[2048, 4096, 8192, 16384, 32768, 65536])
    ap.add_argument("--threshold", type=int, default=8192,
                    help="approximate_above of the approximate rows (default 8192: below every size measured, so "
                         "the 16k rows are approximate too; the library's default is DEFAULT_APPROXIMATE_ABOVE)")
    ap.add_argument("--probes", type=int, default=None, help="lists probed per token (default: the library's)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--cold-peak", type=int, default=None, help="context tokens: run the cold/peak-memory "
                    "measurement alone (one fresh process per size) and print it as JSON")
    args = ap.parse_args(argv)
    if not args.data:
        ap.error("no data folder: give --data PATH (the folder holding the sets' folders, e.g. ../shared/data) "
                 "or set TOKENSHAPLEY_DATA")
    if args.cold_peak:
        print("COLD_PEAK " + json.dumps(cold_peak(args)), flush=True)
        return 0

    import numba
    import torch

    from tokenshapley_rag import TokenShapley
    from tokenshapley_rag._defaults import DEFAULT_APPROXIMATE_ABOVE
    from tokenshapley_rag import _indexing

    if args.probes is not None:
        _indexing.PROBES = args.probes
    PROBES = _indexing.PROBES
    from tokenshapley_rag.benchmark import load_dataset

    torch.set_num_threads(args.threads)
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    threshold = args.threshold
    # The approximate rows need the quantiser, which the default (exact search) does not load.
    ts = TokenShapley(cache_dir=args.cache_dir, max_source_chars=None, max_context_chars=None,
                      approximate_above=threshold)
    keep_in_memory(ts, 1 << 16)
    data = Path(args.data)
    pool = nq_passages(data)
    quotesum = load_dataset("quotesum", data)
    verigran = load_dataset("verigran", data)
    out: dict = {"threshold": threshold, "default_threshold": DEFAULT_APPROXIMATE_ABOVE, "probes": PROBES, "lists": ts.pipeline.builder.quantiser.n_lists,
                 "load_start": load_avg()}
    print(f"approximate_above={threshold}, {PROBES} of {out['lists']} lists probed; load {out['load_start']}", flush=True)

    print("== candidate search alone, exact vs approximate (same datastore, interleaved)", flush=True)
    out["search"] = search_rows(ts, quotesum[0], pool, args.search_sizes, args.repeats)
    print("== warm attribution, new source list (QuoteSum dev answer 1 + NQ dev passages)", flush=True)
    out["speed"] = speed_rows(ts, quotesum[0], pool, args.sizes, args.repeats, threshold)

    out["agreement"] = []
    if args.agreement:
        for size in args.agreement_sizes or args.sizes:
            for name, examples in (("quotesum", quotesum), ("verigran", verigran)):
                chosen = [ex for ex in examples if ex.answer.strip()][: args.agreement]
                t0 = time.perf_counter()
                agree = agreement(ts, chosen, pool, size, threshold)
                agree.update(set=name, size=size, seconds=time.perf_counter() - t0, load=load_avg())
                out["agreement"].append(agree)
                print(f"  {name} @ {size}: {agree['same_best']}/{agree['keywords']} keyword citations with the same "
                      f"status and first (source, sentence) ({100 * agree['best_share']:.2f}%), all cited sources "
                      f"{100 * agree['share']:.2f}%, status {100 * agree['status_share']:.2f}%, "
                      f"{agree['answers']} answers; load {agree['load']}", flush=True)
    out["load_end"] = load_avg()
    print_tables(out)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


def print_tables(out: dict) -> None:
    ms = lambda x: f"{1e3 * x:.1f}"  # noqa: E731
    if out.get("search"):
        print("\n| context tokens | exact search (ms) | approximate search (ms) | speed-up | answer tokens with the same players | load (1/5/15) |")
        print("|---|---|---|---|---|---|")
        for r in out["search"]:
            print(f"| {r['tokens']:,} | {1e3 * r['exact']:.2f} | {1e3 * r['approximate']:.2f} | "
                  f"{r['exact'] / r['approximate']:.2f}x | {100 * r['same_players']:.0f}% | {r['load']} |")
    print("\n| context tokens | sentences | search | warm attribute (ms) | its encoder pass (ms) | ratio | "
          "· rebuild (segment + classes + index) | · index | · candidate search | · assemble | load (1/5/15) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in out["speed"]:
        for name in ("exact", "approximate"):
            x = r[name]
            print(f"| {r['tokens']:,} | {r['sentences']:,} | {name} | {ms(x['total'])} | {ms(x['own_pass'])} | "
                  f"{x['ratio']:.2f}x | {ms(x['rebuild'])} | {ms(x['index'])} | {ms(x['search'])} | "
                  f"{ms(x['assemble'])} | {r['load']} |")
    if out["agreement"]:
        print(f"\n{out['probes']} of {out['lists']} lists probed per answer token.\n")
        print("| set | context tokens | answers | keyword citations | same status and first (source, sentence) | "
              "same status and every cited (source, sentence) | same status | load (1/5/15) |")
        print("|---|---|---|---|---|---|---|---|")
        for a in out["agreement"]:
            print(f"| {a['set']} | {a['size']:,} | {a['answers']} | {a['keywords']} | "
                  f"{a['same_best']} ({100 * a['best_share']:.2f}%) | {a['same']} ({100 * a['share']:.2f}%) | "
                  f"{100 * a['status_share']:.2f}% | {a['load']} |")


if __name__ == "__main__":
    raise SystemExit(main())
