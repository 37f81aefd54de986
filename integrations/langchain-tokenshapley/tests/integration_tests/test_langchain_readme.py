"""The README's Python snippet runs as written (with the session's TokenShapley, to load it once)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.filterwarnings("ignore:`langchain-community` is being sunset:DeprecationWarning")
def test_readme_snippet_runs(ts, monkeypatch, capsys):
    import tokenshapley_rag

    import langchain_tokenshapley  # noqa: F401  (imported before TokenShapley is patched below)

    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 1
    monkeypatch.setattr(tokenshapley_rag, "TokenShapley", lambda *args, **kwargs: ts)
    exec(compile(blocks[0], str(README), "exec"), {"__name__": "readme"})
    lines = capsys.readouterr().out.splitlines()
    assert "'330 metres'     -> eiffel: 'It is 330 metres tall.'" in lines
    assert "'1859'           -> bigben: 'It was completed in 1859.'" in lines
    assert "('330 metres', 'eiffel')" in lines[-1] and "('1859', 'bigben')" in lines[-1]
