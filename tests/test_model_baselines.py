"""HidSim, EmbSim and ContextCite: their math on hand-made inputs, and their pipelines on a
deterministic fake LM (no model). Runs on the real models are in test_eval_models.py (slow)."""

from __future__ import annotations

import numpy as np
import pytest

from tokenshapley_rag._types import Source
from tokenshapley_rag.benchmark import (
    AttributionExample,
    GoldSpan,
    SentenceAttributor,
    load_dataset,
    rank_sentences,
    run_ranking_eval,
    run_span_eval,
    sentence_units,
)
from tokenshapley_rag.benchmark._baselines import MODEL_BASELINE_NAMES, SpanAttributor, make_baseline
from tokenshapley_rag.benchmark._methods import METHOD_NAMES
from tokenshapley_rag.benchmark._model_baselines import (
    ContextCiteAttributor,
    HidSimAttributor,
    aggregate_logit_probs,
    contextcite_masks,
    lasso_fit,
    soft_match_scores,
    window_scores,
)
from tokenshapley_rag.errors import InvalidInputError

SOURCES = (Source("A", "Paris is in France. It is big."), Source("B", "Berlin is in Germany."))
ANSWER = "Paris and Berlin"
EXAMPLE = AttributionExample(
    "toy", "Which cities?", SOURCES, ANSWER,
    (GoldSpan(0, 5, "Paris", ("A",)), GoldSpan(10, 16, "Berlin", ("B",))), (), {},
)  # fmt: skip


def test_method_names():
    assert METHOD_NAMES == ("tokenshapley", "lexical", "exact", "random", "hidsim", "embsim", "contextcite")
    assert MODEL_BASELINE_NAMES == ("hidsim", "embsim", "contextcite")
    with pytest.raises(InvalidInputError, match="contextcite"):
        make_baseline("attention")


# ----------------------------------------------------------------------------- Lasso surrogate


def _sklearn_reference(X, y, alpha):
    sk = pytest.importorskip("sklearn")
    from sklearn.linear_model import Lasso
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    assert sk
    scaler = StandardScaler()
    lasso = Lasso(alpha=alpha, random_state=0, fit_intercept=True, tol=1e-12, max_iter=1_000_000)
    make_pipeline(scaler, lasso).fit(X.astype(np.float64), y)
    weight = lasso.coef_ / scaler.scale_
    bias = lasso.intercept_ - (scaler.mean_ / scaler.scale_) @ lasso.coef_
    return weight, bias


@pytest.mark.filterwarnings("ignore:Objective did not converge")
@pytest.mark.parametrize("n, p", [(64, 12), (8, 20), (256, 40)])
def test_lasso_matches_scikit_learn_pipeline(n, p):
    rng = np.random.RandomState(n + p)
    X = rng.rand(n, p) < 0.5
    w_true = np.where(rng.rand(p) < 0.3, rng.randn(p) * 2, 0.0)
    y = X @ w_true + 0.1 * rng.randn(n) - 1.0
    w, b = lasso_fit(X, y, alpha=0.01)
    w_ref, b_ref = _sklearn_reference(X, y, 0.01)
    np.testing.assert_allclose(w, w_ref, atol=1e-5)
    assert b == pytest.approx(b_ref, abs=1e-5)
    np.testing.assert_allclose(X @ w + b, X @ w_ref + b_ref, atol=1e-5)


def test_lasso_edge_cases():
    X = np.array([[1, 1, 0], [1, 0, 1], [1, 1, 1], [1, 0, 0]], dtype=bool)  # column 0 constant
    w, b = lasso_fit(X, np.array([3.0, 1.0, 4.0, 0.0]), alpha=1e-9)
    np.testing.assert_allclose(w, [0.0, 3.0, 1.0], atol=1e-6)
    assert b == pytest.approx(0.0, abs=1e-6)
    w, b = lasso_fit(X, np.array([3.0, 1.0, 4.0, 0.0]), alpha=100.0)  # everything shrunk away
    np.testing.assert_array_equal(w, 0.0)
    assert b == pytest.approx(2.0)
    for bad in ((np.zeros((0, 2)), np.zeros(0)), (np.zeros((2, 2)), np.zeros(3)), (np.zeros((1, 1)), np.array([np.nan]))):
        with pytest.raises(InvalidInputError):
            lasso_fit(*bad)


def test_contextcite_masks_are_the_packages():
    m = contextcite_masks(5, 7)
    for i in range(5):
        want = np.random.RandomState(i).choice([False, True], size=7, p=[0.5, 0.5])
        np.testing.assert_array_equal(m[i], want)
    np.testing.assert_array_equal(contextcite_masks(2, 7, base_seed=3), m[3:5])
    big = contextcite_masks(64, 200, keep_prob=0.25)
    assert big.shape == (64, 200) and 0.2 < big.mean() < 0.3
    for kw in ({"keep_prob": 0.0}, {"keep_prob": 1.5}):
        with pytest.raises(InvalidInputError):
            contextcite_masks(2, 2, **kw)
    with pytest.raises(InvalidInputError):
        contextcite_masks(-1, 2)


def test_aggregate_logit_probs():
    # token probabilities 1/2 and 1/2 -> p(seq) = 1/4 -> logit = log(1/3)
    np.testing.assert_allclose(aggregate_logit_probs(np.zeros((1, 2))), [np.log(1 / 3)])
    # one token with p = 0.9 -> its logit is returned unchanged
    lp = np.log(0.9 / 0.1)
    np.testing.assert_allclose(aggregate_logit_probs(np.array([[lp], [-lp]])), [lp, -lp])
    assert np.all(np.isfinite(aggregate_logit_probs(np.array([[80.0, 80.0]]))))  # p == 1 in floats
    with pytest.raises(InvalidInputError):
        aggregate_logit_probs(np.zeros(3))


