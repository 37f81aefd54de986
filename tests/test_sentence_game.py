"""The sentence game (docs/method.md §9): exact Shapley values against the brute-force
definition, and the evidence ranking rule by hand."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenshapley_rag._sentence_game import (
    content_words,
    evidence_scores,
    sentence_game_values,
    sentence_source_scores,
    sentences_covered,
    unit_rows,
)
from tokenshapley_rag._types import Source
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError
from tokenshapley_rag.shapley import knn_shapley_brute_force, knn_utility

def _cosines(a, u):
    # the similarities the game ranks by, computed as sentence_game_values does (parallel but
    # unequal embeddings tie or not by float rounding; ties go to the lower index)
    return unit_rows(a) @ unit_rows(u).T


VOCAB = ["paris", "tower", "iron", "rome", "the", "built"]


def _brute(answer_sentences, a_emb, sentences, s_emb, k):
    """The definition: for every (answer sentence, content word) game, enumerate coalitions."""
    cos_all = _cosines(a_emb, s_emb)
    out = np.zeros(len(sentences))
    for i, text in enumerate(answer_sentences):
        cos = cos_all[i]
        sims = np.exp(cos - cos.max())
        for w in content_words(text):
            match = np.array([w in s.lower().replace(".", " ").split() for s in sentences])
            if match.any():
                out += knn_shapley_brute_force(sims, match, k)
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 7).flatmap(
        lambda n: st.tuples(
            st.lists(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3), min_size=n, max_size=n),
            st.lists(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3), min_size=1, max_size=2),
            st.integers(0, 2**31 - 1),
            st.integers(1, 3),
        )
    )
)
def test_matches_brute_force_and_is_efficient(case):
    sent_words, ans_words, seed, k = case
    rng = np.random.default_rng(seed)
    sentences = [" ".join(ws) + "." for ws in sent_words]
    answers = [" ".join(ws) + "." for ws in ans_words]
    # a few equal embeddings so that ties (lower index first) are exercised
    s_emb = rng.integers(1, 4, size=(len(sentences), 3)).astype(float)
    a_emb = rng.integers(1, 4, size=(len(answers), 3)).astype(float)
    got = sentence_game_values(answers, a_emb, sentences, s_emb, k=k)
    np.testing.assert_allclose(got, _brute(answers, a_emb, sentences, s_emb, k), atol=1e-12)
    # efficiency: the values add up to the number of (sentence, word) games that are won
    won = 0.0
    for i, text in enumerate(answers):
        cos = _cosines(a_emb, s_emb)[i]
        for w in content_words(text):
            match = np.array([w in s[:-1].split() for s in sentences])
            if match.any():
                won += knn_utility(np.exp(cos - cos.max()), match, k, range(len(sentences)))
    assert got.sum() == pytest.approx(won)


def test_by_hand():
    e = np.eye(3)
    # nearest sentence lacks "paris": the holder gains 1/2, the nearer non-holder loses 1/2
    assert sentence_game_values(["Paris."], np.array([[1.0, 0.0, 0.5]]), ["Rome is big.", "Lyon.", "Paris!"], e).tolist() == [-0.5, 0.0, 0.5]
    # stopwords do not play; a word no sentence holds gives nothing
    assert sentence_game_values(["The of Zurich."], np.array([[1.0, 0.0, 0.0]]), ["The of.", "a", "b"], e).tolist() == [0.0, 0.0, 0.0]
    assert content_words("The Eiffel TOWER, the tower.") == ["eiffel", "tower"]
    assert sentence_game_values([], np.zeros((0, 3)), ["a"], np.ones((1, 3))).tolist() == [0.0]
    with pytest.raises(InvalidInputError):
        sentence_game_values(["a"], np.zeros((2, 3)), ["a"], np.ones((1, 3)))
    with pytest.raises(InvalidInputError):
        sentence_game_values(["a"], np.zeros((1, 3)), ["a"], np.ones((1, 4)))


def test_evidence_rule_by_hand():
    kw, game, src = np.array([1.0, 0.0, 0.5]), np.array([0.0, 1.0, 0.0]), [0, 0, 1]
    assert evidence_scores(kw, game, src, weight=2.0, passage=1.0).tolist() == [3.0, 4.0, 1.0]
    assert evidence_scores(kw, game, src, weight=0.0, passage=0.0).tolist() == kw.tolist()
    assert evidence_scores(kw, game, src, weight=1.0, passage=0.0).tolist() == [1.0, 1.0, 0.5]
    with pytest.raises(InvalidInputError):
        evidence_scores(kw, game[:2], src, weight=1.0, passage=0.0)


def test_evaluation_option_ranks_by_the_rule():
    """``tokenshapley eval --evidence sentence-game``: the attributor adds the sentence game and
    the passage term to keyword_score (the model parts replaced by stand-ins)."""
    from types import SimpleNamespace as NS

    from tokenshapley_rag._result import AttributionResult
    from tokenshapley_rag._types import SentenceScore, Source
    from tokenshapley_rag.benchmark._methods import TokenShapleyAttributor
    from tokenshapley_rag.benchmark._sentences import sentence_units

    sources = [Source("a", "Rome is old. Lyon is big."), Source("b", "Paris is big.")]
    units = sentence_units(sources)
    kw = [0.25, 0.0, 0.0]
    result = AttributionResult(
        query="", response="Paris is big.", sources=sources, citations=[], source_scores={}, tokens=None,
        sentence_scores=[SentenceScore(u.source_id, i, u.text, u.start, u.end, 0.0, k) for i, (u, k) in enumerate(zip(units, kw))],
    )
    fake_ts = NS(attribute=lambda **kw_: result, config={"k": 1})
    table = {"Paris is big.": [1.0, 0.0, 0.5], "Rome is old.": [1.0, 0.0, 0.0], "Lyon is big.": [0.0, 1.0, 0.0]}
    embedder = NS(embed=lambda texts: np.array([table[t] for t in texts]))

    plain = TokenShapleyAttributor(fake_ts)
    assert plain.score_sentences("", sources, "Paris is big.", units).scores.tolist() == kw
    rule = TokenShapleyAttributor(fake_ts, evidence="sentence-game", evidence_weight=2.0, evidence_passage=1.0)
    rule._embedder = embedder
    got = rule.score_sentences("", sources, "Paris is big.", units).scores
    game = sentence_game_values(["Paris is big."], embedder.embed(["Paris is big."]), [u.text for u in units],
                                embedder.embed([u.text for u in units]))
    # ranked Paris (cos 1), Rome (0.89), Lyon (0): "paris" gives [0, 0, 1]; "big" (held by Paris
    # and Lyon) gives Paris 1 - 1/6, Rome -1/6, Lyon 1/3 (Jia et al.'s K = 1 recursion)
    np.testing.assert_allclose(game, [-1 / 6, 1 / 3, 11 / 6])
    np.testing.assert_allclose(got, evidence_scores(np.array(kw), game, [0, 0, 1], weight=2.0, passage=1.0))
    assert rule.config["evidence"] == "sentence-game" and plain.config == {"k": 1}
    with pytest.raises(InvalidInputError):
        TokenShapleyAttributor(fake_ts, evidence="other")


def test_question_rule_reads_the_claim_with_its_question():
    """``--evidence question-sentence-game``: each answer sentence's game is queried with the
    embedding of question + answer and played over the content words of both; with no
    question it is the sentence-game rule."""
    from types import SimpleNamespace as NS

    from tokenshapley_rag._result import AttributionResult
    from tokenshapley_rag._types import SentenceScore, Source
    from tokenshapley_rag.benchmark._methods import QUESTION_EVIDENCE_WEIGHT, TokenShapleyAttributor
    from tokenshapley_rag.benchmark._sentences import sentence_units

    sources = [Source("a", "Taylor Swift sang at the Grammys."), Source("b", "The theme song is sung by Taylor Swift.")]
    units = sentence_units(sources)
    result = AttributionResult(
        query="", response="Taylor Swift.", sources=sources, citations=[], source_scores={}, tokens=None,
        sentence_scores=[SentenceScore(u.source_id, i, u.text, u.start, u.end, 0.0, 0.0) for i, u in enumerate(units)],
    )
    fake_ts = NS(attribute=lambda **kw_: result, config={})
    table = {
        "Who sings the theme song? Taylor Swift.": [0.0, 1.0], "Taylor Swift.": [1.0, 0.0],
        units[0].text: [1.0, 0.2], units[1].text: [0.2, 1.0],
    }
    embedder = NS(embed=lambda texts: np.array([table[t] for t in texts]))
    rule = TokenShapleyAttributor(fake_ts, evidence="question-sentence-game", evidence_passage=0.0)
    rule._embedder = embedder
    assert rule.evidence_weight == QUESTION_EVIDENCE_WEIGHT == 64.0
    got = rule.score_sentences("Who sings the theme song?", sources, "Taylor Swift.", units).scores
    claim = "Who sings the theme song? Taylor Swift."
    game = sentence_game_values([claim], embedder.embed([claim]), [u.text for u in units], embedder.embed([u.text for u in units]))
    np.testing.assert_allclose(got, 64.0 * game)
    # "theme" and "song", held only by the page the question was written from, rank it first
    assert got[1] > got[0]
    # with no question, the claim is the answer sentence alone: the sentence-game rule, its
    # weight (4) included
    alone = rule.score_sentences("", sources, "Taylor Swift.", units).scores
    plain = TokenShapleyAttributor(fake_ts, evidence="sentence-game", evidence_weight=4.0, evidence_passage=0.0)
    plain._embedder = embedder
    np.testing.assert_allclose(alone, plain.score_sentences("", sources, "Taylor Swift.", units).scores)


# --------------------------------------------------------------------------- TokenShapley.rank_evidence

EVIDENCE_SOURCES = [
    "The Eiffel Tower was completed in 1889. It stands on the Champ de Mars in Paris.",
    "Big Ben is the nickname of the Great Bell of the clock in London. The tower was completed in 1859.",
    "Gustave Eiffel's company designed and built the tower for the 1889 World's Fair.",
]
EVIDENCE_QUESTION = "Which company designed the tower in Paris?"
EVIDENCE_ANSWER = "Gustave Eiffel's firm drew up the plans."


@pytest.fixture(scope="module")
def evidence_engine(ts, bag_of_words):
    """The session's encoder with a bag-of-words embedder (the rule is checked, not MiniLM)."""
    from tokenshapley_rag import TokenShapley

    embedder = bag_of_words()
    engine = TokenShapley(ts.encoder, cache_dir=ts.cache.root.parent if ts.cache.root else None, question_embedder=embedder)
    return engine, embedder, engine.attribute(EVIDENCE_QUESTION, EVIDENCE_SOURCES, EVIDENCE_ANSWER)


