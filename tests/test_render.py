"""The markdown rendering keeps the answer's own markdown intact.

Each test builds a small result by hand (no model): keywords with their statuses, and
asserts the exact markdown. A marker goes right after its keyword, except where that would
break the answer's markup: links, URLs, code, math, task boxes, fenced blocks, the answer's
own footnotes, and a checklist that would join the answer's last list.
"""

from __future__ import annotations

import re

import pytest

from tokenshapley_rag import render_markdown
from tokenshapley_rag._result import AttributionResult, TokenScores
from tokenshapley_rag._types import KeywordCitation, SentenceVerdict, SourceAttribution

PORT = SourceAttribution("cli", 1.0, "The default port is 8080.", 0, 25, 0)
TOWER = SourceAttribution("eiffel", 1.0, "It was completed on 31 March 1889 in Paris.", 0, 43, 0)


def _result(answer: str, keywords: dict[str, SourceAttribution | None], checks: tuple[int, ...] = ()) -> AttributionResult:
    """``answer`` with each keyword (its first occurrence) supported by its sentence, or
    unsupported (None); a "partly" verdict for each answer line numbered in ``checks``."""
    cites = []
    for text, best in keywords.items():
        at = answer.index(text)
        cites.append(KeywordCitation(text, at, at + len(text), (best,) if best else (), supported=best is not None))
    lines = answer.split("\n")
    verdicts = [SentenceVerdict(i, 0, 0, lines[i], "partly", 0.5, 1) for i in checks]
    return AttributionResult("", answer, [], cites, {}, [], TokenScores.empty(), {}, verdicts)


def _answer_part(md: str) -> str:
    """The rendered answer, before the footnote definitions."""
    return re.split(r"\n\n\[\^[^\]]+\]: ", md, maxsplit=1)[0]


def test_the_checklist_is_its_own_block_after_an_answer_that_ends_in_a_list():
    answer = "Facts:\n\n- Port: 8080\n- Host: acme.local"
    md = render_markdown(_result(answer, {"8080": PORT, "Host": None}, checks=(3,)))
    assert md == (
        "Facts:\n\n- Port: 8080[^1]\n- Host[^?]: acme.local\n\n"
        '[^1]: cli: "The default port is 8080."\n'
        "[^?]: Not supported by any source.\n\n"
        "**Sentences to check:**\n\n"
        '- Sentence 4 is partly supported: "- Host: acme.local"\n'
    )


def test_a_marker_for_link_text_follows_the_whole_link_and_none_goes_in_the_target():
    answer = "It stands in [Paris](https://en.wikipedia.org/wiki/Paris) (see [the 1889 report](https://x.org/1889.pdf))."
    res = _result(answer, {"Paris": TOWER, "1889": TOWER, "wikipedia": None, "pdf": None})
    assert _answer_part(render_markdown(res)) == (
        "It stands in [Paris](https://en.wikipedia.org/wiki/Paris)[^1][^?] "
        "(see [the 1889 report](https://x.org/1889.pdf)[^1][^?])."
    )


def test_markers_follow_autolinks_bare_urls_and_addresses():
    answer = "Docs: <https://acme.com/port-8080>, https://acme.com/cli?port=8080. Mail ops@acme.com now."
    res = _result(answer, {"8080": PORT, "port=8080": PORT, "ops": None})
    # a bare URL's trailing "." ends the sentence: the marker goes before it
    assert _answer_part(render_markdown(res)) == (
        "Docs: <https://acme.com/port-8080>[^1], https://acme.com/cli?port=8080[^1]. Mail ops@acme.com[^?] now."
    )


def test_markers_of_a_fenced_block_follow_it_on_a_line_of_their_own():
    answer = "Run:\n\n```bash\npip install acme\nacme serve --port 8080\n```\nIt listens on 8080."
    res = _result(answer, {"pip": None, "8080": PORT, "listens": PORT})
    assert _answer_part(render_markdown(res)) == (
        "Run:\n\n```bash\npip install acme\nacme serve --port 8080\n```\n\n[^?][^1]\n\nIt listens[^1] on 8080."
    )


def test_a_fence_in_a_list_item_keeps_its_markers_in_the_item():
    answer = "1. Start it:\n   ~~~sh\n   acme serve --port 8080\n   ~~~\n2. Done."
    assert _answer_part(render_markdown(_result(answer, {"8080": PORT}))) == (
        "1. Start it:\n   ~~~sh\n   acme serve --port 8080\n   ~~~\n\n   [^1]\n\n2. Done."
    )
    answer = "- ```sh\n  acme serve --port 8080\n  ```\n- Done."
    assert _answer_part(render_markdown(_result(answer, {"8080": PORT}))) == (
        "- ```sh\n  acme serve --port 8080\n  ```\n\n  [^1]\n\n- Done."
    )


