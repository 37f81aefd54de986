"""Bounded work (issue: hardening, deliverable 4): size limits refused before any work, at
every entry, and a cancelled attribution stopping at its next checkpoint.

Nothing here measures wall-clock time: "before any work" is asserted by counting the
encoder's forward passes, and cancellation by events and counters.
"""

from __future__ import annotations

import json
import threading

import pytest

from tokenshapley_rag import (
    AttributionCancelledError,
    InvalidInputError,
    InvalidInputTypeError,
    TextTooLongError,
    TokenShapleyError,
)
from tokenshapley_rag._limits import (
    DEFAULT_MAX_CONTEXT_CHARS,
    DEFAULT_MAX_SOURCE_CHARS,
    check_cancel_event,
    check_context_size,
    check_limit,
    checkpoint,
)

# The probe's input: one 200k-character source (it took 135 s and ~1.6 GB with no refusal).
PROBE_SOURCE = ("The Eiffel Tower is 330 metres tall and stands in Paris. " * 3600)[:200_000]


class PassCounter:
    """Counts the encoder's forward passes (``CausalLMEncoder._states``) and can set an
    event after the n-th one (a client that leaves while the sources are encoded)."""

    def __init__(self, states, set_after: int | None = None, event: threading.Event | None = None) -> None:
        self.inner, self.n, self.set_after, self.event = states, 0, set_after, event

    def __call__(self, *args, **kwargs):
        out = self.inner(*args, **kwargs)
        self.n += 1
        if self.set_after is not None and self.n >= self.set_after:
            self.event.set()
        return out


@pytest.fixture
def passes(ts, monkeypatch):
    ts.encoder._packing_works()  # its one-off probe pass happens before counting starts
    counter = PassCounter(ts.encoder._states)
    monkeypatch.setattr(ts.encoder, "_states", counter)
    return counter


# ---------------------------------------------------------------------- the limit check


def test_the_error_is_typed_exported_and_names_field_size_and_limit():
    assert issubclass(TextTooLongError, TokenShapleyError) and issubclass(TextTooLongError, ValueError)
    assert issubclass(AttributionCancelledError, TokenShapleyError)
    with pytest.raises(TextTooLongError) as info:
        check_context_size(["ok.", "x" * 11], max_source_chars=10, max_context_chars=None, ids=["a", "big"])
    err = info.value
    assert (err.field, err.size, err.limit) == ("sources[1].text", 11, 10)
    assert "sources[1].text (id 'big') has 11 characters, over the limit max_source_chars=10" in str(err)
    with pytest.raises(TextTooLongError) as info:
        check_context_size(["x" * 6, "y" * 6], max_source_chars=10, max_context_chars=10)
    assert (info.value.field, info.value.size, info.value.limit) == ("sources", 12, 10)
    assert "sources hold 12 characters in all (2 sources), over the limit max_context_chars=10" in str(info.value)


def test_limits_at_the_boundary_and_disabled():
    check_context_size(["x" * 10], max_source_chars=10, max_context_chars=10)  # equal is allowed
    check_context_size(["x" * 10**6], max_source_chars=None, max_context_chars=None)
    assert DEFAULT_MAX_SOURCE_CHARS <= DEFAULT_MAX_CONTEXT_CHARS


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (0, InvalidInputError, "max_source_chars must be a positive integer or None \\(no limit\\), got 0"),
        (-5, InvalidInputError, "got -5"),
        (True, InvalidInputTypeError, "max_source_chars must be an int or None, got bool"),
        (1.5, InvalidInputTypeError, "got float"),
    ],
)
def test_limit_values_are_validated(value, error, message):
    with pytest.raises(error, match=message):
        check_limit(value, "max_source_chars")


def test_the_attributor_validates_its_limits_before_loading_a_model():
    from tokenshapley_rag import TokenShapley

    # Refused before load_causal_lm: a model name that does not exist is never looked up.
    with pytest.raises(InvalidInputError, match="max_context_chars must be a positive integer"):
        TokenShapley("no/such-model", max_context_chars=0)


def test_cancel_must_be_an_event():
    assert check_cancel_event(None) is None
    with pytest.raises(InvalidInputTypeError, match="cancel must be a threading.Event"):
        check_cancel_event(True)
    event = threading.Event()
    checkpoint(event, "x")
    event.set()
    with pytest.raises(AttributionCancelledError, match="while encoding"):
        checkpoint(event, "encoding")


