"""The sentence-game span rule of the evaluation (``tokenshapley eval --span-rule sentence-game``,
docs/method.md §10): the spans' holders and answer sentences on the real default model, and
the rule's term by hand (the sentence embedder replaced by a bag-of-words stand-in)."""

import argparse
import re
from types import SimpleNamespace as NS

import numpy as np
import pytest

from tokenshapley_rag._sentence_game import sentence_game_values
from tokenshapley_rag.benchmark._data import AttributionExample, GoldSpan
from tokenshapley_rag.benchmark._methods import TokenShapleyAttributor, make_attributor
from tokenshapley_rag.errors import InvalidInputError

pytestmark = pytest.mark.slow

SOURCES = ["The tower is 330 metres tall and stands in Paris.", "The tower was completed in 1859 in London.", "Tell me more."]
ANSWER = "The tower is 330 metres tall. The tower was completed in 1859."
SECOND = ANSWER.index("The tower", 5)


def _bag_of_words(texts):
    vocab = sorted({w for t in [ANSWER, *SOURCES] for w in re.findall(r"\w+", t.lower())})
    out = np.array([[re.findall(r"\w+", t.lower()).count(w) for w in vocab] for t in texts], dtype=float)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def example():
    from tokenshapley_rag._types import Source

    return AttributionExample(
        id="towers", question="Tell me about the towers.", sources=tuple(Source(str(i), t) for i, t in enumerate(SOURCES)),
        answer=ANSWER,
        spans=(GoldSpan(SECOND, SECOND + 9, "The tower", ("1",)), GoldSpan(ANSWER.index("1859"), ANSWER.index("1859") + 4, "1859", ("1",))),
        gold=(), meta={},
    )


def test_holders_and_answer_sentence(ts, example):
    res = ts.attribute(query=example.question, sources=example.sources, response=ANSWER)
    assert res.span_holders(SECOND, SECOND + 9) == ["0", "1"]
    assert res.span_holders(0, 3) == ["0", "1"]  # "The", cut at a word boundary
    four = ANSWER.index("1859")
    assert res.span_holders(four, four + 4) == ["1"]
    a, b = res.span_answer_sentence(SECOND, SECOND + 9)
    assert ANSWER[a:b].strip() == "The tower was completed in 1859."
    a, b = res.span_answer_sentence(0, 3)
    assert ANSWER[a:b].strip() == "The tower is 330 metres tall."


def test_rule_adds_the_sentence_game_among_holders(ts, example):
    plain = TokenShapleyAttributor(ts).score_spans(example)
    rule = TokenShapleyAttributor(ts, span_rule="sentence-game", span_weight=0.5)
    rule._embedder = NS(embed=_bag_of_words)
    got = rule.score_spans(example)
    # "The tower" (second sentence) is held by sources 0 and 1, one sentence each. The game of
    # "The tower was completed in 1859.": words tower, completed, 1859; source 1's sentence is
    # nearer. "tower" (both hold it): 1/2 each (K = 1 recursion); "completed", "1859" (only
    # source 1): 1 to source 1. So [0.5, 2.5], times the weight 0.5.
    game = sentence_game_values(["The tower was completed in 1859."], _bag_of_words(["The tower was completed in 1859."]),
                                SOURCES[:2], _bag_of_words(SOURCES[:2]))
    np.testing.assert_allclose(game, [0.5, 2.5])
    np.testing.assert_allclose(got[0, :2], plain[0, :2] + 0.5 * game)
    assert got[0, 2] < got[0, :2].min()  # source 2 lacks the span: still below every holder
    # "1859" has one holder: the rule leaves its row alone.
    np.testing.assert_array_equal(got[1], plain[1])
    assert np.argmax(got[0]) == 1
    assert rule.config["span_rule"] == "sentence-game" and rule.config["span_weight"] == 0.5
    assert "span_rule" not in TokenShapleyAttributor(ts).config


def test_rule_options_from_the_command_line(ts, monkeypatch):
    import tokenshapley_rag.benchmark._methods as methods

    monkeypatch.setattr(methods, "TokenShapley", lambda **_: ts)
    args = argparse.Namespace(span_rule="sentence-game", span_weight=2.0)
    made = make_attributor("tokenshapley", args)
    assert (made.span_rule, made.span_weight) == ("sentence-game", 2.0)
    assert make_attributor("tokenshapley", argparse.Namespace()).span_rule == "context"
    with pytest.raises(InvalidInputError):
        TokenShapleyAttributor(ts, span_rule="other")
