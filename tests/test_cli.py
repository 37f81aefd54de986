"""The ``tokenshapley attribute`` and ``demo`` commands, end to end on the default model."""

import json

import pytest

from tokenshapley_rag.cli import main

pytestmark = pytest.mark.slow


@pytest.fixture
def source_files(tmp_path):
    eiffel = tmp_path / "eiffel.txt"
    eiffel.write_text("The Eiffel Tower is in Paris. It is 330 metres tall.", encoding="utf-8")
    bigben = tmp_path / "bigben.txt"
    bigben.write_text("Big Ben is a clock tower in London. It was completed in 1859.", encoding="utf-8")
    return [str(eiffel), str(bigben)]


def test_attribute_writes_json_citations_with_file_name_ids(cache_root, source_files, tmp_path, capsys):
    out = tmp_path / "result.json"
    code = main([
        "attribute", "--query", "How tall is the Eiffel Tower?", "--source", *source_files,
        "--response", "The Eiffel Tower is 330 metres tall.", "--format", "json", "-o", str(out),
        "--ids-from-names", "--cache-dir", str(cache_root),
    ])
    assert code == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    cited = {c["text"]: c["sources"][0]["source_id"] for c in data["citations"] if c["sources"]}
    assert cited["330 metres"] == "eiffel.txt"
    err = capsys.readouterr().err
    assert "Encoding the sources" in err and "Wrote" in err


def test_attribute_prints_markdown_footnotes(cache_root, source_files, capsys):
    assert main([
        "attribute", "--query", "When was Big Ben completed?", "--source", *source_files,
        "--response", "Big Ben was completed in 1859.", "--cache-dir", str(cache_root),
    ]) == 0
    out = capsys.readouterr().out
    assert "1859[^" in out and "It was completed in 1859." in out
    # the footnote names the file, not the source's position
    assert '[^1]: bigben.txt: "' in out


def test_attribute_refuses_an_empty_response_before_loading_the_model(source_files, monkeypatch, capsys):
    import tokenshapley_rag.cli as cli

    monkeypatch.setattr(cli, "_engine", lambda args: pytest.fail("the model was loaded for an empty response"))
    assert main(["attribute", "--query", "q", "--source", *source_files, "--response", "  "]) == 2
    assert "--response is empty" in capsys.readouterr().err


def test_attribute_with_a_missing_source_file_exits_2(cache_root, tmp_path, capsys):
    code = main(["attribute", "--query", "q", "--source", str(tmp_path / "nope.txt"), "--response", "a",
                 "--cache-dir", str(cache_root)])
    assert code == 2
    assert "nope.txt" in capsys.readouterr().err


def test_demo_generates_cites_and_writes_html(cache_root, tmp_path, capsys):
    html = tmp_path / "demo.html"
    assert main(["demo", "--max-new-tokens", "24", "--html", str(html), "--cache-dir", str(cache_root)]) == 0
    out = capsys.readouterr().out
    assert "[^1]" in out and ("supported" in out or "UNSUPPORTED" in out)
    assert html.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("It was built. It was completed on 31 March 1889. The statue of", "It was built. It was completed on 31 March 1889."),
        ("One unfinished sentence", "One unfinished sentence"),
        ("Done. All done.", "Done. All done."),
        ('He said "yes." Then', 'He said "yes."'),
    ],
)
def test_demo_drops_an_unfinished_last_sentence(text, kept):
    from tokenshapley_rag.cli import _complete_sentences

    assert _complete_sentences(text) == kept


def test_engine_options_include_device_and_disk_cache_opt_out():
    from tokenshapley_rag.cli import build_parser

    args = build_parser().parse_args(
        ["attribute", "--query", "q", "--source", "a.txt", "--response", "r", "--device", "cuda:1", "--no-disk-cache"]
    )
    assert args.device == "cuda:1" and args.no_disk_cache
    assert build_parser().parse_args(["demo"]).device == "cpu"
