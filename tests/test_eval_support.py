"""The support benchmark (benchmark/_support.py): changed answers, flag rule, baselines, CLI.

Everything but the last test runs without a model and without the shared data.
"""

import argparse
import json
import re
from types import SimpleNamespace as NS

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenshapley_rag._types import KeywordCitation, SentenceVerdict, Source
from tokenshapley_rag.benchmark._cli import add_eval_arguments, run_eval
from tokenshapley_rag.benchmark._data import AttributionExample, GoldSpan
from tokenshapley_rag.benchmark._support import (
    CHANGE_KINDS,
    change_date,
    change_number,
    control_spans,
    flag_span,
    holds,
    lexical_flag,
    load_support_set,
    make_changes,
    name_pool,
    run_changed_eval,
    run_support_set_eval,
    sentence_scores,
    targets,
    truncate_source,
    wants_support,
    word_overlap,
)

SOURCES = (
    Source("a", "Paris had 2,850 inhabitants in 1927 under the mayor Jean Dupont."),
    Source("b", "The city of Lyon had 1,200 inhabitants. Its mayor was Pierre Martin."),
)
ANSWER = "In 1927 the city of Paris had 2,850 inhabitants and its mayor was Jean Dupont."
TOY = AttributionExample(
    "toy", "How big was Paris?", SOURCES, ANSWER, (GoldSpan(3, len(ANSWER) - 1, ANSWER[3:-1], ("a",)),)
)
POOL = [("other", "Maria Lopez"), ("toy", "Jean Dupont"), ("x", "Lyon")]


# --------------------------------------------------------------------------- generator


def test_targets_and_controls_of_the_toy_example():
    assert [(t.text, t.kind, t.start, t.end) for t in targets(TOY)] == [
        ("1927", "date", 3, 7),
        ("Paris", "name", 20, 25),
        ("2,850", "number", 30, 35),
        ("Jean Dupont", "name", 66, 77),
    ]
    # Every target is held word for word by source a: all four are controls.
    assert [t.text for t in control_spans(TOY)] == ["1927", "Paris", "2,850", "Jean Dupont"]


def test_make_changes_exact_answers_for_each_kind():
    got = {c.kind: c for c in make_changes(TOY, POOL)}
    # (source a is one sentence: no other sentence of it to take a name from)
    assert list(got) == [k for k in CHANGE_KINDS if k != "name_in_source"]
    assert got["number"].answer == "In 1927 the city of Paris had 3,850 inhabitants and its mayor was Jean Dupont."
    assert got["date"].answer == "In 1928 the city of Paris had 2,850 inhabitants and its mayor was Jean Dupont."
    # The swapped name is held by source b, not by the gold source a; one word like "Paris".
    assert got["name_swap"].answer == "In 1927 the city of Lyon had 2,850 inhabitants and its mayor was Jean Dupont."
    # Invented: from another example, held by no source ("Lyon" is; "Jean Dupont" is this example's own).
    assert got["name_invented"].answer == "In 1927 the city of Maria Lopez had 2,850 inhabitants and its mayor was Jean Dupont."
    for c in got.values():
        assert c.answer[c.start : c.end] == c.new
        assert ANSWER[c.orig_start : c.orig_end] == c.old
        # exactly one span changed: the text outside it is the gold answer's
        assert c.answer[: c.start] == ANSWER[: c.orig_start]
        assert c.answer[c.end :] == ANSWER[c.orig_end :]
    assert lexical_flag(SOURCES, got["name_swap"].new) is False
    assert all(lexical_flag(SOURCES, got[k].new) for k in ("number", "date", "name_invented"))


def test_make_changes_is_deterministic():
    first = make_changes(TOY, POOL)
    assert first == make_changes(TOY, list(POOL)) == make_changes(TOY, POOL)
    assert [c.to_dict() for c in first] == [c.to_dict() for c in make_changes(TOY, POOL)]


def test_no_invented_name_without_a_pool_and_no_swap_without_other_sources():
    kinds = [c.kind for c in make_changes(TOY, [])]
    assert "name_invented" not in kinds
    one = AttributionExample("one", "", SOURCES[:1], ANSWER, TOY.spans)
    assert "name_swap" not in [c.kind for c in make_changes(one, POOL)]