# ----------------------------------------------------------------------------- HidSim math


def test_window_scores_by_hand():
    sim = np.zeros((3, 8))
    sim[0, 4] = sim[1, 5] = sim[2, 6] = 1.0  # the span copies context tokens 4..6
    assert window_scores(sim) == 1.0
    sim2 = sim.copy()
    sim2[1, 5] = 0.0
    sim2[0, 0] = 0.9  # a lone strong match elsewhere, aligned with nothing
    assert window_scores(sim2, n_anchors=3, window=0) == pytest.approx(2 / 3)
    assert window_scores(sim2, n_anchors=1, window=0) == pytest.approx(2 / 3)  # anchor (0, 4)
    # an anchor at the context's edge: positions past the end count 0
    edge = np.zeros((3, 2))
    edge[0, 1] = 1.0
    assert window_scores(edge, window=0) == pytest.approx(1 / 3)
    # a shifted window is found within `window`, not beyond
    shifted = np.zeros((2, 10))
    shifted[0, 3] = 0.5
    shifted[0, 6] = shifted[1, 7] = 0.45
    assert window_scores(shifted, n_anchors=1, window=0) == pytest.approx(0.25)
    assert window_scores(shifted, n_anchors=1, window=3) == pytest.approx(0.45)
    assert window_scores(np.zeros((0, 3))) == -1.0 and window_scores(np.zeros((2, 0))) == -1.0
    for kw in ({"n_anchors": 0}, {"window": -1}):
        with pytest.raises(InvalidInputError):
            window_scores(sim, **kw)


def test_soft_match_scores_by_hand():
    sim = np.array([[1.0, 0.2, 0.0, 0.3], [0.1, 0.0, 0.9, 0.4]])
    got = soft_match_scores(sim, [np.array([0, 1]), np.array([2, 3]), np.array([], dtype=int)])
    np.testing.assert_allclose(got, [(1.0 + 0.1) / 2, (0.3 + 0.9) / 2, -1.0])
    np.testing.assert_array_equal(soft_match_scores(np.zeros((0, 4)), [np.array([0])]), [-1.0])


# ----------------------------------------------------------------------------- pipelines on a fake LM


def test_hidsim_on_the_fake_lm(fake_lm):
    h = make_baseline("hidsim", loaded=fake_lm)
    assert isinstance(h, HidSimAttributor) and h.layer == 2 and h.name == "hidsim"
    assert isinstance(h, SpanAttributor) and isinstance(h, SentenceAttributor)
    np.testing.assert_allclose(h.score_spans(EXAMPLE), [[1.0, 0.0], [0.0, 1.0]])
    units = sentence_units(SOURCES)
    s = h.score_sentences("", SOURCES, "Paris is big", units).scores
    np.testing.assert_allclose(s, [2 / 3, 2 / 3, 1 / 3])  # {paris, is} / {is, big} / {is}
    with pytest.raises(InvalidInputError):
        HidSimAttributor(fake_lm, layer=9)


def test_contextcite_on_the_fake_lm(fake_lm):
    cc = make_baseline("contextcite", beta=32, loaded=fake_lm)
    assert isinstance(cc, ContextCiteAttributor) and cc.name == "contextcite-b32" and cc.config["beta"] == 32
    scores = cc.score_spans(EXAMPLE)
    assert scores.shape == (2, 2)
    assert scores[0, 0] > 1.0 and abs(scores[0, 1]) < 0.05 * scores[0, 0]  # "Paris": only A matters
    assert scores[1, 1] > 1.0 and abs(scores[1, 0]) < 0.05 * scores[1, 1]  # "Berlin": only B
    assert fake_lm.scored == 32  # one teacher-forced pass per ablation, shared by the spans
    # sentence level: "Paris ... big" needs A's two sentences, never B's
    units = sentence_units(SOURCES)
    s = cc.score_sentences("", SOURCES, "Paris is big", units).scores
    assert rank_sentences(s)[-1] == 2 and s[0] > 1.0 and s[1] > 1.0
    # the weights reproduce the surrogate fitted by hand
    masks, lp, offs = cc.ablation_logit_probs("", SOURCES, "Paris is big", units)
    w, _ = lasso_fit(masks, aggregate_logit_probs(lp) / 3, alpha=0.01)
    np.testing.assert_allclose(s, 3 * w)
    with pytest.raises(InvalidInputError):
        ContextCiteAttributor(fake_lm, beta=0)


def test_model_baselines_run_through_the_runners(fake_lm, fixture_data):
    for name in ("hidsim", "contextcite"):
        att = make_baseline(name, beta=4, loaded=fake_lm)
        rep = run_span_eval("kv", att, load_dataset("kv", fixture_data, limit=2), order_control=False, progress=False)
        assert rep.n == 2 and rep.metrics["n_spans"] == 2
        rep = run_ranking_eval("wice", att, load_dataset("wice", fixture_data, limit=2), progress=False)
        assert rep.n == 2 and 0.0 <= rep.metrics["recall@5"] <= 1.0
    # with one-hot states, HidSim finds the KV value's pair exactly
    rep = run_span_eval("kv", make_baseline("hidsim", loaded=fake_lm), load_dataset("kv", fixture_data, limit=3), order_control=False, progress=False)
    assert rep.metrics["accuracy"] == 1.0
