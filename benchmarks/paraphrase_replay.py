"""Replay the ranking rules of docs/reports/paraphrase.md on the records of
benchmarks/paraphrase_record.py (out/rec-<set>/), and print the table rows.

    python benchmarks/paraphrase_replay.py nq|wice|paraphrase

The SmolLM2-key rows (nq, wice) also need out/lm-<set>/ and out/as-<set>/: the mean-pooled
layer-8 keys of each answer sentence encoded as a source sentence, and the mean of its tokens'
query states, per record.
"""
import os
import pickle, glob, re, sys, math
import numpy as np
from tokenshapley_rag._segment import STOPWORDS, FILLERS
from tokenshapley_rag.shapley import knn_shapley
NON = STOPWORDS | FILLERS
W = re.compile(r"\w+")

def load(ds):
    recs = [pickle.load(open(f, 'rb')) for f in sorted(glob.glob(f'out/rec-{ds}/*.pkl'))]
    return recs

def f1at5(recs, scores_list, lo=0, hi=None):
    P, R = [], []
    for r, s in list(zip(recs, scores_list))[lo:hi]:
        rel = np.array(r['relevant'], bool)
        if s is None or rel.sum() == 0: continue
        order = np.argsort(-np.asarray(s, float), kind='stable')
        hit = rel[order[:5]].sum()
        P.append(hit / 5); R.append(hit / rel.sum())
    p, rc = np.mean(P), np.mean(R)
    return 2 * p * rc / (p + rc) if p + rc else 0.0, len(P)

def tok_words(r):
    resp = r['response']; out = []
    for a, b in r['tok_offsets']:
        m = None
        for mm in W.finditer(resp):
            if mm.start() <= max(a, 0) < mm.end() or (a <= mm.start() < b):
                m = mm; break
        out.append(m.group(0).lower() if m else '')
    return out

def embsim(r): return (r['emb_parts'] @ r['emb_units'].T).max(0)
def qsim(r): return r['emb_question'] @ r['emb_units'].T if r['emb_question'] is not None else np.zeros(len(r['units']))

def weighted(r, mode):
    if 'tok_unit_scores' not in r: return np.zeros(len(r['units']))
    S = r['tok_unit_scores']; kw = r['tok_keyword']; words = r.setdefault('_words', tok_words(r))
    content = np.array([bool(w) and w not in NON for w in words])
    if mode == 'all': w = np.ones(len(words))
    elif mode == 'content': w = content.astype(float)
    elif mode == 'content_kwnorm':
        w = np.zeros(len(words))
        for k in set(kw.tolist()):
            if k < 0: continue
            idx = np.where((kw == k) & content)[0]
            if len(idx): w[idx] = 1.0 / len(np.where(kw == k)[0])
    elif mode == 'content_wordnorm':
        w = np.zeros(len(words))
        # each content word once: 1/len(tokens of that word occurrence)
        for k in set(kw.tolist()):
            idx = np.where(kw == k)[0]
            idx = idx[content[idx]]
            if len(idx): w[idx] = 1.0 / len(idx)
    return w @ S

def zs(x):
    x = np.asarray(x, float); sd = x.std()
    return (x - x.mean()) / sd if sd > 0 else x * 0

def src_smooth(r, s, lam, how='max'):
    s = np.asarray(s, float); src = np.array(r['unit_source']); out = s.copy()
    for q in set(src.tolist()):
        m = src == q
        agg = s[m].max() if how == 'max' else s[m].sum() if how == 'sum' else s[m].mean()
        out[m] = s[m] + lam * agg
    return out

def sent_game(r, k=1, keys='emb', words_from='content', match_on='unit', m=None):
    """Sentence-level KNN game: players = units; per answer sentence a, per content word w of a:
    neighbours ranked by cosine(answer sentence a, unit); a unit matches when it holds w. Sum over words."""
    U = r['emb_units']; n = len(U)
    out = np.zeros(n)
    texts = [set(W.findall(t.lower())) for t in r['unit_texts']]
    for ai, part in enumerate(r['answer_sentences']):
        q = r['emb_parts'][ai]
        sims = U @ q
        ws = [w for w in dict.fromkeys(W.findall(part.lower())) if w not in NON]
        for w in ws:
            match = np.array([w in t for t in texts])
            if not match.any(): continue
            s = np.exp(sims)  # positive similarities, order = cosine order
            out += knn_shapley(s, match, k)
    return out

