"""Attribution cost (issue 8): where the time of one ``attribute()`` goes, against the floors.

    .venv/bin/python benchmarks/attribution_bench.py                  # a few minutes
    .venv/bin/python benchmarks/attribution_bench.py --limit 6 --repeats 3 --cc-limit 3 \\
        --contexts 1024 4096 16384 --answer-lengths 16 128 512 --bf16-accuracy 40 \\
        --out perf-report.md --plot perf.png   # then merge into docs/reports/performance.md by hand

What it measures, all in one process (except memory), interleaved per repeat so that the
ratios compare calls made under the same machine load:

* **Per answer** (QuoteSum dev by default, ``--dataset nq`` also works): the steps of
  :meth:`TokenShapley.attribute` timed by the library's own step marks (datastore
  build with a cold sentence cache (fresh folder, class memo cleared), with a warm
  in-memory cache and with a warm on-disk cache (LRU and class memo cleared), answer
  encoding, neighbour search, Shapley, aggregation, rendering); next to (a) one forward
  pass of the same model over query + sources + answer (the RAG prompt in the chat
  template, logits for one position: the floor), (b) greedy generation of an answer of the
  same length, (c) ContextCite with beta = 8 and 64 (``_model_baselines``, one call per
  example) and the reference ``context-cite`` package (beta = 8, first ``--reference-cc``
  examples); and the same cold / warm calls with ``TokenShapley(dtype="bfloat16")`` next to
  its own bf16 encoder pass and bf16 LM forward. QuoteSum span accuracy (original source
  order) for TokenShapley (both dtypes) and every ContextCite on the same examples.
* **Scaling** with context length (NQ dev sources concatenated until the context holds N
  datastore tokens; the query and an extractive answer from the first question) and with
  answer length (16 ... 512 answer tokens over a 2k-token context). The model's
  8192-token cap limits one sequence only: the datastore is built per sentence, so 16k
  context tokens are fine for TokenShapley, while the LM floor and ContextCite cannot see
  them in one prompt (n/a).
* **Memory**: one subprocess per configuration; the peak RSS (psutil sampled every 2 ms,
  and ``ru_maxrss``) during the call minus the RSS before it, after the model is loaded and
  warmed up, with packed (shipped) and padded (``pack_tokens=None``, previous) encoding.
  Datastore bytes per context token on disk (file sizes and allocated blocks) and in
  memory (the Datastore's arrays; the LRU's float16 copies and the token-class memo).
* **Speed-ups, previous vs shipped** (commit 9192d80; ``--no-speedups`` skips), interleaved
  where the previous path is still reachable: padded vs packed sentence encoding
  (``encoder.pack_tokens = None``), faiss ``IndexFlatL2`` on the same keys vs
  ``Datastore.nearest``, numba's parallel vs the serial Shapley rows (``_PARALLEL_WORK``
  patched), ``_token_classes`` per sentence vs the memo, float32 vs bfloat16 encoding, and
  span accuracy on the first ``--bf16-accuracy`` QuoteSum answers (padded float32, packed
  float32, packed bfloat16).

Timing rules: ``torch.set_num_threads(--threads)`` (2 by default) and the same count for
numba and faiss; the load average (``os.getloadavg``) is printed with every table. The
targets are printed as measured ratios with MET / NOT MET; they are regression guards to
read, never timed tests. Run it against a fixed core (``PYTHONPATH=<worktree>``): the
report records which package it imported and at which commit.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import math
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")  # the context-cite package wraps its loop in tqdm

import numpy as np

from tokenshapley_rag._timing import record_steps, step  # no torch: the timing marks only

ROOT = Path(__file__).resolve().parents[1]
TMP_ROOT = Path(tempfile.gettempdir()) / "tokenshapley-attribution-bench"

# Targets of issue 8.
WARM_TARGET = 1.1  # warm attribution / one encoder pass over query + answer
COLD_TARGET = 1.2  # cold attribution / one LM forward over query + sources + answer
CC_SPEEDUP_TARGET = 10.0  # ContextCite beta=64 time / TokenShapley time

# Steps of one attribution, as the library marks them (tokenshapley_rag._timing.STEPS) and
# as this benchmark's tables name them. Datastore build (prefix cold_/warm_/disk_):
DATASTORE_STEP_NAMES = {"segment": "segment", "encode_context": "encode", "store_keys": "store",
                        "sentence_classes": "classes", "index": "index"}
DATASTORE_STEPS = tuple(DATASTORE_STEP_NAMES.values())
# Answer side: tokenize + encode_response, then pipeline.attribute = score_tokens + assemble_citations.
DATASTORE_LABELS = {"segment": "sentence split, cache lookups, tokenizing cache misses (DatastoreBuilder.sentences)",
                    "encode": "sentence encoding (encode_before, packed)",
                    "store": "cache writes (SentenceCache.put)", "classes": "token classes (DatastoreBuilder.sentence_classes, memoised)",
                    "index": "Datastore(...) (concat, prefix keys, key norms)", "other": "rest"}
GROUPS = ("answer encoding", "neighbour search", "Shapley", "aggregation")
SUBSTEPS = {
    "neighbour search": (("classes_answer", "answer token classes"),
                         ("search_core", "distance matrix (Datastore._partial_distances, one matmul)"),
                         ("search_rest", "compiled scan: both candidate lists + carrying sentences")),
    "Shapley": (("shapley_rest", "similarities, exact Shapley values, sums per sentence (one compiled pass per token)"),),
}


# =============================================================================== setup


def setup_threads(n: int) -> None:
    import faiss
    import numba
    import torch

    torch.set_num_threads(n)
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    faiss.omp_set_num_threads(n)


def load_avg() -> str:
    a, b, c = os.getloadavg()
    return f"{a:.2f} / {b:.2f} / {c:.2f}"


def machine() -> dict:
    import faiss
    import torch
    import transformers

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        import psutil

        mem = f"{psutil.virtual_memory().total / 2**30:.0f} GiB RAM"
    except ImportError:
        pass
    return {
        "cpu": cpu, "cores": os.cpu_count(), "memory": mem, "python": platform.python_version(),
        "torch": torch.__version__, "transformers": transformers.__version__, "faiss": faiss.__version__,
        "numpy": np.__version__,
    }


class Steps:
    """Accumulates wall-clock seconds per named step."""

    def __init__(self) -> None:
        self.t: dict[str, float] = defaultdict(float)

    @contextlib.contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.t[name] += time.perf_counter() - t0


def fresh_dir() -> Path:
    TMP_ROOT.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=TMP_ROOT, prefix="cache-"))


def forget_memos(ts) -> None:
    """Empty what a TokenShapley remembers in memory besides the sentence cache: token
    classes, source splits (8aac79c and later) and datastores (6539c13 and later); since
    the module split they are the pipeline's."""
    pipeline = getattr(ts, "pipeline", None)
    if pipeline is not None:
        pipeline.forget()
        return
    for name in ("_classes_of_sentence", "_splits_of_source", "_datastores"):
        memo = getattr(ts, name, None)
        if memo is not None:
            memo.clear()


def warm_parallel_kernels(ts) -> None:
    """One tiny attribution with every compiled step forced onto numba's threads: the
    parallel kernels a large context switches to are loaded (or, in a fresh checkout,
    compiled: seconds) before any timing, not inside the first large row."""
    import tokenshapley_rag._datastore as datastore
    import tokenshapley_rag._token_game as token_game

    saved = datastore._PARALLEL_CELLS, token_game._PARALLEL_WORK
    datastore._PARALLEL_CELLS, token_game._PARALLEL_WORK = 0, 0
    try:
        forget_memos(ts)
        ts.attribute(query="q", sources=["A warm-up sentence. Another one."], response="A warm-up.")
    finally:
        datastore._PARALLEL_CELLS, token_game._PARALLEL_WORK = saved
        forget_memos(ts)


def reset_cache(ts, root) -> None:
    """A new sentence cache at ``root`` (None: memory only) and empty memos: the next
    build is cold."""
    from tokenshapley_rag._sentence_cache import SentenceCache

    ts.cache = SentenceCache(root)
    if hasattr(ts, "pipeline"):
        ts.pipeline.builder.cache = ts.cache
    forget_memos(ts)


def core_info() -> dict:
    """Which tokenshapley_rag this process imported, and its commit (dirty if its package
    files differ from it)."""
    import tokenshapley_rag

    pkg = Path(tokenshapley_rag.__file__).resolve().parent
    git = lambda *a: subprocess.run(["git", "-C", str(pkg.parent), *a], capture_output=True, text=True).stdout.strip()  # noqa: E731
    return {"path": str(pkg), "commit": git("rev-parse", "--short", "HEAD") or "?",
            "dirty": bool(git("status", "--porcelain", "--", str(pkg)))}


def dir_bytes(path: Path) -> tuple[int, int]:
    """(sum of file sizes, allocated bytes) under ``path``."""
    size = alloc = 0
    for p in path.rglob("*"):
        if p.is_file():
            st = p.stat()
            size += st.st_size
            alloc += st.st_blocks * 512
    return size, alloc


# ============================================================= probes on the library's own calls


def probed_build_datastore(ts, srcs, st: Steps, prefix: str):
    """``ts.build_datastore(srcs)`` with its steps timed by the library's own step marks
    (``tokenshapley_rag._timing``)."""
    with st(prefix + "total"), record_steps() as steps:
        store = ts.build_datastore(srcs)
    for step_name, label in DATASTORE_STEP_NAMES.items():
        st.t[prefix + label] += steps.seconds.get(step_name, 0.0)
    return store


def probed_result(ts, query, response, srcs, store, resp, queries, st: Steps):
    """``ts.pipeline.attribute(...)`` (scores, then assembly) with its steps timed."""
    with st("result_total"), record_steps() as steps:
        res = ts.pipeline.attribute(query, response, srcs, store, resp, queries, ts.config)
    g = steps.seconds.get
    st.t["classes_answer"] += g("answer_classes", 0.0)
    st.t["candidates"] += g("candidates", 0.0)
    st.t["search_core"] += g("distance_product", 0.0)
    st.t["scores_total"] += g("answer_classes", 0.0) + g("candidates", 0.0) + g("games", 0.0)
    st.t["aggregate"] += g("assemble", 0.0)
    return res


# ============================================================================== floors


