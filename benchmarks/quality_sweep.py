"""Ablation sweep for attribution quality (issue 12) on QuoteSum / VeriGran dev.

Encodes every source sentence and every answer once, at several layers, keeping the
state at every position (before and after each token), then scores many variants of the
game offline with the exact engine: what the KNN search runs on (the paper's state
before the token, a right window, both), the answer's prefix (chat prompt + answer so far,
or the answer's own sentence like the keys), the candidate set, the layer. Prints one
accuracy table per dataset, original order and order-controlled, per span class, with
the lexical baseline on the same spans.

    TOKENSHAPLEY_DATA=../shared/data python benchmarks/quality_sweep.py --dataset quotesum --limit 189 --out docs/_sweep_quotesum.json

Encodings are cached in ``--work`` (npz per example) so reruns only re-score.
"""

from __future__ import annotations

import argparse
import unicodedata
import itertools
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from tokenshapley_rag import TokenShapley
from tokenshapley_rag._segment import split_sentences, token_words
from tokenshapley_rag.benchmark._baselines import make_baseline
from tokenshapley_rag.benchmark._data import load_dataset
from tokenshapley_rag.benchmark._metrics import SOURCE_PERMUTATION_SEEDS, source_permutation, span_class
from tokenshapley_rag.shapley import knn_shapley_batch

LAYERS = (4, 8, 12, 16, 20, 24)


class _Stop(Exception):
    pass