def _expected(result, embed, *, claim_with_question, weight):
    """The rule recomputed from its parts (each tested by hand and against brute force above)."""
    rows = result.sentence_scores
    texts = [r.sentence for r in rows]
    parts = [EVIDENCE_ANSWER]
    if claim_with_question:
        parts = [f"{EVIDENCE_QUESTION} {EVIDENCE_ANSWER}"]
    game = sentence_game_values(parts, embed(parts), texts, embed(texts))
    sources = [int(r.source_id) for r in rows]
    return evidence_scores(np.array([r.keyword_score for r in rows]), game, sources, weight=weight, passage=1.0), game


@pytest.mark.parametrize("rule, claim_with_question, weight", [
    ("sentence-game", False, 4.0), ("question-sentence-game", True, 64.0),
])
def test_rank_evidence_is_the_rule_over_the_results_sentences(evidence_engine, rule, claim_with_question, weight):
    engine, embedder, result = evidence_engine
    ranked = engine.rank_evidence(result, rule=rule)
    scores, game = _expected(result, embedder, claim_with_question=claim_with_question, weight=weight)
    rows = result.sentence_scores
    order = np.argsort(-scores, kind="stable")
    assert [(e.source_id, e.sentence_index) for e in ranked] == [(rows[i].source_id, rows[i].sentence_index) for i in order]
    np.testing.assert_allclose([e.score for e in ranked], scores[order])
    np.testing.assert_allclose([e.game for e in ranked], game[order])
    assert [e.keyword_score for e in ranked] == [rows[i].keyword_score for i in order]
    assert ranked[0].sentence == EVIDENCE_SOURCES[2]  # the sentence the answer paraphrases
    assert set(ranked[0].to_dict()) == {
        "source_id", "sentence_index", "sentence", "sentence_start", "sentence_end", "score", "keyword_score", "game"
    }