class Bench:
    """The model, the encoder and helpers shared by every measurement."""

    def __init__(self, threads: int, dtype: str = "float32") -> None:
        from tokenshapley_rag import TokenShapley
        from tokenshapley_rag.benchmark._lm import ResponseLM

        setup_threads(threads)
        self.threads = threads
        self.ts = TokenShapley(dtype=dtype)
        self.loaded = self.ts.loaded
        self.lm = ResponseLM(self.loaded, memo_size=0)

    # -- inputs of the floors (built outside the timed region)
    def encoder_ids(self, query, resp):
        enc = self.ts.encoder
        prompt = enc.prompt_ids(query)
        return np.concatenate([prompt, resp.ids[:-1]]) if len(resp.ids) else prompt

    def rag_ids(self, query, sources, answer):
        prompt = self.lm.prompt(query, list(sources))
        rids, _ = self.lm.response_tokens(answer)
        return prompt.ids, np.concatenate([prompt.ids, rids])

    def encoder_forward(self, ids) -> None:
        import torch

        x = torch.as_tensor(ids, dtype=torch.long)[None, :]
        self.ts.encoder._states(x, torch.ones_like(x))

    def lm_forward(self, ids) -> None:
        """One forward pass of the whole model, logits for the last position only."""
        import torch

        x = torch.as_tensor(ids, dtype=torch.long)[None, :]
        with torch.inference_mode():
            self.loaded.model(input_ids=x, attention_mask=torch.ones_like(x), use_cache=False, logits_to_keep=1)

    def generate(self, prompt_ids, n_new: int) -> int:
        import torch

        tok = self.loaded.tokenizer
        x = torch.as_tensor(prompt_ids, dtype=torch.long)[None, :]
        with torch.inference_mode():
            out = self.loaded.model.generate(
                x, attention_mask=torch.ones_like(x), min_new_tokens=n_new, max_new_tokens=n_new, do_sample=False,
                pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
            )
        return int(out.shape[1] - x.shape[1])


def measure_case(b: Bench, query, sources, answer, *, lm_floor=True, generate=False, api=False, b16: Bench | None = None,
                 rng: random.Random | None = None) -> tuple[dict, dict]:
    """One repeat of every step for one (query, sources, answer). Returns (seconds, facts)."""
    from tokenshapley_rag._sources import coerce_sources

    ts = b.ts
    st = Steps()
    facts: dict = {}
    cold_dir = fresh_dir()
    try:
        srcs = coerce_sources(sources)
        reset_cache(ts, cold_dir)
        store = probed_build_datastore(ts, srcs, st, "cold_")
        facts["disk_bytes"], facts["disk_alloc"] = dir_bytes(cold_dir)
        store = probed_build_datastore(ts, srcs, st, "warm_")
        ts.cache._memory.clear()
        forget_memos(ts)
        store = probed_build_datastore(ts, srcs, st, "disk_")
        with st("encode_answer"), record_steps() as answer_steps:
            resp = ts.encoder.tokenize(answer)
            with step("encode_answer"):  # the pass itself (query + answer), as attribute() marks it
                queries = ts.encoder.encode_response(query, resp)
        st.t["answer_pass"] += answer_steps.seconds["encode_answer"]
        res = probed_result(ts, query, answer, srcs, store, resp, queries, st)
        with st("render"):
            res.to_markdown()
            res.to_html()
        facts.update(context_tokens=int(store.size), answer_tokens=int(len(resp.ids)),
                     sentences=len(store.sentences), memory_bytes=datastore_memory(store),
                     lru_bytes=sum(e.keys.nbytes + e.ids.nbytes + e.offsets.nbytes for e in ts.cache._memory.values())
                     + sum(a.nbytes for pair in ts.pipeline.builder._classes_of_sentence.values() for a in pair))
    finally:
        shutil.rmtree(cold_dir, ignore_errors=True)

    # Independent blocks, in a shuffled order per repeat.
    enc_ids = b.encoder_ids(query, resp)
    prompt_ids, rag_ids = b.rag_ids(query, sources, answer)
    facts["rag_tokens"] = int(len(rag_ids))
    facts["encoder_tokens"] = int(len(enc_ids))
    fits = len(rag_ids) <= b.loaded.max_length
    blocks = [("encoder_forward", lambda: b.encoder_forward(enc_ids))]
    if lm_floor and fits:
        blocks.append(("lm_forward", lambda: b.lm_forward(rag_ids)))
    if generate and len(prompt_ids) + len(resp.ids) <= b.loaded.max_length:
        blocks.append(("generate", lambda: facts.__setitem__("generated", b.generate(prompt_ids, len(resp.ids)))))
    if api:
        blocks.append(("api", lambda: api_calls(ts, query, sources, answer, st, "api_", facts, "result", own_pass=True)))
    if b16 is not None:
        def bf16_calls():
            api_calls(b16.ts, query, sources, answer, st, "bf16_", facts, "bf16_result", own_pass=True)
            if lm_floor and fits:
                with st("bf16_lm_forward"):
                    b16.lm_forward(rag_ids)
        blocks.append(("bf16", bf16_calls))
    (rng or random.Random(0)).shuffle(blocks)
    for name, fn in blocks:
        if name in ("api", "bf16"):
            fn()
        else:
            with st(name):
                fn()
    reset_cache(ts, None)
    return dict(st.t), facts


def api_calls(ts, query, sources, answer, st: Steps, prefix: str, facts: dict, key: str, own_pass: bool = False) -> None:
    """``attribute()`` end to end: cold (fresh cache folder); warm with the datastore
    remembered (the same sources again, ``<prefix>warm``); and warm for a new source list
    (``<prefix>warm_new``: the datastore memo emptied, so the datastore is rebuilt from
    the sentence cache's memory tier, as for chunks seen before in other combinations).
    With ``own_pass`` each warm call's encoder pass is read from the library's step marks
    (``<prefix>answer_pass``, ``<prefix>warm_new_pass``), so the ratio is to the pass inside
    that same call."""
    reset_cache(ts, fresh_dir())
    try:
        with st(prefix + "cold"):
            ts.attribute(query=query, sources=sources, response=answer)
        for label, pass_label in (("warm", "answer_pass"), ("warm_new", "warm_new_pass")):
            if label == "warm_new":
                ts.pipeline.builder._datastores.clear()
            with st(prefix + label), record_steps() as steps:
                result = ts.attribute(query=query, sources=sources, response=answer)
            if own_pass:
                st.t[prefix + pass_label] += steps.seconds["encode_answer"]
            if label == "warm":
                facts[key] = result
    finally:
        shutil.rmtree(ts.cache.root, ignore_errors=True)
        reset_cache(ts, None)


def datastore_memory(store) -> int:
    """Bytes of the Datastore's arrays (keys, their norms, ids, classes, provenance)."""
    return int(sum(v.nbytes for v in vars(store).values() if isinstance(v, np.ndarray)))


def totals(t: dict) -> dict:
    """Per-repeat totals from the inclusive probe times: cold / warm (memory) / warm (disk)
    attribution, and the exclusive seconds of each group and sub-step."""
    g = lambda k: t.get(k, 0.0)  # noqa: E731
    out = dict(t)
    search = g("classes_answer") + g("candidates")
    out["search_rest"] = g("candidates") - g("search_core")
    out["shapley_rest"] = g("scores_total") - search
    out["answer encoding"] = g("encode_answer")
    out["neighbour search"] = search
    out["Shapley"] = g("scores_total") - search
    out["aggregation"] = g("result_total") - g("scores_total")
    answer = g("encode_answer") + g("result_total")
    for p in ("cold", "warm", "disk"):
        out[f"{p}_datastore"] = g(p + "_total")
        out[f"{p}_other"] = g(p + "_total") - sum(out.get(f"{p}_{s}", 0.0) for s in DATASTORE_STEPS)
        out[f"{p}_total"] = g(p + "_total") + answer
    return out


def median_of(reps: list[dict], key: str) -> float | None:
    vals = [r[key] for r in reps if key in r and r[key] is not None]
    return statistics.median(vals) if vals else None


def ratio_median(reps: list[dict], num: str, den: str) -> float | None:
    vals = [r[num] / r[den] for r in reps if r.get(num) is not None and r.get(den)]
    return statistics.median(vals) if vals else None


# ========================================================================= ContextCite


def contextcite_ours(b: Bench, ex, beta: int) -> tuple[float, np.ndarray]:
    from tokenshapley_rag.benchmark._model_baselines import ContextCiteAttributor
    from tokenshapley_rag.benchmark._lm import ResponseLM

    cc = ContextCiteAttributor(ResponseLM(b.loaded, memo_size=0), beta=beta)
    t0 = time.perf_counter()
    scores = cc.score_spans(ex)
    return time.perf_counter() - t0, scores


def import_context_cite():
    """The reference package with the two offline fixes (shared with check_contextcite.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from check_contextcite import _import_context_cite

    return _import_context_cite()


def contextcite_reference(b: Bench, ex, beta: int) -> tuple[float, np.ndarray | None, str]:
    """The package's ContextCiter on the same model and answer; span scores per source."""
    import logging

    ContextCiter = import_context_cite()
    logging.getLogger("ContextCite").setLevel(logging.ERROR)
    context = "\n\n".join(s.text for s in ex.sources)
    starts, at = [], 0
    for s in ex.sources:
        starts.append(at)
        at += len(s.text) + 2
    t0 = time.perf_counter()
    cc = ContextCiter(b.loaded.model, b.loaded.tokenizer, context, ex.question, num_ablations=beta)
    _, prompt = cc._get_prompt_ids(return_prompt=True)
    cc._cache["output"] = prompt + ex.answer  # the answer is given, not generated
    note = ""
    if cc.response != ex.answer:
        note = "package's response differs from the answer after re-tokenization"
    parts, cursor, src_of = cc.partitioner.parts, 0, []
    for p in parts:
        pos = context.find(p, cursor)
        cursor = pos + len(p)
        src_of.append(int(np.searchsorted(starts, pos, side="right") - 1))
    rows = []
    for span in ex.spans:
        w = np.asarray(cc.get_attributions(span.start, span.end, verbose=False), dtype=np.float64)
        rows.append(np.bincount(src_of, weights=w, minlength=len(ex.sources)))
    return time.perf_counter() - t0, np.asarray(rows), note


def span_hits(ex, rows) -> list[bool]:
    from tokenshapley_rag.benchmark import span_correct

    # -inf marks a source that is no candidate for the span (verbatim rule): lowest score
    rows = np.nan_to_num(np.asarray(rows, dtype=np.float64), nan=-1e300, neginf=-1e300, posinf=1e300)
    return [span_correct(r, ex.gold_indices(s)) for r, s in zip(rows, ex.spans)]


