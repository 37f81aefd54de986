"""Declarative parameter validation: every refusal names the parameter, what was expected
and what was given; a wrong type is a TypeError, a wrong value a ValueError."""

import math

import pytest

from tokenshapley_rag._params import NONE, Boolean, Interval, Options, validate_params
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError

CONSTRAINTS = {
    "k": [Interval(int, 1, None)],
    "gamma": [Options(("auto",)), Interval(float, 0, None, closed="neither")],
    "weight": [Interval(float, 0, None)],
    "share": [Interval(float, 0, 1, closed="right")],
    "verbatim": [Boolean()],
    "threshold": [NONE, Interval(float, None, None)],
}


@pytest.mark.parametrize(
    "name, value",
    [("k", 1), ("k", 10**9), ("gamma", "auto"), ("gamma", 0.5), ("gamma", 2), ("weight", 0), ("weight", 0.0),
     ("share", 1.0), ("share", 1e-9), ("verbatim", False), ("threshold", None), ("threshold", -3.5)],
)
def test_accepted(name, value):
    validate_params(CONSTRAINTS, {name: value})


@pytest.mark.parametrize(
    "name, value, error, message",
    [
        ("k", 0, InvalidInputError, "k must be an int in [1, inf), got 0"),
        ("k", 2.0, InvalidInputTypeError, "k must be an int in [1, inf), got 2.0"),
        ("k", True, InvalidInputTypeError, "k must be an int in [1, inf), got True"),
        ("k", "3", InvalidInputTypeError, "k must be an int in [1, inf), got '3'"),
        ("gamma", 0.0, InvalidInputError, "gamma must be one of 'auto' or a finite number in (0, inf), got 0.0"),
        ("gamma", "median", InvalidInputError, "gamma must be one of 'auto' or a finite number in (0, inf), got 'median'"),
        ("gamma", math.inf, InvalidInputError, "gamma must be one of 'auto' or a finite number in (0, inf), got inf"),
        ("weight", -0.5, InvalidInputError, "weight must be a finite number in [0, inf), got -0.5"),
        ("weight", math.nan, InvalidInputError, "weight must be a finite number in [0, inf), got nan"),
        ("share", 0, InvalidInputError, "share must be a finite number in (0, 1], got 0"),
        ("verbatim", 1, InvalidInputTypeError, "verbatim must be a bool, got 1"),
        ("threshold", "0.1", InvalidInputTypeError, "threshold must be None or a finite number in (-inf, inf), got '0.1'"),
    ],
)
def test_refused_with_expected_and_actual(name, value, error, message):
    with pytest.raises(error) as info:
        validate_params(CONSTRAINTS, {name: value})
    assert str(info.value) == message
    # the typed errors are also the built-in kinds callers catch
    assert isinstance(info.value, TypeError if error is InvalidInputTypeError else ValueError)


def test_unconstrained_names_are_not_checked():
    validate_params(CONSTRAINTS, {"anything": object()})


# ---------------------------------------------------------------- the constructor's parameters


@pytest.mark.parametrize(
    "params, error, message",
    [
        ({"k": 0}, InvalidInputError, "k must be an int in [1, inf), got 0"),
        ({"m": "10"}, InvalidInputTypeError, "m must be an int in [1, inf), got '10'"),
        ({"gamma": -1.0}, InvalidInputError, "gamma must be one of 'auto' or a finite number in (0, inf), got -1.0"),
        ({"match": "fuzzy"}, InvalidInputError, "match must be one of 'word', 'word_or_token', 'normalized', 'exact', got 'fuzzy'"),
        ({"context_scale": 0.0}, InvalidInputError, "context_scale must be a finite number in (0, inf), got 0.0"),
        ({"verbatim": "yes"}, InvalidInputTypeError, "verbatim must be a bool, got 'yes'"),
        ({"support_threshold": float("nan")}, InvalidInputError, "support_threshold must be None or a finite number in (-inf, inf), got nan"),
        ({"max_sentence_tokens": 0}, InvalidInputError, "max_sentence_tokens must be None or an int in [1, inf), got 0"),
    ],
)
def test_constructor_and_from_pretrained_refuse_before_loading(params, error, message, monkeypatch):
    import tokenshapley_rag._attribution as attribution
    from tokenshapley_rag import TokenShapley

    def no_loading(*a, **k):
        raise AssertionError("the model was loaded before the parameters were checked")

    monkeypatch.setattr(attribution, "load_causal_lm", no_loading)
    for build in (TokenShapley, TokenShapley.from_pretrained):
        with pytest.raises(error) as info:
            build(**params)
        assert str(info.value) == message


@pytest.mark.slow
def test_an_encoder_is_injected_as_it_is(ts, cache_root):
    from tokenshapley_rag import TokenShapley

    built = TokenShapley(ts.encoder, cache_dir=cache_root, m=7)
    assert built.encoder is ts.encoder and built.loaded is ts.loaded
    assert (built.config["m"], built.config["layer"]) == (7, ts.encoder.layer)
    answer = "The Eiffel Tower is 330 metres tall."
    sources = ["The Eiffel Tower is 330 metres tall.", "Big Ben is in London."]
    # with the same parameters an injected encoder gives what the loading constructor gives
    same = TokenShapley(ts.encoder, cache_dir=cache_root).attribute("", sources, answer)
    expected = ts.attribute("", sources, answer)
    assert [(c.text, c.status, c.best.source_id) for c in same.citations] == [
        (c.text, c.status, c.best.source_id) for c in expected.citations
    ]
    assert [c.support for c in same.citations] == pytest.approx([c.support for c in expected.citations], abs=1e-9)
    with pytest.raises(InvalidInputError, match=r"model is a built encoder .* got \['layer'\] too"):
        TokenShapley(ts.encoder, layer=6)
