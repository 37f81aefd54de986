"""Evaluation metrics (hand-made cases), order control, the span runner and the CLI glue.

Runner tests read the committed fixture sets (``fixture_data``: tests/data/sets, a few
verbatim lines of each real file); counts of the real files take ``shared_data`` (skipped
when the full sets are absent).
"""

from __future__ import annotations

import argparse
import doctest
import importlib
import itertools
import json
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenshapley_rag.benchmark as ev
from tokenshapley_rag._types import Source
from tokenshapley_rag.benchmark import (
    SOURCE_PERMUTATION_SEEDS,
    SPAN_CLASSES,
    AttributionExample,
    GoldEvidence,
    GoldSpan,
    accuracy_order_controlled,
    add_eval_arguments,
    answer_accuracy,
    auroc,
    best_source,
    evidence_overlaps,
    load_dataset,
    mean_logprob_drop,
    partial_path,
    permute_example,
    precision_recall_f1_at_k,
    ranking_metrics,
    run_eval,
    run_span_eval,
    source_permutation,
    span_accuracy,
    span_class,
)
from tokenshapley_rag.benchmark._baselines import LexicalAttributor, make_baseline
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError

EXPECTED_ALL = [
    "ABLATION_KS", "CNNDM_QUERY", "RANKING_KS", "SentenceAttributor", "SentenceScores", "SentenceUnit",
    "ablate_sentences", "label_separation", "rank_sentences", "run_ablation_eval", "run_ranking_eval",
    "sentence_units",
    "ATTRIBUTION_DATASETS", "DATASETS", "DATA_ENV_VAR", "SOURCE_PERMUTATION_SEEDS", "SPAN_CHECKS", "SPAN_CLASSES",
    "SPAN_DATASETS",
    "AttributionExample", "DatasetFormatError", "DatasetNotFoundError", "EvalReport", "GoldEvidence",
    "GoldSpan", "SummaryExample", "accuracy_order_controlled", "add_eval_arguments", "answer_accuracy",
    "auroc", "best_source", "default_data_dir", "evidence_overlaps", "load_dataset", "mean_logprob_drop",
    "partial_path", "permute_example", "precision_recall_f1_at_k", "ranking_metrics", "run_eval",
    "run_span_eval", "source_permutation", "span_accuracy", "span_class", "span_correct",
]  # fmt: skip


def test_all_is_exact():
    assert sorted(ev.__all__) == sorted(EXPECTED_ALL)
    for name in ev.__all__:
        assert hasattr(ev, name)


@pytest.mark.parametrize(
    "module",
    [
        "tokenshapley_rag.benchmark._data",
        "tokenshapley_rag.benchmark._metrics",
        "tokenshapley_rag.benchmark._runner",
        "tokenshapley_rag.benchmark._cli",
        "tokenshapley_rag.benchmark._sentences",
        "tokenshapley_rag.benchmark._protocols",
        "tokenshapley_rag.benchmark._lm",
        "tokenshapley_rag.benchmark._methods",
        "tokenshapley_rag.benchmark._baselines",
        "tokenshapley_rag.benchmark._model_baselines",
        "tokenshapley_rag.benchmark._paraphrase",
        "tokenshapley_rag._sentence_game",
    ],
)
def test_doctests(module, default_sets):
    # _data and _runner load with the default folder: the full sets, else the fixtures
    res = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0
    assert res.failed == 0


# ----------------------------------------------------------------------------- span accuracy


def test_best_source_ties_go_to_the_first():
    assert best_source([0.2, 0.9, 0.1]) == 1
    assert best_source([0.5, 0.9, 0.9]) == 1
    assert best_source([3.0, 3.0, 3.0]) == 0
    assert best_source(np.array([-1.0, -1.0])) == 0


@pytest.mark.parametrize("bad", [[], [[1.0, 2.0]], [1.0, np.nan], [np.inf, 0.0]])
def test_best_source_rejects_bad_rows(bad):
    with pytest.raises(InvalidInputError):
        best_source(bad)


