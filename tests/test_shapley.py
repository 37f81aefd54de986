"""The exact KNN-Shapley engine against the brute-force definition of the game."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenshapley_rag import shapley
from tokenshapley_rag.shapley import (
    knn_shapley,
    knn_shapley_batch,
    knn_shapley_brute_force,
    knn_utility,
)

# Similarity values that stress the engine: exact dyadic quanta make subset sums tie
# exactly (the zero-sum rule decides), zeros make non-matches vote "correct", tiny values
# test underflow, and repeated values test the rank tie-break.
_value = st.one_of(
    st.floats(0.0, 1.0, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]),
    st.sampled_from([0.0, 5e-324, 1e-300, 1e-200]),
    st.integers(0, 8).map(lambda i: i / 8.0),
)


@st.composite
def _game(draw, max_n=10):
    n = draw(st.integers(0, max_n))
    sims = np.array(draw(st.lists(_value, min_size=n, max_size=n)), dtype=np.float64)
    mode = draw(st.sampled_from(["random", "all", "none"]))
    if mode == "random":
        matches = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    else:
        matches = np.full(n, mode == "all")
    k = draw(st.integers(1, 12))  # includes k >= n
    weighted = draw(st.booleans())
    return sims, matches, k, weighted


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_game())
def test_matches_brute_force(game):
    sims, matches, k, weighted = game
    fast = knn_shapley(sims, matches, k, weighted=weighted)
    slow = knn_shapley_brute_force(sims, matches, k, weighted=weighted)
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)


@settings(max_examples=300, deadline=None)
@given(_game())
def test_efficiency_axiom(game):
    sims, matches, k, weighted = game
    phi = knn_shapley(sims, matches, k, weighted=weighted)
    grand = knn_utility(sims, matches, k, range(len(sims)), weighted=weighted)
    assert phi.sum() == pytest.approx(grand, abs=1e-12)


def test_k1_closed_form():
    # K = 1 (Jia et al. 2019): phi_i = v_i / i - sum_{j > i} v_j / (j (j - 1)), 1-indexed ranks.
    rng = np.random.default_rng(0)
    sims = rng.random(200)
    matches = rng.random(200) < 0.3
    phi = knn_shapley(sims, matches, 1)
    order = np.argsort(-sims, kind="stable")
    v = matches[order].astype(float)
    ranks = np.arange(1, 201, dtype=float)
    tail = np.concatenate([np.cumsum((v / (ranks * (ranks - 1) + (ranks == 1)))[::-1])[::-1][1:], [0.0]])
    expected = v / ranks - tail
    np.testing.assert_allclose(phi[order], expected, atol=1e-12)


def test_known_values_and_tie_rules():
    # Nearest is a match: it takes all the credit it can.
    np.testing.assert_allclose(knn_shapley([0.9, 0.5, 0.1], [True, False, True], 1), [5 / 6, -1 / 6, 1 / 3])
    # Equal similarities: lower index ranks first, so the mismatch at index 0 is "nearest".
    np.testing.assert_allclose(knn_shapley([0.5, 0.5], [False, True], 1), [-0.5, 0.5])
    np.testing.assert_allclose(knn_shapley([0.5, 0.5], [True, False], 1), [1.0, 0.0])
    # A non-matching neighbour with similarity 0 casts a zero vote, which counts as correct.
    np.testing.assert_allclose(knn_shapley([0.0], [False], 1), [1.0])
    # Weighted K=2: a strong match outvotes a weaker mismatch (0.8 - 0.3 >= 0) ...
    assert knn_utility([0.8, 0.3], [True, False], 2, [0, 1]) == 1.0
    # ... and exact cancellation counts as correct; unweighted, any 1-1 tie is correct too.
    assert knn_utility([0.5, 0.5], [True, False], 2, [0, 1]) == 1.0
    assert knn_utility([0.9, 0.1], [False, True], 2, [0, 1], weighted=False) == 1.0
    assert knn_utility([0.9, 0.1], [False, True], 2, [0, 1]) == 0.0


@pytest.mark.parametrize("parallel_work", [0, 10**12], ids=["parallel", "serial"])
def test_batch_equals_rows(monkeypatch, parallel_work):
    # Both compiled paths (numba threads for big batches, one thread for small ones).
    monkeypatch.setattr(shapley, "_PARALLEL_WORK", parallel_work)
    rng = np.random.default_rng(1)
    sims = rng.random((50, 12))
    sims[::7] = np.round(sims[::7] * 4) / 4  # some rows with exact ties
    matches = rng.random((50, 12)) < 0.4
    for k in (1, 2, 3, 5, 12, 20):
        for weighted in (True, False):
            batch = knn_shapley_batch(sims, matches, k, weighted=weighted)
            rows = np.stack([knn_shapley(s, m, k, weighted=weighted) for s, m in zip(sims, matches)])
            np.testing.assert_array_equal(batch, rows)


def test_larger_n_against_brute_force_and_efficiency():
    rng = np.random.default_rng(2)
    for n, k in ((14, 3), (13, 5), (12, 7)):
        sims = rng.random(n)
        matches = rng.random(n) < 0.5
        np.testing.assert_allclose(knn_shapley(sims, matches, k), knn_shapley_brute_force(sims, matches, k), atol=1e-12)
    sims = rng.random(400)
    matches = rng.random(400) < 0.5
    for k in (1, 2, 3):
        phi = knn_shapley(sims, matches, k)
        assert phi.sum() == pytest.approx(knn_utility(sims, matches, k, range(400)), abs=1e-9)


def test_empty_inputs():
    assert knn_shapley([], [], 3).shape == (0,)
    assert knn_shapley_batch(np.zeros((4, 0)), np.zeros((4, 0), bool), 1).shape == (4, 0)
    assert knn_shapley_batch(np.zeros((0, 5)), np.zeros((0, 5), bool), 1).shape == (0, 5)


@pytest.mark.parametrize(
    ("sims", "matches", "k", "error", "message"),
    [
        ([0.1, np.nan], [True, False], 1, ValueError, "finite"),
        ([0.1, np.inf], [True, False], 1, ValueError, "finite"),
        ([0.1, -0.2], [True, False], 1, ValueError, ">= 0"),
        ([0.1, 0.2], [True], 1, ValueError, "same shape"),
        ([0.1, 0.2], [True, False], 0, ValueError, "k >= 1"),
        ([0.1, 0.2], [True, False], 1.5, TypeError, "integer"),
        ([0.1, 0.2], [True, False], True, TypeError, "integer"),
        ([[0.1, 0.2]], [[True, False]], 1, ValueError, "1 dimension"),
        (["a", "b"], [True, False], 1, TypeError, "numeric"),
        ([0.1, 0.2], [2, 0], 1, ValueError, "booleans"),
    ],
)
def test_validation(sims, matches, k, error, message):
    with pytest.raises(error, match=message):
        knn_shapley(sims, matches, k)


def test_batch_validation():
    with pytest.raises(ValueError, match="2 dimension"):
        knn_shapley_batch([0.1, 0.2], [True, False], 1)