def test_rank_evidence_by_keyword_score_embeds_nothing(evidence_engine):
    engine, embedder, result = evidence_engine
    embedder.calls.clear()
    ranked = engine.rank_evidence(result, rule="keyword", top_k=2)
    rows = sorted(result.sentence_scores, key=lambda r: -r.keyword_score)  # sorted() is stable
    assert [(e.source_id, e.sentence_index, e.score) for e in ranked] == [
        (r.source_id, r.sentence_index, r.keyword_score) for r in rows[:2]
    ]
    assert all(e.game == 0.0 for e in ranked) and embedder.calls == []


def test_rank_evidence_without_a_question_is_the_sentence_game_rule(evidence_engine):
    engine, _, result = evidence_engine
    bare = dataclasses.replace(result, query="")
    assert [e.score for e in engine.rank_evidence(bare)] == [e.score for e in engine.rank_evidence(bare, rule="sentence-game")]


@pytest.mark.parametrize("kwargs, error, message", [
    ({"rule": "bm25"}, InvalidInputError, "rule must be one of 'keyword', 'sentence-game', 'question-sentence-game', got 'bm25'"),
    ({"top_k": 0}, InvalidInputError, "top_k must be"),
    ({"top_k": 2.5}, InvalidInputTypeError, "top_k must be"),
])
def test_rank_evidence_refuses_bad_options_by_name(evidence_engine, kwargs, error, message):
    engine, _, result = evidence_engine
    with pytest.raises(error, match=re.escape(message)):
        engine.rank_evidence(result, **kwargs)
    with pytest.raises(InvalidInputTypeError, match="result must be an AttributionResult, got dict"):
        engine.rank_evidence(result.to_dict())