def test_span_and_answer_accuracy_by_hand():
    scores = [[0.1, 0.9], [0.3, 0.3], [1.0, 0.0], [0.0, 0.2, 0.2]]
    gold = [{1}, {1}, {0}, {2}]
    # correct: yes, no (tie -> 0), yes, no (tie -> 1)
    assert span_accuracy(scores, gold) == 0.5
    per_answer = answer_accuracy([scores[:1], scores[1:3], scores[3:]], [gold[:1], gold[1:3], gold[3:]])
    assert per_answer == pytest.approx(1 / 3)
    with pytest.raises(InvalidInputError):
        span_accuracy(scores, gold[:2])
    with pytest.raises(InvalidInputError):
        span_accuracy([], [])
    with pytest.raises(InvalidInputError):
        answer_accuracy([[]], [[]])


def _ex(texts, spans, ids=None, ex_id="t"):
    ids = ids or [str(i) for i in range(len(texts))]
    return AttributionExample(
        ex_id, "", tuple(Source(i, t) for i, t in zip(ids, texts)), "", tuple(spans), (), {}
    )


def test_span_class_each_case_and_case_insensitivity():
    ex = _ex(["Blue Whale.", "the blue whale eats krill", "krill and more KRILL"], [])

    def cls(text, gold):
        return span_class(ex, GoldSpan(0, 0, text, (gold,)))

    assert cls("Blue Whale.", "0") == "gold-only"
    assert cls("BLUE WHALE", "0") == "several"  # in 0 and 1 (case-insensitive)
    assert cls("krill", "1") == "several"
    assert cls("krill", "0") == "several"  # several sources, none gold: still "several"
    assert cls("eats krill", "0") == "non-gold-only"
    assert cls("orca", "0") == "nowhere"
    assert cls("more krill", "2") == "gold-only"
    with pytest.raises(InvalidInputTypeError):
        span_class("x", GoldSpan(0, 0, "a", ("0",)))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name, counts",
    [
        ("quotesum", {"gold-only": 665, "several": 147, "nowhere": 5}),
        ("verigran", {"gold-only": 196, "several": 95, "nowhere": 164, "non-gold-only": 12}),
        ("kv", {"gold-only": 342}),
    ],
)
def test_span_class_counts_on_dev(name, counts, shared_data):
    got = Counter(span_class(e, sp) for e in load_dataset(name, shared_data) for sp in e.spans)
    assert got == counts
    assert set(got) <= set(SPAN_CLASSES)


# ----------------------------------------------------------------------------- order control


def test_permute_example_reorders_sources_only():
    ex = _ex([f"s{i}" for i in range(6)], [GoldSpan(0, 1, "s", ("3",))], ex_id="abc")
    for seed in SOURCE_PERMUTATION_SEEDS:
        p, perm = permute_example(ex, seed)
        assert perm.dtype == np.int64 and sorted(perm.tolist()) == list(range(6))
        assert [s.id for s in p.sources] == [str(i) for i in perm]
        assert all(p.sources[i] is ex.sources[perm[i]] for i in range(6))
        assert p.spans == ex.spans and p.gold == ex.gold and p.id == ex.id
        assert p.gold_indices(p.spans[0]) == {int(np.flatnonzero(perm == 3)[0])}
        p2, perm2 = permute_example(ex, seed)
        assert perm2.tolist() == perm.tolist()  # deterministic
    perms = {tuple(permute_example(ex, s)[1].tolist()) for s in SOURCE_PERMUTATION_SEEDS}
    assert len(perms) == 3
    assert source_permutation("abc", 6, 0).tolist() == np.random.default_rng(
        [0, int.from_bytes(__import__("hashlib").sha256(b"abc").digest()[:8], "little")]
    ).permutation(6).tolist()


def test_permutations_vary_by_example_so_two_source_examples_get_swapped(shared_data):
    # default_rng(seed).permutation(2) is the identity for seeds 0, 1, 2; ours is not
    assert all(np.random.default_rng(s).permutation(2).tolist() == [0, 1] for s in (0, 1, 2))
    qs2 = [e for e in load_dataset("quotesum", shared_data) if len(e.sources) == 2]
    assert len(qs2) == 80
    for seed in SOURCE_PERMUTATION_SEEDS:
        swapped = sum(permute_example(e, seed)[1].tolist() == [1, 0] for e in qs2)
        assert 25 <= swapped <= 55, swapped


