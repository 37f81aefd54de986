"""`tokenshapley warmup` compiles every kernel an ordinary attribution calls, ahead of it.

Two processes share a fresh NUMBA_CACHE_DIR: the warm-up, then an attribution of another
answer over other sources that must load every kernel it calls from that cache (numba's
per-dispatcher cache statistics: hits, no miss; an empty cache gives only misses).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]

# Reports, per kernel the attribution called, the signatures numba compiled (misses) and
# loaded from its cache (hits).
PROBE = r"""
import json, sys
from numba.core.registry import CPUDispatcher
from tokenshapley_rag import TokenShapley

ts = TokenShapley(cache_dir=sys.argv[1])
ts.attribute(
    "Who built the Brooklyn Bridge?",
    ["The Brooklyn Bridge opened in 1883. Its main span is 486 metres long.",
     "John Roebling designed the bridge; his son Washington finished it."],
    "John Roebling designed the Brooklyn Bridge, which opened in 1883 with a 486-metre span.",
)
report = {}
for name, module in list(sys.modules.items()):
    if name.startswith("tokenshapley_rag"):
        for attr, value in vars(module).items():
            if isinstance(value, CPUDispatcher) and (value.stats.cache_hits or value.stats.cache_misses):
                report[f"{name}.{attr}"] = {"misses": len(value.stats.cache_misses), "hits": len(value.stats.cache_hits)}
print(json.dumps(report))
"""


def _env(numba_cache: Path) -> dict:
    return {**os.environ, "NUMBA_CACHE_DIR": str(numba_cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _probe(numba_cache: Path, cache_dir: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(cache_dir)], env=_env(numba_cache), cwd=ROOT,
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_after_warmup_the_first_attribution_compiles_nothing(tmp_path, cache_root):
    cache_dir = cache_root  # the converted models, shared with the session
    warmed = tmp_path / "numba-warmed"
    run = subprocess.run(
        [sys.executable, "-m", "tokenshapley_rag.cli", "warmup", "--cache-dir", str(cache_dir)],
        env=_env(warmed), cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith("ready: ")

    after = _probe(warmed, cache_dir)
    assert after, "the attribution called no compiled kernel"
    assert {k: v for k, v in after.items() if v["misses"]} == {}
    assert all(v["hits"] for v in after.values())
    # the kernels of the candidate search and of the token games are among them
    assert {"tokenshapley_rag._kernels.keep_rows_serial", "tokenshapley_rag._kernels.measure_kept_rows",
            "tokenshapley_rag._kernels.sequence_rows"} <= set(after)


def test_an_engine_with_small_size_limits_still_warms_up(ts, monkeypatch):
    # `tokenshapley serve --max-source-chars 10` warms up on the demo passages (longer than
    # that) before serving: the limits are lifted for the warm-up alone, then hold again.
    from tokenshapley_rag._warmup import warm_up
    from tokenshapley_rag.errors import TextTooLongError

    monkeypatch.setattr(ts, "max_source_chars", 10)
    assert warm_up(ts).n_citations > 0
    assert (ts.max_source_chars, ts.max_context_chars) == (10, ts.config["max_context_chars"])
    with pytest.raises(TextTooLongError, match="max_source_chars=10"):
        ts.attribute("When?", ["The Eiffel Tower opened in 1889."], "In 1889.")


def test_the_warm_up_loads_the_question_embedder(ts, bag_of_words):
    # a service's first bare answer to a question that names nothing would otherwise load it
    from tokenshapley_rag import TokenShapley
    from tokenshapley_rag._question_documents import MiniLMEmbedder
    from tokenshapley_rag._sources import demo_passages
    from tokenshapley_rag._warmup import warm_up

    embedder = bag_of_words()
    engine = TokenShapley(ts.encoder, use_disk_cache=False, question_embedder=embedder)
    report = warm_up(engine)
    assert embedder.calls[-1] == [demo_passages()[0]] and report.embedder_seconds > 0.0
    off = warm_up(TokenShapley(ts.encoder, use_disk_cache=False, question_embedder=None))
    assert off.embedder_seconds == 0.0 and off.n_citations == report.n_citations
    if isinstance(ts.pipeline.question_embedder, MiniLMEmbedder):  # the default: loaded by the warm-up
        warm_up(ts)
        assert ts.pipeline.question_embedder._model is not None
