"""The paraphrase check (``tokenshapley eval --dataset paraphrase``): examples built from the
support set by hand, and the ranking protocol end to end on tiny files."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from tokenshapley_rag._types import Source
from tokenshapley_rag.benchmark import add_eval_arguments, run_eval, run_ranking_eval
from tokenshapley_rag.benchmark._baselines import make_baseline
from tokenshapley_rag.benchmark._data import GoldEvidence, GoldSpan
from tokenshapley_rag.benchmark._paraphrase import (
    load_paraphrase_set,
    load_support_sentences_set,
    paraphrase_examples,
    support_sentence_examples,
)
from tokenshapley_rag.benchmark._support import SupportClaim
from tokenshapley_rag.errors import InvalidInputError


def _claim(cid, question, claim, passages, label="supported"):
    srcs = tuple(Source(str(i + 1), t) for i, t in enumerate(passages))
    return SupportClaim(cid, question, srcs, f"Intro. {claim}", 7, 7 + len(claim), label)


CLAIMS = [
    _claim("a", "Who designed the Eiffel tower?", "Gustave Eiffel's firm designed the tower.",
           ["The tower was engineered by the company of Gustave Eiffel. It opened in 1889."]),
    _claim("b", "How tall is the Eiffel tower?", "The tower is about 330 metres high.",
           ["The Eiffel Tower is 330 m tall. It is in Paris."]),
    _claim("c", "What is rust made of?", "Rust is mostly iron oxide.", ["Rust is an iron oxide. It forms in water."]),
    _claim("d", "Who designed the Eiffel tower?", "Someone else.", ["Not this one."]),  # same question as "a"
    _claim("e", "Eiffel tower paint?", "It is painted brown.", ["Brown paint covers it."], label="not_supported"),
]


def _write_support_set(tmp_path, claims):
    """``claims`` as ``<tmp_path>/support/dev.jsonl`` (the support set's schema)."""
    rows = [{
        "id": c.id, "question": c.question, "answer": c.answer,
        "sources": [{"id": s.id, "title": None, "text": s.text} for s in c.sources],
        "claim": {"start": c.start, "end": c.end, "text": c.claim}, "label": c.label, "meta": {},
    } for c in claims]
    path = tmp_path / "support" / "dev.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _run_lexical_eval(tmp_path, dataset):
    p = argparse.ArgumentParser()
    add_eval_arguments(p)
    out = tmp_path / "rep.json"
    args = p.parse_args(["--dataset", dataset, "--data", str(tmp_path), "--method", "lexical", "--json", str(out)])
    assert run_eval(args, lambda m, a: make_baseline(m)) == 0
    return json.loads(out.read_text(encoding="utf-8"))


def test_examples_by_hand():
    exs = paraphrase_examples(CLAIMS, n_distractors=1)
    # only supported claims; "e" is neither an example nor a distractor
    assert [e.id for e in exs] == ["a", "b", "c", "d"]
    a = exs[0]
    assert a.answer == "Gustave Eiffel's firm designed the tower." and a.question == CLAIMS[0].question
    # "b" shares {eiffel, tower} with a's question; "d" has the same question and is skipped
    assert a.meta["distractors"] == ["b"]
    assert sorted(s.id for s in a.sources) == ["b:1", "own:1"]
    own = next(s for s in a.sources if s.id == "own:1")
    assert own.text == CLAIMS[0].sources[0].text
    assert a.gold == (GoldEvidence("own:1", 0, len(own.text)),)
    # "c" shares no content word with anyone: the first other claim in file order
    assert exs[2].meta["distractors"] == ["a"]
    # deterministic, and the passages are capped at sentence ends
    assert paraphrase_examples(CLAIMS, n_distractors=1) == exs
    cut = paraphrase_examples(CLAIMS, n_distractors=0, max_source_chars=60)[0]
    assert [s.text for s in cut.sources] == ["The tower was engineered by the company of Gustave Eiffel."]
    assert len(paraphrase_examples(CLAIMS, limit=2)) == 2
    with pytest.raises(InvalidInputError):
        paraphrase_examples(CLAIMS, n_distractors=-1)


def test_ranking_protocol_by_hand():
    exs = paraphrase_examples(CLAIMS[:3], n_distractors=1)
    rep = run_ranking_eval("paraphrase", make_baseline("lexical"), exs, progress=False)
    assert rep.n == 3
    rows = rep.records
    # claim "a" against its passage (2 sentences, gold) and b's (2 sentences): lexical puts
    # a's "Gustave Eiffel" sentence first
    first = rows[0]["ranking"][0]
    assert first[0] == "own:1" and first[1] == 0
    for r in rows:
        assert {tuple(g) for g in r["gold"]} == {(s, 0, e) for s, _a, e in r["gold"]}
    m = rep.metrics
    assert m["precision@1"] == pytest.approx(1.0)
    # every claim has 2 gold sentences among 4: both in the top 5, P@5 = 2/5, R@5 = 1
    assert m["precision@5"] == pytest.approx(0.4) and m["recall@5"] == pytest.approx(1.0)
    assert rep.config["response"] == "the supported claim; query: its question"


def test_cli_end_to_end(tmp_path, capsys):
    _write_support_set(tmp_path, CLAIMS)
    assert [e.id for e in load_paraphrase_set(tmp_path, limit=2)] == ["a", "b"]
    rep = _run_lexical_eval(tmp_path, "paraphrase")
    assert (rep["dataset"], rep["method"], rep["n"]) == ("paraphrase", "lexical", 4)
    assert "paraphrase/lexical: n=4" in capsys.readouterr().err


# --- The answer-sentence check (``--dataset support-sentences``) ---------------------------

ANSWER = "The tower opened in 1889. It is 330 metres tall. It is painted brown."
TOWER = "The Eiffel Tower opened to the public in 1889."
HEIGHT = "The Eiffel Tower is 330 m tall."
PAINT = "Brown paint covers it."


def _sentence_claim(cid, start, end, passages, label="supported", answer=ANSWER, question="Eiffel tower?"):
    return SupportClaim(cid, question, tuple(Source(str(i + 1), t) for i, t in enumerate(passages)), answer, start, end, label)


SENTENCE_CLAIMS = [
    _sentence_claim("s1", 0, 25, [TOWER]),
    _sentence_claim("s2", 26, 48, ["  The Eiffel Tower is\n330 m tall.", TOWER]),  # TOWER again, spacing differs for HEIGHT
    _sentence_claim("s3", 49, 70, [PAINT], label="not_supported"),  # its passage is a distractor
    _sentence_claim("o1", 0, 9, ["All of it."], answer="Only this.", question="Other?"),  # its own passage is every passage
]


def test_support_sentence_examples_by_hand():
    (ex,) = support_sentence_examples(SENTENCE_CLAIMS)
    assert (ex.id, ex.question, ex.answer, ex.gold) == ("s1", "Eiffel tower?", ANSWER, ())
    by_id = {s.id: s.text for s in ex.sources}
    # passages by first sight, whitespace-normalised for identity; the first text is kept
    assert by_id == {"p1": TOWER, "p2": "  The Eiffel Tower is\n330 m tall.", "p3": PAINT}
    assert ex.spans == (
        GoldSpan(0, 25, "The tower opened in 1889.", ("p1",)),
        GoldSpan(26, 48, "It is 330 metres tall.", ("p1", "p2")),
    )
    assert ex.meta == {"subset": None, "claims": ["s1", "s2", "s3"]}
    assert support_sentence_examples(SENTENCE_CLAIMS) == [ex]  # deterministic order
    assert support_sentence_examples(SENTENCE_CLAIMS, limit=0) == []


def test_support_sentences_cli_end_to_end(tmp_path, capsys):
    _write_support_set(tmp_path, SENTENCE_CLAIMS)
    assert [e.id for e in load_support_sentences_set(tmp_path)] == ["s1"]
    rep = _run_lexical_eval(tmp_path, "support-sentences")
    assert (rep["dataset"], rep["method"], rep["n"], rep["metrics"]["n_spans"]) == ("support-sentences", "lexical", 1, 2)
    assert "support-sentences/lexical: n=1 spans=2" in capsys.readouterr().err


def test_tokenshapley_scores_a_whole_sentence_span_by_its_sentence_sources(ts):
    """A span that states whole answer sentences gets those sentences' source scores
    (TokenShapley.sentence_sources); a keyword span keeps its span scores."""
    from tokenshapley_rag.benchmark._data import AttributionExample
    from tokenshapley_rag.benchmark._methods import TokenShapleyAttributor

    sources = (Source("a", TOWER), Source("b", HEIGHT), Source("c", PAINT))
    spans = (GoldSpan(0, 25, "The tower opened in 1889.", ("a",)), GoldSpan(32, 48, "330 metres tall.", ("b",)),
             GoldSpan(0, 48, ANSWER[:48], ("a", "b")), GoldSpan(20, 24, "1889", ("a",)))
    ex = AttributionExample("x", "Eiffel tower?", sources, ANSWER, spans, (), {})
    res = ts.attribute(query=ex.question, sources=ex.sources, response=ex.answer)
    by_sentence = {a.index: {s.source_id: s.score for s in a.sources} for a in ts.sentence_sources(res)}
    rows = TokenShapleyAttributor(ts).score_spans(ex)
    ids = ["a", "b", "c"]
    np.testing.assert_allclose(rows[0], [by_sentence[0][i] for i in ids])
    np.testing.assert_allclose(rows[1], [by_sentence[1][i] for i in ids])  # "It is" are stopwords
    np.testing.assert_allclose(rows[2], [by_sentence[0][i] + by_sentence[1][i] for i in ids])
    keyword = np.array([res.span_scores(20, 24)[i] for i in ids])
    # only "a" holds "1889": the others are not candidates (-inf), ranked below it finitely
    assert np.isfinite(keyword).tolist() == [True, False, False]
    np.testing.assert_allclose(rows[3], [keyword[0], keyword[0] - 1.0, keyword[0] - 1.0])
    assert rows[0].argmax() == 0 and rows[1].argmax() == 1
    as_spans = TokenShapleyAttributor(ts, sentence_spans="span-scores").score_spans(ex)
    np.testing.assert_allclose(as_spans[0], [res.span_scores(0, 25)[i] for i in ids])


def test_the_variants_benchmark_runs_and_the_shipped_rule_is_the_library_call(ts, capsys):
    """benchmarks/sentence_sources_bench.py --variants on the two hand-made sentences: its
    table has every rule, and its shipped row is right where sentence_sources is."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "sentence_sources_bench.py"
    spec = importlib.util.spec_from_file_location("sentence_sources_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    (ex,) = support_sentence_examples(SENTENCE_CLAIMS)
    bench.variants(ts, [ex], first_half=1)
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 + len(bench.RULES)
    shipped = next(line for line in lines if "(shipped)" in line).strip("| ").split(" | ")
    res = ts.attribute(query=ex.question, sources=ex.sources, response=ex.answer)
    right = [
        a.best is not None and a.best.source_id in span.source_ids
        for a in ts.sentence_sources(res)
        for span in ex.spans
        if (span.start, span.end) == (a.start, a.end) or ex.answer[span.start:span.end].strip() == a.text
    ]
    assert len(right) == 2
    assert float(shipped[-1]) == pytest.approx(100 * sum(right) / 2)