def sent_game2(r, k=1, tau=1.0, stem=0, query='part', keys=None, qkeys=None, words='content'):
    U = r['emb_units'] if keys is None else keys
    n = len(U); out = np.zeros(n)
    norm = (lambda w: w[:stem]) if stem else (lambda w: w)
    texts = [set(norm(w) for w in W.findall(t.lower())) for t in r['unit_texts']]
    for ai, part in enumerate(r['answer_sentences']):
        if qkeys is not None: q = qkeys[ai]
        elif query == 'part': q = r['emb_parts'][ai]
        elif query == 'qa': q = r['emb_qa']
        sims = U @ q
        ws = [w for w in dict.fromkeys(W.findall(part.lower())) if w not in NON]
        ws = list(dict.fromkeys(norm(w) for w in ws))
        for w in ws:
            match = np.array([w in t for t in texts])
            if not match.any(): continue
            out += knn_shapley(np.exp((sims - sims.max()) / tau), match, k)
    return out

def sent_game3(r, Ukeys, Akeys, k=1, centered=False):
    """answer sentences by the library's segmentation (tok_answer_sentence); words from its tokens."""
    U = np.asarray(Ukeys, float); A = np.asarray(Akeys, float)
    if centered:
        mu = U.mean(0); U = U - mu; A = A - mu
    U = U / np.maximum(np.linalg.norm(U, axis=1, keepdims=True), 1e-9)
    A = A / np.maximum(np.linalg.norm(A, axis=1, keepdims=True), 1e-9)
    n = len(U); out = np.zeros(n)
    texts = [set(W.findall(t.lower())) for t in r['unit_texts']]
    asent = r['tok_answer_sentence']; resp = r['response']
    for ai in range(A.shape[0]):
        idx = np.where(asent == ai)[0]
        if not len(idx): continue
        a, b = r['tok_offsets'][idx[0]][0], r['tok_offsets'][idx[-1]][1]
        part = resp[a:b]
        sims = U @ A[ai]
        for w in dict.fromkeys(x for x in W.findall(part.lower()) if x not in NON):
            match = np.array([w in t for t in texts])
            if not match.any(): continue
            out += knn_shapley(np.exp(sims - sims.max()), match, k)
    return out
from tokenshapley_rag._sentence_game import sentence_game_values, evidence_scores
from tokenshapley_rag._segment import split_sentences
def lib_sg(r):
    parts=r['answer_sentences']
    return sentence_game_values(parts, r['emb_parts'], r['unit_texts'], r['emb_units'])
def prep(ds):
    R=[r for r in load(ds) if 'keyword_score' in r]
    for r in R: r['sg']=lib_sg(r); r['emb']=embsim(r)
    return R
def f1(R,S,a=0,b=None): return f1at5(R,S,a,b)[0]
from tokenshapley_rag.benchmark._baselines import LexicalAttributor
from tokenshapley_rag.benchmark._data import load_dataset
from tokenshapley_rag.benchmark._paraphrase import load_paraphrase_set
from tokenshapley_rag.benchmark._protocols import _nonempty
from tokenshapley_rag.benchmark._sentences import sentence_units
ds=sys.argv[1]
R=prep(ds)
if ds=='paraphrase': exs={e.id:e for e in load_paraphrase_set('/work/shared/data',limit=60)}
else: exs={e.id:e for e in load_dataset(ds,'/work/shared/data',limit=80)}
lex=LexicalAttributor()
for i,r in enumerate(R):
    ex=exs[r['id']]; src=_nonempty(ex.sources); units=sentence_units(src,split=(ds!='wice'))
    assert [u.as_triple() for u in units]==[tuple(u) for u in r['units']]
    r['lex']=lex.score_sentences(r['query'] if ds!='wice' else '',src,r['response'],units).scores
    r['qnum']=list(exs).index(r['id'])
    r['qs']=qsim(r)
    for d in ('lm','as'):
        f=f'out/{d}-{ds}/{r["qnum"]:04d}.pkl'
        if os.path.exists(f): r.update(pickle.load(open(f,'rb')))
