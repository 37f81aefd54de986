"""Start-up stays light: the package and the CLI's argument parsing do not import the engine.

Not a timed test (times depend on load): it asserts which modules get imported, in a fresh
interpreter, which is what the start-up time follows (docs/reports/performance.md, "Start-up").
"""

import subprocess
import sys

HEAVY = ("torch", "numba", "transformers")


def _imported_after(code: str, watched: tuple[str, ...] = HEAVY) -> set[str]:
    """The ``watched`` modules (and their submodules) a fresh interpreter has imported after ``code``."""
    probe = (
        f"{code}\nimport sys\n"
        f"print(' '.join(w for w in {watched!r} if any(m == w or m.startswith(w + '.') for m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_importing_the_package_defers_torch_and_numba():
    assert _imported_after("import tokenshapley_rag\nfrom tokenshapley_rag import Source, KeywordCitation, render_markdown") == set()


def test_engine_names_still_resolve_on_first_use():
    assert _imported_after("from tokenshapley_rag import TokenShapley") >= {"torch", "numba"}
    import tokenshapley_rag

    assert set(tokenshapley_rag.__all__) <= set(dir(tokenshapley_rag))
    for name in tokenshapley_rag.__all__:
        assert getattr(tokenshapley_rag, name) is not None


def test_cli_help_does_not_load_the_engine():
    code = (
        "import contextlib, io\nfrom tokenshapley_rag.cli import build_parser\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        build_parser().parse_args(['attribute', '--help'])\n"
        "    except SystemExit:\n        pass"
    )
    assert _imported_after(code) == set()


def test_the_library_does_not_import_the_benchmark_harness():
    code = (
        "import tokenshapley_rag._attribution, tokenshapley_rag._stream, tokenshapley_rag._render\n"
        "import tokenshapley_rag.chain_eval, tokenshapley_rag.chat, tokenshapley_rag.cli"
    )
    assert _imported_after(code, ("tokenshapley_rag.benchmark",)) == set()


def test_attributing_on_a_server_does_not_load_the_engine(tmp_path):
    """``tokenshapley attribute --server`` reads, sends and prints: no torch, no model (here
    nothing answers, so it ends with its typed error, after everything a call imports)."""
    source = tmp_path / "a.txt"
    source.write_text("The Eiffel Tower is 330 metres tall.", encoding="utf-8")
    code = (
        "import contextlib, io\nfrom tokenshapley_rag.cli import main\n"
        "with contextlib.redirect_stderr(io.StringIO()):\n"
        f"    assert main(['attribute', '--server', 'http://127.0.0.1:9', '--query', 'q', '--source', {str(source)!r},"
        " '--response', 'It is 330 metres tall.']) == 2"
    )
    assert _imported_after(code) == set()


def test_finding_a_background_service_does_not_load_the_engine():
    """``attribute --daemon`` with its service running only reads, sends and prints."""
    code = "import tokenshapley_rag.cli, tokenshapley_rag._daemon, tokenshapley_rag._client"
    assert _imported_after(code) == set()
