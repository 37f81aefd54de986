"""Every Python block of the README runs as written, in order, in one namespace, and prints
the output its comments show (the session's TokenShapley stands in for ``TokenShapley()``,
so the model is loaded once)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def shown_output(block: str) -> list[str]:
    """The comment lines right after a ``print(...)`` line (a blank or code line ends them):
    what the README says it prints."""
    shown, after_print = [], False
    for line in block.splitlines():
        if line.lstrip().startswith("print("):
            after_print = True
        elif after_print and line.startswith("#"):
            shown.append(line[2:] if line.startswith("# ") else "")
        else:
            after_print = False
    return [s for s in shown if s.strip()]


def test_shown_output_parser():
    block = "x = 1\nprint(x)\n# 1\n#\n# two\n\n# a remark\nfor y in [2]:\n    print(y)\n# 2\n"
    assert shown_output(block) == ["1", "two", "2"]


@pytest.mark.slow
def test_readme_runs_as_written(ts, monkeypatch, capsys, lc):
    import tokenshapley_rag

    import langchain_tokenshapley  # noqa: F401  (imported before TokenShapley is patched below)

    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) == 3
    assert not any("langchain_community" in block for block in blocks)  # being sunset: partner packages only
    monkeypatch.setattr(tokenshapley_rag, "TokenShapley", lambda *args, **kwargs: ts)
    ns: dict = {"__name__": "readme"}
    for i, block in enumerate(blocks, start=1):
        exec(compile(block, f"{README}#block{i}", "exec"), ns)

    out = capsys.readouterr().out.splitlines()
    for block in blocks:
        for line in shown_output(block):
            assert line in out, f"the README shows {line!r}, the run printed:\n" + "\n".join(out)

    # the create_retrieval_chain output: input, context, answer, citations, offsets exact
    result = ns["out"]
    assert set(result) == {"input", "context", "answer", "citations"}
    assert [d.id for d in result["context"]] == ["eiffel", "bigben"]
    lc.check_offsets(result["citations"], result["answer"], result["context"])
    cite = lc.by_text(result["citations"])["330 metres"]
    assert (cite["doc_id"], cite["status"], cite["display_name"]) == ("eiffel", "supported", "Eiffel Tower")
    # the LCEL chain builds the same prompt, so the greedy model gives the same answer
    lcel = ns["lcel_chain"].invoke({"input": result["input"]})
    assert lcel["answer"] == result["answer"] and lcel["citations"] == result["citations"]
    # the streamed LCEL run printed its answer word by word, then its citations
    streamed = ns["lcel_chain"].invoke({"input": "How tall is the Eiffel Tower?"})
    assert any(line.startswith(streamed["answer"]) for line in out)
    assert str([(c["text"], c["doc_id"]) for c in streamed["citations"] if c["supported"]]) in out