def test_a_name_in_source_comes_from_another_sentence_of_the_gold_source():
    page = Source("wc", "Lionel Messi won the Golden Ball. The top scorer was Kylian Mbappé.")
    other = Source("x", "Paris hosted the Olympic Games.")
    answer = "Lionel Messi won the Golden Ball."
    ex = AttributionExample("wc", "", (page, other), answer, (GoldSpan(0, 12, "Lionel Messi", ("wc",)),))
    got = {c.kind: c for c in make_changes(ex, POOL)}
    assert got["name_in_source"].answer == "Kylian Mbappé won the Golden Ball."
    assert got["name_swap"].answer == "Olympic Games won the Golden Ball."  # another source's name
    assert lexical_flag((page, other), got["name_in_source"].new) is False
    # a name the target's own sentence holds is no candidate
    same = Source("wc", "Lionel Messi and Kylian Mbappé won the Golden Ball.")
    ex = AttributionExample("wc", "", (same, other), answer, (GoldSpan(0, 12, "Lionel Messi", ("wc",)),))
    assert "name_in_source" not in [c.kind for c in make_changes(ex, POOL)]


def test_name_pool_lists_the_name_targets():
    pool = name_pool([TOY])
    assert pool == [("toy", "Paris"), ("toy", "Jean Dupont")]


def test_change_number_keeps_the_format():
    assert [change_number("2,850", [], k) for k in ("a", "c", "f")] == ["2,580", "3,850", "2,870"]
    assert change_number("$3.5 million", [], "a") == "$5.3 million"
    assert change_number("21st", [], "b") == "12th"  # the ordinal suffix follows the new number
    assert change_number("20 days", [], "c") == "30 days"
    for k in "abcdefgh":
        new = change_number("4,205", [], k)
        assert re.fullmatch(r"[1-9],\d{3}", new) and new != "4,205"


def test_numbers_in_words_are_targets_changed_in_words():
    sources = (Source("a", "Lyon is the third-largest city of France, with fifteen bridges."),)
    answer = "Lyon is the third-largest city of France, with fifteen bridges."
    ex = AttributionExample("w", "", sources, answer, (GoldSpan(0, len(answer) - 1, answer[:-1], ("a",)),))
    assert [(t.text, t.kind) for t in targets(ex)] == [("third-largest", "number"), ("France", "name"), ("fifteen", "number")]
    assert [t.text for t in control_spans(ex)] == ["third-largest", "France", "fifteen"]
    (number,) = [c for c in make_changes(ex, []) if c.kind == "number"]  # the span's first number
    assert number.answer == "Lyon is the fifth-largest city of France, with fifteen bridges."
    # a value some source holds, in digits or in words, is never the change
    assert change_number("fifteen", ["16 and seventeen"], "a") == "fourteen"
    assert change_number("Second", [], "b") == "Fourth" and change_number("one", [], "a") is None


def test_change_number_never_returns_a_held_value():
    held = ["3850 and 2,870 and 2,580"]
    for k in "abcdefgh":
        new = change_number("2,850", held, k)
        assert new.replace(",", "") not in {"3850", "2870", "2580", "2850"}
    # every one-digit change of "7" held: nothing left
    assert change_number("7", [" ".join(str(i) for i in range(10))], "a") is None


@given(st.integers(0, 99999), st.lists(st.integers(0, 99999), max_size=30), st.text("abc", max_size=3))
def test_change_number_property(value, held, key):
    src = [" ".join(f"{h:,}" for h in held)]
    new = change_number(f"{value:,}", src, key)
    if new is not None:
        n = int(new.replace(",", ""))
        assert n != value and n not in held
        assert len(new) == len(f"{value:,}")


def test_change_date_forms():
    assert change_date("1927", [], "a") == "1928"
    assert change_date("1927", ["in 1928 and 1926"], "a") == "1929"
    assert change_date("June 5th, 2021", [], "a") == "September 5th, 2021"
    assert change_date("June 5, 2021", [], "c") == "June 5, 2022"
    assert change_date("5 Sept 2021", [], "f") == "12 Sept 2021"
    assert change_date("5th of Jan. 2021", [], "a") == "5th of Apr. 2021"
    assert change_date("2021-06-05", [], "b") == "2021-09-05"
    assert change_date("yesterday", [], "a") is None


def test_change_date_never_returns_a_held_date():
    # September 5, 2021 is held in another format: not produced
    new = change_date("June 5, 2021", ["It opened on 5 September 2021."], "a")
    assert new is not None and "September 5, 2021" != new
    for k in "abcdefgh":
        new = change_date("June 5, 2021", ["5 September 2021", "June 5, 2022", "June 12, 2021"], k)
        assert new not in ("September 5, 2021", "June 5, 2022", "June 12, 2021", "June 5, 2021")


# --------------------------------------------------------------------------- baselines


def test_holds_and_lexical_baseline():
    assert holds("Paris is big.", "paris")
    assert not holds("Parisian food", "Paris")
    assert holds("New\nYork", "new york")
    assert not holds("anything", "  ")
    assert lexical_flag(SOURCES, "Pierre Martin") is False
    assert lexical_flag(["It cost 2,850 dollars."], "2,580") is True
    assert lexical_flag(["It cost 2,850 dollars."], "2,85") is True  # whole words only


