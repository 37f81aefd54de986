"""Loaders of the six shared sets.

Schema and loader checks run on the committed fixtures (tests/data/sets: a few verbatim lines
of each real file); checks of the real files' counts and ids take ``shared_data`` (the full
sets, skipped when absent); property checks over every example run on both (``sets_dir``).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tokenshapley_rag._types import Source
from tokenshapley_rag.benchmark import (
    AttributionExample,
    DatasetFormatError,
    DatasetNotFoundError,
    GoldEvidence,
    GoldSpan,
    SummaryExample,
    default_data_dir,
    load_dataset,
)
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError, TokenShapleyError

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "data" / "sets"


def _raw(name: str, data: Path = FIXTURES) -> list[dict]:
    with (data / name / "dev.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def test_the_package_has_no_default_data_folder(monkeypatch):
    # Installed anywhere, the harness cannot know where the sets are: it asks for them.
    for unset in (None, ""):  # empty = unset
        if unset is None:
            monkeypatch.delenv("TOKENSHAPLEY_DATA", raising=False)
        else:
            monkeypatch.setenv("TOKENSHAPLEY_DATA", unset)
        with pytest.raises(DatasetNotFoundError, match=r"no data folder given.*--data PATH.*TOKENSHAPLEY_DATA"):
            default_data_dir()
        with pytest.raises(DatasetNotFoundError, match=r"no data folder given"):
            load_dataset("quotesum")


def test_environment_variable_overrides_the_default(tmp_path, monkeypatch):
    (tmp_path / "kv").mkdir()
    (tmp_path / "kv" / "dev.jsonl").write_text(
        (FIXTURES / "kv" / "dev.jsonl").read_text(encoding="utf-8"), encoding="utf-8"
    )
    monkeypatch.setenv("TOKENSHAPLEY_DATA", str(tmp_path))
    assert default_data_dir() == tmp_path
    assert [e.id for e in load_dataset("kv")] == [r["id"] for r in _raw("kv")]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOKENSHAPLEY_DATA", ".")  # relative: against the working directory
    assert default_data_dir() == tmp_path
    monkeypatch.setenv("TOKENSHAPLEY_DATA", str(tmp_path / "nope"))
    # an explicit data_dir still wins over the variable
    assert len(load_dataset("kv", FIXTURES)) == 3


def test_missing_default_folder_says_where_it_looked_and_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSHAPLEY_DATA", str(tmp_path / "nope"))
    with pytest.raises(DatasetNotFoundError) as info:
        load_dataset("quotesum")
    msg = str(info.value)
    assert str(tmp_path / "nope") in msg and "does not exist" in msg
    assert "from the TOKENSHAPLEY_DATA environment variable" in msg
    assert "--data PATH" in msg and "TOKENSHAPLEY_DATA" in msg and "quotesum/" in msg
    monkeypatch.delenv("TOKENSHAPLEY_DATA")
    with pytest.raises(DatasetNotFoundError, match=r"given as data_dir \(--data\).*TOKENSHAPLEY_DATA"):
        load_dataset("quotesum", tmp_path / "elsewhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetNotFoundError, match=r"quotesum/dev\.jsonl' does not exist.*--data PATH"):
        load_dataset("quotesum", tmp_path / "empty")


def test_fixtures_are_verbatim_lines_of_the_shared_files(shared_data):
    for name in ("quotesum", "verigran", "kv", "nq", "cnndm", "wice"):
        real = set((shared_data / name / "dev.jsonl").read_text(encoding="utf-8").splitlines())
        mine = (FIXTURES / name / "dev.jsonl").read_text(encoding="utf-8").splitlines()
        assert 2 <= len(mine) <= 4 and all(line in real for line in mine), name
    # ... and the bare answer's example (tests/test_question_documents.py)
    real = set((shared_data / "nq" / "dev.jsonl").read_text(encoding="utf-8").splitlines())
    assert (FIXTURES / "nq" / "bare_answer.jsonl").read_text(encoding="utf-8").splitlines()[0] in real


def test_fixtures_load_with_every_set_present():
    for name in ("quotesum", "verigran", "kv", "nq", "wice"):
        exs = load_dataset(name, FIXTURES)
        assert 2 <= len(exs) <= 4 and all(isinstance(e, AttributionExample) for e in exs)
    assert all(isinstance(e, SummaryExample) for e in load_dataset("cnndm", FIXTURES))


@pytest.mark.parametrize(
    "name, n_examples, n_spans",
    [
        ("quotesum", 189, 817),
        ("verigran", 288, 467),
        ("kv", 342, 342),
        ("nq", 705, 705),
        ("wice", 521, 0),
    ],
)
def test_attribution_counts_match_readme(name, n_examples, n_spans, shared_data):
    exs = load_dataset(name, shared_data)
    assert len(exs) == n_examples
    assert sum(len(e.spans) for e in exs) == n_spans
    assert all(isinstance(e, AttributionExample) for e in exs)
    assert len({e.id for e in exs}) == n_examples
    for e in exs:
        assert isinstance(e.sources, tuple) and isinstance(e.spans, tuple) and isinstance(e.gold, tuple)
        for sp in e.spans:
            assert e.answer[sp.start : sp.end] == sp.text
            assert all(sid in e.source_ids for sid in sp.source_ids)


def test_cnndm_counts_and_fields(shared_data):
    exs = load_dataset("cnndm", shared_data)
    assert len(exs) == 694
    assert all(isinstance(e, SummaryExample) for e in exs)
    assert Counter(e.meta["split"] for e in exs) == {"test": 260, "validation": 434}
    assert exs[0].article.startswith(_raw("cnndm", shared_data)[0]["article"][:50])
    assert all(e.highlights and e.article for e in exs)


def test_explicit_data_dir_and_limit_and_split(tmp_path):
    d = tmp_path / "kv"
    d.mkdir()
    lines = (FIXTURES / "kv" / "dev.jsonl").read_text(encoding="utf-8").splitlines()
    (d / "mini.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    exs = load_dataset("kv", tmp_path, split="mini")
    assert len(exs) == 3 and [e.id for e in exs] == [json.loads(x)["id"] for x in lines]
    assert [e.id for e in load_dataset("kv", str(tmp_path), split="mini", limit=2)] == [e.id for e in exs[:2]]
    assert [e.id for e in load_dataset("kv", FIXTURES, limit=2)] == [e.id for e in load_dataset("kv", FIXTURES)[:2]]


def test_limit_keeps_the_first_lines_of_the_shared_file(shared_data):
    assert [e.id for e in load_dataset("kv", shared_data, limit=3)] == [e.id for e in load_dataset("kv", shared_data)[:3]]


def test_quotesum_sources_are_title_plus_text(sets_dir):
    quotesum = load_dataset("quotesum", sets_dir)
    for raw, ex in zip(_raw("quotesum", sets_dir), quotesum, strict=True):
        assert ex.id == raw["id"]
        for rs, s in zip(raw["sources"], ex.sources):
            assert rs["title"] is not None
            assert s.text == rs["title"] + "\n" + rs["text"]
            assert s.metadata["title"] == rs["title"]
            assert s.metadata["text_offset"] == len(rs["title"]) + 1
            off = s.metadata["text_offset"]
            assert s.text[off:] == rs["text"]


def test_quotesum_title_only_spans_are_now_in_the_gold_source(shared_data):
    quotesum = load_dataset("quotesum", shared_data)
    title_only = 0
    nowhere = 0
    for ex in quotesum:
        for sp, chk in zip(ex.spans, ex.meta["span_checks"]):
            gold_text = ex.sources[ex.source_index(sp.source_ids[0])].text
            if chk["in_source_title"] and not chk["in_source_text"]:
                title_only += 1
                assert sp.text in gold_text
            if not chk["in_source_title"] and not chk["in_source_text"]:
                nowhere += 1
    assert (title_only, nowhere) == (60, 5)  # PROVENANCE.md: 60 title-only, 5 in neither


def test_gold_ranges_are_shifted_by_the_title(tmp_path):
    """QuoteSum has no gold ranges; a QuoteSum-shaped file with one checks the shift."""
    raw = _raw("quotesum")[0]
    src = raw["sources"][1]
    raw["gold"] = [{"source_id": src["id"], "start": 4, "end": 20}]
    (tmp_path / "quotesum").mkdir()
    (tmp_path / "quotesum" / "dev.jsonl").write_text(json.dumps(raw) + "\n", encoding="utf-8")
    (ex,) = load_dataset("quotesum", tmp_path)
    (g,) = ex.gold
    s = ex.sources[1]
    assert g == GoldEvidence(src["id"], 4 + len(src["title"]) + 1, 20 + len(src["title"]) + 1)
    assert s.text[g.start : g.end] == src["text"][4:20]


def test_nq_gold_passage_shift(sets_dir):
    nq = load_dataset("nq", sets_dir)
    raws = _raw("nq", sets_dir)
    for raw, ex in zip(raws, nq, strict=True):
        (rg,) = raw["gold"]
        (g,) = ex.gold
        s = ex.sources[ex.source_index(g.source_id)]
        rs = next(x for x in raw["sources"] if x["id"] == rg["source_id"])
        assert s.text == rs["title"] + "\n" + rs["text"]
        assert g.start == rg["start"] + len(rs["title"]) + 1
        assert s.text[g.start : g.end] == rs["text"][rg["start"] : rg["end"]]
        assert g.end == len(s.text)  # the whole passage, title excluded
    ex = nq[0]
    assert ex.spans[0].source_ids == (ex.gold[0].source_id,)
    assert ex.spans[0].start == 0 and ex.spans[0].end == len(ex.answer)


def test_sets_without_titles_keep_text_unchanged(sets_dir):
    for name in ("verigran", "kv", "wice"):
        for raw, ex in zip(_raw(name, sets_dir)[:40], load_dataset(name, sets_dir, limit=40), strict=True):
            for rs, s in zip(raw["sources"], ex.sources):
                assert rs["title"] is None
                assert s.text == rs["text"]
                assert s.metadata == {"title": None, "text_offset": 0}
            assert [(g.source_id, g.start, g.end) for g in ex.gold] == [
                (g["source_id"], g["start"], g["end"]) for g in raw["gold"]
            ]


def test_kv_gold_positions_of_the_shared_file(shared_data):
    exs = load_dataset("kv", shared_data)
    assert Counter(e.meta["gold_index"] for e in exs) == {0: 84, 24: 87, 49: 84, 74: 87}


def test_kv_answer_is_the_whole_gold_value(sets_dir):
    for e in load_dataset("kv", sets_dir):
        assert len(e.sources) == 75 and len(e.answer) == 36
        (sp,) = e.spans
        assert (sp.start, sp.end, sp.source_ids) == (0, 36, (str(e.meta["gold_index"]),))
        holders = [s.id for s in e.sources if e.answer in s.text]
        assert holders == [str(e.meta["gold_index"])]


def test_verigran_details(shared_data):
    exs = load_dataset("verigran", shared_data)
    assert [e.id for e in exs if not e.spans] == ["verigran-dev-2", "verigran-test-84"]
    test = [e for e in exs if e.meta["orig_split"] == "test"]
    assert (len(test), sum(len(e.spans) for e in test)) == (155, 247)
    for e in exs:  # gold = the passages cited by the spans, whole
        cited = {sid for sp in e.spans for sid in sp.source_ids}
        assert {g.source_id for g in e.gold} == cited
        for g in e.gold:
            assert (g.start, g.end) == (0, len(e.sources[e.source_index(g.source_id)].text))


def test_wice_details(shared_data):
    exs = load_dataset("wice", shared_data)
    assert Counter(e.meta["label"] for e in exs) == {
        "supported": 168,
        "partially_supported": 301,
        "not_supported": 52,
    }
    assert all(e.question == "" and e.spans == () for e in exs)
    assert sum(1 for e in exs if not e.gold) == 42
    assert sum(1 for e in exs for s in e.sources if s.text == "") == 17


@pytest.mark.parametrize(
    "name, limit, exc",
    [
        ("squad", None, InvalidInputError),
        ("kv", 0, InvalidInputError),
        ("kv", 1.5, InvalidInputTypeError),
        (3, None, InvalidInputTypeError),
    ],
)
def test_bad_arguments(name, limit, exc):
    with pytest.raises(exc):
        load_dataset(name, FIXTURES, limit=limit)


def test_missing_paths(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="does not exist"):
        load_dataset("kv", tmp_path / "nope")
    with pytest.raises(DatasetNotFoundError, match="kv"):
        load_dataset("kv", tmp_path)
    assert issubclass(DatasetNotFoundError, FileNotFoundError)
    assert issubclass(DatasetNotFoundError, TokenShapleyError)


def _write(tmp_path: Path, name: str, rows: list[dict]) -> Path:
    (tmp_path / name).mkdir(exist_ok=True)
    (tmp_path / name / "dev.jsonl").write_text(
        "\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8"
    )
    return tmp_path


def test_span_text_mismatch_names_the_example(tmp_path):
    raw = _raw("quotesum")[0]
    raw["spans"][1]["end"] += 1
    _write(tmp_path, "quotesum", [raw])
    with pytest.raises(DatasetFormatError, match=raw["id"]) as info:
        load_dataset("quotesum", tmp_path)
    assert "spans[1]" in str(info.value) and "!=" in str(info.value)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r["spans"][0].update(source_ids=["99"]), "not among source ids"),
        (lambda r: r["sources"].append(dict(r["sources"][0])), "duplicate source id"),
        (lambda r: r.pop("answer"), "missing field 'answer'"),
        (lambda r: r.update(gold=[{"source_id": "1", "start": 0, "end": 10**6}]), "len\\(source text\\)"),
        (lambda r: r["spans"][0].update(start=5, end=5), "start < end"),
    ],
)
def test_schema_errors(tmp_path, mutate, message):
    raw = _raw("quotesum")[0]
    mutate(raw)
    _write(tmp_path, "quotesum", [raw])
    with pytest.raises(DatasetFormatError, match=message):
        load_dataset("quotesum", tmp_path)


def test_duplicate_example_ids_and_bad_json(tmp_path):
    raw = _raw("kv")[0]
    _write(tmp_path, "kv", [raw, raw])
    with pytest.raises(DatasetFormatError, match="duplicate example id"):
        load_dataset("kv", tmp_path)
    (tmp_path / "kv" / "dev.jsonl").write_text('{"id": "x", \n', encoding="utf-8")
    with pytest.raises(DatasetFormatError, match="not valid JSON"):
        load_dataset("kv", tmp_path)


def test_dataclasses_are_frozen():
    s = GoldSpan(0, 1, "a", ("1",))
    with pytest.raises(AttributeError):
        s.start = 3  # type: ignore[misc]
    ex = AttributionExample("t", "", (Source("1", "a"),), "a", (s,), (), {})
    with pytest.raises(AttributeError):
        ex.answer = "b"  # type: ignore[misc]
    with pytest.raises(InvalidInputError, match="no source with id '2'"):
        ex.source_index("2")