def states_at_layers(ts: TokenShapley, seqs: list[list[int]]) -> list[dict[int, np.ndarray]]:
    """For each id sequence, {layer: (len, hidden) float16} for LAYERS (right-padded batch)."""
    model = ts.loaded.model
    blocks = ts.encoder._layers
    out: list[dict[int, np.ndarray]] = [dict() for _ in seqs]
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    budget = 4096
    i = 0
    while i < len(order):
        batch = [order[i]]
        while i + len(batch) < len(order) and (len(batch) + 1) * len(seqs[order[i + len(batch)]]) <= budget:
            batch.append(order[i + len(batch)])
        i += len(batch)
        width = max(len(seqs[j]) for j in batch)
        ids = torch.full((len(batch), width), ts.encoder.pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, j in enumerate(batch):
            ids[r, : len(seqs[j])] = torch.as_tensor(seqs[j])
            mask[r, : len(seqs[j])] = 1
        captured: dict[int, torch.Tensor] = {}
        handles = []
        for layer in LAYERS:
            def hook(_m, _i, output, layer=layer):
                captured[layer] = output[0] if isinstance(output, tuple) else output
                if layer == max(LAYERS):
                    raise _Stop
            handles.append(blocks[layer - 1].register_forward_hook(hook))
        try:
            with torch.inference_mode():
                model(input_ids=ids, attention_mask=mask, use_cache=False)
        except _Stop:
            pass
        finally:
            for h in handles:
                h.remove()
        for layer in LAYERS:
            arr = captured[layer].float().numpy()
            for r, j in enumerate(batch):
                out[j][layer] = arr[r, : len(seqs[j])].astype(np.float16)
    return out


def source_tokens(ts: TokenShapley, ex):
    """The datastore's sentence records of ``ex``'s sources and their tokenizations."""
    records, _, toks = ts.pipeline.builder.sentences(list(ex.sources))
    return records, [t or ts.encoder.tokenize(r.text) for r, t in zip(records, toks)]


def encode_example(ts: TokenShapley, ex, path: Path) -> dict:
    if path.exists():
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    records, toks = source_tokens(ts, ex)
    bos = ts.encoder.start_id
    resp = ts.encoder.tokenize(ex.answer)
    prompt = ts.encoder.prompt_ids(ex.question).tolist()
    # Answer sentences: groups of answer tokens by the sentence their first char is in.
    bounds = split_sentences(ex.answer)
    group = np.zeros(len(resp.ids), np.int64)
    for t, (a, _b) in enumerate(resp.offsets.tolist()):
        group[t] = max([g for g, (s, _e) in enumerate(bounds) if s <= a] or [0])
    groups = [np.flatnonzero(group == g) for g in range(len(bounds))]
    groups = [g for g in groups if len(g)]
    seqs = [[bos, *t.ids.tolist()] for t in toks]
    seqs.append(prompt + resp.ids.tolist())
    seqs.extend([[bos, *resp.ids[g].tolist()] for g in groups])
    st = states_at_layers(ts, seqs)
    data: dict[str, np.ndarray] = {
        "src_len": np.array([len(t.ids) for t in toks], np.int64),
        "src_ids": np.concatenate([t.ids for t in toks]) if toks else np.zeros(0, np.int64),
        "src_source": np.array([r.source_index for r in records], np.int64),
        "resp_ids": resp.ids,
        "resp_offsets": resp.offsets,
        "resp_group": np.concatenate([np.full(len(g), k) for k, g in enumerate(groups)]) if groups else np.zeros(0, np.int64),
    }
    n_src = len(toks)
    for layer in LAYERS:
        data[f"src_L{layer}"] = np.concatenate([st[i][layer] for i in range(n_src)])  # (sum(n_i+1), H)
        data[f"chat_L{layer}"] = st[n_src][layer][len(prompt) - 1 :]  # (T+1, H)
        data[f"sent_L{layer}"] = np.concatenate([st[n_src + 1 + k][layer] for k in range(len(groups))])  # (T+G, H)
    np.savez(path, **data)
    return data


def features(data: dict, layer: int, prefix: str, kind: str):
    """Return (src_feats (N, D), resp_feats (T, D), src_sentence (N,))."""
    S = data[f"src_L{layer}"].astype(np.float32)
    lens = data["src_len"]
    T = len(data["resp_ids"])
    # index of "before token t" and "after token t" in the stacked (n+1)-row blocks
    starts = np.concatenate([[0], np.cumsum(lens + 1)[:-1]])
    before_idx = np.concatenate([s + np.arange(n) for s, n in zip(starts, lens)])
    sent = np.repeat(np.arange(len(lens)), lens)
    pos = np.concatenate([np.arange(n) for n in lens]) if len(lens) else np.zeros(0, np.int64)
    n_of = np.repeat(lens, lens)
    if prefix == "chat":
        R = data[f"chat_L{layer}"].astype(np.float32)
        rb = np.arange(T)
        grp = data["resp_group"]
        # sentence end (exclusive) of each answer token, as an index into R's "after" rows
        ends = np.zeros(T, np.int64)
        for g in np.unique(grp):
            m = np.flatnonzero(grp == g)
            ends[m] = m.max() + 1
        r_pos, r_end, r_base = rb, ends, np.zeros(T, np.int64)
    else:
        R = data[f"sent_L{layer}"].astype(np.float32)
        grp = data["resp_group"]
        r_base = np.zeros(T, np.int64)
        r_pos = np.zeros(T, np.int64)
        r_end = np.zeros(T, np.int64)
        off = 0
        for g in np.unique(grp):
            m = np.flatnonzero(grp == g)
            r_base[m] = off
            r_pos[m] = np.arange(len(m))
            r_end[m] = len(m)
            off += len(m) + 1
    parts_s, parts_r = [], []
    for piece in kind.split("+"):
        if piece == "before":
            parts_s.append(S[before_idx])
            parts_r.append(R[r_base + r_pos])
        elif piece.startswith("win"):
            w = int(piece[3:])
            parts_s.append(S[starts[sent] + np.minimum(pos + 1 + w, n_of)])
            parts_r.append(R[r_base + np.minimum(r_pos + 1 + w, r_end)])
        else:
            raise ValueError(piece)
    return np.concatenate(parts_s, 1), np.concatenate(parts_r, 1), sent


def token_classes(ts, ids, words=None, table=None):
    """The library's "normalized" classes (token text after NFKC, casefold, strip), or
    with ``words`` its "word" classes ((token class, word) pairs)."""
    table = {} if table is None else table
    out = []
    for i, tid in enumerate(ids.tolist()):
        piece = unicodedata.normalize("NFKC", ts.loaded.tokenizer.decode([tid])).casefold().strip()
        key = piece if words is None else (piece, unicodedata.normalize("NFKC", words[i]))
        out.append(table.setdefault(key, len(table)))
    return np.asarray(out, np.int64)


def classes(ts, ex, data, match):
    if match == "exact":  # token ids (the paper)
        return data["src_ids"].astype(np.int64), data["resp_ids"].astype(np.int64)
    if match == "token":
        table: dict = {}
        return token_classes(ts, data["src_ids"], table=table), token_classes(ts, data["resp_ids"], table=table)
    if match == "wordfb":  # word classes; token classes for answer tokens whose word no source has
        ws, wr = classes(ts, ex, data, "word")
        table: dict = {}
        ts_, tr_ = token_classes(ts, data["src_ids"], table=table), token_classes(ts, data["resp_ids"], table=table)
        off = 1 << 40
        has = np.isin(wr, ws)
        return ws, np.where(has, wr, tr_ + off), ts_ + off
    records, toks = source_tokens(ts, ex)
    src_words = [w for r, t in zip(records, toks) for w in token_words(r.text, t.offsets)]
    table = {}
    return (
        token_classes(ts, data["src_ids"], src_words, table),
        token_classes(ts, data["resp_ids"], token_words(ex.answer, data["resp_offsets"]), table),
    )


def token_scores(ts, data, layer, prefix, kind, cand, m=10, k=1, match="token", ex=None):
    Fs, Fr, sent = features(data, layer, prefix, kind)
    got = classes(ts, ex, data, match)
    cls_s, cls_r = got[0], got[1]
    cls_s_fb = got[2] if len(got) > 2 else None
    T, n_sent = len(Fr), len(data["src_len"])
    d2 = ((Fr[:, None, :] - Fs[None, :, :]) ** 2).sum(-1) if T * len(Fs) < 4e6 else None
    if d2 is None:
        d2 = (Fr**2).sum(1)[:, None] + (Fs**2).sum(1)[None, :] - 2 * Fr @ Fs.T
        d2 = np.maximum(d2, 0)
    match_all = cls_s[None, :] == cls_r[:, None]
    if cls_s_fb is not None:
        match_all |= cls_s_fb[None, :] == cls_r[:, None]
    mm = min(m, len(Fs))
    if cand == "nearest":
        idx = np.argsort(d2, axis=1, kind="stable")[:, :mm]
    else:  # mixed: nearest mm//2 of the answer token's class, then nearest overall
        idx = np.zeros((T, mm), np.int64)
        for t in range(T):
            mt = np.flatnonzero(match_all[t])
            a = mt[np.argsort(d2[t, mt], kind="stable")[: mm // 2]]
            rest = [j for j in np.argsort(d2[t], kind="stable")[: mm + len(a)] if j not in set(a)][: mm - len(a)]
            c = np.concatenate([a, np.asarray(rest, np.int64)])
            idx[t] = c[np.argsort(d2[t, c], kind="stable")]
    dd = np.take_along_axis(d2, idx, 1).astype(np.float64)
    med = float(np.median(dd))
    gamma = 1.0 / med if med > 0 else 1.0
    sims = np.exp(-gamma * (dd - dd[:, :1]))
    matches = np.take_along_axis(match_all, idx, 1)
    phi = knn_shapley_batch(sims, matches, k)
    out = np.zeros((T, n_sent))
    np.add.at(out, (np.repeat(np.arange(T), mm), sent[idx].ravel()), phi.ravel())
    # carries[t, j]: sentence j holds an entry of answer token t's match class
    carries = np.zeros((T, n_sent), bool)
    for t in range(T):
        carries[t, np.unique(sent[match_all[t]])] = True
    return out, carries


def context_weights(data, inside, lam, tau, flat=0.0):
    """Weight of every answer token in a span's game: 1 inside the span, ``lam *
    exp(-d / tau)`` for the other tokens of the same answer sentence at token distance d."""
    T = len(data["resp_ids"])
    w = np.zeros(T)
    if lam > 0 and len(inside):
        grp = data["resp_group"]
        same = np.flatnonzero(grp == grp[inside[0]])
        d = np.minimum(np.abs(same - inside.min()), np.abs(same - inside.max()))
        w[same] = (lam * np.exp(-d / tau) if tau > 0 else lam) + flat
    w[inside] = 1.0
    return w


def span_matrix(ex, data, scored, lam=0.0, tau=0.0, flat=0.0, gate=0.0):
    tok_sent_scores, carries = scored
    offs = data["resp_offsets"]
    src_of_sent = data["src_source"]
    rows = []
    for sp in ex.spans:
        inside = np.flatnonzero((offs[:, 0] < sp.end) & (offs[:, 1] > sp.start) & (offs[:, 1] > offs[:, 0]))
        own = tok_sent_scores[inside].sum(0)
        per_sent = context_weights(data, inside, lam, tau, flat) @ tok_sent_scores
        if gate == 1:  # context counts only for sentences with positive own evidence
            per_sent = own + (per_sent - own) * (own > 0)
        elif gate == 2:  # ... only for sentences holding one of the span's tokens
            per_sent = own + (per_sent - own) * carries[inside].any(0)
        elif gate == 3:  # ... only for the sentences of sources holding one of them
            holds = np.zeros(len(ex.sources), bool)
            np.logical_or.at(holds, src_of_sent, carries[inside].any(0))
            per_sent = own + (per_sent - own) * holds[src_of_sent]
        per_src = np.zeros(len(ex.sources))
        np.add.at(per_src, src_of_sent, per_sent)
        rows.append(per_src)
    return np.asarray(rows)


def accuracy_rows(ex, mat):
    """[(class, correct_original, correct_oc_mean)] per span."""
    out = []
    for si, sp in enumerate(ex.spans):
        gold = ex.gold_indices(sp)
        row = mat[si]
        orig = int(np.argmax(row)) in gold
        oc = []
        for seed in SOURCE_PERMUTATION_SEEDS:
            perm = source_permutation(ex.id, len(ex.sources), seed)
            oc.append(int(perm[int(np.argmax(row[perm]))]) in gold)
        out.append((span_class(ex, sp), orig, float(np.mean(oc))))
    return out


def summarize(rows):
    res = {"n": len(rows), "acc": np.mean([r[1] for r in rows]), "acc_oc": np.mean([r[2] for r in rows])}
    for c in ("gold-only", "several", "nowhere", "non-gold-only"):
        sel = [r for r in rows if r[0] == c]
        res[c] = (len(sel), float(np.mean([r[2] for r in sel])) if sel else float("nan"))
    return res


def main() -> None:
    global LAYERS
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="quotesum")
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--work", default="/tmp/tokenshapley_sweep")
    ap.add_argument("--layers", default="8,12,16")
    ap.add_argument("--kinds", default="before,win0,before+win0,before+win2,win2")
    ap.add_argument("--prefixes", default="chat,sent")
    ap.add_argument("--cands", default="nearest,mixed")
    ap.add_argument("--matches", default="token")
    ap.add_argument("--contexts", default="0:0", help="lam:tau pairs of the answer-context kernel")
    ap.add_argument("--out", default=None)
    ap.add_argument("--encode-layers", default=",".join(map(str, LAYERS)))
    args = ap.parse_args()
    LAYERS = tuple(int(x) for x in args.encode_layers.split(","))
    ts = TokenShapley()
    exs = load_dataset(args.dataset)[: args.limit]
    work = Path(args.work) / args.dataset
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    datas = []
    for i, ex in enumerate(exs):
        datas.append(encode_example(ts, ex, work / f"{i:04d}.npz"))
    print(f"encoded {len(exs)} examples in {time.time() - t0:.0f}s", flush=True)
    lexical = make_baseline("lexical")
    results = {}
    lex_rows = [r for ex in exs for r in accuracy_rows(ex, lexical.score_spans(ex))]
    results["lexical"] = summarize(lex_rows)
    grid = itertools.product(
        [int(x) for x in args.layers.split(",")], args.kinds.split(","), args.prefixes.split(","), args.cands.split(","),
        args.matches.split(","),
    )
    contexts = [tuple(float(v) for v in c.split(":")) for c in args.contexts.split(",")]
    for layer, kind, prefix, cand, match in grid:
        base = f"L{layer} {kind} {prefix} {cand} {match}"
        scores = [token_scores(ts, data, layer, prefix, kind, cand, match=match, ex=ex) for ex, data in zip(exs, datas)]
        for ctx in contexts:
            lam, tau, flat, gate = (*ctx, 0.0, 0.0, 0.0)[:4]
            name = base + (f" ctx{lam:g}:{tau:g}:{flat:g}:{gate:g}" if lam or flat else "")
            rows = []
            for ex, data, sc in zip(exs, datas, scores):
                rows.extend(accuracy_rows(ex, span_matrix(ex, data, sc, lam, tau, flat, gate)))
            results[name] = summarize(rows)
            r = results[name]
            print(f"{name:50s} acc {r['acc']:.3f} oc {r['acc_oc']:.3f} " + " ".join(
                f"{c} {r[c][1]:.3f}({r[c][0]})" for c in ("gold-only", "several", "nowhere")), flush=True)
    r = results["lexical"]
    print(f"{'lexical':50s} acc {r['acc']:.3f} oc {r['acc_oc']:.3f} " + " ".join(
        f"{c} {r[c][1]:.3f}({r[c][0]})" for c in ("gold-only", "several", "nowhere")), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1, default=float))


if __name__ == "__main__":
    main()