def test_accuracy_order_controlled_by_hand():
    tie = [[1.0, 1.0]]
    assert accuracy_order_controlled([tie, tie, tie], [[{0}], [{1}], [{1}]]) == pytest.approx(1 / 3)
    assert accuracy_order_controlled([[[0.0, 1.0]]] * 3, [[{1}]] * 3) == 1.0
    with pytest.raises(InvalidInputError):
        accuracy_order_controlled([], [])


# ----------------------------------------------------------------------------- ranking


def test_evidence_overlap_rule():
    assert evidence_overlaps(("1", 0, 10), ("1", 9, 20))
    assert evidence_overlaps(("1", 5, 6), GoldEvidence("1", 0, 100))
    assert not evidence_overlaps(("1", 0, 10), ("1", 10, 20))  # touching
    assert not evidence_overlaps(("1", 20, 30), ("1", 10, 20))
    assert not evidence_overlaps(("2", 0, 10), ("1", 0, 10))  # other source
    assert not evidence_overlaps(("1", 5, 5), ("1", 0, 10))  # empty
    with pytest.raises(InvalidInputTypeError):
        evidence_overlaps(("1", 0), ("1", 0, 1))
    with pytest.raises(InvalidInputError):
        evidence_overlaps(("1", 5, 1), ("1", 0, 1))


def test_precision_recall_f1_at_k_by_hand():
    # gold: passage "B" [0, 100) with sentences at 0-30, 31-60, 61-100; "D" sentence 0-40
    ranked = [
        ("A", 0, 50),  # no
        ("B", 31, 60),  # yes
        ("D", 0, 40),  # yes
        ("C", 0, 20),  # no
        ("B", 0, 30),  # yes
        ("B", 61, 100),  # yes
        ("A", 51, 80),  # no
    ]
    gold = [GoldEvidence("B", 0, 100), GoldEvidence("D", 0, 40)]
    # relevant flags 0 1 1 0 1 1 0 -> 4 relevant in total
    expected = {
        1: (0 / 1, 0 / 4),
        2: (1 / 2, 1 / 4),
        3: (2 / 3, 2 / 4),
        5: (3 / 5, 3 / 4),
        7: (4 / 7, 4 / 4),
        10: (4 / 10, 4 / 4),  # divided by k even past the end of the list
    }
    for k, (p, r) in expected.items():
        gp, gr, gf = precision_recall_f1_at_k(ranked, gold, k)
        assert gp == pytest.approx(p) and gr == pytest.approx(r)
        assert gf == pytest.approx(0.0 if p + r == 0 else 2 * p * r / (p + r))
    p, r, f = precision_recall_f1_at_k(ranked, [], 3)
    assert p == 0.0 and math.isnan(r) and math.isnan(f)
    with pytest.raises(InvalidInputError):
        precision_recall_f1_at_k(ranked, gold, 0)


def test_ranking_metrics_f1_of_means_and_no_gold_examples():
    r1 = [("a", 0, 5), ("b", 0, 5), ("c", 0, 5)]
    g1 = [("b", 0, 5)]
    r2 = [("a", 0, 5), ("b", 0, 5), ("c", 0, 5)]
    g2 = [("a", 0, 5), ("c", 0, 5)]
    m = ranking_metrics([r1, r2, r1], [g1, g2, []], ks=[1, 2, 3])
    # ex1: P@1 0, R@1 0; ex2: P@1 1, R@1 .5 ; ex3 has no gold -> left out
    assert m[1]["n"] == 2 and m[1]["n_no_gold"] == 1
    assert m[1]["precision"] == pytest.approx(0.5) and m[1]["recall"] == pytest.approx(0.25)
    assert m[1]["f1"] == pytest.approx(2 * 0.5 * 0.25 / 0.75)
    assert m[1]["f1_mean"] == pytest.approx((0 + 2 * 1 * 0.5 / 1.5) / 2)
    assert m[3]["recall"] == 1.0 and m[3]["precision"] == pytest.approx((1 / 3 + 2 / 3) / 2)
    assert sorted(ranking_metrics([r1], [g1])) == list(range(1, 11))


