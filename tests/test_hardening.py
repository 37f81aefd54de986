"""Bad input gets a typed error naming the problem, at every public entry (issue: hardening)."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenshapley_rag import DuplicateSourceIdError, Source
from tokenshapley_rag._sources import coerce_sources
from tokenshapley_rag._segment import find_keywords, split_sentences
from tokenshapley_rag._support import keyword_facts, sentence_facts
from tokenshapley_rag._text import check_text, decode_utf8
from tokenshapley_rag.errors import InvalidInputTypeError, InvalidTextError, TokenShapleyError

SURROGATE = "It is \ud800 ok."


def test_check_text_names_the_field_and_position():
    with pytest.raises(InvalidTextError, match=r"response holds a lone surrogate U\+D800 at index 6"):
        check_text(SURROGATE, "response")
    with pytest.raises(InvalidInputTypeError, match="query must be a str, got bytes"):
        check_text(b"x", "query")
    with pytest.raises(InvalidTextError, match=r"--source 'a.txt' is not UTF-8 text \(byte 1"):
        decode_utf8(b"a\xff", "--source 'a.txt'")
    assert decode_utf8("\ufeffé".encode(), "x") == "é"


@pytest.mark.parametrize(
    "sources, field",
    [
        ([SURROGATE], r"sources\[0\]\.text"),
        ([{"id": "\udc80", "text": "ok."}], r"sources\[0\]\.id"),
        ([Source("a", "fine."), Source("b", "bad \udfff.")], r"sources\[1\]\.text"),
    ],
)
def test_sources_with_lone_surrogates_are_refused(sources, field):
    with pytest.raises(InvalidTextError, match=field):
        coerce_sources(sources)


def test_source_ids_are_compared_as_strings():
    with pytest.raises(DuplicateSourceIdError, match="'1'"):
        coerce_sources([{"id": 1, "text": "a."}, {"id": "1", "text": "b."}])
    with pytest.raises(DuplicateSourceIdError):
        coerce_sources([Source(1, "a."), Source("1", "b.")])
    assert [s.id for s in coerce_sources([Source(7, "a."), {"id": None, "text": "b."}])] == ["7", "1"]
    with pytest.raises(InvalidInputTypeError, match=r"sources\[0\]\.id must be a str or an int, got float"):
        coerce_sources([{"id": 1.5, "text": "a."}])


@pytest.mark.slow
def test_attribute_and_stream_refuse_lone_surrogates(ts):
    with pytest.raises(InvalidTextError, match="response"):
        ts.attribute(query="q", sources=["It is ok."], response=SURROGATE)
    with pytest.raises(InvalidTextError, match="query"):
        ts.attribute(query=SURROGATE, sources=["It is ok."], response="ok")
    stream = ts.stream(query="q", sources=["It is ok."])
    with pytest.raises(InvalidTextError, match="delta"):
        stream.feed(SURROGATE)


def test_cli_non_utf8_file_is_a_clear_error(tmp_path, capsys):
    from tokenshapley_rag.cli import main

    bad = tmp_path / "latin1.txt"
    bad.write_bytes("Café au lait.".encode("latin-1"))
    code = main(["attribute", "--query", "q", "--source", str(bad), "--response", "ok"])
    assert code == 2
    assert "is not UTF-8 text" in capsys.readouterr().err


_TEXT = st.text(st.characters(codec="utf-8"), max_size=60) | st.text(max_size=30)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(_TEXT)
def test_text_functions_never_raise_outside_typed_errors(text):
    # Arbitrary Unicode (lone surrogates included): segmentation and the fact rule either
    # work or (for check_text) raise the library's typed error.
    try:
        check_text(text, "response")
    except TokenShapleyError:
        return
    spans = split_sentences(text)
    assert all(0 <= a < b <= len(text) for a, b in spans)
    for k in find_keywords(text):
        assert text[k.start:k.end] == k.text
        keyword_facts(k.text, k.kind)
    sentence_facts(text)


def test_evaluate_chain_writes_an_error_row_for_a_lone_surrogate(tmp_path, ts):
    from tokenshapley_rag.chain_eval import evaluate_chain

    records = [
        {"id": "bad", "question": "Q?", "sources": ["It is ok."], "answer": SURROGATE},
        {"id": "good", "question": "Q?", "sources": ["The tower is 330 metres tall."], "answer": "It is 330 metres tall."},
    ]
    out = tmp_path / "rows.jsonl"
    report = evaluate_chain(records, attributor=ts, output=out)
    rows = {r.id: r for r in report.rows}
    assert not rows["bad"].ok and "lone surrogate" in (rows["bad"].error or "")
    assert rows["good"].ok
    lines = out.read_bytes().decode("utf-8").splitlines()
    assert len(lines) == 2 and all(json.loads(line) for line in lines)
    again = evaluate_chain(records, attributor=ts, output=out)  # resumes without crashing
    assert [r.id for r in again.rows] == ["bad", "good"]
def test_zero_width_characters_do_not_split_a_keyword():
    units = [k.text for k in find_keywords("The Eif\u200bfel Tower is tall.") if k.citable]
    assert units == ["Eif\u200bfel Tower", "tall"]
    assert keyword_facts("Eif\u200bfel Tower", "name").words == ("eiffel", "tower")


