"""The documentation builds with warnings as errors (``mkdocs build --strict``).

``mkdocs.yml`` sets ``strict: true`` and validates every relative link and anchor, and
mkdocstrings renders the API reference from the docstrings, so a broken link, a page missing
from the nav or a docstring griffe cannot parse fails this test. The site goes to a temporary
folder: the build must not write into the repository.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("mkdocs", reason="the docs tools come with the dev extra (make install)")
pytest.importorskip("mkdocstrings_handlers.python", reason="mkdocstrings[python] comes with the dev extra")


def _tree_state() -> set[str]:
    """Every path git reports under the repository, ignored files included."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=all"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    return set(out.splitlines())


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="needs a git checkout to check that the build writes nothing")
def test_docs_build_strict_into_a_temporary_folder(tmp_path: Path) -> None:
    before = _tree_state()
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not re.search(r"^WARNING", proc.stderr, flags=re.M), proc.stderr

    # Every page of the nav was built, the API reference included.
    for page in ("index.html", "guide/getting-started/index.html", "method/index.html",
                 "reports/benchmarks/index.html", "api/core/index.html", "api/integrations/index.html"):
        assert (site / page).is_file(), page
    api = (site / "api" / "core" / "index.html").read_text(encoding="utf-8")
    assert 'id="tokenshapley_rag.TokenShapley"' in api
    assert 'id="tokenshapley_rag.KeywordCitation"' in api
    integrations = (site / "api" / "integrations" / "index.html").read_text(encoding="utf-8")
    assert 'id="llama_index.postprocessor.tokenshapley.TokenShapleyPostprocessor"' in integrations
    assert 'id="langchain_tokenshapley.TokenShapleyCitations"' in integrations

    # Nothing was written into the repository (no site/, no caches).
    assert _tree_state() == before