def test_ranking_on_real_nq_gold(sets_dir):
    """With the gold passage ranked first as one candidate, P@1 = R@1 = 1 on every NQ example."""
    exs = load_dataset("nq", sets_dir, limit=20)
    rankings = [
        [(g.source_id, g.start, g.end) for g in e.gold] + [(s.id, 0, len(s.text)) for s in e.sources] for e in exs
    ]
    m = ranking_metrics(rankings, [e.gold for e in exs], ks=[1])
    # the whole gold source (title included) is relevant too, so 2 relevant candidates each
    assert m[1]["precision"] == 1.0 and m[1]["recall"] == 0.5


# ----------------------------------------------------------------------------- AUROC


def _auroc_pairs(s, y):
    pos = [a for a, b in zip(s, y) if b]
    neg = [a for a, b in zip(s, y) if not b]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


def test_auroc_known_values():
    assert auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == 0.75
    assert auroc([1, 2, 3], [False, True, True]) == 1.0
    assert auroc([3, 2, 1], [0, 1, 1]) == 0.0
    assert auroc([5, 5, 5, 5], [0, 1, 0, 1]) == 0.5
    assert auroc([1, 2, 2, 3], [0, 0, 1, 1]) == pytest.approx(_auroc_pairs([1, 2, 2, 3], [0, 0, 1, 1])) == 0.875


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=2, max_size=40))
def test_auroc_matches_brute_force_pair_count(pairs):
    s = [float(a) for a, _ in pairs]  # small integer range -> many ties
    y = [b for _, b in pairs]
    if all(y) or not any(y):
        with pytest.raises(InvalidInputError, match="both classes"):
            auroc(s, y)
        return
    assert auroc(s, y) == pytest.approx(_auroc_pairs(s, y), abs=1e-12)


def test_auroc_seeded_random_against_brute_force():
    rng = np.random.default_rng(42)
    s = rng.normal(size=300).round(1)
    y = rng.random(300) < 0.3 + 0.2 * (s > 0)
    assert auroc(s, y) == pytest.approx(_auroc_pairs(s.tolist(), y.tolist()), abs=1e-12)


@pytest.mark.parametrize(
    "s, y",
    [([1, 2], [0, 1, 1]), ([1, np.nan], [0, 1]), ([1, 2], [0, 2]), ([[1, 2]], [[0, 1]])],
)
def test_auroc_rejects_bad_input(s, y):
    with pytest.raises(InvalidInputError):
        auroc(s, y)


def test_mean_logprob_drop():
    assert mean_logprob_drop([-10.0, -20.0, -5.0], [-12.0, -20.5, -5.5]) == pytest.approx(1.0)
    assert mean_logprob_drop(np.array([-1.0]), np.array([-0.5])) == -0.5
    with pytest.raises(InvalidInputError):
        mean_logprob_drop([], [])
    with pytest.raises(InvalidInputError):
        mean_logprob_drop([-1.0, -2.0], [-1.0])
    with pytest.raises(InvalidInputError):
        mean_logprob_drop([-np.inf], [-1.0])


# ----------------------------------------------------------------------------- runner


class Counting:
    """Lexical scores, counting calls per example id."""

    name = "counting"

    def __init__(self):
        self.calls = Counter()
        self.inner = LexicalAttributor()

    def score_spans(self, example):
        self.calls[example.id] += 1
        return self.inner.score_spans(example)


