"""Record, once per example, everything the paraphrase ablations replay offline.

For NQ (generated answers, the shared generation cache) and WiCE (the claim), per example:
the candidate units and their relevance, TokenShapley's ``keyword_score`` and whole-answer
``score`` per unit, the token game's per-token values per unit with the tokens' texts,
keyword ids and answer sentences, all-MiniLM-L6-v2 embeddings of the question, the answer,
its sentences and the units, and the encoder's mean-pooled datastore keys per unit and
per answer sentence. Written as one pickle per example under OUT (resumable).

    python benchmarks/paraphrase_record.py --dataset nq --limit 80 --out out/rec-nq \
        --generations out/gen-nq.jsonl --data /work/shared/data
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path

import numpy as np


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", required=True, choices=["nq", "wice", "paraphrase"])
    p.add_argument("--data", required=True)
    p.add_argument("--limit", type=int, default=80)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--out", required=True)
    p.add_argument("--generations", default=None)
    a = p.parse_args(argv)

    from tokenshapley_rag import TokenShapley
    from tokenshapley_rag._segment import split_sentences
    from tokenshapley_rag.benchmark._data import load_dataset
    from tokenshapley_rag.benchmark._lm import GenerationCache, ResponseLM
    from tokenshapley_rag.benchmark._metrics import evidence_overlaps
    from tokenshapley_rag.benchmark._model_baselines import EmbSimAttributor
    from tokenshapley_rag.benchmark._protocols import _TASK, _nonempty
    from tokenshapley_rag.benchmark._sentences import assign_to_units, sentence_units

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.dataset == "paraphrase":
        from tokenshapley_rag.benchmark._paraphrase import load_paraphrase_set

        examples = load_paraphrase_set(a.data, limit=a.limit)[a.start:]
    else:
        examples = load_dataset(a.dataset, a.data, limit=a.limit)[a.start:]
    ts = TokenShapley()
    emb = EmbSimAttributor()
    lm = gens = None
    if a.dataset == "nq":
        lm = ResponseLM(ts.loaded)
        gens = GenerationCache(a.generations)
    for n, ex in enumerate(examples):
        f = out / f"{a.start + n:04d}.pkl"
        if f.exists():
            continue
        t0 = time.perf_counter()
        sources = _nonempty(ex.sources)
        if a.dataset == "nq":
            query = ex.question
            response = gens.get_or_generate(lm, _TASK["nq"], ex.id, query, sources, max_new_tokens=64)
            units = sentence_units(sources)
        elif a.dataset == "paraphrase":
            query, response = ex.question, ex.answer
            units = sentence_units(sources)
        else:
            query, response = "", ex.answer
            units = sentence_units(sources, split=False)
        gold = [(g.source_id, g.start, g.end) for g in ex.gold]
        rec = {"id": ex.id, "query": ex.question, "response": response, "label": ex.meta.get("label"),
               "units": [u.as_triple() for u in units], "unit_texts": [u.text for u in units],
               "unit_source": [u.source_index for u in units], "gold": gold}
        rec["relevant"] = [any(evidence_overlaps(u.as_triple(), g) for g in gold) for u in units] if gold else [False] * len(units)
        if response.strip() and units:
            res = ts.attribute(query=query, sources=list(sources), response=response)
            ss = res.sentence_scores
            rec["keyword_score"] = assign_to_units(units, ((s.source_id, s.sentence_start, s.sentence_end, s.keyword_score) for s in ss))
            rec["score"] = assign_to_units(units, ((s.source_id, s.sentence_start, s.sentence_end, s.score) for s in ss))
            # map datastore sentences -> unit index
            one = np.eye(len(ss))
            dmap = np.stack([assign_to_units(units, [(s.source_id, s.sentence_start, s.sentence_end, one[j, i])
                                                      for j, s in enumerate(ss)]) for i in range(len(ss))]) if ss else np.zeros((0, len(units)))
            tok = res.tokens
            rec["tok_texts"] = list(tok.texts)
            rec["tok_offsets"] = np.asarray(tok.offsets)
            rec["tok_keyword"] = np.asarray(tok.keyword)
            rec["tok_answer_sentence"] = np.asarray(tok.answer_sentence)
            rec["tok_unit_scores"] = np.asarray(tok.scores) @ dmap  # (T, n_units)
            rec["tok_unit_carries"] = (np.asarray(tok.carries).astype(float) @ dmap) > 0
            rec["citations"] = [(c.start, c.end, c.text) if hasattr(c, "start") else None for c in res.citations]
            # encoder keys, mean-pooled per datastore sentence and per answer sentence
            store = ts.pipeline.datastore_for(list(sources))
            keys = np.asarray(store.keys, dtype=np.float64)
            sof = np.asarray(store.sentence_of)
            pooled = np.zeros((len(store.sentences), keys.shape[1]))
            cnt = np.bincount(sof, minlength=len(store.sentences)).astype(float)
            np.add.at(pooled, sof, keys)
            pooled /= np.maximum(cnt, 1)[:, None]
            rec["store_sentences"] = [(s.text) for s in store.sentences]
            rec["store_pooled"] = pooled.astype(np.float32)
            rec["store_to_units"] = None
        parts = [response[x:y] for x, y in split_sentences(response)] or [response]
        rec["answer_sentences"] = parts
        rec["emb_question"] = emb.embed([ex.question or ""])[0] if ex.question else None
        rec["emb_answer"] = emb.embed([response])[0] if response.strip() else None
        rec["emb_qa"] = emb.embed([(ex.question + " " + response).strip()])[0] if response.strip() else None
        rec["emb_parts"] = emb.embed(parts)
        rec["emb_units"] = emb.embed([u.text for u in units]) if units else np.zeros((0, 384))
        rec["seconds"] = time.perf_counter() - t0
        tmp = f.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps(rec))
        tmp.replace(f)
        print(a.start + n, ex.id, f"{rec['seconds']:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