def ts_rows(res, ex) -> np.ndarray:
    ids = [s.id for s in ex.sources]
    return np.asarray([[res.span_scores(s.start, s.end)[i] for i in ids] for s in ex.spans]).reshape(len(ex.spans), len(ids))


# ============================================================================ scaling data


def scaling_case(b: Bench, n_tokens: int):
    """(query, sources, answer) with about ``n_tokens`` datastore tokens: NQ dev sources of
    consecutive questions, in file order, the last source cut at a sentence end; the query is
    the first question and the answer two sentences of its gold passage (extractive)."""
    from tokenshapley_rag._segment import split_sentences
    from tokenshapley_rag._types import Source
    from tokenshapley_rag.benchmark import load_dataset

    nq = load_dataset("nq", limit=60)
    first = nq[0]
    gold = first.sources[first.source_index(first.spans[0].source_ids[0])]
    sents = split_sentences(gold.text)
    at = first.meta["answer_char_spans_in_gold"][0][0] + gold.metadata["text_offset"]
    hold = next((i for i, (a, e) in enumerate(sents) if a <= at < e), 0)
    answer = " ".join(gold.text[a:e] for a, e in sents[hold: hold + 2]).replace("\n", " ")
    sources, total = [], 0
    for qi, ex in enumerate(nq):
        for s in ex.sources:
            n = sentence_tokens(b, s.text)
            if total + n <= n_tokens:
                sources.append(Source(f"{qi}-{s.id}", s.text))
                total += n
                continue
            kept_end = 0
            for a, e in split_sentences(s.text):
                m = sentence_tokens(b, s.text[:e])
                if total + m > n_tokens:
                    break
                kept_end = e
            if kept_end:
                sources.append(Source(f"{qi}-{s.id}", s.text[:kept_end]))
            return first.question, sources, answer
    return first.question, sources, answer


def sentence_tokens(b: Bench, text: str) -> int:
    from tokenshapley_rag._types import Source

    recs, entries, toks = b.ts.pipeline.builder.sentences([Source("x", text)])
    return sum(len((e or t or b.ts.encoder.tokenize(r.text)).ids) for r, e, t in zip(recs, entries, toks))


def answer_of_length(b: Bench, sources, n_tokens: int) -> str:
    """The first ``n_tokens`` tokens of the sources' text (sentences joined): an extractive answer."""
    from tokenshapley_rag._segment import split_sentences

    text = ""
    for s in sources:
        for a, e in split_sentences(s.text):
            text = (text + " " + s.text[a:e].replace("\n", " ")).strip()
            tok = b.ts.encoder.tokenize(text)
            if len(tok.ids) >= n_tokens:
                return text[: int(tok.offsets[n_tokens - 1, 1])]
    return text


# ============================================================================== memory


def child_main(spec: dict) -> None:
    """Run one configuration and print its memory figures as JSON (subprocess)."""
    import psutil

    b = Bench(spec["threads"])
    proc = psutil.Process()
    query, sources, answer = scaling_case(b, spec["n"])
    if spec["kind"] == "ts-cold-padded":  # the previous encoding: length-sorted padded batches
        b.ts.encoder.pack_tokens = None
    # warm-up on a tiny input: numba and torch kernels loaded outside the measurement
    reset_cache(b.ts, None)
    b.ts.attribute(query="q", sources=["A warm-up sentence. Another one."], response="A warm-up.")
    warm_parallel_kernels(b.ts)
    b.lm_forward(np.arange(8))
    reset_cache(b.ts, None)
    gc.collect()
    rss0 = proc.memory_info().rss
    maxrss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    peak = [rss0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.002)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out: dict = {"kind": spec["kind"], "n": spec["n"]}
    t0 = time.perf_counter()
    if spec["kind"] in ("ts-cold", "ts-cold-padded"):
        res = b.ts.attribute(query=query, sources=sources, response=answer)
        out["context_tokens"] = int(sum(len(e.ids) for e in b.ts.cache._memory.values()))
        del res
    elif spec["kind"] == "lm-forward":
        _, ids = b.rag_ids(query, sources, answer)
        out["prompt_tokens"] = int(len(ids))
        b.lm_forward(ids)
    elif spec["kind"] == "contextcite-b8":
        from tokenshapley_rag.benchmark._model_baselines import ContextCiteAttributor
        from tokenshapley_rag.benchmark._lm import ResponseLM
        from tokenshapley_rag.benchmark._sentences import sentence_units

        cc = ContextCiteAttributor(ResponseLM(b.loaded, memo_size=0), beta=8)
        cc.score_sentences(query, sources, answer, sentence_units(sources))
    out["seconds"] = time.perf_counter() - t0
    stop.set()
    th.join()
    peak[0] = max(peak[0], proc.memory_info().rss)
    out["rss_before"] = rss0
    out["peak_delta"] = peak[0] - rss0
    out["retained_delta"] = proc.memory_info().rss - rss0
    out["maxrss_delta"] = max(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - maxrss0)
    print("CHILD-RESULT " + json.dumps(out), flush=True)


