"""Replay span rules on the records of benchmarks/span_record.py and print the rows of
docs/reports/paraphrase.md ("The several-sources class"): span accuracy per class on the
first and second half of the set, each span counted g / t when t sources tie at the top and
g of them are gold (the expectation over source orders).

    python benchmarks/span_replay.py out/span-verigran [HALF]
"""
import pickle, glob, sys, re, unicodedata
import numpy as np
from tokenshapley_rag._context_game import context_weight_rows
from tokenshapley_rag._sentence_game import sentence_game_values, content_words
from tokenshapley_rag._segment import STOPWORDS, FILLERS



def candidates(rec, sp):
    """(exact, candidate_source bool[n_src]) as in span_games."""
    carries, ss = rec['carries'], rec['sentence_source']
    n_src = len(rec['ids'])
    inside = sp['inside']
    verb = sp['verbatim']
    exact = bool(verb.any()) and len(inside) > 0
    cand = np.zeros(n_src, bool)
    if len(inside) == 0 or len(ss) == 0:
        return exact, cand
    if exact:
        cand[np.unique(ss[verb])] = True
        return exact, cand
    words = sp['words']
    if words:
        count = np.zeros(n_src, int)
        for w in words:
            held = carries[np.asarray(w, int)].any(axis=0)
            count[np.unique(ss[held])] += 1
        if count.max() > 0:
            cand = count == count.max()
        return exact, cand
    held = carries[inside].any(axis=0)
    cand[np.unique(ss[held])] = True
    return exact, cand

NON = STOPWORDS | FILLERS
W = re.compile(r"\w+")

def load(d):
    R = []
    for f in sorted(glob.glob(d + '/*.pkl')):
        r = pickle.load(open(f, 'rb'))
        r['n'] = int(f.split('/')[-1][:4])
        R.append(r)
    return R

def tok_content(r):
    if 'tc' in r: return r['tc']
    text = r['answer']; out = []
    spans = [(m.start(), m.end(), m.group(0)) for m in W.finditer(unicodedata.normalize('NFKC', text))]
    for a, b in r['offsets']:
        word = ''
        for s, e, g in spans:
            if s < b and a < e: word = g.casefold(); break
        out.append(bool(word) and word not in NON)
    r['tc'] = np.array(out, bool)
    return r['tc']

def prep_span(r, sp):
    """Per-sentence terms for one span."""
    if 'terms' in sp: return sp
    exact, cand = candidates(r, sp)
    sp['exact'], sp['cand'] = exact, cand
    S = r['scores']; ss = r['sentence_source']; ins = sp['inside']
    cfg = r['config']
    w = context_weight_rows(r['answer_sentence'], [ins], cfg['context_weight'], cfg['context_scale'])[0]
    sp['ctx'] = w @ S
    sp['own'] = S[ins].sum(0) if len(ins) else np.zeros(S.shape[1])
    terms = {}
    if len(ins):
        a = r['answer_sentence'][ins[0]]
        same = (r['answer_sentence'] == a); same[ins] = False
        terms['flat'] = same.astype(float) @ S
        terms['flat_kw'] = (same & (r['keyword'] >= 0)).astype(float) @ S
        terms['flat_content'] = (same & tok_content(r)).astype(float) @ S
        # sentence game on the answer sentence, players: sentences of candidate sources
        pl = np.flatnonzero(cand[ss] & ~np.isnan(r['e_sent'][:, 0])) if cand.sum() >= 2 else np.zeros(0, int)
        sg = np.zeros(S.shape[1]); cs = np.zeros(S.shape[1])
        if len(pl):
            ea = r['e_as'][a:a + 1]
            sg[pl] = sentence_game_values([r['as_text'][a]], ea, [r['sent_texts'][j] for j in pl], r['e_sent'][pl])
            u = r['e_sent'][pl].astype(float); u /= np.linalg.norm(u, axis=1, keepdims=True)
            cs[pl] = (u @ (ea[0] / np.linalg.norm(ea[0])))
        terms['sg'] = sg; terms['cos'] = cs
        sg3 = np.zeros(S.shape[1]); sgn = np.zeros(S.shape[1]); sgw = np.zeros(S.shape[1])
        if len(pl):
            sg3[pl] = sentence_game_values([r['as_text'][a]], ea, [r['sent_texts'][j] for j in pl], r['e_sent'][pl], k=3)
            sgw[pl] = sentence_game_values(r['as_text'], r['e_as'], [r['sent_texts'][j] for j in pl], r['e_sent'][pl])
            pn = np.flatnonzero(~np.isnan(r['e_sent'][:, 0]))
            sgn[pn] = sentence_game_values([r['as_text'][a]], ea, [r['sent_texts'][j] for j in pn], r['e_sent'][pn])
        terms['sg3'] = sg3; terms['sg_need'] = sgn; terms['sg_whole'] = sgw
        sp['a'] = a
    sp['terms'] = terms
    return sp