def test_run_span_eval_three_examples_by_hand(fixture_data):
    exs = load_dataset("quotesum", fixture_data, limit=3)  # the real file's first 3 lines
    rep = run_span_eval("quotesum", LexicalAttributor(), exs, progress=False)
    lex = LexicalAttributor()
    rows = [lex.score_spans(e) for e in exs]
    golds = [[set(e.gold_indices(sp)) for sp in e.spans] for e in exs]
    flat_rows = [r for rr in rows for r in rr]
    flat_gold = [g for gg in golds for g in gg]
    by_seed_s, by_seed_g = [], []
    for seed in SOURCE_PERMUTATION_SEEDS:
        ps, pg = [], []
        for e in exs:
            p, _ = permute_example(e, seed)
            ps.extend(lex.score_spans(p))
            pg.extend(set(p.gold_indices(sp)) for sp in p.spans)
        by_seed_s.append(ps)
        by_seed_g.append(pg)
    m = rep.metrics
    assert rep.n == 3 and m["n_answers"] == 3 and m["n_spans"] == sum(len(e.spans) for e in exs) == 17
    assert m["accuracy"] == pytest.approx(span_accuracy(flat_rows, flat_gold))
    assert m["answer_accuracy"] == pytest.approx(answer_accuracy(rows, golds))
    assert m["accuracy_order_controlled"] == pytest.approx(accuracy_order_controlled(by_seed_s, by_seed_g))
    assert sum(c["n"] for c in m["per_class"].values()) == 17
    assert (m["accuracy"], m["accuracy_order_controlled"], m["answer_accuracy"]) == (15 / 17, 15 / 17, 1 / 3)
    assert (m["per_class"]["gold-only"]["n"], m["per_class"]["several"]["n"]) == (13, 4)
    assert m["per_class"]["gold-only"]["accuracy"] == 1.0 and m["per_class"]["several"]["accuracy"] == 0.5
    assert set(m["per_class"]) == set(SPAN_CLASSES)
    assert m["per_class"]["non-gold-only"] == {"n": 0, "accuracy": None, "accuracy_order_controlled": None}
    out = rep.to_json()
    assert set(out) == {"dataset", "method", "n", "metrics", "seconds_per_example", "config"}
    assert out["dataset"] == "quotesum" and out["method"] == "lexical" and out["n"] == 3
    json.dumps(out)  # serialisable
    assert [r["id"] for r in rep.records] == [e.id for e in exs]


def test_run_span_eval_without_order_control_calls_once(fixture_data):
    exs = load_dataset("kv", fixture_data, limit=3)
    att = Counting()
    rep = run_span_eval("kv", att, exs, order_control=False, progress=False)
    assert att.calls == {e.id: 1 for e in exs}
    assert rep.metrics["accuracy"] == 1.0 and rep.metrics["accuracy_order_controlled"] is None
    assert rep.config["permutation_seeds"] == []


def test_verigran_statements_without_spans_are_skipped(fixture_data):
    exs = load_dataset("verigran", fixture_data)
    assert [e.id for e in exs if not e.spans] == ["verigran-test-84"]
    rep = run_span_eval("verigran", LexicalAttributor(), exs, order_control=False, progress=False)
    assert rep.metrics["n_skipped_no_spans"] == 1
    assert rep.n == len(exs) - 1


def test_resume_after_a_kill_has_no_duplicates(tmp_path, fixture_data):
    exs = load_dataset("quotesum", fixture_data, limit=3)
    part = tmp_path / "run.partial.jsonl"
    full = run_span_eval("quotesum", Counting(), exs, progress=False, resume_path=part)
    lines = part.read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["id"] for x in lines] == [e.id for e in exs]
    # simulate a kill: first row complete, second row cut mid-write
    part.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2], encoding="utf-8")
    att = Counting()
    rep = run_span_eval("quotesum", att, exs, progress=False, resume_path=part)
    assert att.calls == {exs[1].id: 4, exs[2].id: 4}  # original + 3 permutations, first example reused
    ids = [json.loads(x)["id"] for x in part.read_text(encoding="utf-8").splitlines()]
    assert ids == [e.id for e in exs]
    timing = "seconds_per_example_incl_permutations"
    assert rep.metrics == {**full.metrics, timing: rep.metrics[timing]}
    assert rep.config["n_resumed"] == 1
    # a third run recomputes nothing and writes nothing
    att3 = Counting()
    run_span_eval("quotesum", att3, exs, progress=False, resume_path=part)
    assert att3.calls == {}
    assert len(part.read_text(encoding="utf-8").splitlines()) == 3


def test_resume_refuses_a_partial_file_of_another_run(tmp_path, fixture_data):
    exs = load_dataset("kv", fixture_data, limit=2)
    part = tmp_path / "p.jsonl"
    run_span_eval("kv", LexicalAttributor(), exs, progress=False, resume_path=part)
    with pytest.raises(InvalidInputError, match="method"):
        run_span_eval("kv", make_baseline("exact"), exs, progress=False, resume_path=part)
    with pytest.raises(InvalidInputError, match="seeds"):
        run_span_eval("kv", LexicalAttributor(), exs, order_control=False, progress=False, resume_path=part)


