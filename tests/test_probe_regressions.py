"""Probe failures of the hardening issue that no other test reproduces end to end
(docs/reports/hardening.md maps every failure to its test)."""

from __future__ import annotations

import warnings

import pytest

SOURCES = ["The Eiffel Tower is in Paris. It is 330 metres tall.", "Big Ben is in London."]


@pytest.mark.slow
@pytest.mark.parametrize(
    "answer",
    [
        "The Eiffel Tower 🗼 is in Paris👍.",
        "It is 330 metres tall 😀.",
        "The Eiffel\u200b Tower is in Paris\u2764\ufe0f.",
        "It is in Paris 🇫🇷 and is 330 metres tall.",
        "The Eif\u200bfel Tower is in Pa\u200dris.",
    ],
    ids=["emoji-apart", "emoji-after", "zwsp-and-heart", "flag", "zero-width-inside"],
)
def test_an_emoji_or_zero_width_character_never_unsupports_held_text(ts, answer):
    res = ts.attribute(query="Where is it?", sources=SOURCES, response=answer)
    assert res.citations
    assert all(c.status == "supported" and c.best.source_id == "0" for c in res.citations), [
        (c.text, c.status) for c in res.citations
    ]


def test_cli_lone_surrogate_is_refused_before_the_model_loads(tmp_path, capsys, monkeypatch):
    from tokenshapley_rag import cli

    def no_engine(args):
        raise AssertionError("the model was loaded for an input that was already refused")

    monkeypatch.setattr(cli, "_engine", no_engine)
    source = tmp_path / "s.txt"
    source.write_text("It is ok.", encoding="utf-8")
    code = cli.main(["attribute", "--query", "q", "--source", str(source), "--response", "It is \udcff ok."])
    err = capsys.readouterr().err
    assert code == 2 and "--response holds a lone surrogate U+DCFF at index 6" in err and "Traceback" not in err


@pytest.mark.slow
def test_cli_attributes_from_memory_when_the_cache_folder_cannot_be_written(cache_root, tmp_path, capsys):
    from tokenshapley_rag.cli import main

    (cache_root / "datastore").write_text("a file where the datastore folder should be")
    source = tmp_path / "eiffel.txt"
    source.write_text(SOURCES[0], encoding="utf-8")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["attribute", "--query", "How tall?", "--source", str(source), "--response",
                     "It is 330 metres tall.", "--cache-dir", str(cache_root), "--format", "json"])
    assert code == 0, capsys.readouterr().err
    assert '"330 metres"' in capsys.readouterr().out
    assert [str(w.message) for w in caught if "kept in memory only" in str(w.message)][:1]
