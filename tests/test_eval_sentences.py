"""Sentence-level protocols (NQ, WiCE, CNN/DM) without a model: candidates, ablation, the
model-free baselines' sentence scores, the runners (with a deterministic fake LM) and the CLI.

The runners read the committed fixture sets (``fixture_data``: tests/data/sets, a few verbatim
lines of each real file); the NQ gold check also runs on the full sets when present.
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest

from tokenshapley_rag._types import Source
from tokenshapley_rag.benchmark import (
    ABLATION_KS,
    CNNDM_QUERY,
    SentenceAttributor,
    SentenceScores,
    SummaryExample,
    ablate_sentences,
    add_eval_arguments,
    auroc,
    label_separation,
    load_dataset,
    partial_path,
    rank_sentences,
    ranking_metrics,
    run_ablation_eval,
    run_eval,
    run_ranking_eval,
    sentence_units,
)
from tokenshapley_rag.benchmark._baselines import (
    ExactMatchAttributor,
    LexicalAttributor,
    RandomAttributor,
    longest_common_run,
    make_baseline,
)
from tokenshapley_rag.benchmark._lm import GenerationCache
from tokenshapley_rag.benchmark._sentences import assign_to_units, check_scores
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError

# ----------------------------------------------------------------------------- candidates


def test_sentence_units_skip_titles_and_keep_offsets():
    srcs = [
        Source("1", "Eiffel Tower\nIt is in Paris. It is tall.", {"title": "Eiffel Tower", "text_offset": 13}),
        Source("2", "   "),
        Source("3", "No title here! Two sentences."),
    ]
    units = sentence_units(srcs)
    assert [(u.source_id, u.source_index, u.text) for u in units] == [
        ("1", 0, "It is in Paris."), ("1", 0, "It is tall."), ("3", 2, "No title here!"), ("3", 2, "Two sentences."),
    ]  # fmt: skip
    for u in units:
        assert srcs[u.source_index].text[u.start : u.end] == u.text
        assert u.as_triple() == (u.source_id, u.start, u.end)
    whole = sentence_units(srcs, split=False)
    assert [(u.source_id, u.start, u.end) for u in whole] == [("1", 13, 40), ("3", 0, 29)]
    with pytest.raises(InvalidInputTypeError):
        sentence_units("text")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputTypeError):
        sentence_units(["text"])  # type: ignore[list-item]


def test_nq_gold_sentences_are_the_gold_passage_text(sets_dir):
    for ex in load_dataset("nq", sets_dir, limit=25):
        units = sentence_units(ex.sources)
        (g,) = ex.gold
        gold_units = [u for u in units if u.source_id == g.source_id]
        assert gold_units and all(g.start <= u.start and u.end <= g.end for u in gold_units)
        # exactly the gold passage's sentences are relevant; titles are never candidates
        rel = ranking_metrics([[u.as_triple() for u in units]], [ex.gold], ks=[len(units)])
        assert rel[len(units)]["recall"] == 1.0
        assert rel[len(units)]["precision"] == pytest.approx(len(gold_units) / len(units))
        for s in ex.sources:
            assert not any(u.source_id == s.id and u.start < s.metadata["text_offset"] for u in units)


def test_rank_sentences_is_stable():
    assert rank_sentences([0.0, 2.0, 1.0, 2.0]).tolist() == [1, 3, 2, 0]
    for bad in ([[1.0]], [np.nan]):
        with pytest.raises(InvalidInputError):
            rank_sentences(bad)


def test_ablate_sentences_by_hand():
    srcs = (
        Source("t", "Title\nA one. B two.\n\nC three.", {"text_offset": 6}),
        Source("u", "D four. E five."),
    )
    units = sentence_units(srcs)
    assert [u.text for u in units] == ["A one.", "B two.", "C three.", "D four.", "E five."]
    assert ablate_sentences(srcs, units, []) == srcs
    assert [s.text for s in ablate_sentences(srcs, units, [1])] == ["Title\nA one.\n\nC three.", "D four. E five."]
    assert [s.text for s in ablate_sentences(srcs, units, [0, 4])] == ["Title\nB two.\n\nC three.", "D four."]
    assert [s.text for s in ablate_sentences(srcs, units, range(5))] == ["Title\n", ""]
    out = ablate_sentences(srcs, units, [2])
    assert out[0].metadata == srcs[0].metadata and out[0].id == "t"
    for bad in ([5], [-1], [True]):
        with pytest.raises(InvalidInputError):
            ablate_sentences(srcs, units, bad)
    with pytest.raises(InvalidInputError, match="does not belong"):
        ablate_sentences(srcs[::-1], units, [0])


def test_assign_to_units_and_check_scores():
    units = sentence_units([Source("a", "One two. Three four."), Source("b", "Five.")])
    v = assign_to_units(units, [("a", 0, 8, 1.0), ("a", 4, 12, 0.5), ("a", 9, 20, 2.0), ("b", 0, 5, -1.0), ("z", 0, 3, 9.0)])
    assert v.tolist() == [1.5, 2.0, -1.0]  # (4, 12) overlaps "One two." by 4 chars, the next by 3
    ok = check_scores(SentenceScores([1, 2, 3], {"x": 1}), 3, "m")
    assert ok.scores.dtype == np.float64 and ok.support == {"x": 1.0}
    with pytest.raises(InvalidInputError, match="shape"):
        check_scores(SentenceScores(np.zeros(2)), 3, "m")
    with pytest.raises(InvalidInputError, match="non-finite"):
        check_scores(SentenceScores(np.array([1.0, np.inf, 0.0])), 3, "m")
    with pytest.raises(InvalidInputError, match="support"):
        check_scores(SentenceScores(np.zeros(3), {"s": math.nan}), 3, "m")
    with pytest.raises(InvalidInputTypeError):
        check_scores(np.zeros(3), 3, "m")


def test_label_separation_matches_auroc():
    labels = ["supported", "not_supported", "partially_supported", "supported", "not_supported", "partially_supported"]
    scores = [0.9, 0.2, 0.5, 0.4, 0.4, 0.1]
    r = label_separation(scores, labels)
    assert r["auroc_supported_vs_not"] == auroc([0.9, 0.2, 0.4, 0.4], [1, 0, 1, 0]) == 0.875
    assert r["auroc_partial_vs_not"] == auroc([0.2, 0.5, 0.4, 0.1], [0, 1, 0, 1]) == 0.5
    assert r["auroc_supported_vs_partial"] == 0.75
    assert r["mean"]["supported"] == pytest.approx(0.65) and r["n"]["not_supported"] == 2
    r = label_separation([0.1, 0.2], ["supported", "partially_supported"])
    assert r["auroc_supported_vs_not"] is None and r["auroc_supported_vs_partial"] == 0.0
    with pytest.raises(InvalidInputError, match="unknown WiCE labels"):
        label_separation([0.1], ["refuted"])


# ----------------------------------------------------------------------------- model-free baselines


UNITS_SRC = [Source("a", "The Eiffel Tower is in Paris. It opened in 1889."), Source("b", "Big Ben is in London.")]


def test_baselines_implement_the_sentence_protocol():
    for name in ("lexical", "exact", "random"):
        assert isinstance(make_baseline(name), SentenceAttributor)


def test_lexical_sentence_scores_by_hand():
    units = sentence_units(UNITS_SRC)
    s = LexicalAttributor().score_sentences("", UNITS_SRC, "It opened in 1889.", units).scores
    # idf over the 3 candidates: "it", "opened", "1889" in 1 unit; "in" in all 3
    idf1, idf3 = math.log(4 / 2) + 1, math.log(4 / 4) + 1
    total = 3 * idf1 + idf3
    np.testing.assert_allclose(s, [idf3 / total, 2.0 + 1.0, idf3 / total])  # unit 1 holds it verbatim
    assert rank_sentences(s)[0] == 1


def test_exact_sentence_scores_are_longest_word_runs():
    units = sentence_units(UNITS_SRC)
    s = ExactMatchAttributor().score_sentences("", UNITS_SRC, "the tower is in paris and big ben", units).scores
    assert s.tolist() == [4.0, 1.0, 2.0]  # "tower is in paris" / "in" / "big ben" (or "is in")
    assert longest_common_run([], ["a"]) == 0 and longest_common_run(list("abcab"), list("xcabz")) == 3
    cs = ExactMatchAttributor(case_sensitive=True).score_sentences("", UNITS_SRC, "paris", units).scores
    assert cs.tolist() == [0.0, 0.0, 0.0]


def test_random_sentence_scores_are_seeded():
    units = sentence_units(UNITS_SRC)
    a = RandomAttributor(seed=1).score_sentences("", UNITS_SRC, "x", units).scores
    assert a.shape == (3,) and np.all((a >= 0) & (a < 1))
    np.testing.assert_array_equal(a, RandomAttributor(seed=1).score_sentences("q", UNITS_SRC, "x", units).scores)
    assert not np.array_equal(a, RandomAttributor(seed=1).score_sentences("", UNITS_SRC, "y", units).scores)
    assert not np.array_equal(a, RandomAttributor(seed=2).score_sentences("", UNITS_SRC, "x", units).scores)


# ----------------------------------------------------------------------------- WiCE ranking


def test_wice_ranking_by_hand_and_resume(tmp_path, fixture_data):
    exs = load_dataset("wice", fixture_data)  # one claim of each label, the unsupported one without gold
    lex = LexicalAttributor()
    part = tmp_path / "w.partial.jsonl"
    rep = run_ranking_eval("wice", lex, exs, progress=False, resume_path=part)
    rankings, golds = [], []
    for ex in exs:
        srcs = [s for s in ex.sources if s.text.strip()]
        units = sentence_units(srcs, split=False)
        assert len(units) == len(srcs)
        order = rank_sentences(lex.score_sentences("", srcs, ex.answer, units).scores)
        rankings.append([units[i].as_triple() for i in order])
        golds.append(ex.gold)
    want = ranking_metrics(rankings, golds)
    m = rep.metrics
    assert rep.n == 3 and m["n_examples"] == 3 and m["n_skipped"] == {}
    assert m["recall@5"] == pytest.approx(want[5]["recall"]) and m["precision@5"] == pytest.approx(want[5]["precision"])
    assert m["f1@5"] == pytest.approx(want[5]["f1"]) and m["recall@10"] == pytest.approx(want[10]["recall"])
    assert m["n_no_gold"] == sum(1 for g in golds if not g) == 1
    assert set(m["by_k"]) == {str(k) for k in range(1, 11)}
    sep = m["label_separation"]["max_sentence"]
    assert sep["n"] == {"supported": 1, "partially_supported": 1, "not_supported": 1}
    best = [r["support"]["max_sentence"] for r in rep.records]
    assert sep["auroc_supported_vs_not"] == label_separation(best, [e.meta["label"] for e in exs])["auroc_supported_vs_not"]
    out = rep.to_json()
    assert set(out) == {"dataset", "method", "n", "metrics", "seconds_per_example", "config"}
    json.dumps(out)
    # resume: nothing recomputed, same metrics
    class Boom:
        name = "lexical"

        def score_sentences(self, *a):
            raise AssertionError("should have been resumed")

    again = run_ranking_eval("wice", Boom(), exs, progress=False, resume_path=part)
    assert again.config["n_resumed"] == 3 and again.metrics == rep.metrics


def test_wice_drops_empty_evidence_sentences(fixture_data):
    ex = next(e for e in load_dataset("wice", fixture_data) if any(not s.text.strip() for s in e.sources))
    rep = run_ranking_eval("wice", LexicalAttributor(), [ex], progress=False)
    (row,) = rep.records
    assert row["n_candidates"] == sum(1 for s in ex.sources if s.text.strip()) < len(ex.sources)


def test_ranking_eval_validation(fake_lm, fixture_data):
    exs = load_dataset("wice", fixture_data, limit=2)
    with pytest.raises(InvalidInputError, match="nq"):
        run_ranking_eval("quotesum", LexicalAttributor(), exs, progress=False)
    with pytest.raises(InvalidInputTypeError):
        run_ranking_eval("wice", object(), exs, progress=False)
    with pytest.raises(InvalidInputError, match="duplicate"):
        run_ranking_eval("wice", LexicalAttributor(), exs + exs[:1], progress=False)
    with pytest.raises(InvalidInputError, match="lm="):
        run_ranking_eval("nq", LexicalAttributor(), load_dataset("nq", fixture_data, limit=1), progress=False)

    class Bad:
        name = "bad"

        def score_sentences(self, q, srcs, resp, units):
            return SentenceScores(np.zeros(len(units) + 1))

    with pytest.raises(InvalidInputError, match="shape"):
        run_ranking_eval("wice", Bad(), exs, progress=False)


# ----------------------------------------------------------------------------- NQ with a fake LM


def test_nq_generates_once_and_every_method_reuses_the_answer(fake_lm, tmp_path, fixture_data):
    exs = load_dataset("nq", fixture_data, limit=3)
    cache = GenerationCache(tmp_path / "gen.jsonl")
    reps = [
        run_ranking_eval("nq", m, exs, lm=fake_lm, generations=cache, progress=False)
        for m in (LexicalAttributor(), ExactMatchAttributor(), RandomAttributor())
    ]
    assert sum(fake_lm.generated.values()) == 3 and cache.misses == 3 and cache.hits == 6
    for ex, rows in zip(exs, zip(*(r.records for r in reps))):
        want = fake_lm.generate(ex.question, ex.sources)
        assert {r["response"] for r in rows} == {want}
    # a new process (new cache object on the same file) reuses the stored answers
    fresh = GenerationCache(tmp_path / "gen.jsonl")
    run_ranking_eval("nq", LexicalAttributor(), exs, lm=fake_lm, generations=fresh, progress=False)
    assert fresh.misses == 0 and fresh.hits == 3
    lex = reps[0]
    assert lex.config["generator_fingerprint"] == fake_lm.fingerprint and lex.n == 3
    assert lex.metrics["n_no_gold"] == 0 and 0.0 <= lex.metrics["f1@5"] <= 1.0
    # the fake answers with the first sentence of passage "1": lexical ranks it first
    for row, ex in zip(lex.records, exs):
        assert row["ranking"][0][0] == "1"


def test_generation_cache_keys_and_truncated_lines(tmp_path):
    path = tmp_path / "g.jsonl"
    c = GenerationCache(path)
    c.put("nq-answer", "q1", "fp1", 64, "answer one")
    c.put("nq-answer", "q2", "fp1", 64, "answer two")
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"task": "nq-answer", "id": "q3", "fingerp')  # killed mid-write
    d = GenerationCache(path)
    assert d.get("nq-answer", "q1", "fp1", 64) == "answer one"
    assert d.get("nq-answer", "q1", "fp2", 64) is None  # other model
    assert d.get("nq-answer", "q1", "fp1", 32) is None  # other length
    assert d.get("cnndm-summary", "q1", "fp1", 64) is None  # other task
    assert d.get("nq-answer", "q3", "fp1", 64) is None


def test_empty_generated_answers_are_skipped_and_counted(fake_lm_cls, fixture_data):
    exs = load_dataset("nq", fixture_data, limit=2)
    rep = run_ranking_eval("nq", LexicalAttributor(), exs, lm=fake_lm_cls(empty_for={exs[0].question}), progress=False)
    assert rep.n == 1 and rep.metrics["n_skipped"] == {"empty_response": 1}
    assert rep.records[0]["skipped"] == "empty_response" and "ranking" not in rep.records[0]


# ----------------------------------------------------------------------------- CNN/DM with a fake LM


def test_cnndm_ablation_by_hand(fake_lm):
    ex = SummaryExample("toy", "Alpha beta gamma. Delta epsilon. Zeta eta theta.", "", {})
    rep = run_ablation_eval(LexicalAttributor(), [ex], lm=fake_lm, progress=False)
    (row,) = rep.records
    assert row["response"] == "Alpha beta gamma."  # the fake summarises with the first sentence
    assert row["removed"] == {"1": [0], "3": [0, 1, 2], "5": [0, 1, 2]}
    # full: 4 tokens in context (-0.1 each); k=1: the 3 words go (-3 each), "." stays;
    # k>=3: the context is empty, "." goes too
    assert row["full_logprob"] == pytest.approx(-0.4)
    assert row["ablated_logprob"] == pytest.approx({"1": -9.1, "3": -12.0, "5": -12.0})
    m = rep.metrics
    assert m["logprob_drop"] == pytest.approx({"1": 8.7, "3": 11.6, "5": 11.6})
    assert m["logprob_drop_per_token"] == pytest.approx({"1": 8.7 / 4, "3": 2.9, "5": 2.9})
    assert m["n_examples"] == 1 and m["mean_sentences"] == 3 and rep.config["ks"] == list(ABLATION_KS)
    assert rep.config["query"] == CNNDM_QUERY


def test_cnndm_on_real_articles_resumes_and_skips_empty(tmp_path, fake_lm_cls, fixture_data):
    FakeLM = fake_lm_cls
    exs = load_dataset("cnndm", fixture_data, limit=3)
    lm = FakeLM()
    part = tmp_path / "c.partial.jsonl"
    rep = run_ablation_eval(ExactMatchAttributor(), exs, lm=lm, progress=False, resume_path=part)
    assert rep.n == 3 and all(r["n_sentences"] > 5 for r in rep.records)
    # the first sentence is the summary: exact match puts it first, so removing it drops the most
    assert all(r["removed"]["1"] == [0] for r in rep.records)
    assert rep.metrics["logprob_drop"]["1"] > 0
    scored = lm.scored
    again = run_ablation_eval(ExactMatchAttributor(), exs, lm=lm, progress=False, resume_path=part)
    assert lm.scored == scored and again.metrics == rep.metrics  # resumed, nothing scored
    empty = FakeLM(empty_for={"article"})
    rep = run_ablation_eval(ExactMatchAttributor(), exs, lm=empty, progress=False)
    assert rep.n == 0 and rep.metrics["n_skipped"] == {"empty_response": 3}
    assert rep.metrics["logprob_drop"] == {"1": None, "3": None, "5": None}


# ----------------------------------------------------------------------------- CLI


def _parse(argv):
    p = argparse.ArgumentParser()
    add_eval_arguments(p)
    return p.parse_args(argv)


def test_run_eval_for_every_sentence_set(tmp_path, capsys, fake_lm, fixture_data):
    lm = fake_lm
    made = []

    def lm_factory(args, attributor):
        made.append(attributor.name)
        return lm

    for name in ("wice", "nq", "cnndm"):
        out = tmp_path / f"{name}.json"
        argv = ["--dataset", name, "--data", str(fixture_data), "--limit", "2", "--method", "lexical", "--json", str(out), "--generations", str(tmp_path / "g.jsonl")]
        assert run_eval(_parse(argv), lambda m, a: make_baseline(m), lm_factory) == 0
        rep = json.loads(out.read_text(encoding="utf-8"))
        assert set(rep) == {"dataset", "method", "n", "metrics", "seconds_per_example", "config"}
        assert (rep["dataset"], rep["method"], rep["n"]) == (name, "lexical", 2)
        assert len(partial_path(out).read_text(encoding="utf-8").splitlines()) == 2
        err = capsys.readouterr().err
        assert f"{name}/lexical: n=2" in err
    assert made == ["lexical", "lexical"]  # only nq and cnndm build the LM
    assert json.loads((tmp_path / "cnndm.json").read_text())["metrics"]["logprob_drop"]["5"] is not None
    assert "recall@5" in json.loads((tmp_path / "wice.json").read_text())["metrics"]
    a = _parse(["--dataset", "nq", "--max-new-tokens", "16", "--generator", "gemma-3-270m"])
    assert (a.max_new_tokens, a.generator) == (16, "gemma-3-270m")


def test_response_lm_is_shared_with_the_method_when_it_holds_the_generator():
    from types import SimpleNamespace

    from tokenshapley_rag._models import DEFAULT_MODEL, LoadedModel
    from tokenshapley_rag.benchmark._lm import ResponseLM
    from tokenshapley_rag.benchmark._methods import make_response_lm

    own = LoadedModel(model=None, tokenizer=None, name=DEFAULT_MODEL, fingerprint="a" * 64,
                      num_layers=2, hidden_size=4, max_length=16)  # fmt: skip
    lm = make_response_lm(SimpleNamespace(generator=None, cache_dir=None), SimpleNamespace(loaded=own))
    assert isinstance(lm, ResponseLM) and lm.loaded is own and lm.fingerprint == "a" * 64
    with pytest.raises(InvalidInputTypeError):
        ResponseLM(object())