def test_run_span_eval_validation(fixture_data):
    exs = load_dataset("kv", fixture_data, limit=2)
    with pytest.raises(InvalidInputError, match="span sets"):
        run_span_eval("nq", LexicalAttributor(), exs, progress=False)
    with pytest.raises(InvalidInputError, match="duplicate"):
        run_span_eval("kv", LexicalAttributor(), exs + exs[:1], progress=False)
    with pytest.raises(InvalidInputTypeError):
        run_span_eval("kv", object(), exs, progress=False)  # type: ignore[arg-type]

    class Bad:
        name = "bad"

        def score_spans(self, example):
            return np.zeros((1, 3))

    with pytest.raises(InvalidInputError, match=r"shape \(1, 3\).*\(1, 75\)"):
        run_span_eval("kv", Bad(), exs, progress=False)
    with pytest.raises(InvalidInputError, match="whole answer"):
        run_span_eval("kv", LexicalAttributor(), load_dataset("quotesum", fixture_data, limit=1), progress=False)


# ----------------------------------------------------------------------------- CLI glue


def _parse(argv):
    p = argparse.ArgumentParser()
    add_eval_arguments(p)
    return p.parse_args(argv)


def test_cli_arguments_defaults_and_errors(capsys):
    a = _parse(["--dataset", "quotesum"])
    assert (a.data, a.limit, a.method, a.beta, a.json, a.order_control, a.resume) == (
        None, None, "tokenshapley", 8, None, True, False
    )  # fmt: skip
    a = _parse(["--dataset", "kv", "--data", "/x", "--limit", "5", "--method", "exact", "--beta", "64",
                "--json", "o.json", "--no-order-control", "--resume"])  # fmt: skip
    assert (str(a.data), a.limit, a.method, a.beta, str(a.json), a.order_control, a.resume) == (
        "/x", 5, "exact", 64, "o.json", False, True
    )  # fmt: skip
    for bad in (["--dataset", "squad"], ["--dataset", "kv", "--limit", "0"], []):
        with pytest.raises(SystemExit):
            _parse(bad)


def test_run_eval_writes_json_and_resumes(tmp_path, capsys, fixture_data):
    data = ["--data", str(fixture_data)]
    out = tmp_path / "sub" / "kv.json"
    made = []

    def factory(method, args):
        made.append((method, args.beta))
        return make_baseline(method)

    args = _parse(["--dataset", "kv", *data, "--limit", "3", "--json", str(out), "--beta", "16", "--method", "lexical"])
    assert run_eval(args, factory) == 0
    assert made == [("lexical", 16)]
    rep = json.loads(out.read_text(encoding="utf-8"))
    assert rep["dataset"] == "kv" and rep["n"] == 3 and rep["metrics"]["accuracy"] == 1.0
    assert rep["config"]["beta"] == 16 and rep["config"]["limit"] == 3 and rep["config"]["data"] == str(fixture_data)
    assert json.loads(capsys.readouterr().out) == rep
    assert len(partial_path(out).read_text(encoding="utf-8").splitlines()) == 3
    # --resume reuses the rows; without it the partial file starts over
    args = _parse(["--dataset", "kv", *data, "--limit", "3", "--json", str(out), "--resume", "--method", "lexical"])
    assert run_eval(args, factory) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["config"]["n_resumed"] == 3
    args = _parse(["--dataset", "kv", *data, "--limit", "2", "--json", str(out), "--method", "lexical"])
    assert run_eval(args, factory) == 0
    assert len(partial_path(out).read_text(encoding="utf-8").splitlines()) == 2


def test_run_eval_usage_errors(capsys):
    def factory(method, args):
        return make_baseline(method)

    assert run_eval(_parse(["--dataset", "kv", "--resume"]), factory) == 2
    assert "--resume needs --json" in capsys.readouterr().err
    for name in ("nq", "cnndm"):  # generation sets need the LM factory
        assert run_eval(_parse(["--dataset", name]), factory) == 2
        assert "LM factory" in capsys.readouterr().err