# --- An answer sentence's sources (docs/method.md §11) ---------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda n: st.tuples(
            st.lists(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3), min_size=n, max_size=n),
            st.lists(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4), min_size=1, max_size=3),
            st.lists(st.integers(0, 2), min_size=n, max_size=n),
            st.integers(0, 2**31 - 1),
        )
    )
)
def test_sentence_source_scores_sum_the_brute_force_values_per_source(case):
    """Each answer sentence's row is its own game alone (played in one batch with the others),
    summed per source."""
    sent_words, answer_words, sources, seed = case
    rng = np.random.default_rng(seed)
    sentences = [" ".join(ws) + "." for ws in sent_words]
    answers = [" ".join(ws) + "." for ws in answer_words]
    s_emb = rng.integers(1, 4, size=(len(sentences), 3)).astype(float)
    a_emb = rng.integers(1, 4, size=(len(answers), 3)).astype(float)
    scores, values = sentence_source_scores(answers, a_emb, sentences, s_emb, sources, 3)
    assert scores.shape == (len(answers), 3) and values.shape == (len(answers), len(sentences))
    for i, answer in enumerate(answers):
        brute = _brute([answer], a_emb[i : i + 1], sentences, s_emb, 1)
        np.testing.assert_allclose(values[i], brute, atol=1e-12)
        expected = [sum(brute[j] for j in range(len(sentences)) if sources[j] == s) for s in range(3)]
        np.testing.assert_allclose(scores[i], expected, atol=1e-12)


def test_sentence_source_scores_refuse_a_sentence_without_a_valid_source():
    e = np.eye(2)
    with pytest.raises(InvalidInputError, match=re.escape("sources must give one source in [0, 2) for each of the 2 sentences, got [0, 2]")):
        sentence_source_scores(["Paris."], e[:1], ["Paris.", "Rome."], e, [0, 2], 2)
    with pytest.raises(InvalidInputError, match="for each of the 2 sentences, got \\[0\\]"):
        sentence_source_scores(["Paris."], e[:1], ["Paris.", "Rome."], e, [0], 2)


ANSWER_OF_TWO = "Paris is in France. It has 2 million people, says the census."
TWO = [(0, 19), (20, 62)]


@pytest.mark.parametrize("start, end, covered", [
    (0, 19, [0]),        # the first sentence
    (0, 18, [0]),        # without its full stop
    (20, 62, [1]),
    (23, 62, [1]),       # without "It": a stopword
    (0, 62, [0, 1]),     # both
    (9, 62, []),         # "in France. It has ...": lacks "Paris", a content word of sentence 0
    (27, 36, []),        # "2 million": a keyword
    (0, 5, []),          # "Paris"
])
def test_sentences_covered_by_hand(start, end, covered):
    assert sentences_covered(ANSWER_OF_TWO, TWO, start, end) == covered


TWO_SENTENCE_ANSWER = "The tower was completed in 1889. Gustave Eiffel's firm drew up the plans."