def row_of(r, sp, mix=(), agg='sum', only_multi=True, only_exact=False):
    """Per-source scores: base (shipped) + sum(mu * term) for candidate sentences."""
    prep_span(r, sp)
    ss = r['sentence_source']; n = len(r['ids'])
    cand, exact = sp['cand'], sp['exact']
    per = sp['ctx'].copy()
    use = ((cand.sum() >= 2) or not only_multi) and (exact or not only_exact)
    extra = np.zeros(n)
    if use:
        for name, mu in mix:
            t = sp['terms'].get(name)
            if t is None: continue
            if agg == 'sum':
                np.add.at(extra, ss, mu * t)
            else:
                m = np.full(n, -np.inf); np.maximum.at(m, ss, mu * t); m[~np.isfinite(m)] = 0; extra += m
    perv = np.where(cand[ss], per, -np.inf if exact else sp['own'])
    row = np.zeros(n); np.add.at(row, ss, np.where(np.isfinite(perv), perv, 0))
    row = row + np.where(cand, extra, 0)
    if exact: row[~cand] = -np.inf
    return row

def span_acc(row, gold_idx):
    top = row.max(); t = np.flatnonzero(row == top)
    return len(set(t) & gold_idx) / len(t)

def evaluate(R, mix=(), agg='sum', only_multi=True, only_exact=False):
    out = {}
    for r in R:
        idx = {sid: i for i, sid in enumerate(r['ids'])}
        for sp in r['spans']:
            row = row_of(r, sp, mix, agg, only_multi, only_exact)
            acc = span_acc(row, {idx[g] for g in sp['gold']})
            out.setdefault(sp['cls'], []).append(acc); out.setdefault('all', []).append(acc)
    return out

def fmt(o):
    return ' | '.join(f"{100*np.mean(o.get(k,[np.nan])):.1f}" for k in ('all', 'several', 'nowhere', 'gold-only'))


if __name__ == "__main__":
    R = load(sys.argv[1]); half = int(sys.argv[2]) if len(sys.argv) > 2 else 144
    A = [r for r in R if r['n'] < half]; B = [r for r in R if r['n'] >= half]
    print(f"first half {len(A)} answers, second half {len(B)}: all | several | nowhere | gold-only")

    def show(nm, **kw):
        print(f"| {nm} | {fmt(evaluate(A, **kw))} | {fmt(evaluate(B, **kw))} |")

    show('context game (shipped)')
    for name in ['flat', 'flat_kw', 'flat_content']:
        for mu in [0.25, 1, 4]:
            show(f'+ {mu} x {name}', mix=[(name, mu)])
    for mu in [1, 4, 16]:
        show(f'+ {mu} x cos', mix=[('cos', mu)])
    for name in ['sg', 'sg3', 'sg_need', 'sg_whole']:
        for mu in [0.125, 0.25, 0.5, 1, 2, 4, 8]:
            show(f'+ {mu} x {name}', mix=[(name, mu)])
    for mu in [0.25, 0.5, 1, 4]:
        show(f'+ {mu} x sg, holders only', mix=[('sg', mu)], only_exact=True)
        show(f'+ {mu} x sg, max per source', mix=[('sg', mu)], agg='max')
