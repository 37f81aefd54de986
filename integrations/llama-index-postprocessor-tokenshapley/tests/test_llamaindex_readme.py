"""Every Python block of the README runs as written, in order, in one namespace, and prints
the output its comments show (the session's TokenShapley stands in for ``TokenShapley()``,
so the model is loaded once)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llama_index.postprocessor.tokenshapley import TokenShapleyPostprocessor

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def shown_output(block: str) -> list[str]:
    """The comment lines right after a top-level ``print(...)``: what the README says it prints."""
    shown, after_print = [], False
    for line in block.splitlines():
        if line.startswith("print("):
            after_print = True
        elif after_print and line.startswith("#"):
            shown.append(line[2:] if line.startswith("# ") else "")
        else:
            after_print = False
    return [s for s in shown if s.strip()]


def test_shown_output_parser():
    block = 'x = 1\nprint(x)\n# 1\n#\n# two\ny = 2  # not output\nprint(y)\n'
    assert shown_output(block) == ["1", "two"]


@pytest.mark.slow
def test_readme_runs_as_written(ts, monkeypatch, capsys):
    import tokenshapley_rag

    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) == 5
    monkeypatch.setattr(tokenshapley_rag, "TokenShapley", lambda *args, **kwargs: ts)
    ns: dict = {"__name__": "readme"}
    try:
        for i, block in enumerate(blocks, start=1):
            exec(compile(block, f"{README}#block{i}", "exec"), ns)
    finally:
        for value in list(ns.values()):
            if isinstance(value, TokenShapleyPostprocessor):
                value.detach()

    out = capsys.readouterr().out.splitlines()
    for block in blocks:
        for line in shown_output(block):
            assert line in out, f"the README shows {line!r}, the run printed:\n" + "\n".join(out)

    # the pipeline: the answer cites the Eiffel and Big Ben nodes, in footnote order
    resp = ns["resp"]
    answer = str(resp)
    assert "330 metres" in answer, f"greedy SmolLM2 output changed: {answer!r}"
    cites = resp.metadata["citations"]
    assert "citations_error" not in resp.metadata
    for c in cites:
        assert answer[c["start"] : c["end"]] == c["text"]
    by_text = {c["text"]: c for c in cites}
    assert by_text["330 metres"]["display_name"] == "Eiffel Tower" and by_text["330 metres"]["status"] == "supported"
    cited = resp.metadata["cited_nodes"]
    assert [n.node.ref_doc_id for n in cited] == ["eiffel", "bigben"]
    assert all(any(n is s for s in resp.source_nodes) for n in cited)
    md = resp.metadata["attribution"].to_markdown()
    for n, node in enumerate(cited, start=1):
        assert f"[^{n}]: {node.node.metadata['title']}: " in md
    assert ns["html"].startswith("<!DOCTYPE html>")
    # streaming: the deltas are the answer, cited once consumed
    stream = ns["stream"]
    assert any(c["text"] == "330 metres" and c["display_name"] == "Eiffel Tower" for c in stream.metadata["citations"])
    # the chat engine's reply and the hand-set-up engine cite too
    assert [n.node.ref_doc_id for n in ns["reply"].metadata["cited_nodes"]] == ["eiffel"]
    assert "330 metres" in [c["text"] for c in ns["qe2"].query("How tall is the Eiffel Tower?").metadata["citations"]]
    assert ns["deltas"] and "".join(ns["deltas"]) == ns["llm"].complete("What is the capital of France?").text