def test_sentence_sources_is_the_game_of_each_answer_sentence(evidence_engine):
    engine, embedder, _ = evidence_engine
    result = engine.attribute(EVIDENCE_QUESTION, EVIDENCE_SOURCES, TWO_SENTENCE_ANSWER)
    got = engine.sentence_sources(result)
    rows = result.sentence_scores
    texts = [r.sentence for r in rows]
    assert [(a.index, a.start, a.end, a.text) for a in got] == [(v.index, v.start, v.end, v.text) for v in result.sentences]
    assert len(got) == 2
    answers = [a.text for a in got]
    all_scores, all_values = sentence_source_scores(
        answers, embedder(answers), texts, embedder(texts), [int(r.source_id) for r in rows], 3
    )
    for answer, scores, values in zip(got, all_scores, all_values):
        order = np.argsort(-scores, kind="stable")
        assert [s.source_id for s in answer.sources] == [str(i) for i in order]
        np.testing.assert_allclose([s.score for s in answer.sources], scores[order])
        for s in answer.sources:  # each source's best sentence: the first of its highest value
            own = [j for j, r in enumerate(rows) if r.source_id == s.source_id]
            j = max(own, key=lambda j: (values[j], -j))
            assert (s.sentence_index, s.sentence, s.sentence_value) == (rows[j].sentence_index, rows[j].sentence, values[j])
            assert EVIDENCE_SOURCES[int(s.source_id)][s.sentence_start:s.sentence_end] == s.sentence
    # "completed in 1889" is in sources 0 and 1 (Big Ben's tower too); the plans are source 2's
    assert got[1].best.source_id == "2" and got[1].best.sentence == EVIDENCE_SOURCES[2]
    assert got[0].best.source_id in {"0", "1"}
    top = engine.sentence_sources(result, top_k=1)
    assert [len(a.sources) for a in top] == [1, 1] and top[1].sources[0] == got[1].sources[0]
    # the keyword citations' schema: the best source flat at top level, every source below
    flat = got[1].to_dict(id_key="node_id")
    assert list(flat) == ["index", "start", "end", "text", "node_id", "display_name", "page", "score", "sentence",
                          "sentence_start", "sentence_end", "sources"]
    assert (flat["node_id"], flat["display_name"], flat["page"], flat["sentence"]) == ("2", "2", None, EVIDENCE_SOURCES[2])
    assert flat["score"] == got[1].best.score and flat["sources"][0] == got[1].best.to_dict(id_key="node_id")
    assert set(flat["sources"][0]) == {
        "node_id", "display_name", "page", "score", "sentence_index", "sentence", "sentence_start", "sentence_end",
        "sentence_value",
    }


def test_sentence_sources_best_is_none_without_a_positive_source(evidence_engine):
    engine, _, _ = evidence_engine
    result = engine.attribute(EVIDENCE_QUESTION, EVIDENCE_SOURCES, "Nobody knows.")
    (answer,) = engine.sentence_sources(result)
    assert answer.best is None and all(s.score == 0.0 for s in answer.sources)
    flat = answer.to_dict()
    assert flat["source_id"] is None and flat["score"] is None and len(flat["sources"]) == 3


def test_sentence_sources_without_source_sentences_embeds_nothing(evidence_engine):
    engine, embedder, result = evidence_engine
    embedder.calls.clear()
    bare = dataclasses.replace(result, sentence_scores=[])  # as when nothing was retrieved
    got = engine.sentence_sources(bare)
    assert [(a.text, a.sources, a.best) for a in got] == [(v.text, (), None) for v in result.sentences]
    assert embedder.calls == []


def test_sentence_sources_refuses_bad_options_by_name(evidence_engine):
    engine, _, result = evidence_engine
    with pytest.raises(InvalidInputError, match="top_k must be"):
        engine.sentence_sources(result, top_k=0)
    with pytest.raises(InvalidInputTypeError, match="result must be an AttributionResult, got dict"):
        engine.sentence_sources(result.to_dict())


def test_sentence_sources_with_the_default_embedder_tells_two_paraphrased_sentences_apart(ts):
    """The docstring's example on the real encoder and the bundled all-MiniLM-L6-v2."""
    sources = ["The Eiffel Tower was completed in 1889 for the World's Fair.",
               "Gustave Eiffel's company designed and built the tower."]
    res = ts.attribute("Tell me about the Eiffel Tower.", sources,
                       "It was finished in 1889. Eiffel's firm drew it up and built it.")
    got = ts.sentence_sources(res)
    assert [a.best.source_id for a in got] == ["0", "1"]
    named = ts.sentence_sources(ts.attribute("Tell me about the Eiffel Tower.", [
        Source("a", sources[0], {"title": "Tower history", "page_label": "4"}), Source("b", sources[1])],
        "It was finished in 1889."))
    assert (named[0].best.display_name, named[0].best.page) == ("Tower history", "4")
    assert got[0].best.sentence == sources[0] and got[0].best.score == pytest.approx(1.0)


def test_sentence_sources_read_chinese_by_character(ts):
    """A CJK run is split as the keywords split it (each Han character), so a Chinese answer
    sentence's words vote: "大本钟在伦敦" is one \\w+ run that no source holds whole."""
    res = ts.attribute("埃菲尔铁塔有多高？", ["埃菲尔铁塔高330米。它位于巴黎。", "大本钟位于伦敦。"],
                       "埃菲尔铁塔高330米。大本钟在伦敦。")
    got = ts.sentence_sources(res)
    assert [(a.text, a.best.source_id) for a in got] == [("埃菲尔铁塔高330米。", "0"), ("大本钟在伦敦。", "1")]
    assert got[1].best.sentence == "大本钟位于伦敦。"
