"""Fuzz the public API with arbitrary Unicode (issue: hardening, deliverable 7).

``TokenShapley.attribute``, ``stream`` (feed / finish), ``find_keywords`` and the renderers
either work or raise one of the library's typed errors (:class:`TokenShapleyError`), for
any text: lone surrogates, zero-width and bidi controls, combining marks, emoji sequences,
CJK, RTL scripts, control characters. Results must be consistent: offsets into the answer,
JSON-serialisable dicts, renderings that hold the answer's text.

Deterministic (the conftest profile: ``derandomize=True``, no example database) and kept
small: the real default model on short strings.
"""

from __future__ import annotations

import html
import json
import re

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tokenshapley_rag import TokenShapleyError, render_html, render_markdown
from tokenshapley_rag._segment import find_keywords, split_sentences, token_words, word_pieces

# Pieces that broke (or could break) text handling: a lone surrogate, zero-width and
# presentation characters, bidi controls, combining marks, emoji (with ZWJ, skin tone,
# flags, keycaps), CJK and RTL words, controls, and ordinary words, numbers and stops.
PIECES = [
    "\ud800", "\udfff", "\udc80",
    "\u200b", "\u200c", "\u200d", "\u00ad", "\ufeff", "\u2060", "\ufe0f", "\u034f",
    "\u200e", "\u200f", "\u202e", "\u2066", "\u2069",
    "e\u0301", "\u0308", "\u0338", "Zalgo\u0336\u0337",
    "👍", "👍🏽", "👨‍👩‍👧", "🇫🇷", "1\ufe0f\u20e3", "🏳️‍🌈",
    "埃菲尔铁塔", "位于巴黎", "東京タワーは", "ﾀﾜｰ", "서울은",
    "مرحبا", "باريس", "שלום", "١٢٣",
    "\x00", "\x07", "\r\n", "\n\n", "\t", "\u2028", "\u0085",
    "The Eiffel Tower", " is ", " in Paris", "330 metres", "1889", "-2.5%", "$3.5 million", "J.D.", "U.S.",
    ". ", "。", "! ", "? ", "…", "\"", "'", "(", ")", " ", "ﬁ", "İ", "ß", "Ω",
]
# Half the draws are valid text built from the pieces (so that most examples get as far as
# an attribution); the rest may hold anything, lone surrogates and empty strings included.
VALID = st.lists(st.sampled_from([p for p in PIECES if not any("\ud800" <= c <= "\udfff" for c in p)]),
                 min_size=1, max_size=8).map("".join)
TEXT = st.one_of(
    VALID,
    VALID,
    st.lists(st.sampled_from(PIECES), max_size=8).map("".join),
    st.text(max_size=24),  # any code point, surrogates included
    st.text(st.characters(codec="utf-8"), max_size=24),
)
_MARKER = re.compile(r"\[\^(?:\d+|\?|x\d+)\]")
FUZZ = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _check_result(res, response: str) -> None:
    """A result consistent with its answer: offsets, dicts, renderings."""
    assert res.response == response
    for c in res.citations:
        assert 0 <= c.start < c.end <= len(response) and response[c.start:c.end] == c.text
        assert c.status in ("supported", "unsupported", "contradicted")
    # Strict JSON, as the chat app's JSONResponse writes it (NaN or infinity would be a 500).
    json.dumps(res.to_dict(), allow_nan=False)
    md, page = render_markdown(res), render_html(res)
    # The answer, with footnote markers inserted after keywords (its own footnotes change the
    # labels; a fenced block's markers follow it on a line of their own).
    if not any(mark in response for mark in ("[^", "```", "~~~", "$$", "]:")):
        assert _MARKER.sub("", md).startswith(response)
    for c in res.citations:  # each keyword on the page, escaped
        assert html.escape(c.text) in page


@pytest.mark.slow
@FUZZ
@given(query=TEXT, sources=st.lists(TEXT, min_size=1, max_size=3), response=TEXT)
def test_attribute_never_raises_outside_typed_errors(ts, query, sources, response):
    try:
        res = ts.attribute(query=query, sources=sources, response=response)
    except TokenShapleyError as err:
        event(f"typed error: {type(err).__name__}")
        return
    event("attributed")
    _check_result(res, response)


@pytest.mark.slow
@FUZZ
@given(query=TEXT, sources=st.lists(TEXT, min_size=1, max_size=2), deltas=st.lists(TEXT, min_size=1, max_size=4))
def test_stream_never_raises_outside_typed_errors(ts, query, sources, deltas):
    try:
        stream = ts.stream(query=query, sources=sources)
    except TokenShapleyError as err:
        event(f"typed error at stream(): {type(err).__name__}")
        return
    fed = ""
    for delta in deltas:
        try:
            done = stream.feed(delta)
        except TokenShapleyError as err:
            event(f"typed error at feed(): {type(err).__name__}")
            fed = stream.text  # a refused delta (invalid text) is not appended; the stream goes on
            continue
        fed += delta
        for s in done:
            assert fed[s.start:s.end] == s.text
    try:
        stream.finish()
    except TokenShapleyError as err:
        event(f"typed error at finish(): {type(err).__name__}")
        return
    event("streamed")
    _check_result(stream.result, fed)


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(TEXT)
def test_segmentation_never_raises_and_keeps_offsets(text):
    spans = split_sentences(text)
    assert all(0 <= a < b <= len(text) for a, b in spans)
    keywords = find_keywords(text)
    for k in keywords:
        assert text[k.start:k.end] == k.text and k.kind in ("date", "number", "name", "word", "stopword")
    assert all(a.end <= b.start for a, b in zip(keywords, keywords[1:]))  # units never overlap
    assert all(piece in text for piece in word_pieces(text))
    offsets = [(k.start, k.end) for k in keywords]
    assert len(token_words(text, offsets)) == len(offsets)