# ---------------------------------------------------------------------- every entry refuses the probe


@pytest.mark.slow
def test_the_probes_200k_character_source_is_refused_before_any_work(ts, passes):
    assert (ts.max_source_chars, ts.max_context_chars) == (DEFAULT_MAX_SOURCE_CHARS, DEFAULT_MAX_CONTEXT_CHARS)
    with pytest.raises(TextTooLongError, match=r"sources\[0\]\.text \(id '0'\) has 200000 characters") as info:
        ts.attribute(query="How tall is it?", sources=[PROBE_SOURCE], response="It is 330 metres tall.")
    assert (info.value.field, info.value.size, info.value.limit) == ("sources[0].text", 200_000, DEFAULT_MAX_SOURCE_CHARS)
    with pytest.raises(TextTooLongError, match="max_source_chars"):
        ts.stream(query="How tall is it?", sources=[PROBE_SOURCE])
    # Four sources of 40k: each under the per-source limit, together over the total.
    quarter = [PROBE_SOURCE[:40_000] + f" Part {i}." for i in range(4)]
    with pytest.raises(TextTooLongError, match="max_context_chars=120000") as info:
        ts.attribute(query="q", sources=quarter, response="It is 330 metres tall.")
    assert info.value.field == "sources"
    assert passes.n == 0  # not one forward pass was spent


@pytest.mark.slow
def test_the_limits_are_configurable(ts, monkeypatch, passes):
    sources = ["The tower is 330 metres tall.", "Big Ben is in London."]
    monkeypatch.setattr(ts, "max_source_chars", 25)
    with pytest.raises(TextTooLongError, match=r"sources\[0\]\.text \(id '0'\) has 29 characters, over the limit max_source_chars=25"):
        ts.attribute(query="q", sources=sources, response="It is 330 metres tall.")
    assert passes.n == 0
    monkeypatch.setattr(ts, "max_source_chars", None)
    monkeypatch.setattr(ts, "max_context_chars", 50)
    with pytest.raises(TextTooLongError, match=r"sources hold 51 characters in all \(3 sources\), over the limit max_context_chars=50"):
        ts.attribute(query="q", sources=[*sources, "x"], response="It is 330 metres tall.")
    monkeypatch.setattr(ts, "max_context_chars", None)  # None disables both
    res = ts.attribute(query="q", sources=sources, response="It is 330 metres tall.")
    assert [(c.text, c.best.source_id) for c in res.citations if c.supported] == [("330 metres", "0"), ("tall", "0")]
    assert passes.n > 0


@pytest.mark.slow
def test_an_answer_over_the_models_context_is_refused_before_the_sources_are_encoded(ts, passes):
    with pytest.raises(TextTooLongError, match="query \\+ answer take"):
        ts.attribute(query="q", sources=["A fresh source sentence about limits."], response="word " * 20_000)
    assert passes.n == 0


