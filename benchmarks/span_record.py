"""Record, once per example, what the span-rule ablations of docs/reports/paraphrase.md replay
offline (QuoteSum or VeriGran dev, original source order): the answer tokens' Shapley values
per source sentence, their match classes' holders, the answer sentences, each gold span's
tokens, verbatim holders and words, the shipped per-source span scores, and all-MiniLM-L6-v2
embeddings of the answer sentences and of the sentences of every source that is one of two or
more candidates of some span. One pickle per example under OUT (resumable).

    python benchmarks/span_record.py verigran out/span-verigran
    python benchmarks/span_replay.py out/span-verigran

``PERM=1`` also records the 3 permuted source orders of the order-controlled metric.
"""
import pickle, sys, time
from pathlib import Path
import numpy as np
from tokenshapley_rag import TokenShapley
from tokenshapley_rag._text_search import is_word_char, span_words
from tokenshapley_rag.benchmark._data import load_dataset
from tokenshapley_rag.benchmark._metrics import span_class
from tokenshapley_rag.benchmark._model_baselines import EmbSimAttributor
sys.path.insert(0, str(Path(__file__).resolve().parent))
from span_replay import candidates  # noqa: E402

ds, out = sys.argv[1], Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
import os
exs = load_dataset(ds, os.environ.get("TOKENSHAPLEY_DATA"))[:int(os.environ.get("LIM", "100000"))]
ts = TokenShapley()
emb = EmbSimAttributor()


from tokenshapley_rag.benchmark._metrics import permute_example
def record(ex):
    t0 = time.perf_counter()
    res = ts.attribute(query=ex.question, sources=ex.sources, response=ex.answer)
    t = res.tokens
    text = ex.answer
    ids = [s.id for s in ex.sources]
    spans = []
    for sp in ex.spans:
        offs = t.offsets
        inside = np.flatnonzero((offs[:, 0] < sp.end) & (offs[:, 1] > sp.start) & (offs[:, 1] > offs[:, 0]))
        start, end = sp.start, sp.end
        verb = t.verbatim(inside) | res._sentence_texts.holding(
            text[start:end],
            open_start=start > 0 and is_word_char(text[start - 1]) and is_word_char(text[start]),
            open_end=end < len(text) and is_word_char(text[end - 1]) and is_word_char(text[end]))
        words = span_words(text, offs, start, end)
        ps = res.span_scores(start, end)
        spans.append(dict(start=start, end=end, gold=list(sp.source_ids), cls=span_class(ex, sp), inside=inside,
                          verbatim=np.asarray(verb, bool), words=[np.asarray(w) for w in words],
                          shipped=np.array([ps[i] for i in ids])))
    sent_texts = [s.sentence for s in res.sentence_scores]
    n_as = int(t.answer_sentence.max()) + 1 if len(t.answer_sentence) else 0
    as_text = []
    for a in range(n_as):
        m = np.flatnonzero(t.answer_sentence == a)
        as_text.append(text[int(t.offsets[m, 0].min()):int(t.offsets[m, 1].max())] if len(m) else "")
    rec = dict(id=ex.id, answer=text, question=ex.question, ids=ids, spans=spans, offsets=t.offsets, scores=t.scores,
               keyword=t.keyword, answer_sentence=t.answer_sentence, carries=t.carries, sentence_source=t.sentence_source,
               sent_texts=sent_texts, sent_source_id=[s.source_id for s in res.sentence_scores], as_text=as_text,
               e_as=emb.embed(as_text) if as_text else None,
               config=dict(ts.config))
    need = np.zeros(len(ids), bool)
    for sp in spans:
        ex_, cand = candidates(rec, sp)
        if cand.sum() >= 2:
            need |= cand
    rows = [j for j in range(len(sent_texts)) if need[rec['sentence_source'][j]]]
    e_sent = np.full((len(sent_texts), 384), np.nan, np.float32)
    if rows:
        e_sent[rows] = emb.embed([sent_texts[j] for j in rows])
    rec['e_sent'] = e_sent
    return rec, need

for n, ex in enumerate(exs):
    f = out / f"{n:04d}.pkl"
    if f.exists() or not ex.spans:
        continue
    t0 = time.perf_counter()
    rec, need = record(ex)
    rec["perm"] = None
    perms = {}
    if need.any() and os.environ.get("PERM", "0") == "1":
        for seed in (0, 1, 2):
            pex, _ = permute_example(ex, seed)
            prec, _ = record(pex)
            prec["perm"] = seed
            perms[seed] = prec
    rec["perms"] = perms
    with open(f, "wb") as fh:
        pickle.dump(rec, fh)
    print(n, ex.id, len(ex.spans), len(perms), f"{time.perf_counter()-t0:.1f}s", flush=True)
