"""The chat page in a real browser (Playwright driving Debian's /usr/bin/chromium).

A uvicorn server runs the app in a thread; the answer comes from a fixed-text generator
with a delay per piece, so the stream takes ~4 s and citations can be seen arriving
before it ends. Attribution is the real default TokenShapley.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip(f"browser tests need Chromium at {CHROMIUM}", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="browser tests need the playwright Python package")
pytest.importorskip("starlette", reason="browser tests need starlette (the chat extra)")
uvicorn = pytest.importorskip("uvicorn", reason="browser tests need uvicorn (the chat extra)")

from tokenshapley_rag.chat import FixedTextGenerator, create_app, load_documents  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "tests" / "data" / "chat_docs"
SCREENSHOT = ROOT / "docs" / "chat_screenshot.png"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
QUESTION = "When was the Eiffel Tower completed and how tall is it?"
ANSWER = (
    "The Eiffel Tower was completed on 31 March 1889, in time for the World's Fair. "
    "It is 330 metres tall, about the same height as an 81-storey building. "
    "Its lifts were designed by the baker Pierre Zorblat."
)


@pytest.fixture(scope="module")
def chunks():
    return load_documents(DOCS)


@pytest.fixture(scope="module")
def app(ts, chunks):
    app = create_app(ts, chunks, generator=FixedTextGenerator(ANSWER, piece=3, delay=0.06))
    return app


@pytest.fixture(scope="module")
def expected(ts, app):
    """attribute() on the whole answer over the chunks the app retrieves: what the page must show."""
    hits = app.state.chat.retriever.retrieve(QUESTION, app.state.chat.config.top_k)
    return ts.attribute(QUESTION, [h.chunk.to_source() for h in hits], ANSWER)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def asked(app, browser, local_server):
    """A page that asked QUESTION; records what the page looked like when the first marker appeared."""
    with local_server(app) as url:
        app.state.ready.wait(60)  # sentence keys prepared: the first chat does not pay for them
        page = browser.new_page(viewport={"width": 1180, "height": 720}, bypass_csp=True)  # lets wait_for_function eval
        page.goto(url)
        page.fill("#q", QUESTION)
        page.press("#q", "Enter")
        page.wait_for_selector(".fn", timeout=30_000)
        at_first_marker = page.evaluate(
            "() => ({app: document.getElementById('app').dataset.state, first: window.tsChat.firstMarker,"
            " chars: window.tsChat.turns[0].answer.length})"
        )
        page.wait_for_function("document.getElementById('app').dataset.state === 'done'", timeout=60_000)
        yield page, at_first_marker
        page.close()


def _markers(page) -> list[dict]:
    return page.evaluate(
        """() => [...document.querySelectorAll('.fn')].map(b => ({
            id: b.id, n: b.dataset.n, source: b.dataset.source, card: b.getAttribute('aria-describedby'),
            starts: JSON.parse(b.dataset.starts), keywords: JSON.parse(b.dataset.keywords),
            unsupported: b.classList.contains('unsupported')}))"""
    )


def _norm(text: str) -> str:
    return " ".join(text.split())


def test_markers_appear_while_the_answer_is_still_streaming(asked):
    page, at_first = asked
    assert at_first["app"] == "streaming"
    assert at_first["first"]["state"] == "streaming" and not at_first["first"]["doneReceived"]
    assert at_first["first"]["answerChars"] < len(ANSWER)
    # The answer's text in the page, markers and cards left out, is the whole answer.
    shown = page.evaluate(
        "() => { const a = document.querySelector('.answer').cloneNode(true);"
        " a.querySelectorAll('.cite').forEach(e => e.remove()); return a.textContent; }"
    )
    assert shown == ANSWER
    assert page.evaluate("window.tsChat.turns[0].answer") == ANSWER


def test_every_marker_cites_the_right_sentence_on_hover(asked, expected):
    page, _ = asked
    by_start = {c.start: c for c in expected.citations}
    markers = _markers(page)
    cited = sorted(s for m in markers for s in m["starts"])
    assert cited == sorted(by_start)  # every keyword of the answer is under some marker
    for m in markers:
        group = [by_start[s] for s in m["starts"]]
        assert [c.text for c in group] == m["keywords"]
        card = page.locator(f"#{m['card']}")
        assert card.get_attribute("role") == "tooltip"
        page.hover(f"#{m['id']}")
        card.wait_for(state="visible", timeout=5000)
        text = _norm(card.inner_text())
        if m["unsupported"]:
            assert all(not c.supported for c in group)
            assert ("contradicted by" if group[0].status == "contradicted" else "unsupported") in text.lower()
        else:
            best = {(c.best.source_id, c.best.sentence, c.best.display_name) for c in group}
            assert len(best) == 1, best
            ((source_id, sentence, name),) = best
            assert m["source"] == source_id and name in text  # the card names the source for a reader
            assert _norm(sentence) in text
            marks = [t.lower() for t in card.locator("mark").all_inner_texts()]
            assert marks, f"no keyword highlighted in {text!r}"
            assert all(any(mk in c.text.lower() for c in group) for mk in marks), (marks, m["keywords"])
        page.mouse.move(1, 1)
        card.wait_for(state="hidden", timeout=5000)


def test_markers_work_from_the_keyboard(asked, expected):
    page, _ = asked
    by_start = {c.start: c for c in expected.citations}
    page.focus("#q")
    first = None
    for _ in range(10):  # Tab from the question box reaches the first marker after the Ask button
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('fn')"):
            first = page.evaluate("document.activeElement.id")
            break
    assert first, "Tab never reached a citation marker"
    m = next(x for x in _markers(page) if x["id"] == first)
    assert not m["unsupported"]
    group = [by_start[s] for s in m["starts"]]
    card = page.locator(f"#{m['card']}")
    card.wait_for(state="visible", timeout=5000)  # focus shows the card
    assert _norm(group[0].best.sentence) in _norm(card.inner_text())
    assert page.get_attribute(f"#{first}", "aria-expanded") == "true"
    page.keyboard.press("Escape")
    card.wait_for(state="hidden", timeout=5000)
    page.keyboard.press("Enter")  # opens the source passage
    page.wait_for_selector("#panel:not([hidden]) .cited", timeout=5000)
    assert page.inner_text("#panel-title") == group[0].best.source_id
    assert _norm(page.inner_text("#panel .cited")) == _norm(group[0].best.sentence)
    chunk_text = page.evaluate("document.getElementById('panel-text').textContent")
    assert chunk_text == next(c for c in expected.sources if c.id == group[0].best.source_id).text
    assert page.evaluate("document.activeElement.id") == "panel-title"
    page.keyboard.press("Escape")
    page.wait_for_selector("#panel", state="hidden", timeout=5000)
    assert page.evaluate("document.activeElement.id") == first  # focus goes back to the marker
    page.keyboard.press("Tab")  # the next marker takes over the card
    nxt = page.evaluate("document.activeElement.id")
    assert nxt != first and page.evaluate("document.activeElement.classList.contains('fn')")
    page.locator("#" + page.get_attribute(f"#{nxt}", "aria-describedby")).wait_for(state="visible", timeout=5000)
    card.wait_for(state="hidden", timeout=5000)
    page.keyboard.press("Space")  # Space activates a marker like Enter
    page.wait_for_selector("#panel:not([hidden])", timeout=5000)
    page.keyboard.press("Escape")
    page.keyboard.press("Escape")
    page.wait_for_selector("#panel", state="hidden", timeout=5000)


def test_unsupported_keywords_are_marked(asked, expected):
    page, _ = asked
    unsupported = [c.text for c in expected.citations if not c.supported]
    assert "Pierre Zorblat" in unsupported
    shown = page.eval_on_selector_all(".answer .kw.unsupported", "els => els.map(e => e.textContent)")
    assert shown == unsupported
    style = page.eval_on_selector(".answer .kw.unsupported", "e => getComputedStyle(e).textDecorationStyle")
    assert style == "dotted"
    supported_shown = page.eval_on_selector_all(".answer .kw:not(.unsupported)", "els => els.map(e => e.textContent)")
    assert supported_shown == [c.text for c in expected.citations if c.supported]
    label = page.get_attribute(".fn.unsupported", "aria-label")
    assert label.startswith("Unsupported") and re.search(r"Zorblat|lifts|baker", label)


def test_screenshot(asked, tmp_path):
    # docs/chat_screenshot.png is refreshed on request only, so a test run leaves the
    # work tree clean: TOKENSHAPLEY_UPDATE_SCREENSHOT=1 pytest tests/test_chat_browser.py
    target = SCREENSHOT if os.environ.get("TOKENSHAPLEY_UPDATE_SCREENSHOT") == "1" else tmp_path / SCREENSHOT.name
    page, _ = asked
    page.set_viewport_size({"width": 1100, "height": 500})
    page.click(".fn:not(.unsupported) >> nth=2")  # the third marker's passage in the side panel
    page.wait_for_selector("#panel:not([hidden]) .cited", timeout=5000)
    page.locator(".fn:not(.unsupported)").last.hover()  # and, below the answer, the last marker's card
    page.wait_for_selector(".card:not([hidden])", timeout=5000)
    target.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(target))
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and target.stat().st_size > 10_000


class _FailingEngine:
    def __init__(self, ts):
        self.loaded = ts.loaded

    def stream(self, query, sources):
        raise RuntimeError("the encoder fell over")


def test_citations_unavailable_note_is_visible_and_the_answer_complete(ts, chunks, browser, local_server):
    app = create_app(_FailingEngine(ts), chunks, generator=FixedTextGenerator(ANSWER, piece=12, delay=0.01), prepare=False)
    with local_server(app) as url:
        page = browser.new_page(bypass_csp=True)
        page.goto(url)
        page.fill("#q", QUESTION)
        page.click("#send")
        page.wait_for_function("document.getElementById('app').dataset.state === 'done'", timeout=30_000)
        note = page.locator(".note")
        assert note.is_visible() and "Citations unavailable" in note.inner_text() and "fell over" in note.inner_text()
        assert page.evaluate("window.tsChat.turns[0].answer") == ANSWER
        assert page.locator(".fn").count() == 0
        assert page.get_attribute(".turn", "data-citations") == "unavailable"
        # An empty question is refused in the page, and a refused request shows the server's reason.
        page.fill("#q", "   ")
        page.press("#q", "Enter")
        assert "Type a question" in page.inner_text("#form-error")
        status = page.evaluate(
            "async () => { const r = await fetch('chat', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{'}); return [r.status, await r.json()]; }"
        )
        assert status[0] == 400 and status[1]["error"] == "malformed_json"
        page.close()