@pytest.mark.slow
def test_cli_refuses_a_long_source_with_a_clear_message(tmp_path, capsys, monkeypatch, ts, passes):
    from tokenshapley_rag import cli

    big, small = tmp_path / "big.txt", tmp_path / "small.txt"
    big.write_text(PROBE_SOURCE, encoding="utf-8")
    small.write_text("The tower is 330 metres tall.", encoding="utf-8")
    monkeypatch.setattr(cli, "_engine", lambda args: ts)
    argv = ["attribute", "--query", "How tall?", "--response", "It is 330 metres tall.", "--source", str(small), str(big)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"tokenshapley: error: --source {str(big)!r} has 200000 characters, over the limit of 50000 " \
           "(--max-source-chars N raises it, 0 disables it)" in err
    monkeypatch.setattr(ts, "max_source_chars", None)
    assert cli.main(argv) == 2
    assert "the --source files hold 200029 characters in all, over the limit of 120000 (--max-context-chars N" \
           in capsys.readouterr().err
    assert passes.n == 0


def test_cli_limit_flags():
    from tokenshapley_rag.cli import build_parser, limit_options

    base = ["attribute", "--query", "q", "--source", "a.txt", "--response", "r"]
    assert limit_options(build_parser().parse_args(base)) == {}
    args = build_parser().parse_args([*base, "--max-source-chars", "0", "--max-context-chars", "500000"])
    assert limit_options(args) == {"max_source_chars": None, "max_context_chars": 500_000}
    with pytest.raises(SystemExit):
        build_parser().parse_args([*base, "--max-source-chars", "-1"])
    chain = build_parser().parse_args(["evaluate-chain", "q.jsonl", "--max-context-chars", "7"])
    assert limit_options(chain) == {"max_context_chars": 7}


def test_support_eval_lifts_the_engines_source_limit_to_its_own_cut():
    import argparse

    from tokenshapley_rag.benchmark import _methods

    made = []

    class Recorder:
        def __init__(self, **options):
            made.append(options)

    real = _methods.TokenShapley
    _methods.TokenShapley = Recorder
    try:
        for cap in (0, 6000, 80_000):
            _methods.make_attributor("tokenshapley", argparse.Namespace(max_source_chars=cap))
    finally:
        _methods.TokenShapley = real
    assert [m["max_source_chars"] for m in made] == [None, DEFAULT_MAX_SOURCE_CHARS, 80_000]


@pytest.mark.slow
def test_chain_evaluation_writes_an_error_row_and_goes_on(tmp_path, ts):
    from tokenshapley_rag.chain_eval import evaluate_chain

    records = [
        {"id": "probe", "question": "How tall?", "sources": [PROBE_SOURCE], "answer": "It is 330 metres tall."},
        {"id": "good", "question": "How tall?", "sources": ["The tower is 330 metres tall."], "answer": "It is 330 metres tall."},
    ]
    report = evaluate_chain(records, attributor=ts, output=tmp_path / "rows.jsonl")
    rows = {r.id: r for r in report.rows}
    assert not rows["probe"].ok and rows["probe"].error_type == "TextTooLongError"
    assert "has 200000 characters, over the limit max_source_chars=50000" in rows["probe"].error
    assert rows["good"].ok and rows["good"].unsupported == ()
    lines = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [d["id"] for d in lines] == ["probe", "good"]


# ---------------------------------------------------------------------- cancellation in the core

# 40 sentences no other test encodes: several forward passes with small packed rows.
FRESH = " ".join(f"Checkpoint tower {i} was built in {1700 + 7 * i} and is {20 + 3 * i} metres tall." for i in range(40))


@pytest.mark.slow
def test_a_set_event_stops_attribute_before_the_encoder_runs(ts, passes):
    event = threading.Event()
    event.set()
    with pytest.raises(AttributionCancelledError, match="cancelled"):
        ts.attribute(query="q", sources=[FRESH + " Never encoded."], response="It is 23 metres tall.", cancel=event)
    with pytest.raises(AttributionCancelledError):
        ts.stream(query="q", sources=[FRESH + " Never encoded either."], cancel=event)
    assert passes.n == 0


@pytest.mark.slow
def test_cancelling_mid_encoding_stops_at_the_next_forward_pass(ts, monkeypatch):
    ts.encoder._packing_works()
    monkeypatch.setattr(ts.encoder, "pack_tokens", 32)  # small rows: the sources need several passes
    event = threading.Event()
    counter = PassCounter(ts.encoder._states, set_after=1, event=event)  # the client leaves during pass 1
    monkeypatch.setattr(ts.encoder, "_states", counter)
    with pytest.raises(AttributionCancelledError, match="while encoding the sources"):
        ts.attribute(query="q", sources=[FRESH], response="It is 23 metres tall.", cancel=event)
    assert counter.n == 1
    # Uncancelled, the same sources take many passes (so the cancel above saved them).
    full = PassCounter(counter.inner)
    monkeypatch.setattr(ts.encoder, "_states", full)
    res = ts.attribute(query="q", sources=[FRESH], response="Checkpoint tower 1 is 23 metres tall.")
    assert full.n > 3 and res.citations


@pytest.mark.slow
def test_a_cancelled_stream_stops_feeding(ts):
    event = threading.Event()
    stream = ts.stream(query="How tall?", sources=["The tower is 330 metres tall."], cancel=event)
    assert [c.text for s in stream.feed("It is 330 metres tall. And ") for c in s.citations][:1] == ["330 metres"]
    event.set()
    with pytest.raises(AttributionCancelledError, match="while streaming"):
        stream.feed("more. ")
    with pytest.raises(AttributionCancelledError):
        stream.finish()


@pytest.mark.parametrize("module", ["tokenshapley_rag._limits", "tokenshapley_rag.errors"])
def test_doctests(module):
    import doctest
    import importlib

    res = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0