def test_word_overlap_and_truncation():
    assert word_overlap("The tower is in Paris", ["Paris is a city."]) == 0.5
    assert word_overlap("it is the", ["x"]) == 1.0
    assert truncate_source("One two. Three four. Five.", 20) == "One two. Three four."
    assert truncate_source("abcdef ghijkl", 8) == "abcdef"
    assert truncate_source("short", None) == "short"


# --------------------------------------------------------------------------- flag rule


def _cit(text, start, status="supported", support=1.0, kind="word"):
    return KeywordCitation(text, start, start + len(text), (), status == "supported", support, status, kind)


def test_flag_rule():
    cs = [
        _cit("Paris", 0, kind="name"),
        _cit("1929", 9, "unsupported", 0.0, "date"),
        _cit("Lyon", 20, "contradicted", 0.0, "name"),
    ]
    assert flag_span(cs, 0, 5)["flagged"] is False
    f = flag_span(cs, 9, 13)
    assert f["flagged"] and f["covered"] and f["statuses"] == ["unsupported"]
    f = flag_span(cs, 20, 24)
    assert f["flagged"] and f["statuses"] == ["contradicted"] and f["kinds"] == ["name"]
    # any overlapping citation counts: a span over Paris and 1929 is flagged
    assert flag_span(cs, 3, 11)["flagged"] is True
    # no citation covers 6..8: flagged, and said so
    f = flag_span(cs, 6, 8)
    assert f["flagged"] and not f["covered"]


def test_sentence_scores_and_claim_score():
    from tokenshapley_rag.benchmark._support import _claim_score

    res = NS(sentences=[SentenceVerdict(0, 0, 13, "Paris is big.", "supported", 0.9, 1),
                        SentenceVerdict(1, 14, 31, "It has 9 bridges.", "unsupported", 0.0, 1)])
    s = sentence_scores(res)
    assert s == [{"start": 0, "end": 13, "score": 0.9, "verdict": "supported"},
                 {"start": 14, "end": 31, "score": 0.0, "verdict": "unsupported"}]
    assert _claim_score(s, 0, 13) == (0.9, ["supported"])
    assert _claim_score(s, 5, 20) == (0.45, ["supported", "unsupported"])  # the mean of both sentences
    assert _claim_score(s, 40, 45) == (None, [])


# --------------------------------------------------------------------------- runners with a fake attributor


class FakeTS:
    """Cites every keyword of the answer, supported iff a source holds it; a sentence's
    score is the share of its keywords supported."""

    config = {"fake": True}

    def attribute(self, query="", sources=(), response=""):
        from tokenshapley_rag._segment import find_keywords, split_sentences

        cits = [
            _cit(k.text, k.start, "unsupported" if lexical_flag(sources, k.text) else "supported", kind=k.kind)
            for k in find_keywords(response)
            if k.citable
        ]
        sents = []
        for i, (a, b) in enumerate(split_sentences(response)):
            inside = [c for c in cits if a <= c.start < b]
            score = sum(c.supported for c in inside) / len(inside) if inside else 1.0
            sents.append(SentenceVerdict(i, a, b, response[a:b], "supported" if score == 1 else "partly", score, len(inside)))
        return NS(response=response, citations=cits, sentences=sents)


def test_run_changed_eval_with_a_fake_attributor():
    rep = run_changed_eval("quotesum", FakeTS(), [TOY], pool=POOL, progress=False)
    m = rep.metrics
    assert rep.n == 1 and m["n_changed_answers"] == 4
    assert m["per_kind"]["number"] == {"n": 1, "flagged": 1.0, "lexical_flagged": 1.0, "n_uncovered": 0, "contradicted_of_flagged": 0.0}
    assert m["per_kind"]["name_swap"]["flagged"] == 0.0  # the fake is lexical: a swapped name passes
    assert m["control"]["n"] == 4 and m["control"]["flagged"] == 0.0
    json.dumps(rep.to_json())


def test_run_support_set_eval_with_a_fake_attributor():
    from tokenshapley_rag.benchmark._support import SupportClaim

    claims = [
        SupportClaim("s1", "q", SOURCES, "Paris had 2,850 inhabitants. Fine.", 0, 28, "supported"),
        SupportClaim("s2", "q", SOURCES, "Rome had 9,999 inhabitants. Fine.", 0, 27, "not_supported"),
    ]
    rep = run_support_set_eval("support", FakeTS(), claims, progress=False)
    assert rep.metrics["verdict_score"]["auroc"] == 1.0
    assert rep.metrics["word_overlap"]["auroc"] == 1.0
    assert rep.n == 2


# --------------------------------------------------------------------------- CLI


def _parser():
    p = argparse.ArgumentParser()
    add_eval_arguments(p)
    return p