R=[r for r in R if any(r['relevant'])]
half = 40 if ds=='nq' else (20 if ds=='wice' else 30)
A=[r for r in R if r['qnum']<half]; B=[r for r in R if r['qnum']>=half]
def p1(RR,S):
    return np.mean([np.array(r['relevant'])[np.argsort(-np.asarray(s),kind='stable')[0]] for r,s in zip(RR,S)])
def row(nm,fn):
    SA=[fn(r) for r in A]; SB=[fn(r) for r in B]
    cells=[f1at5(A,SA)[0], f1at5(B,SB)[0] if B else float('nan'), f1at5(A+B,SA+SB)[0]]
    extra=f" | {p1(A+B,SA+SB):.3f}"
    print(f"| {nm} | {cells[0]:.3f} | {cells[1]:.3f} | {cells[2]:.3f}{extra} |")
print(f"{ds}: choose n={len(A)} (examples 1-{half}), check n={len(B)}, all {len(A)+len(B)}")
ev=lambda r,b,l,g='sg',base='keyword_score': evidence_scores(r[base],r[g] if g else 0*r[base],r['unit_source'],weight=b,passage=l)
row('lexical (IDF word overlap)',lambda r:r['lex'])
row('EmbSim',lambda r:r['emb'])
row('EmbSim + passage term λ=1',lambda r:ev(r,0,1,None,'emb'))
row('TokenShapley `keyword_score` (default)',lambda r:r['keyword_score'])
row('TokenShapley `score` (whole answer, stopwords included)',lambda r:r['score'])
row('token game, content words only (stopwords out)',lambda r:weighted(r,'content'))
row('token game, content words, each keyword weight 1',lambda r:weighted(r,'content_kwnorm'))
row('`keyword_score` + passage term λ=1',lambda r:ev(r,0,1,None))
row('sentence game alone (MiniLM keys, K=1)',lambda r:r['sg'])
row('sentence game alone, K=3',lambda r:sent_game2(r,3,0.2))
row('sentence game alone, word stems (5 letters)',lambda r:sent_game2(r,1,1.0,5))
if ds!='paraphrase' and all('unit_pooled' in r and 'ans_states' in r for r in R):  # out/lm-, out/as- records present
    cn=lambda X:np.asarray(X,float)/np.maximum(np.linalg.norm(X,axis=1,keepdims=True),1e-9)
    row('sentence game, SmolLM2 layer-8 keys mean-pooled (answer sentences encoded as sources)',lambda r:sent_game2(r,1,keys=cn(r['unit_pooled']),qkeys=cn(r['ans_pooled'])))
    row('sentence game, SmolLM2 keys; query = mean of the answer tokens\' states',lambda r:sent_game3(r,r['unit_pooled'],r['ans_states']))
    row('`keyword_score` + 4 × sentence game (SmolLM2 keys, answer encoded as sources)',lambda r:r['keyword_score']+4*sent_game2(r,1,keys=cn(r['unit_pooled']),qkeys=cn(r['ans_pooled'])))
    row('`keyword_score` + 4 × sentence game (SmolLM2 keys, answer states)',lambda r:r['keyword_score']+4*sent_game3(r,r['unit_pooled'],r['ans_states']))
for b in [1,2,4,8]:
    for l in ([0,0.5,1,2] if ds!='wice' else [0]):
        row(f'rule b={b}, λ={l}',lambda r,b=b,l=l:ev(r,b,l))
if ds=='nq':
    row('question ↔ sentence cosine (not attribution: ignores the answer)',lambda r:qsim(r))
    row('question cosine + passage term λ=1 (not attribution)',lambda r:ev(r,0,1,None,'qs') if 'qs' in r else None)
