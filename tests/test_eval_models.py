"""Every method on every set with the real models, on 3 small examples each (slow).

The 3 examples of each set are the committed fixture examples (tests/data/sets: short real
dev examples, VeriGran's among those with spans), written to a temporary data folder, so the
smoke runs stay small and need no full sets.
KV contexts are cut from 75 to 10 key/value pairs (the gold pair and the first 9 others):
a 75-pair context is ~4k tokens, whose whole-context forward passes (HidSim, ContextCite)
take about a minute per example on 2 cores. NQ answers and CNN/DM summaries are generated
once per session (16 new tokens at most) and shared by every method through one cache.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tokenshapley_rag._generate import generate_answer
from tokenshapley_rag._types import Source
from tokenshapley_rag.benchmark import (
    AttributionExample,
    GoldSpan,
    load_dataset,
    rank_sentences,
    run_ablation_eval,
    run_ranking_eval,
    run_span_eval,
    sentence_units,
)
from tokenshapley_rag.benchmark._baselines import make_baseline
from tokenshapley_rag.benchmark._lm import GenerationCache, ResponseLM
from tokenshapley_rag.benchmark._methods import TokenShapleyAttributor
from tokenshapley_rag.benchmark._model_baselines import ContextCiteAttributor, EmbSimAttributor, HidSimAttributor

pytestmark = pytest.mark.slow

MAX_NEW = 16


def _size(raw: dict) -> int:
    if "article" in raw:
        return len(raw["article"])
    return sum(len(s["text"]) + len(s.get("title") or "") for s in raw["sources"])


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory, fixture_data) -> Path:
    root = tmp_path_factory.mktemp("tiny-data")
    for name in ("quotesum", "verigran", "kv", "nq", "cnndm", "wice"):
        lines = (fixture_data / name / "dev.jsonl").read_text(encoding="utf-8").splitlines()
        raws = [json.loads(x) for x in lines if x.strip()]
        if name == "verigran":
            raws = [r for r in raws if r["spans"]]
        keep = sorted(raws, key=_size)[:3]
        if name == "kv":
            for r in keep:
                gold = r["spans"][0]["source_ids"][0]
                others = [x for x in r["sources"] if x["id"] != gold][:9]
                r["sources"] = [x for x in r["sources"] if x["id"] == gold or x in others]
        (root / name).mkdir()
        (root / name / "dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in keep), encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def rlm(ts) -> ResponseLM:
    return ResponseLM(ts.loaded)


@pytest.fixture(scope="session")
def generations(tmp_path_factory) -> GenerationCache:
    return GenerationCache(tmp_path_factory.mktemp("gen") / "generations.jsonl")


@pytest.fixture(scope="session")
def embsim() -> EmbSimAttributor:
    return EmbSimAttributor()


@pytest.fixture(scope="session")
def methods(ts, embsim):
    return {
        "tokenshapley": TokenShapleyAttributor(ts),
        "hidsim": HidSimAttributor(ts.loaded),
        "embsim": embsim,
        "contextcite": ContextCiteAttributor(ts.loaded, beta=2),
        "lexical": make_baseline("lexical"),
        "exact": make_baseline("exact"),
        "random": make_baseline("random"),
    }


# ----------------------------------------------------------------------------- the response LM


def test_response_lm_prompt_is_the_generation_prompt(rlm):
    srcs = [Source("e", "The Eiffel Tower is 330 metres tall."), Source("b", "Big Ben is in London.")]
    p = rlm.prompt("How tall is the Eiffel Tower?", srcs)
    tok = rlm.loaded.tokenizer
    from tokenshapley_rag._generate import rag_prompt

    want = tok.apply_chat_template(
        [{"role": "user", "content": rag_prompt("How tall is the Eiffel Tower?", srcs)}],
        add_generation_prompt=True, return_dict=True,
    )["input_ids"]  # fmt: skip
    assert p.ids.tolist() == list(want)
    for s, a in zip(srcs, p.source_starts):
        assert p.text[a : a + len(s.text)] == s.text
    answer = generate_answer(rlm.loaded, "How tall is the Eiffel Tower?", srcs, max_new_tokens=12)
    assert rlm.generate("How tall is the Eiffel Tower?", srcs, max_new_tokens=12) == answer


def test_score_response_real_values(rlm):
    srcs = [Source("e", "The Eiffel Tower is 330 metres tall."), Source("b", "Big Ben is in London.")]
    resp = "The Eiffel Tower is 330 metres tall."
    s = rlm.score_response("How tall is the Eiffel Tower?", srcs, resp)
    assert s.logprobs.shape == s.logit_probs.shape == (len(s.offsets),) and np.all(s.logprobs < 0)
    # log p = logsigmoid(logit p): the two per-token values agree (float32 logits)
    np.testing.assert_allclose(-np.logaddexp(0.0, -s.logit_probs), s.logprobs, atol=1e-4)
    assert "".join(resp[a:b] for a, b in s.offsets).replace(" ", "") == resp.replace(" ", "")
    assert rlm.score_response("How tall is the Eiffel Tower?", list(srcs), resp) is s  # memoised
    # removing the source the answer copies makes the answer much less likely
    without = rlm.score_response("How tall is the Eiffel Tower?", srcs[1:], resp)
    assert s.total - without.total > 2.0
    prompt, ph, rh, roffs = rlm.hidden_states("How tall?", srcs, resp, 15)
    assert ph.shape == (len(prompt.ids), rlm.loaded.hidden_size) and rh.shape[0] == len(roffs)


def test_embsim_real_values(embsim):
    ex = AttributionExample(
        "t", "", (Source("a", "Big Ben is a clock tower in London."), Source("b", "The Eiffel Tower is in Paris, France.")),
        "Paris", (GoldSpan(0, 5, "Paris", ("b",)),), (), {},
    )  # fmt: skip
    assert int(np.argmax(embsim.score_spans(ex)[0])) == 1
    srcs = [Source("x", "The tower is 330 metres tall. It was built in 1889. Tourists love it.")]
    units = sentence_units(srcs)
    s = embsim.score_sentences("", srcs, "It is 330 metres high.", units).scores
    assert rank_sentences(s)[0] == 0 and s[0] > 0.5


# ----------------------------------------------------------------------------- smoke runs


def _finite(x) -> bool:
    if isinstance(x, dict):
        return all(_finite(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return all(_finite(v) for v in x)
    if isinstance(x, float):
        return math.isfinite(x)
    return True


@pytest.mark.parametrize("method", ["tokenshapley", "hidsim", "embsim", "contextcite", "lexical", "exact", "random"])
@pytest.mark.parametrize("dataset", ["quotesum", "verigran", "kv", "nq", "cnndm", "wice"])
def test_smoke_every_method_on_every_set(dataset, method, methods, tiny_data, rlm, generations):
    att = methods[method]
    exs = load_dataset(dataset, tiny_data)
    assert len(exs) == 3
    if dataset in ("quotesum", "verigran", "kv"):
        rep = run_span_eval(dataset, att, exs, order_control=False, progress=False)
        assert rep.metrics["n_spans"] >= 3 and 0.0 <= rep.metrics["accuracy"] <= 1.0
        if dataset == "kv" and method in ("lexical", "exact"):
            assert rep.metrics["accuracy"] == 1.0
    elif dataset == "cnndm":
        rep = run_ablation_eval(att, exs, lm=rlm, generations=generations, max_new_tokens=MAX_NEW, progress=False)
        assert set(rep.metrics["logprob_drop"]) == {"1", "3", "5"}
    else:
        rep = run_ranking_eval(dataset, att, exs, lm=rlm, generations=generations, max_new_tokens=MAX_NEW, progress=False)
        assert 0.0 <= rep.metrics["precision@5"] <= 1.0 and 0.0 <= rep.metrics["recall@5"] <= 1.0
        if dataset == "wice":
            assert "max_sentence" in rep.metrics["label_separation"]
            if method == "tokenshapley":
                assert {"keyword_support_min", "keyword_support_mean"} <= set(rep.metrics["label_separation"])
    assert rep.n == 3 and rep.method == att.name
    out = rep.to_json()
    json.dumps(out)
    assert _finite(out["metrics"])
    if dataset in ("nq", "cnndm"):
        # every method explained the same cached response
        for row in rep.records:
            assert row["response"] == generations.get(
                {"nq": "nq-answer", "cnndm": "cnndm-summary"}[dataset], row["id"], rlm.fingerprint, MAX_NEW
            )


def test_cli_generates_and_evaluates_nq(tiny_data, tmp_path, cache_root):
    from tokenshapley_rag.cli import main

    out = tmp_path / "nq.json"
    argv = ["eval", "--dataset", "nq", "--data", str(tiny_data), "--limit", "2", "--method", "lexical",
            "--json", str(out), "--max-new-tokens", "16", "--generations", str(tmp_path / "g.jsonl"),
            "--cache-dir", str(cache_root)]  # fmt: skip
    assert main(argv) == 0
    rep = json.loads(out.read_text(encoding="utf-8"))
    assert (rep["dataset"], rep["method"], rep["n"]) == ("nq", "lexical", 2)
    assert rep["config"]["max_new_tokens"] == 16 and len(rep["config"]["generator_fingerprint"]) == 64
    assert len((tmp_path / "g.jsonl").read_text(encoding="utf-8").splitlines()) == 2