def test_cli_arguments():
    a = _parser().parse_args(["--protocol", "support", "--dataset", "nq", "--limit", "5"])
    assert (a.protocol, a.dataset, a.limit, a.max_source_chars, a.max_per_kind) == ("support", "nq", 5, 6000, None)
    assert wants_support(a)
    a = _parser().parse_args(["--dataset", "support", "--max-source-chars", "0"])
    assert a.protocol is None and a.max_source_chars == 0 and wants_support(a)
    assert not wants_support(_parser().parse_args(["--dataset", "quotesum"]))
    with pytest.raises(SystemExit):
        _parser().parse_args(["--protocol", "other", "--dataset", "nq"])


def _write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_cli_end_to_end_with_tiny_files(tmp_path, capsys):
    srcs = [{"id": s.id, "title": None, "text": s.text} for s in SOURCES]
    _write_jsonl(
        tmp_path / "quotesum" / "dev.jsonl",
        [{"id": "toy", "question": "q", "sources": srcs, "answer": ANSWER,
          "spans": [{"start": 3, "end": len(ANSWER) - 1, "text": ANSWER[3:-1], "source_ids": ["a"]}]}],
    )
    _write_jsonl(
        tmp_path / "support" / "dev.jsonl",
        [
            {"id": "s1", "question": "q", "sources": srcs, "answer": "Paris had 2,850 inhabitants.",
             "claim": {"start": 0, "end": 28, "text": "Paris had 2,850 inhabitants."}, "label": "supported", "meta": {}},
            {"id": "s2", "question": "q", "sources": srcs, "answer": "Rome had 9,999 inhabitants.",
             "claim": {"start": 0, "end": 27, "text": "Rome had 9,999 inhabitants."}, "label": "not_supported", "meta": {}},
        ],
    )
    assert [c.claim for c in load_support_set(tmp_path)] == ["Paris had 2,850 inhabitants.", "Rome had 9,999 inhabitants."]
    factory = lambda name, args: NS(ts=FakeTS())  # noqa: E731
    out = tmp_path / "rep.json"
    args = _parser().parse_args(["--protocol", "support", "--dataset", "quotesum", "--data", str(tmp_path), "--json", str(out)])
    assert run_eval(args, factory) == 0
    rep = json.loads(out.read_text())
    assert rep["metrics"]["per_kind"]["date"]["n"] == 1 and rep["metrics"]["control"]["n"] == 4
    assert "control" in capsys.readouterr().err  # the table
    args = _parser().parse_args(["--dataset", "support", "--data", str(tmp_path), "--json", str(out)])
    assert run_eval(args, factory) == 0
    assert json.loads(out.read_text())["metrics"]["verdict_score"]["auroc"] == 1.0
    args = _parser().parse_args(["--protocol", "support", "--dataset", "kv", "--data", str(tmp_path)])
    assert run_eval(args, factory) == 2
    args = _parser().parse_args(["--dataset", "support", "--method", "lexical", "--data", str(tmp_path)])
    assert run_eval(args, factory) == 2


# --------------------------------------------------------------------------- one real attribution


def test_end_to_end_with_the_model(ts):
    ex = AttributionExample(
        "e2e", "How many people lived in Paris?",
        (Source("a", "Paris had 2,850 inhabitants in 1927."), Source("b", "Lyon had 1,200 inhabitants in 1931.")),
        "Paris had 2,850 inhabitants in 1927.",
        (GoldSpan(0, 35, "Paris had 2,850 inhabitants in 1927", ("a",)),),
    )
    rep = run_changed_eval("quotesum", ts, [ex], pool=[("x", "Maria Lopez")], progress=False)
    m = rep.metrics
    assert m["per_kind"]["number"]["n"] == 1 and m["per_kind"]["number"]["flagged"] == 1.0  # "3,850" vs 2,850
    assert m["per_kind"]["date"]["n"] == 1 and m["per_kind"]["date"]["flagged"] == 1.0
    assert m["control"]["n"] == 2 and m["control"]["flagged"] == 0.0  # 2,850 and 1927 ("Paris" opens the answer)


def test_max_per_kind_caps_the_changed_answers():
    two = AttributionExample(
        "two", "q", SOURCES, ANSWER,
        (GoldSpan(3, 25, ANSWER[3:25], ("a",)), GoldSpan(30, 35, "2,850", ("a",)), GoldSpan(66, 77, "Jean Dupont", ("a",))),
    )
    kinds = [c.kind for c in make_changes(two, POOL)]
    assert kinds.count("name_invented") == 2
    rep = run_changed_eval("quotesum", FakeTS(), [two], pool=POOL, max_per_kind=1, progress=False)
    assert rep.metrics["per_kind"]["name_invented"]["n"] == 1 and rep.config["max_per_kind"] == 1