def test_a_fence_the_answer_leaves_open_is_closed_before_the_footnotes():
    # Else the footnotes and the checklist would render as code.
    md = render_markdown(_result("Run:\n\n```sh\nacme serve --port 8080\n", {"8080": PORT}))
    assert md.startswith("Run:\n\n```sh\nacme serve --port 8080\n```\n\n[^1]\n\n[^1]: cli:")


def test_an_inline_code_span_of_three_backticks_is_not_a_fence():
    answer = "Use ```--port 8080``` to change it."
    assert _answer_part(render_markdown(_result(answer, {"8080": PORT}))) == "Use ```--port 8080```[^1] to change it."


def test_labels_do_not_collide_with_the_answers_own_footnotes():
    answer = "It opened in 1889[^1].\n\n[^1]: The official site"
    md = render_markdown(_result(answer, {"1889": TOWER, "official": None}))
    assert md == (
        "It opened in 1889[^ts1][^1].\n\n[^1]: The official[^ts?] site\n\n"
        '[^ts1]: eiffel: "It was completed on 31 March 1889 in Paris."\n'
        "[^ts?]: Not supported by any source.\n"
    )
    md = render_markdown(_result("It opened in 1889[^ts1].", {"1889": TOWER}))
    assert md.startswith("It opened in 1889[^ts-1][^ts1].\n\n[^ts-1]: eiffel:")


def test_markers_follow_math_and_task_boxes():
    answer = "Energy is $E = mc^2$ here.\n\n- [x] Port 8080 is open"
    res = _result(answer, {"mc": None, "x": None, "8080": PORT})
    # after the box and its space: "[x][^?]" would no longer be a task box
    assert _answer_part(render_markdown(res)) == "Energy is $E = mc^2$[^?] here.\n\n- [x] [^?]Port 8080[^1] is open"


def test_dollar_amounts_are_not_math():
    answer = "Revenue rose from $3.1 billion to $4.2 billion."
    res = _result(answer, {"$3.1 billion": None, "$4.2 billion": PORT})
    assert _answer_part(render_markdown(res)) == "Revenue rose from $3.1 billion[^?] to $4.2 billion[^1]."


def test_markers_follow_the_emphasis_a_keyword_ends():
    answer = "It was completed on **31 March 1889** in _Paris_, a **1889 landmark** too."
    res = _result(answer, {"31 March 1889": TOWER, "Paris": None, "1889 landmark": TOWER})
    assert _answer_part(render_markdown(res)) == (
        "It was completed on **31 March 1889**[^1] in _Paris_[^?], a **1889 landmark**[^1] too."
    )


def test_markers_in_table_cells_and_headings_keep_their_structure():
    answer = "## Port 8080\n\n| Port | Docs |\n|---|---|\n| 8080 |https://acme.com/8080|"
    res = _result(answer, {"Port 8080": PORT, "| 8080": PORT, "acme": None})
    assert _answer_part(render_markdown(res)) == (
        "## Port 8080[^1]\n\n| Port | Docs |\n|---|---|\n| 8080[^1] |https://acme.com/8080[^?]|"
    )


def test_renderers_keep_links_code_and_lists():
    """The rendered HTML: links keep their targets, the code block closes, the checklist is
    not part of the answer's list (skipped where the renderers are not installed)."""
    markdown = pytest.importorskip("markdown", reason="Python-Markdown renders the footnotes")
    markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py is the CommonMark renderer")
    answer = (
        "See [Paris](https://en.wikipedia.org/wiki/Paris):\n\n```sh\nacme serve --port 8080\n```\n\n"
        "- Opened: **1889**\n- Port: 8080"
    )
    res = _result(answer, {"Paris": TOWER, "wikipedia": None, "acme": None, "1889": TOWER, "Port": None}, checks=(7,))
    md = render_markdown(res)
    page = markdown.markdown(md, extensions=["footnotes", "tables", "fenced_code"])
    assert 'href="https://en.wikipedia.org/wiki/Paris"' in page
    assert "<pre><code" in page and "Not supported" not in page.split("</pre>")[0]
    items = re.search(r"<ul>(.*?)</ul>", page, re.DOTALL)[1]
    assert "Opened" in items and "Sentence" not in items
    page = markdown_it.MarkdownIt("commonmark").enable("table").render(md)
    assert 'href="https://en.wikipedia.org/wiki/Paris"' in page
    assert page.count("<pre>") == 1 and "Sentences to check" not in page.split("</pre>")[0]