def run_child(spec: dict) -> dict | None:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    for line in proc.stdout.splitlines():
        if line.startswith("CHILD-RESULT "):
            return json.loads(line[len("CHILD-RESULT "):])
    print(f"  memory child {spec} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
    return None


# ===================================================================== speed-ups (9192d80)


def padded_tokens(enc, token_lists) -> int:
    """Tokens (padding included) that the padded, length-sorted batches run."""
    order = sorted(len(t) for t in token_lists if len(t))
    total, batch = 0, []
    for n in order:
        if batch and (len(batch) + 1) * n > enc.max_batch_tokens:
            total += len(batch) * batch[-1]
            batch = []
        batch.append(n)
    return total + (len(batch) * batch[-1] if batch else 0)


def timeit_interleaved(fns: dict, repeats: int) -> dict:
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


@contextlib.contextmanager
def patched(obj, name: str, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def run_speedups(b: Bench, b16: Bench | None, examples, scale_cases: dict, args) -> list[dict]:
    """Previous vs shipped code paths of 9192d80, interleaved. Rows {name, where, previous,
    shipped, speedup, note}."""
    import faiss

    import tokenshapley_rag.shapley as shapley

    ts, enc = b.ts, b.ts.encoder
    rows: list[dict] = []
    reps = args.speedup_repeats

    def row(name, where, prev, new, note=""):
        rows.append({"name": name, "where": where, "previous": prev, "shipped": new,
                     "speedup": prev / new if new > 0 else float("inf"), "note": note})
        print(f"  {name} [{where}]: {fmt_s(prev)} -> {fmt_s(new)} ({prev / max(new, 1e-12):.2f}x) {note}", flush=True)

    def sentence_lists(sources):
        recs, _, _ = ts.pipeline.builder.sentences(sources)
        return [enc.tokenize(r.text).ids for r in recs]

    def padded(e, tl):
        with patched(e, "pack_tokens", None):
            return e.encode_before(tl)

    reset_cache(ts, None)
    ex = examples[0]
    mid_n = min(scale_cases, key=lambda n: abs(n - 4096))
    # 1. sentence encoding: padded batches vs packed rows; float32 vs bfloat16 (packed)
    for label, srcs in [(f"{args.dataset} ex. 1 context", list(ex.sources)), (f"{mid_n}-token context", scale_cases[mid_n][1])]:
        tl = sentence_lists(srcs)
        ref, new = padded(enc, tl), enc.encode_before(tl)
        err = max(float(np.abs(a - p).max()) for a, p in zip(ref, new))
        scale = max(float(np.abs(a).max()) for a in ref)
        fns = {"padded": lambda: padded(enc, tl), "packed": lambda: enc.encode_before(tl)}
        if b16 is not None:
            fns["bf16"] = lambda: b16.ts.encoder.encode_before(tl)
        t = timeit_interleaved(fns, reps)
        row("encode_before: padded batches → packed rows (pack_tokens=256)", label, t["padded"], t["packed"],
            f"{sum(len(x) for x in tl)} tokens in {len(tl)} sentences, {padded_tokens(enc, tl)} with padding; max |key diff| "
            f"{err:.1e} (keys up to {scale:.0f}, stored as fp16)")
        if b16 is not None:
            row("encode_before: float32 → bfloat16 (dtype='bfloat16', both packed)", label, t["packed"], t["bf16"])
    if b16 is not None:
        resp = enc.tokenize(ex.answer)
        t = timeit_interleaved({"f32": lambda: enc.encode_response(ex.question, resp),
                                "bf16": lambda: b16.ts.encoder.encode_response(ex.question, resp)}, reps)
        row("encode_response: float32 → bfloat16", f"{args.dataset} ex. 1 answer ({len(resp.ids)} tokens)", t["f32"], t["bf16"])

    # 2. neighbour search: faiss IndexFlatL2 on the same keys vs Datastore.nearest
    big_n = max(scale_cases)
    q_big, s_big, _ = scale_cases[big_n]
    cases = [(ts.build_datastore(list(ex.sources)), ex.question, ex.answer, f"{args.dataset} ex. 1")]
    big_store = ts.build_datastore(s_big)
    cases += [(big_store, q_big, answer_of_length(b, s_big, n_q), f"{big_n}-token context") for n_q in (64, 512)]
    for store, q, a, label in cases:
        r = enc.tokenize(a)
        qs = np.ascontiguousarray(enc.encode_response(q, r), dtype=np.float32)
        t0 = time.perf_counter()
        index = faiss.IndexFlatL2(store.keys.shape[1])
        index.add(store.keys)
        t_add = time.perf_counter() - t0
        d_f, i_f = index.search(qs, ts.m)
        d_n, i_n = store.nearest(qs, ts.m)
        same = float(np.mean([set(x) == set(y) for x, y in zip(i_f.tolist(), i_n.tolist())]))
        same_d = float(np.mean(np.isclose(np.maximum(d_f, 0), d_n, rtol=1e-3, atol=1e-2).all(axis=1)))
        t = timeit_interleaved({"faiss": lambda: index.search(qs, ts.m), "exact": lambda: store.nearest(qs, ts.m)}, max(reps, 5))
        row("search: faiss IndexFlatL2.search → Datastore.nearest (one matmul per block + topk)",
            f"{store.size} entries, T={len(qs)}", t["faiss"], t["exact"],
            f"same {ts.m} neighbours for {100 * same:.0f}% of tokens, same distances for {100 * same_d:.0f}%; faiss also spent {fmt_s(t_add)} on add() and "
            f"{store.size * store.keys.shape[1] * 4 / 2**20:.1f} MiB on its copy of the keys")
        del index

    # 2b. the games' candidates: class masks + the two masked/unmasked top-m lists merged in
    # numpy + sentences_holding (previous, still Datastore's mask API) vs game_candidates'
    # one compiled scan per row (shipped)
    for store, q, a, label in cases:
        r = enc.tokenize(a)
        qs = np.ascontiguousarray(enc.encode_response(q, r), dtype=np.float32)
        classes, _ = ts.pipeline.classes.of(r.ids, a, r.offsets)
        m = min(ts.m, store.size)

        def previous():
            mask = store.class_mask(classes)
            return (*store.mixed_nearest(qs, m, m // 2, mask), store.sentences_holding(classes, mask=mask))

        def shipped():
            return store.game_candidates(qs, classes, m, m // 2)

        (d_p, i_p, c_p), (d_s, i_s, c_s) = previous(), shipped()
        same = float(np.mean((i_p == i_s).all(axis=1)))
        t = timeit_interleaved({"previous": previous, "shipped": shipped}, max(reps, 5))
        row("games' candidates: class masks + mixed_nearest + sentences_holding → Datastore.game_candidates (compiled scan)",
            f"{store.size} entries, T={len(qs)}", t["previous"], t["shipped"],
            f"same players in the same order for {100 * same:.0f}% of tokens; same distances: {bool((d_p == d_s).all())}; "
            f"same carrying sentences: {bool((c_p == c_s).all())}")

    # 3. Shapley: numba's thread pool always (previous) vs serial below _PARALLEL_WORK
    rng = np.random.default_rng(0)
    for n_rows in (len(enc.tokenize(ex.answer).ids), 512, 40_000):
        sims, matches = rng.random((n_rows, ts.m)), rng.random((n_rows, ts.m)) < 0.3
        f = lambda: shapley.knn_shapley_batch(sims, matches, ts.k)  # noqa: E731

        def forced(work):
            def g():
                with patched(shapley, "_PARALLEL_WORK", work):
                    f()
            return g

        t = timeit_interleaved({"parallel": forced(0), "serial": forced(float("inf")), "shipped": f}, max(reps, 7))
        work = n_rows * ts.m * math.comb(ts.m, min(ts.k, ts.m) - 1)
        shipped = "parallel" if work >= shapley._PARALLEL_WORK else "serial"
        row(f"knn_shapley_batch: numba parallel → {shipped} (shipped choice, threshold {shapley._PARALLEL_WORK} cells)",
            f"T={n_rows}, M={ts.m}, K={ts.k}", t["parallel"], t["shipped"], f"serial forced: {fmt_s(t['serial'])}")

    # 4. warm build: token classes per sentence (previous) vs the memo (shipped)
    recs, entries, _ = ts.pipeline.builder.sentences(s_big)
    for r, e in zip(recs, entries):
        ts.pipeline.builder.sentence_classes(r.text, e)
    t = timeit_interleaved({"prev": lambda: [ts.pipeline.classes.of(e.ids, r.text, e.offsets) for r, e in zip(recs, entries)],
                            "memo": lambda: [ts.pipeline.builder.sentence_classes(r.text, e) for r, e in zip(recs, entries)]}, reps)
    row("warm build: _token_classes per sentence → memo (_sentence_classes)", f"{big_store.size} entries", t["prev"], t["memo"])
    reset_cache(ts, None)
    return rows


def profile_attribute(b: Bench, query, sources, answer, cases=("cold", "warm")) -> dict:
    """cProfile of a cold and a warm attribute() call: the 15 functions with the most own time."""
    import cProfile
    import io
    import pstats

    out = {}
    reset_cache(b.ts, fresh_dir())
    try:
        for name in ("cold", "warm"):
            pr = cProfile.Profile()
            pr.enable()
            b.ts.attribute(query=query, sources=sources, response=answer)
            pr.disable()
            if name in cases:
                buf = io.StringIO()
                pstats.Stats(pr, stream=buf).strip_dirs().sort_stats("tottime").print_stats(15)
                text = buf.getvalue()
                out[name] = text[text.find("ncalls"):].rstrip()
    finally:
        shutil.rmtree(b.ts.cache.root, ignore_errors=True)
        reset_cache(b.ts, None)
    return out


def bf16_accuracy(b: Bench, b16: Bench, n: int) -> dict:
    """Span accuracy (original order) on the first ``n`` QuoteSum answers: float32 with the
    previous padded encoding, float32 packed, bfloat16 packed (cold, memory-only cache)."""
    from tokenshapley_rag.benchmark import load_dataset

    arms = {"float32, padded (previous)": (b.ts, None), "float32, packed (shipped)": (b.ts, b.ts.encoder.pack_tokens),
            "bfloat16, packed (dtype='bfloat16')": (b16.ts, b16.ts.encoder.pack_tokens)}
    hits = {k: [] for k in arms}
    secs = {k: 0.0 for k in arms}
    examples = [e for e in load_dataset("quotesum", limit=n) if e.spans]
    for ex in examples:
        for name, (ts, pack) in arms.items():
            reset_cache(ts, None)
            with patched(ts.encoder, "pack_tokens", pack):
                t0 = time.perf_counter()
                res = ts.attribute(query=ex.question, sources=ex.sources, response=ex.answer)
                secs[name] += time.perf_counter() - t0
            hits[name].extend(span_hits(ex, ts_rows(res, ex)))
    reset_cache(b.ts, None)
    reset_cache(b16.ts, None)
    ref = np.array(hits["float32, packed (shipped)"])
    return {"answers": len(examples), "spans": len(ref), "seconds": secs,
            "acc": {k: float(np.mean(v)) for k, v in hits.items()},
            "agree": {k: float(np.mean(np.array(v) == ref)) for k, v in hits.items()}}


# ============================================================================== report


def fmt_s(x: float | None) -> str:
    if x is None:
        return "n/a"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    if x >= 0.01:
        return f"{x:.3f}"
    return f"{x * 1e3:.2f} ms"


def fmt_r(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}×"


def md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def linear_fit(x, y):
    x, y = np.asarray(x, float), np.asarray(y, float)
    A = np.vstack([x, np.ones_like(x)]).T
    (slope, icpt), *_ = np.linalg.lstsq(A, y, rcond=None)
    pred = A @ np.array([slope, icpt])
    ss = ((y - y.mean()) ** 2).sum()
    r2 = 1 - ((y - pred) ** 2).sum() / ss if ss > 0 else 1.0
    return float(slope), float(icpt), float(r2)


def make_plot(path: Path, data: dict, per: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mean, scale, alen, mem, speedups = per["mean"], data["scale"], data["alen"], data["mem"], data["speedups"]
    fig, ax = plt.subplots(2, 3, figsize=(19, 10.5))
    # (1) per answer totals against the floors, log scale
    a = ax[0, 0]
    bars = [("TokenShapley, cold", mean.get("cold_total"), "#4c72b0"), ("TokenShapley, warm (memory)", mean.get("warm_total"), "#4c72b0"),
            ("TokenShapley, warm (disk)", mean.get("disk_total"), "#4c72b0"),
            ("its encoder pass (query + answer)", mean.get("answer_pass"), "#999999"),
            ("encoder pass timed apart", mean.get("encoder_forward"), "#999999"),
            ("LM forward (query + sources + answer)", mean.get("lm_forward"), "#999999"),
            ("greedy generation, same length", mean.get("generate"), "#dd8452"),
            ("TokenShapley bf16, cold", mean.get("bf16_cold"), "#55a868"), ("TokenShapley bf16, warm", mean.get("bf16_warm"), "#55a868"),
            ("its bf16 encoder pass", mean.get("bf16_answer_pass"), "#999999"),
            ("LM forward, bf16", mean.get("bf16_lm_forward"), "#999999")]
    for beta, v in sorted(per.get("contextcite", {}).items()):
        bars.append((f"ContextCite β={beta} (ours)", v, "#c44e52"))
    if per.get("reference") is not None:
        bars.append(("context-cite package β=8", per["reference"], "#c44e52"))
    bars = [x for x in bars if x[1]]
    y = np.arange(len(bars))[::-1]
    a.barh(y, [v for _, v, _ in bars], color=[c for _, _, c in bars])
    for yy, (_, v, _) in zip(y, bars):
        a.text(v * 1.08, yy, fmt_s(v) + ("" if v < 0.01 else " s"), va="center", fontsize=7)
    a.set_yticks(y, [n for n, _, _ in bars], fontsize=8)
    a.set_xscale("log")
    a.set_xlabel("seconds per answer (median over repeats, mean over answers)")
    a.set_title(f"Per answer: {per['n']} {per['dataset']} dev answers")
    # (2) shares of each step
    a = ax[0, 1]
    parts = [("datastore", "#4c72b0"), ("answer encoding", "#55a868"), ("neighbour search", "#c44e52"), ("Shapley", "#8172b2"),
             ("aggregation", "#ccb974")]
    for i, p in enumerate(("cold", "warm", "disk")):
        tot = mean[f"{p}_total"]
        left = 0.0
        for name, c in parts:
            v = (mean[f"{p}_datastore"] if name == "datastore" else mean[name]) / tot * 100
            a.barh(2 - i, v, left=left, color=c, label=name if i == 0 else None)
            if v > 4:
                a.text(left + v / 2, 2 - i, f"{v:.0f}%", ha="center", va="center", fontsize=7, color="white")
            left += v
    a.set_yticks([2, 1, 0], ["cold", "warm (memory)", "warm (disk)"])
    a.set_xlabel("% of the attribution's time")
    a.set_title("Where the time goes")
    a.legend(fontsize=7, loc="lower right")
    # (3) context scaling, (4) answer length
    curves = (("cold_total", "TokenShapley cold", "o-"), ("warm_total", "TokenShapley warm (memory)", "s-"),
              ("answer_pass", "its encoder pass (query + answer)", "^:"), ("lm_forward", "LM forward (query + sources + answer)", "v--"))
    for a, rows, xkey, title in ((ax[0, 2], scale, "tokens", "Scaling with context length"),
                                 (ax[1, 0], alen, "answer_tokens", "Scaling with answer length")):
        for key, lab, st in curves:
            pts = [(r[xkey], r["med"].get(key)) for r in rows if r["med"].get(key)]
            if pts:
                a.plot(*zip(*pts), st, label=lab)
        a.set_xscale("log", base=2)
        a.set_yscale("log")
        a.set_ylabel("seconds")
        a.set_xlabel("context tokens (datastore entries)" if xkey == "tokens" else
                     f"answer tokens ({rows[0]['context_tokens'] if rows else '?'} context tokens)")
        a.set_title(title)
        a.legend(fontsize=7)
    # (5) memory
    a = ax[1, 1]
    for kind, lab, st in (("ts-cold", "TokenShapley cold (packed encoding, shipped)", "o-"),
                          ("ts-cold-padded", "TokenShapley cold, padded encoding (previous)", "d-"),
                          ("lm-forward", "LM forward", "v--"), ("contextcite-b8", "ContextCite β=8", "x")):
        pts = sorted((m.get("context_tokens", m["n"]), m["peak_delta"] / 2**20) for m in mem if m and m["kind"] == kind)
        if pts:
            a.plot(*zip(*pts), st, label=lab)
    ds = [(r["tokens"], (r["facts"]["memory_bytes"] + r["facts"]["lru_bytes"]) / 2**20) for r in scale]
    if ds:
        a.plot(*zip(*ds), "k:", label="Datastore + LRU bytes (computed)")
    a.set_xlabel("context tokens")
    a.set_ylabel("peak RSS − RSS before (MiB)")
    a.set_title("Peak memory, one subprocess per point")
    a.legend(fontsize=7)
    # (6) previous vs shipped
    a = ax[1, 2]
    pr = [p for p in speedups if p.get("speedup")]
    if pr:
        y = np.arange(len(pr))[::-1]
        a.barh(y, [p["speedup"] for p in pr], color=["#55a868" if p["speedup"] >= 1 else "#c44e52" for p in pr])
        a.set_yticks(y, [(p["name"].split(" (")[0][:46] + " | " + p["where"][:24]) for p in pr], fontsize=6)
        a.axvline(1, color="k", lw=0.8)
        a.set_xscale("log")
        a.set_xlabel("speed-up (previous / shipped time)")
        a.set_title("Speed-ups of 9192d80, interleaved")
    fig.suptitle(f"TokenShapley attribution cost — {data['machine']['cpu']}, {data['machine']['cores']} cores, "
                 f"{data['args']['threads']} threads, load {data['loads']['start']} (start) … {data['loads']['end']} (end)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ================================================================================ main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", choices=["quotesum", "nq"], default="quotesum")
    ap.add_argument("--limit", type=int, default=3, help="answers for the per-answer table and ContextCite")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats per answer")
    ap.add_argument("--generate-repeats", type=int, default=1, help="repeats that also time generation (slow)")
    ap.add_argument("--betas", type=int, nargs="*", default=[8, 64], help="ContextCite (ours) ablation counts")
    ap.add_argument("--cc-limit", type=int, default=1, help="answers (of --limit) that ContextCite runs on")
    ap.add_argument("--reference-cc", type=int, default=2, help="answers for the context-cite package (beta 8); 0 skips")
    ap.add_argument("--reference-beta", type=int, default=8)
    ap.add_argument("--contexts", type=int, nargs="*", default=[1024, 4096, 16384])
    ap.add_argument("--answer-lengths", type=int, nargs="*", default=[16, 64, 256, 512])
    ap.add_argument("--answer-context", type=int, default=2048)
    ap.add_argument("--scale-repeats", type=int, default=2)
    ap.add_argument("--speedup-repeats", type=int, default=5, help="interleaved repeats of each previous-vs-shipped pair")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--no-speedups", action="store_true", help="skip the previous-vs-shipped measurements")
    ap.add_argument("--no-bf16", action="store_true", help="skip TokenShapley(dtype='bfloat16') everywhere")
    ap.add_argument("--bf16-accuracy", type=int, default=0,
                    help="QuoteSum answers for the padded / packed / bfloat16 span accuracy (0 skips)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--profile", action="store_true",
                    help="cProfile a cold and a warm attribute() and a warm one on the biggest context (top functions in the report)")
    ap.add_argument("--out", default=None, help="write the report (markdown) here (a scratch file: docs/reports/performance.md is edited by hand)")
    ap.add_argument("--plot", default=None, help="write the figure (PNG) here, e.g. docs/performance.png")
    ap.add_argument("--json", default=None, help="also dump every measurement as JSON")
    ap.add_argument("--from-json", default=None, help="rebuild the report and plot from a --json dump (no measuring)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child_main(json.loads(args.child))
        return 0
    if args.from_json:
        render(json.loads(Path(args.from_json).read_text(encoding="utf-8")), args.out, args.plot)
        return 0

    t_start = time.time()
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_start = load_avg()
    core = core_info()
    print(f"load average at start: {load_start}; tokenshapley_rag from {core['path']} at {core['commit']}"
          f"{' (modified)' if core['dirty'] else ''}", flush=True)
    b = Bench(args.threads)
    b16 = None if args.no_bf16 else Bench(args.threads, dtype="bfloat16")
    from tokenshapley_rag.benchmark import load_dataset

    examples = [e for e in load_dataset(args.dataset, limit=args.limit) if e.spans]
    rng = random.Random(0)
    # warm-up (numba cache, kernels, the packing check) of both dtypes
    measure_case(b, examples[0].question, examples[0].sources, examples[0].answer, b16=b16, rng=rng)
    warm_parallel_kernels(b.ts)

    # ---------------------------------------------------------------- per answer
    print(f"\n== per answer: {len(examples)} {args.dataset} answers x {args.repeats} repeats", flush=True)
    per_rows = []
    for ex in examples:
        reps, facts = [], {}
        for _ in range(args.repeats):
            t, facts = measure_case(b, ex.question, ex.sources, ex.answer, generate=len(reps) < args.generate_repeats,
                                    api=True, b16=b16, rng=rng)
            reps.append(totals(t))
        res, res16 = facts.pop("result"), facts.pop("bf16_result", None)
        per_rows.append({"id": ex.id, "reps": reps, "facts": facts, "ts_hits": span_hits(ex, ts_rows(res, ex)),
                         "bf16_hits": span_hits(ex, ts_rows(res16, ex)) if res16 is not None else None,
                         "med": {k: median_of(reps, k) for k in set().union(*reps)}})
        m = per_rows[-1]["med"]
        print(f"  {ex.id}: ctx {facts['context_tokens']} tok, answer {facts['answer_tokens']} tok | cold {fmt_s(m['cold_total'])} "
              f"warm {fmt_s(m['warm_total'])} disk {fmt_s(m['disk_total'])} | enc pass {fmt_s(m['encoder_forward'])} "
              f"LM fwd {fmt_s(m.get('lm_forward'))} gen {fmt_s(m.get('generate'))} | bf16 cold {fmt_s(m.get('bf16_cold'))} "
              f"warm {fmt_s(m.get('bf16_warm'))} pass {fmt_s(m.get('bf16_answer_pass'))} LM fwd {fmt_s(m.get('bf16_lm_forward'))} "
              f"| load {load_avg()}", flush=True)
    load_per = load_avg()

    # ContextCite, one call per answer and beta, each next to a TokenShapley cold call for a local ratio
    cc_rows = {beta: [] for beta in args.betas}

    def cold_seconds(ts, ex):
        reset_cache(ts, fresh_dir())
        t0 = time.perf_counter()
        ts.attribute(query=ex.question, sources=ex.sources, response=ex.answer)
        t = time.perf_counter() - t0
        shutil.rmtree(ts.cache.root, ignore_errors=True)
        reset_cache(ts, None)
        return t

    for ex in examples[: args.cc_limit]:
        for beta in args.betas:
            t_ts = cold_seconds(b.ts, ex)
            t16 = cold_seconds(b16.ts, ex) if b16 is not None else None
            secs, rows = contextcite_ours(b, ex, beta)
            cc_rows[beta].append({"id": ex.id, "seconds": secs, "ts_cold_adjacent": t_ts, "bf16_cold_adjacent": t16,
                                  "hits": span_hits(ex, rows)})
            print(f"  ContextCite (ours) beta={beta} {ex.id}: {fmt_s(secs)} (TokenShapley cold next to it {fmt_s(t_ts)}, "
                  f"bf16 {fmt_s(t16)}) load {load_avg()}", flush=True)
    ref_rows = []
    if args.reference_cc:
        try:
            import_context_cite()
            for ex in examples[: args.reference_cc]:
                secs, rows, note = contextcite_reference(b, ex, args.reference_beta)
                ref_rows.append({"id": ex.id, "seconds": secs, "hits": span_hits(ex, rows), "note": note})
                print(f"  context-cite package beta={args.reference_beta} {ex.id}: {fmt_s(secs)} {note}", flush=True)
        except Exception as err:  # the package is optional
            print(f"  context-cite package not run: {type(err).__name__}: {err}", flush=True)
            ref_rows = [{"error": f"{type(err).__name__}: {err}"}]
    load_cc = load_avg()

    # ---------------------------------------------------------------- scaling
    scale_cases = {n: scaling_case(b, n) for n in sorted(set(args.contexts) | {args.answer_context})}
    scale = []
    print(f"\n== context scaling ({args.scale_repeats} repeats)", flush=True)
    for n in sorted(args.contexts):
        q, s, a = scale_cases[n]
        reps, facts = [], {}
        for _ in range(args.scale_repeats):
            t, facts = measure_case(b, q, s, a, rng=rng)
            reps.append(totals(t))
        med = {k: median_of(reps, k) for k in set().union(*reps)}
        scale.append({"n": n, "tokens": facts["context_tokens"], "facts": facts, "reps": reps, "med": med,
                      "cold_lm": ratio_median(reps, "cold_total", "lm_forward"),
                      "warm_enc": ratio_median(reps, "warm_total", "encoder_forward"),
                      "warm_pass": ratio_median(reps, "warm_total", "answer_pass"),
                      "load": load_avg()})
        print(f"  {facts['context_tokens']} ctx tokens ({facts['sentences']} sentences), answer {facts['answer_tokens']}: "
              f"cold {fmt_s(med['cold_total'])} (encode {fmt_s(med.get('cold_encode'))}) warm {fmt_s(med['warm_total'])} "
              f"disk {fmt_s(med['disk_total'])} | enc pass {fmt_s(med['encoder_forward'])} LM fwd {fmt_s(med.get('lm_forward'))} "
              f"| disk {facts['disk_bytes'] / facts['context_tokens']:.0f} B/tok mem {facts['memory_bytes'] / facts['context_tokens']:.0f} B/tok "
              f"| load {load_avg()}", flush=True)
    alen = []
    print(f"\n== answer length ({args.answer_context}-token context)", flush=True)
    q, s, _ = scale_cases[args.answer_context]
    for n in args.answer_lengths:
        a = answer_of_length(b, s, n)
        reps, facts = [], {}
        for _ in range(args.scale_repeats):
            t, facts = measure_case(b, q, s, a, rng=rng)
            reps.append(totals(t))
        med = {k: median_of(reps, k) for k in set().union(*reps)}
        alen.append({"n": n, "answer_tokens": facts["answer_tokens"], "context_tokens": facts["context_tokens"], "reps": reps,
                     "med": med, "cold_lm": ratio_median(reps, "cold_total", "lm_forward"),
                     "warm_enc": ratio_median(reps, "warm_total", "encoder_forward"),
                     "warm_pass": ratio_median(reps, "warm_total", "answer_pass"), "load": load_avg()})
        print(f"  answer {facts['answer_tokens']} tok: cold {fmt_s(med['cold_total'])} warm {fmt_s(med['warm_total'])} "
              f"| enc pass {fmt_s(med['encoder_forward'])} LM fwd {fmt_s(med.get('lm_forward'))} | search "
              f"{fmt_s(med['neighbour search'])} Shapley {fmt_s(med['Shapley'])} aggr {fmt_s(med['aggregation'])} | load {load_avg()}", flush=True)

    profiles = {}
    if args.profile:
        ex = examples[0]
        big_n = max(args.contexts)
        profiles = {f"{k} `attribute()` ({ex.id})": v for k, v in profile_attribute(b, ex.question, ex.sources, ex.answer).items()}
        profiles.update({f"warm `attribute()` ({scale[-1]['tokens']} context tokens, {scale[-1]['facts']['answer_tokens']}-token answer)": v
                         for v in profile_attribute(b, *scale_cases[big_n], cases=("warm",)).values()})
        for k, v in profiles.items():
            print(f"\n== cProfile, {k}\n{v}", flush=True)

    # ---------------------------------------------------------------- previous vs shipped
    speedups: list[dict] = []
    if not args.no_speedups:
        print("\n== speed-ups of 9192d80 (previous -> shipped, interleaved)", flush=True)
        speedups = run_speedups(b, b16, examples, scale_cases, args)
    load_speedups = load_avg()
    bf16 = None
    if args.bf16_accuracy and b16 is not None:
        print(f"\n== padded / packed / bfloat16 span accuracy, first {args.bf16_accuracy} quotesum answers", flush=True)
        bf16 = bf16_accuracy(b, b16, args.bf16_accuracy)
        print(f"  {bf16}", flush=True)

    # ---------------------------------------------------------------- memory (subprocesses)
    mem: list[dict] = []
    if not args.no_memory:
        print("\n== memory (one subprocess per configuration)", flush=True)
        specs = [{"kind": "ts-cold", "n": n} for n in sorted(args.contexts)]
        specs += [{"kind": "ts-cold-padded", "n": n} for n in sorted(args.contexts)]
        specs += [{"kind": "lm-forward", "n": n} for n in sorted(args.contexts) if n <= 8192 - 256]
        specs += [{"kind": "contextcite-b8", "n": min(args.contexts)}]
        for spec in specs:
            spec["threads"] = args.threads
            r = run_child(spec)
            if r:
                mem.append(r)
                print(f"  {r['kind']} n={r['n']}: peak {r['peak_delta'] / 2**20:.1f} MiB over {r['rss_before'] / 2**20:.0f} MiB "
                      f"(maxrss delta {r['maxrss_delta'] / 2**20:.1f} MiB, retained {r['retained_delta'] / 2**20:.1f} MiB) "
                      f"in {r['seconds']:.1f} s", flush=True)

    data = {
        "cmd": "python benchmarks/attribution_bench.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "date": started,
        "elapsed": time.time() - t_start, "args": vars(args), "core": core,
        "machine": machine(), "info": model_info(b),
        "loads": {"start": load_start, "per_answer": load_per, "contextcite": load_cc, "speedups": load_speedups,
                  "end": load_avg()},
        "per": per_rows, "cc": {str(k): v for k, v in cc_rows.items()}, "ref": ref_rows, "scale": scale, "alen": alen,
        "speedups": speedups, "bf16": bf16, "mem": mem, "profiles": profiles,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(data, default=str, indent=1), encoding="utf-8")
        print(f"wrote {args.json}")
    render(data, args.out, args.plot)
    shutil.rmtree(TMP_ROOT, ignore_errors=True)
    return 0


def model_info(b: Bench) -> dict:
    return {"model": b.loaded.name, "num_layers": b.loaded.num_layers, "hidden": b.loaded.hidden_size,
            "layer": b.ts.encoder.layer, "k": b.ts.k, "m": b.ts.m, "candidates": b.ts.candidates, "match": b.ts.match,
            "pack_tokens": b.ts.encoder.pack_tokens}


def render(data: dict, out: str | None, plot: str | None) -> None:
    report = build_report(data)
    print("\n" + report["text"])
    if out:
        Path(out).write_text(report["text"] + "\n", encoding="utf-8")
        print(f"wrote {out}")
    if plot:
        make_plot(Path(plot), data, report["per"])
        print(f"wrote {plot}")


def build_report(data: dict) -> dict:
    import types

    args = types.SimpleNamespace(**data["args"])
    info, mach, loads, elapsed = data["info"], data["machine"], data["loads"], data["elapsed"]
    per_rows, ref_rows, scale, alen = data["per"], data["ref"], data["scale"], data["alen"]
    speedups, bf16, mem, profiles = data["speedups"], data["bf16"], data["mem"], data["profiles"]
    cc_rows = {int(k): v for k, v in data["cc"].items()}
    n_ans = len(per_rows)
    keys = sorted(set().union(*[r["med"].keys() for r in per_rows]))
    mean = {k: float(np.mean([r["med"][k] for r in per_rows if r["med"].get(k) is not None]))
            for k in keys if any(r["med"].get(k) is not None for r in per_rows)}
    ctx_tok = np.mean([r["facts"]["context_tokens"] for r in per_rows])
    ans_tok = np.mean([r["facts"]["answer_tokens"] for r in per_rows])
    rag_tok = np.mean([r["facts"]["rag_tokens"] for r in per_rows])
    enc_tok = np.mean([r["facts"]["encoder_tokens"] for r in per_rows])

    def pooled_ratio(num, den):  # per repeat: sum over answers; median over repeats
        vals = []
        for i in range(args.repeats):
            n_ = sum(r["reps"][i].get(num, 0.0) for r in per_rows)
            d_ = sum(r["reps"][i].get(den, 0.0) for r in per_rows)
            if d_ > 0:
                vals.append(n_ / d_)
        return statistics.median(vals) if vals else None

    def per_answer_ratios(num, den):
        return [ratio_median(r["reps"], num, den) for r in per_rows]

    warm_r = pooled_ratio("warm_total", "answer_pass")  # same chain: attribution / its own encoder pass
    warm_sep = pooled_ratio("warm_total", "encoder_forward")  # the pass timed apart, interleaved
    disk_r = pooled_ratio("disk_total", "answer_pass")
    disk_sep = pooled_ratio("disk_total", "encoder_forward")
    cold_r = pooled_ratio("cold_total", "lm_forward")
    warm16_r = pooled_ratio("bf16_warm", "bf16_answer_pass")
    new16_r = pooled_ratio("bf16_warm_new", "bf16_warm_new_pass")
    new_r = pooled_ratio("api_warm_new", "api_warm_new_pass")  # attribute(), new source list / its own pass
    memo_r = pooled_ratio("api_warm", "api_answer_pass")  # attribute(), same sources again / its own pass
    cold16_r = pooled_ratio("bf16_cold", "bf16_lm_forward")
    cold16_f32 = pooled_ratio("bf16_cold", "lm_forward")
    ts_acc = float(np.mean([h for r in per_rows for h in r["ts_hits"]]))
    n_spans = sum(len(r["ts_hits"]) for r in per_rows)
    cc_ids = {r["id"] for rows in cc_rows.values() for r in rows}
    ts_hits_cc = [h for r in per_rows if r["id"] in cc_ids for h in r["ts_hits"]]
    ts_acc_cc = float(np.mean(ts_hits_cc)) if ts_hits_cc else None
    bf16_hits_cc = [h for r in per_rows if r["id"] in cc_ids and r.get("bf16_hits") for h in r["bf16_hits"]]
    cc_stats = {}
    for beta, rows in cc_rows.items():
        if rows:
            cc_stats[beta] = {"seconds": float(np.mean([r["seconds"] for r in rows])),
                              "ts_adjacent": float(np.mean([r["ts_cold_adjacent"] for r in rows])),
                              "bf16_adjacent": float(np.mean([r.get("bf16_cold_adjacent") or np.nan for r in rows])),
                              "speedup": float(sum(r["seconds"] for r in rows) / sum(r["ts_cold_adjacent"] for r in rows)),
                              "bf16_speedup": float(sum(r["seconds"] for r in rows) / sum(r["bf16_cold_adjacent"] for r in rows))
                              if all(r.get("bf16_cold_adjacent") for r in rows) else None,
                              "acc": float(np.mean([h for r in rows for h in r["hits"]]))}
    ref_ok = [r for r in ref_rows if "seconds" in r]
    L: list[str] = []
    L.append("# Attribution cost")
    L.append("")
    L.append("Generated by `benchmarks/attribution_bench.py` (issue 8); rerun it to refresh every number here.")
    L.append("")
    cmd = data["cmd"]
    L.append("## What ran")
    L.append("")
    core = data["core"]
    pythonpath = str(Path(core["path"]).parent)
    L.append(f"* Command: `PYTHONPATH={pythonpath} HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 {cmd.strip()}` (started "
             f"{data['date']}, {elapsed / 60:.0f} min).")
    L.append(f"* Core measured: `tokenshapley_rag` imported from `{core['path']}`, commit {core['commit']}"
             f"{' with local changes' if core['dirty'] else ' (clean)'}.")
    L.append(f"* Machine: {mach['cpu']}, {mach['cores']} cores, {mach['memory']}; Python {mach['python']}, torch {mach['torch']}, "
             f"transformers {mach['transformers']}, faiss {mach['faiss']}. torch / numba / faiss threads: {args.threads}.")
    L.append(f"* **Load average (1 / 5 / 15 min)**: start {loads['start']}, after the per-answer runs {loads['per_answer']}, "
             f"after ContextCite {loads['contextcite']}, after the speed-ups {loads.get('speedups', 'n/a')}, end {loads['end']} "
             "(the scaling tables give the load per row; the benchmark's own 2 threads make a load of ~2). Above that, "
             "other jobs shared the cores and absolute seconds are inflated; the ratios compare calls interleaved in the "
             "same repeat (medians over repeats).")
    L.append(f"* Model: the default encoder ({info['model']}, float32, {info['num_layers']} layers, hidden {info['hidden']}); "
             f"TokenShapley defaults (layer {info['layer']}, K={info['k']}, M={info['m']}, candidates={info['candidates']}, "
             f"match={info['match']}, packed encoding with pack_tokens={info.get('pack_tokens')}). *bf16* rows: a second "
             "`TokenShapley(dtype=\"bfloat16\")` (its own cache keys), with its own bf16 encoder pass and bf16 LM forward.")
    L.append(f"* Per answer: the first {n_ans} {args.dataset} dev answers with spans, {args.repeats} interleaved repeats each "
             f"(mean {ctx_tok:.0f} context tokens, {ans_tok:.0f} answer tokens; the LM floor's prompt is {rag_tok:.0f} tokens, "
             f"the encoder's query + answer pass {enc_tok:.0f} tokens). ContextCite: one call per answer and beta.")
    L.append("* Definitions. *Encoder pass*: the forward pass `encode_response` runs (chat-template query + answer, stopping "
             f"after layer {info['layer']}). *LM forward*: one pass of the whole model over the RAG prompt (query + sources) "
             "+ answer, logits for one position: the floor for anything that reads the sources with the model. *Cold*: empty "
             "sentence cache (fresh folder). *Warm (memory)*: the sentences are in the in-process LRU. *Warm (disk)*: LRU cleared, "
             "read back from the cache folder. Attribution totals are what `attribute()` does (rendering excluded, shown apart).")
    L.append("")

    # ---------------------------------------------------------------- targets
    L.append("## Targets")
    L.append("")
    trows = []

    def verdict(ok):
        return "**MET**" if ok else "**NOT MET**"

    if new_r is not None:
        trows.append([f"warm attribution ≤ {WARM_TARGET} × one encoder pass over query + answer ({n_ans} {args.dataset} answers; "
                      "`attribute()` end to end on a new source list: datastore rebuilt from the sentence cache's memory tier)",
                      f"{fmt_s(mean['api_warm_new'])} vs {fmt_s(mean['api_warm_new_pass'])} (its own pass)",
                      fmt_r(new_r), verdict(new_r <= WARM_TARGET)])
    if warm_r is not None:
        trows.append(["(same, the instrumented chain of the step table below: every step timed by a probe, which adds "
                      "a few µs per call)",
                      f"{fmt_s(mean['warm_total'])} vs {fmt_s(mean['answer_pass'])} (its own pass); vs the pass timed apart: "
                      f"{fmt_s(mean['encoder_forward'])}, ratio {fmt_r(warm_sep)}", fmt_r(warm_r), verdict(warm_r <= WARM_TARGET)])
    if memo_r is not None:
        trows.append(["(same, `attribute()` end to end on the same sources again: the datastore is remembered, not rebuilt)",
                      f"{fmt_s(mean['api_warm'])} vs {fmt_s(mean['api_answer_pass'])} (its own pass)",
                      fmt_r(memo_r), verdict(memo_r <= WARM_TARGET)])
    if disk_r is not None:
        trows.append(["(same, sentence keys read back from the disk cache)",
                      f"{fmt_s(mean['disk_total'])} vs {fmt_s(mean['answer_pass'])}; vs the pass timed apart {fmt_r(disk_sep)}",
                      fmt_r(disk_r), verdict(disk_r <= WARM_TARGET)])
    if new16_r is not None:
        trows.append(["(same, bfloat16 encoder: warm `attribute()` on a new source list vs its own bf16 pass)",
                      f"{fmt_s(mean['bf16_warm_new'])} vs {fmt_s(mean['bf16_warm_new_pass'])}", fmt_r(new16_r),
                      verdict(new16_r <= WARM_TARGET)])
    if warm16_r is not None:
        trows.append(["(same, bfloat16 encoder: warm `attribute()`, the same sources again, vs its own bf16 pass)",
                      f"{fmt_s(mean['bf16_warm'])} vs {fmt_s(mean['bf16_answer_pass'])}", fmt_r(warm16_r), verdict(warm16_r <= WARM_TARGET)])
    for r in scale:
        if r.get("warm_pass") is not None:
            trows.append([f"(same, instrumented chain, warm, {r['tokens']} context tokens, {r['facts']['answer_tokens']}-token answer)",
                          f"{fmt_s(r['med']['warm_total'])} vs {fmt_s(r['med']['answer_pass'])}; vs the pass timed apart {fmt_r(r['warm_enc'])}",
                          fmt_r(r["warm_pass"]), verdict(r["warm_pass"] <= WARM_TARGET)])
    if cold_r is not None:
        trows.append([f"cold attribution ≤ {COLD_TARGET} × one LM forward over query + sources + answer ({n_ans} answers)",
                      f"{fmt_s(mean['cold_total'])} vs {fmt_s(mean.get('lm_forward'))}", fmt_r(cold_r), verdict(cold_r <= COLD_TARGET)])
    if cold16_r is not None:
        trows.append(["(same, bfloat16 encoder: cold `attribute()` vs a bf16 LM forward)",
                      f"{fmt_s(mean['bf16_cold'])} vs {fmt_s(mean['bf16_lm_forward'])}; vs the float32 LM forward {fmt_r(cold16_f32)}",
                      fmt_r(cold16_r), verdict(cold16_r <= COLD_TARGET)])
    for r in scale:
        trows.append([f"(same, cold, {r['tokens']} context tokens)",
                      f"{fmt_s(r['med']['cold_total'])} vs {fmt_s(r['med'].get('lm_forward'))}" if r["cold_lm"] is not None else
                      f"{fmt_s(r['med']['cold_total'])}; no LM forward: the prompt exceeds the model's 8192 tokens",
                      fmt_r(r["cold_lm"]), verdict(r["cold_lm"] <= COLD_TARGET) if r["cold_lm"] is not None else "n/a"])
    if 64 in cc_stats:
        c = cc_stats[64]
        ok = c["speedup"] >= CC_SPEEDUP_TARGET and ts_acc_cc is not None and ts_acc_cc >= c["acc"]
        trows.append([f"≥ {CC_SPEEDUP_TARGET:.0f}× less time than ContextCite β = 64 at equal or better span accuracy "
                      f"(cold TokenShapley; the same {len(cc_rows[64])} answers)",
                      f"{fmt_s(c['seconds'])} vs {fmt_s(c['ts_adjacent'])} per answer; span accuracy TokenShapley "
                      f"{100 * ts_acc_cc:.1f}% vs ContextCite {100 * c['acc']:.1f}% (n = {len(ts_hits_cc)} spans)",
                      f"{c['speedup']:.0f}× less time", verdict(ok)])
        if c.get("bf16_speedup") and bf16_hits_cc:
            acc16 = float(np.mean(bf16_hits_cc))
            ok = c["bf16_speedup"] >= CC_SPEEDUP_TARGET and acc16 >= c["acc"]
            trows.append(["(same, bfloat16 encoder)", f"{fmt_s(c['seconds'])} vs {fmt_s(c['bf16_adjacent'])} per answer; span "
                          f"accuracy {100 * acc16:.1f}% vs {100 * c['acc']:.1f}%", f"{c['bf16_speedup']:.0f}× less time", verdict(ok)])
    ts_m = sorted([m for m in mem if m and m["kind"] == "ts-cold"], key=lambda m: m["context_tokens"])
    lin = None
    if len(ts_m) >= 3:
        x = [m["context_tokens"] for m in ts_m]
        y = [m["peak_delta"] for m in ts_m]
        slope, icpt, r2 = linear_fit(x, y)
        marg = [(y[i + 1] - y[i]) / (x[i + 1] - x[i]) for i in range(len(x) - 1)]
        lin = (slope, icpt, r2, marg)
        ok = marg[-1] <= 1.25 * max(marg[0], 1.0) or max(yy / xx for xx, yy in zip(x, y)) == y[0] / x[0] and y[-1] / x[-1] <= y[0] / x[0]
        trows.append(["memory linear in context tokens (peak RSS during a cold attribution)",
                      f"{y[0] / 2**20:.0f} → {y[-1] / 2**20:.0f} MiB for {x[0]} → {x[-1]} tokens; added KiB per added token between "
                      f"sizes: {', '.join(f'{v / 1024:.1f}' for v in marg)}; fit {slope / 1024:.1f} KiB/token + {icpt / 2**20:.0f} MiB, R² {r2:.3f}",
                      f"{y[-1] / x[-1] / 1024:.1f} KiB/token at {x[-1]}",
                      verdict(ok)])
    L.append(md_table(["target", "measured", "ratio", "verdict"], trows))
    L.append("")
    if new_r is not None:
        wr = [x for x in per_answer_ratios("api_warm_new", "api_warm_new_pass") if x is not None]
        cr = [x for x in per_answer_ratios("cold_total", "lm_forward") if x is not None]
        L.append(f"Ratios are pooled over the {n_ans} answers (sum of times per repeat, median over repeats); per answer the "
                 f"warm ratio ranges {min(wr):.2f}–{max(wr):.2f}× and the cold one {min(cr):.2f}–{max(cr):.2f}×. "
                 "Scaling rows below give the same ratios per context and answer length.")
        L.append("")

    # ---------------------------------------------------------------- per answer table
    L.append(f"## Per answer ({n_ans} {args.dataset} answers)")
    L.append("")
    L.append("Seconds per answer: median over repeats, mean over answers. Share = part of that attribution's total.")
    L.append("")
    prow = []
    for p, lab in (("cold", "cold cache"), ("warm", "warm (memory)"), ("disk", "warm (disk)")):
        tot = mean[f"{p}_total"]
        ds = mean[f"{p}_datastore"]
        prow.append([f"datastore build, {lab}", fmt_s(ds), f"{100 * ds / tot:.0f}% of {p}"])
        for s in (*DATASTORE_STEPS, "other"):
            v = mean.get(f"{p}_{s}")
            if v:
                prow.append([f"  · {DATASTORE_LABELS.get(s, s)}", fmt_s(v), f"{100 * v / tot:.0f}%"])
    wt = mean["warm_total"]
    for g in GROUPS:
        prow.append([g, fmt_s(mean[g]), f"{100 * mean[g] / wt:.0f}% of warm"])
        for key, lab in SUBSTEPS.get(g, ()):
            if mean.get(key):
                prow.append([f"  · {lab}", fmt_s(mean[key]), f"{100 * mean[key] / wt:.0f}%"])
    prow.append(["rendering (markdown + HTML)", fmt_s(mean["render"]), "not in totals"])
    prow.append(["**attribution, cold**", f"**{fmt_s(mean['cold_total'])}**", f"`attribute()` end to end: {fmt_s(mean.get('api_cold'))}"])
    prow.append(["**attribution, warm (memory)**", f"**{fmt_s(mean['warm_total'])}**",
                 f"`attribute()` end to end: {fmt_s(mean.get('api_warm_new'))} on a new source list, "
                 f"{fmt_s(mean.get('api_warm'))} on the same sources again"])
    prow.append(["**attribution, warm (disk)**", f"**{fmt_s(mean['disk_total'])}**", ""])
    if mean.get("bf16_cold"):
        prow.append(["attribution, cold, bfloat16 encoder (`attribute()`)", fmt_s(mean["bf16_cold"]),
                     f"{mean['api_cold'] / mean['bf16_cold']:.2f}× faster than float32" if mean.get("api_cold") else ""])
        prow.append(["attribution, warm, bfloat16 encoder (`attribute()`)", fmt_s(mean["bf16_warm"]),
                     f"{mean['api_warm'] / mean['bf16_warm']:.2f}× faster than float32" if mean.get("api_warm") else ""])
        prow.append(["  · its bf16 encoder pass", fmt_s(mean.get("bf16_answer_pass")), "bf16 warm floor"])
    prow.append([f"encoder pass, query + answer ({enc_tok:.0f} tok)", fmt_s(mean["encoder_forward"]), "warm floor"])
    prow.append([f"(a) LM forward, query + sources + answer ({rag_tok:.0f} tok)", fmt_s(mean.get("lm_forward")), "cold floor"])
    if mean.get("bf16_lm_forward"):
        prow.append(["(a) same, bfloat16 weights", fmt_s(mean["bf16_lm_forward"]), "cold floor of the bf16 rows"])
    prow.append([f"(b) greedy generation of {ans_tok:.0f} tokens", fmt_s(mean.get("generate")),
                 f"cold attribution = {mean['cold_total'] / mean['generate']:.2f}× of it" if mean.get("generate") else ""])
    for beta, c in cc_stats.items():
        prow.append([f"(c) ContextCite β = {beta} (ours)", fmt_s(c["seconds"]),
                     f"{c['speedup']:.0f}× cold TokenShapley run next to it; span acc. {100 * c['acc']:.1f}%"])
    if ref_ok:
        rs = float(np.mean([r["seconds"] for r in ref_ok]))
        racc = float(np.mean([h for r in ref_ok for h in r["hits"]]))
        prow.append([f"(c) context-cite package β = {args.reference_beta} (first {len(ref_ok)} answers)", fmt_s(rs),
                     f"span acc. {100 * racc:.1f}% on its {sum(len(r['hits']) for r in ref_ok)} spans"])
    elif ref_rows:
        prow.append(["(c) context-cite package", "not run", ref_rows[0].get("error", "")])
    L.append(md_table(["step", "seconds", "share / note"], prow))
    L.append("")
    acc16 = [h for r in per_rows if r.get("bf16_hits") for h in r["bf16_hits"]]
    L.append(f"TokenShapley span accuracy on these {n_spans} spans (original source order): **{100 * ts_acc:.1f}%**"
             + (f" (bfloat16 encoder: {100 * np.mean(acc16):.1f}%)." if acc16 else "."))
    L.append("")

    # ---------------------------------------------------------------- scaling
    if scale:
        L.append("## Scaling with context length")
        L.append("")
        L.append(f"NQ dev sources of consecutive questions until the datastore holds N tokens; query and a "
                 f"{scale[0]['facts']['answer_tokens']}-token extractive answer from the first question; {args.scale_repeats} repeats. "
                 "The LM floor needs the whole prompt in one sequence, so it is n/a past the model's 8192-token context; "
                 "TokenShapley encodes sentence by sentence and has no such limit.")
        L.append("")
        rows = []
        for r in scale:
            f, m = r["facts"], r["med"]
            rows.append([r["tokens"], f["sentences"], fmt_s(m["cold_total"]), fmt_s(m.get("cold_encode")), fmt_s(m["warm_total"]),
                         fmt_s(m["warm_datastore"]), fmt_s(m["neighbour search"]), fmt_s(m["disk_total"]), fmt_s(m["answer_pass"]),
                         fmt_s(m["encoder_forward"]), fmt_s(m.get("lm_forward")),
                         fmt_r(r["cold_lm"]), f"{fmt_r(r['warm_pass'])} ({fmt_r(r['warm_enc'])})",
                         f"{f['disk_bytes'] / f['context_tokens']:.0f} ({f['disk_alloc'] / f['context_tokens']:.0f})",
                         f"{f['memory_bytes'] / f['context_tokens']:.0f} + {f['lru_bytes'] / f['context_tokens']:.0f}", r["load"]])
        L.append(md_table(["context tokens", "sentences", "cold (s)", "· encode", "warm mem (s)", "· datastore", "· search",
                           "warm disk (s)", "its encoder pass", "pass timed apart", "LM forward", "cold / LM",
                           "warm / own pass (/ apart)", "disk B/token (allocated)",
                           "memory B/token (Datastore + LRU and class memo)", "load"], rows))
        L.append("")
        L.append(f"Memory bytes per token: the Datastore's float32 keys ({4 * info['hidden']} B at hidden {info['hidden']}), "
                 "their cached norms (4 B) and int64 ids, classes and provenance (no second copy of the keys: the faiss index "
                 "is gone); plus the LRU cache's float16 keys, ids and offsets and the token-class memo. On disk: one `.npz` "
                 "per sentence (float16 keys); *allocated* counts whole filesystem blocks.")
        L.append("")
    if alen:
        L.append(f"## Scaling with answer length ({alen[0]['context_tokens']} context tokens)")
        L.append("")
        rows = []
        for r in alen:
            m = r["med"]
            rows.append([r["answer_tokens"], fmt_s(m["cold_total"]), fmt_s(m["warm_total"]), fmt_s(m["encode_answer"]),
                         fmt_s(m["neighbour search"]), fmt_s(m["Shapley"]), fmt_s(m["aggregation"]), fmt_s(m["answer_pass"]),
                         fmt_s(m["encoder_forward"]), fmt_s(m.get("lm_forward")), fmt_r(r["cold_lm"]),
                         f"{fmt_r(r['warm_pass'])} ({fmt_r(r['warm_enc'])})", r["load"]])
        L.append(md_table(["answer tokens", "cold (s)", "warm mem (s)", "· answer encoding", "· search", "· Shapley", "· aggregation",
                           "its encoder pass", "pass timed apart", "LM forward", "cold / LM", "warm / own pass (/ apart)", "load"], rows))
        L.append("")
    if mem:
        L.append("## Peak memory")
        L.append("")
        L.append("One subprocess per row: model loaded, a tiny warm-up attribution, then the call. *Peak*: highest RSS sampled "
                 "every 2 ms during the call minus the RSS before it; *maxrss*: the `ru_maxrss` increase (0 when the peak "
                 "stays under the model-loading peak); *retained*: RSS after minus before (the LRU's float16 keys, and pages the "
                 "allocator keeps after freeing). *ts-cold*: shipped (packed encoding); *ts-cold-padded*: `pack_tokens=None`, the "
                 "previous padded batches.")
        L.append("")
        rows = [[m["kind"], m.get("context_tokens", m["n"]), f"{m['rss_before'] / 2**20:.0f}", f"{m['peak_delta'] / 2**20:.1f}",
                 f"{m['maxrss_delta'] / 2**20:.1f}", f"{m['retained_delta'] / 2**20:.1f}", f"{m['seconds']:.1f}"] for m in mem]
        L.append(md_table(["configuration", "context tokens", "RSS before (MiB)", "peak − before (MiB)", "maxrss Δ (MiB)",
                           "retained (MiB)", "seconds"], rows))
        L.append("")
        if lin:
            L.append(f"Linear fit of TokenShapley's peak: {lin[0] / 1024:.1f} KiB per context token + {lin[1] / 2**20:.0f} MiB "
                     f"(R² = {lin[2]:.3f}); added KiB per added context token between consecutive sizes: "
                     f"{', '.join(f'{v / 1024:.1f}' for v in lin[3])}. The persistent part (Datastore + LRU) is exactly linear: "
                     "the same bytes per token at every size (scaling table).")
            L.append("")
    if speedups or bf16:
        L.append("## Speed-ups of 9192d80: previous vs shipped (interleaved)")
        L.append("")
        L.append(f"Each pair timed alternately in the same loop ({args.speedup_repeats} repeats or more, median), "
                 f"{args.threads} threads, load {loads.get('speedups', 'n/a')}. Not reachable any more, so not re-measured: fsync per cache write and "
                 "`zf.testzip()` per read (both 1.5× on their step in the previous report), tokenizing cache hits.")
        L.append("")
        L.append(md_table(["change", "measured on", "previous", "shipped", "speed-up", "note"],
                          [[p["name"], p["where"], fmt_s(p["previous"]), fmt_s(p["shipped"]), f"{p['speedup']:.2f}×", p["note"]]
                           for p in speedups]))
        L.append("")
        if bf16:
            L.append(f"**Does accuracy hold?** Span accuracy on the first {bf16['answers']} QuoteSum dev answers with spans "
                     f"({bf16['spans']} spans, original source order), cold attribution with a memory-only cache:")
            L.append("")
            L.append(md_table(["encoder", "span accuracy", "same verdict as float32 packed", "seconds (sum)"],
                              [[k, f"{100 * v:.1f}%", f"{100 * bf16['agree'][k]:.1f}%", f"{bf16['seconds'][k]:.0f}"]
                               for k, v in bf16["acc"].items()]))
            L.append("")
    for k, v in profiles.items():
        L.append(f"## cProfile of one {k}: own time per function, top 15")
        L.append("")
        L.append("```")
        L.append(v)
        L.append("```")
        L.append("")
    return {"text": "\n".join(L), "per": {"mean": mean, "n": n_ans, "dataset": args.dataset,
                                          "reference": float(np.mean([r["seconds"] for r in ref_ok])) if ref_ok else None,
                                          "contextcite": {beta: c["seconds"] for beta, c in cc_stats.items()}}}


if __name__ == "__main__":
    sys.exit(main())
