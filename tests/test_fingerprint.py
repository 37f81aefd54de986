"""Fingerprint of the attribution pipeline: 50 attributions that must not change unless meant to.

Each case attributes a hand-written answer (correct, wrong numbers and dates, swapped names,
several sentences, one with a semicolon) over one of two committed corpora with the default
TokenShapley: the 15 documents of ``tests/data/competing_facts`` (one source each) and the 8
files of ``tests/data/chat_docs`` cut into paragraphs (chunks of one document share its
``Source.document``). Two of the 50 are streamed (``TokenShapley.stream``, 9-character
deltas): their per-sentence citations as they were returned are recorded too.

``tests/data/fingerprint.json`` holds what each attribution gave. Compared exactly: keyword
texts, spans, kinds and statuses, each keyword's cited sources (ids, sentence indices and
ranges, keyword ranges), its conflicting sentence, the answer sentences' verdicts and keyword
counts, and each token's keyword and answer sentence. Compared with a tolerance
(``abs=1e-6, rel=1e-5``, never bit equality: BLAS threading can change the last bits):
supports, source scores, sentence scores and verdict scores. Sources whose recorded scores
are equal within that tolerance may come in either order.

The fixture is rewritten on purpose, when a change of behaviour is intended, with::

    TOKENSHAPLEY_REGENERATE_FINGERPRINT=1 python -m pytest tests/test_fingerprint.py

which writes the file and skips the comparison; review its diff before committing it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tokenshapley_rag import Source

pytestmark = pytest.mark.slow

DATA = Path(__file__).parent / "data"
FIXTURE = DATA / "fingerprint.json"
REGENERATE = os.environ.get("TOKENSHAPLEY_REGENERATE_FINGERPRINT") == "1"
ABS, REL = 1e-6, 1e-5

COMPETING = [
    Source(p.stem, p.read_text(encoding="utf-8").strip()) for p in sorted((DATA / "competing_facts").glob("*.txt"))
]
CHAT = [
    Source(f"{p.name}#{i}", chunk.strip(), document=p.name)
    for p in sorted((DATA / "chat_docs").iterdir())
    for i, chunk in enumerate(c for c in p.read_text(encoding="utf-8").split("\n\n") if c.strip())
]
CORPORA = {"competing_facts": COMPETING, "chat_docs": CHAT}

# (corpus, query, answer, streamed)
CASES: list[tuple[str, str, str, bool]] = [
    # competing facts: correct answers and copied words
    ("competing_facts", "", "In 2020 the city of Lyon had a population of 522,250 inhabitants.", False),
    ("competing_facts", "", "Marseille had a population of 870,321 in 2020.", False),
    ("competing_facts", "", "The Danube is 2,850 kilometres long and flows into the Black Sea.", False),
    ("competing_facts", "", "The Danube is 2850 km long.", False),
    ("competing_facts", "", "The Golden Gate Bridge's main span is 1,280 metres long.", False),
    ("competing_facts", "", "The Rhine is 1,230 kilometres long.", False),
    ("competing_facts", "", "The Brooklyn Bridge opened in 1883 and its main span is 486 metres long.", False),
    ("competing_facts", "", "Marie Curie was born in Warsaw in 1867.", False),
    ("competing_facts", "", "Marie Curie won the Nobel Prize in Physics in 1903.", False),
    ("competing_facts", "", "Lise Meitner was born in Vienna in 1878 and died in 1968 in Cambridge.", False),
    ("competing_facts", "", "The Rhine flows into the North Sea. The Danube flows into the Black Sea.", False),
    ("competing_facts", "", "The Danube is very long.", False),
    ("competing_facts", "Who designed the Brooklyn Bridge?", "It was designed by John Augustus Roebling.", False),
    ("competing_facts", "", "Toulouse is home to the headquarters of Airbus.", False),
    # competing facts: wrong numbers and dates
    ("competing_facts", "", "In 2020 Lyon had a population of 870,000 inhabitants.", False),
    ("competing_facts", "", "Lyon had a population of 870,321 in 2020.", False),
    ("competing_facts", "", "The Danube is 2,580 kilometres long and flows into the Black Sea.", False),
    ("competing_facts", "", "The Golden Gate Bridge's main span is 1,450 metres long.", False),
    ("competing_facts", "", "The Rhine is 1,320 kilometres long.", False),
    ("competing_facts", "", "The Brooklyn Bridge's main span is 468 metres long.", False),
    ("competing_facts", "", "She won the Nobel Prize in 1944.", False),
    ("competing_facts", "", "The Golden Gate Bridge opened to traffic in 1989.", False),
    ("competing_facts", "", "The Brooklyn Bridge in New York City opened in 1887.", False),
    ("competing_facts", "", "Lise Meitner died in 1833 in Cambridge.", False),
    # competing facts: swapped names
    ("competing_facts", "", "Marie Curie was born in Vienna in 1878.", False),
    ("competing_facts", "", "Lise Meitner was born in Warsaw in 1867.", False),
    ("competing_facts", "", "The chief engineer of the Brooklyn Bridge was Joseph Strauss.", False),
    ("competing_facts", "", "Marseille was founded by the Romans under the name Lugdunum.", False),
    ("competing_facts", "", "Together with Marie Curie she discovered protactinium in 1917.", False),
    # chat docs: correct answers
    ("chat_docs", "When was the Eiffel Tower completed?",
     "Construction of the Eiffel Tower was completed on 31 March 1889. It is 330 metres tall.", False),
    ("chat_docs", "Who landed on the Moon?",
     "Neil Armstrong and Buzz Aldrin landed the Eagle on 20 July 1969, while Michael Collins stayed in lunar orbit.", False),
    ("chat_docs", "How high is Everest?", "The summit of Mount Everest is 8,849 metres high.", False),
    ("chat_docs", "", "Tenzing Norgay and Edmund Hillary made the first confirmed ascent of Everest on 29 May 1953.", False),
    ("chat_docs", "", "The Great Wall of China measures about 21,196 kilometres in total.", False),
    ("chat_docs", "", "The Statue of Liberty was dedicated on 28 October 1886; its framework was built by Gustave Eiffel.",
     False),
    ("chat_docs", "", "The Nile is about 6,650 kilometres long and flows into the Mediterranean Sea.", False),
    ("chat_docs", "", "Titanic sank in the North Atlantic Ocean on 15 April 1912. More than 1,500 people died.", False),
    ("chat_docs", "", "Big Ben's bell weighs 13.7 tonnes and the Elizabeth Tower stands 96 metres tall.", False),
    # chat docs: wrong numbers and dates
    ("chat_docs", "", "The Eiffel Tower is 300 metres tall.", False),
    ("chat_docs", "", "Construction of the Eiffel Tower was completed on 31 March 1899.", False),
    ("chat_docs", "", "Mount Everest's summit is 8,848 metres high.", False),
    ("chat_docs", "", "Titanic sank on 14 April 1912 and more than 2,500 people died.", False),
    ("chat_docs", "", "The Great Wall was declared a UNESCO World Heritage Site in 1997.", False),
    # chat docs: swapped names
    ("chat_docs", "", "The Eiffel Tower is named after the sculptor Frederic Auguste Bartholdi.", False),
    ("chat_docs", "", "Michael Collins and Buzz Aldrin landed the Eagle on the Moon.", False),
    ("chat_docs", "", "Titanic was built by Harland and Wolff in Southampton.", False),
    ("chat_docs", "", "The Nile's tributaries meet at Khartoum in Egypt.", False),
    ("chat_docs", "Tell me about Big Ben.", "Big Ben is in Paris; the tower was completed in 1859.", False),
    # streamed
    ("competing_facts", "Tell me about Lise Meitner and the Rhine.",
     "Lise Meitner was born in Vienna in 1878. The Rhine is 1,320 kilometres long. It flows into the North Sea.", True),
    ("chat_docs", "Tell me about the Eiffel Tower.",
     "The Eiffel Tower is in Paris and is 330 metres tall. It was completed on 31 March 1899 for the World's Fair.", True),
]


def _source_fields(s: Any) -> dict[str, Any]:
    return {
        "source_id": s.source_id,
        "sentence_index": s.sentence_index,
        "sentence": [s.sentence_start, s.sentence_end],
        "keyword": [s.keyword_start, s.keyword_end],
        "score": s.score,
    }


def _citation(c: Any) -> dict[str, Any]:
    return {
        "text": c.text,
        "span": [c.start, c.end],
        "kind": c.kind,
        "status": c.status,
        "support": c.support,
        "sources": [_source_fields(s) for s in c.sources],
        "conflict": None if c.conflict is None else [c.conflict.source_id, c.conflict.sentence_index],
    }


def _verdict(v: Any) -> dict[str, Any]:
    return {"span": [v.start, v.end], "verdict": v.verdict, "score": v.score, "n_keywords": v.n_keywords}


def _fingerprint(res: Any) -> dict[str, Any]:
    return {
        "citations": [_citation(c) for c in res.citations],
        "sentences": [_verdict(v) for v in res.sentences],
        "support": res.support,
        "source_scores": res.source_scores,
        "sentence_scores": [[s.source_id, s.sentence_index, s.score, s.keyword_score] for s in res.sentence_scores],
        "token_keyword": res.tokens.keyword.tolist(),
        "token_sentence": res.tokens.answer_sentence.tolist(),
    }


def _run(ts: Any, corpus: str, query: str, answer: str, streamed: bool) -> dict[str, Any]:
    sources = CORPORA[corpus]
    if not streamed:
        return _fingerprint(ts.attribute(query, sources, answer))
    stream = ts.stream(query, sources)
    returned = []
    for i in range(0, len(answer), 9):
        returned.extend(stream.feed(answer[i : i + 9]))
    returned.extend(stream.finish())
    out = _fingerprint(stream.result)
    out["returned"] = [
        {"index": s.index, "span": [s.start, s.end], "verdict": s.verdict, "score": s.score,
         "citations": [_citation(c) for c in s.citations]}
        for s in returned
    ]
    return out


@pytest.fixture(scope="module")
def recorded(ts) -> list[dict[str, Any]]:
    got = [
        {"corpus": corpus, "query": query, "answer": answer, "streamed": streamed,
         **_run(ts, corpus, query, answer, streamed)}
        for corpus, query, answer, streamed in CASES
    ]
    if REGENERATE:
        FIXTURE.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        pytest.skip(f"rewrote {FIXTURE.name}: review its diff before committing it")
    return got


def _close(got: float | None, want: float | None) -> bool:
    if got is None or want is None:
        return got is want
    return got == pytest.approx(want, abs=ABS, rel=REL)


def _assert_same_sources(got: list[dict], want: list[dict], where: str) -> None:
    """The same sources with the same fields; sources whose recorded scores tie (within the
    tolerance) may swap places, since their order then rests on the last bits."""
    assert len(got) == len(want), f"{where}: {[s['source_id'] for s in got]} != {[s['source_id'] for s in want]}"
    i = 0
    while i < len(want):
        j = i + 1
        while j < len(want) and _close(want[j]["score"], want[i]["score"]):
            j += 1
        key = lambda s: (s["source_id"], s["sentence_index"])  # noqa: E731
        g, w = sorted(got[i:j], key=key), sorted(want[i:j], key=key)
        for a, b in zip(g, w):
            assert {k: v for k, v in a.items() if k != "score"} == {k: v for k, v in b.items() if k != "score"}, where
            assert _close(a["score"], b["score"]), f"{where}: score of {a['source_id']} {a['score']} != {b['score']}"
        i = j


def _assert_same_citations(got: list[dict], want: list[dict], where: str) -> None:
    exact = ("text", "span", "kind", "status", "conflict")
    assert [[c[k] for k in exact] for c in got] == [[c[k] for k in exact] for c in want], where
    for a, b in zip(got, want):
        here = f"{where}, keyword {b['text']!r}"
        assert _close(a["support"], b["support"]), f"{here}: support {a['support']} != {b['support']}"
        _assert_same_sources(a["sources"], b["sources"], here)


def _assert_same_verdicts(got: list[dict], want: list[dict], where: str) -> None:
    exact = ("span", "verdict", "n_keywords")
    assert [[v.get(k) for k in exact] for v in got] == [[v.get(k) for k in exact] for v in want], where
    assert all(_close(a["score"], b["score"]) for a, b in zip(got, want)), where


def test_the_fixture_covers_every_case(recorded):
    want = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert len(CASES) == 50 and sum(s for *_, s in CASES) == 2
    assert [(w["corpus"], w["query"], w["answer"], w["streamed"]) for w in want] == [tuple(c) for c in CASES]


@pytest.mark.parametrize("case", range(len(CASES)), ids=lambda i: f"{i:02d}")
def test_attribution_matches_its_fingerprint(recorded, case):
    want = json.loads(FIXTURE.read_text(encoding="utf-8"))[case]
    got = recorded[case]
    where = f"case {case} ({want['answer']!r})"
    _assert_same_citations(got["citations"], want["citations"], where)
    _assert_same_verdicts(got["sentences"], want["sentences"], where)
    assert _close(got["support"], want["support"]), where
    assert got["token_keyword"] == want["token_keyword"] and got["token_sentence"] == want["token_sentence"], where
    assert list(got["source_scores"]) == list(want["source_scores"]), where
    for sid, v in want["source_scores"].items():
        assert _close(got["source_scores"][sid], v), f"{where}: source score of {sid}"
    assert [s[:2] for s in got["sentence_scores"]] == [s[:2] for s in want["sentence_scores"]], where
    for a, b in zip(got["sentence_scores"], want["sentence_scores"]):
        assert _close(a[2], b[2]) and _close(a[3], b[3]), f"{where}: sentence {b[:2]} scores {a[2:]} != {b[2:]}"
    if want["streamed"]:
        assert len(got["returned"]) == len(want["returned"]), where
        for a, b in zip(got["returned"], want["returned"]):
            here = f"{where}, streamed sentence {b['index']}"
            assert (a["index"], a["span"], a["verdict"]) == (b["index"], b["span"], b["verdict"]), here
            assert _close(a["score"], b["score"]), here
            _assert_same_citations(a["citations"], b["citations"], here)
