"""Render an attribution as markdown footnotes or a self-contained HTML page."""

from __future__ import annotations

import html
import json
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenshapley_rag._result import AttributionResult
    from tokenshapley_rag._types import SourceAttribution

__all__ = ["render_markdown", "render_html", "footnote_numbers", "source_label"]


def _footnotes(result: AttributionResult) -> dict[str, tuple[int, list[SourceAttribution]]]:
    """Each cited source, numbered by first appearance in the answer (a stable number per
    source), with its cited sentences in order of first citation."""
    notes: dict[str, tuple[int, list[SourceAttribution]]] = {}
    for c in sorted(result.citations, key=lambda c: c.start):
        if c.supported and c.best is not None:
            n, cited = notes.setdefault(c.best.source_id, (len(notes) + 1, []))
            if all(a.sentence_index != c.best.sentence_index for a in cited):
                cited.append(c.best)
    return notes


def footnote_numbers(result: AttributionResult) -> dict[str, int]:
    """The footnote number of each cited source id, by first appearance in the answer.

    These are the ``n`` of the ``[^n]`` markers of :func:`render_markdown` (and the HTML
    page): a source is numbered by the first supported keyword whose best source it is.
    Sources that are retrieved but never cited, or only contradict the answer, get none.

    Examples
    --------
    >>> res = ts.attribute(query="When was Big Ben completed, how tall is the Eiffel Tower?",
    ...                    sources=sources, response="Big Ben dates from 1859; the tower is 330 metres tall.")
    ... # doctest: +SKIP
    >>> footnote_numbers(res)  # doctest: +SKIP
    {'bigben': 1, 'eiffel': 2}
    """
    return {key: n for key, (n, _) in _footnotes(result).items()}


def source_label(attribution: SourceAttribution) -> str:
    """A source as a reader sees it: its display name and, when known, its page.

    >>> from tokenshapley_rag._types import SourceAttribution
    >>> source_label(SourceAttribution("3f2c", 1.0, "s.", 0, 2, 0, display_name="report.pdf", page="4"))
    'report.pdf, p. 4'
    """
    return attribution.display_name + (f", p. {attribution.page}" if attribution.page else "")


# A quoted source sentence is text, not markup: a character that markdown reads as emphasis,
# code, a link, a table cell or HTML is escaped ("<img onerror=...>" in a page must not run,
# "*star_gate*" must not turn italic).
_MARKDOWN_ACTIVE = re.compile(r"([\\`*_\[\]|#~])")
_ENTITY_LIKE = re.compile(r"&(?=#?\w+;)")  # an entity a page writes ("&amp;") shows as written; "R&D" stays


def _quote(text: str) -> str:
    """``text`` on one line, as literal markdown text inside double quotes.

    >>> _quote('The <b> R&D build of *star_gate* | "v2"')
    'The &lt;b> R&D build of \\\\*star\\\\_gate\\\\* \\\\| \\\\"v2\\\\"'
    """
    text = _ENTITY_LIKE.sub("&amp;", " ".join(text.split())).replace("<", "&lt;")
    return _MARKDOWN_ACTIVE.sub(r"\\\1", text).replace('"', '\\"')


# Inline code, and a fenced block's fences with what they hold.
_INLINE_CODE = re.compile(r"```.*?```|`[^`\n]+`", re.DOTALL)


def render_markdown(result: AttributionResult) -> str:
    """The answer with ``[^n]`` after each supported keyword (``n`` numbers its best source,
    labelled with its display name and page; the footnote quotes the cited sentences),
    ``[^xk]`` after contradicted ones (the contradicting sentence) and ``[^?]`` after
    unsupported ones, then the footnotes quoting the sentences and a list of the answer
    sentences that are not fully supported, with their verdicts.

    Consecutive keywords citing the same source in one sentence share one marker, placed
    after the last of them, so a sentence-long quote gets one footnote, not ten.
    """
    notes = _footnotes(result)
    numbers = {key: n for key, (n, _) in notes.items()}
    conflicts = _conflicts(result)
    text = result.response
    inserts: list[tuple[int, str]] = []
    cites = sorted(result.citations, key=lambda c: c.start)
    for i, c in enumerate(cites):
        if c.supported and c.best is not None:
            marker = f"[^{numbers[c.best.source_id]}]"
        elif c.status == "contradicted" and c.conflict is not None:
            marker = f"[^x{conflicts[(c.conflict.source_id, c.conflict.sentence_index)][0]}]"
        else:
            marker = "[^?]"
        nxt = cites[i + 1] if i + 1 < len(cites) else None
        if nxt is not None:
            same = (
                nxt.status == c.status
                and c.status != "contradicted"
                and (nxt.best is None) == (c.best is None)
                and (c.best is None or nxt.best.source_id == c.best.source_id)
                and not any(ch in ".!?\n" for ch in text[c.end : nxt.start])
            )
            if same:
                continue
        inserts.append((c.end, marker))
    # A marker never goes inside inline code ("`1859`" -> "`1859`[^1]"), where it would show
    # as code, not as a footnote.
    code = [m.span() for m in _INLINE_CODE.finditer(text)]
    inserts = [(next((b for a, b in code if a < at < b), at), marker) for at, marker in inserts]
    out = []
    pos = 0
    for at, marker in inserts:
        out.append(text[pos:at])
        out.append(marker)
        pos = at
    out.append(text[pos:])
    lines = ["".join(out), ""]
    for n, cited in notes.values():
        quotes = " … ".join(f'"{_quote(a.sentence)}"' for a in cited)
        lines.append(f"[^{n}]: {_quote(source_label(cited[0]))}: {quotes}")
    for n, sent in conflicts.values():
        lines.append(f'[^x{n}]: Contradicted by {_quote(source_label(sent))}: "{_quote(sent.sentence)}"')
    if any(c.status == "unsupported" for c in cites):
        lines.append("[^?]: Not supported by any source.")
    checks = [v for v in result.sentences if v.verdict != "supported"]
    if checks:
        lines.append("")
        for v in checks:
            lines.append(f'- Sentence {v.index + 1} is {_VERDICT_WORDS[v.verdict]}: "{_quote(v.text)}"')
    return "\n".join(lines).rstrip() + "\n"


_VERDICT_WORDS = {
    "supported": "supported",
    "partly": "partly supported",
    "unsupported": "not supported",
    "contradicted": "contradicted by a source",
}


def _conflicts(result: AttributionResult) -> dict[tuple[str, int], tuple[int, SourceAttribution]]:
    """Each contradicting (source id, sentence index), numbered by first appearance."""
    out: dict[tuple[str, int], tuple[int, SourceAttribution]] = {}
    for c in sorted(result.citations, key=lambda c: c.start):
        if c.status == "contradicted" and c.conflict is not None:
            out.setdefault((c.conflict.source_id, c.conflict.sentence_index), (len(out) + 1, c.conflict))
    return out


_CSS = """
body{font:16px/1.6 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b}
.answer{white-space:pre-wrap}
.kw{background:#e6f0ff;border-bottom:2px solid #3a6fd8;cursor:pointer;position:relative;border-radius:2px}
.kw.unsupported{background:#fff1e6;border-bottom:2px dashed #c0392b}
.kw sup{color:#3a6fd8;font-size:.7em;margin-left:1px}
.kw.unsupported sup{color:#c0392b}
.kw.contradicted{background:#ffe6e6;border-bottom:2px solid #a00000}
.kw.contradicted sup{color:#a00000}
.verdict{font-size:.7em;border-radius:3px;padding:0 .3em;margin-left:.3em;vertical-align:super}
.verdict.partly{background:#fff1e6;color:#8a4b00}.verdict.unsupported{background:#fff1e6;color:#c0392b}
.verdict.contradicted{background:#ffe6e6;color:#a00000}
.card{display:none;position:absolute;left:0;top:1.6em;z-index:10;width:26rem;max-width:80vw;background:#fff;
 border:1px solid #bbb;border-radius:6px;box-shadow:0 4px 14px rgba(0,0,0,.15);padding:.6rem .8rem;
 font-size:.9rem;line-height:1.4;white-space:normal;color:#222}
.kw:hover .card,.kw:focus .card,.kw.open .card{display:block}
.card .src{font-weight:600;color:#555;display:block;margin-bottom:.2rem}
.card mark{background:#ffe38a}
ol.notes{font-size:.92rem;color:#333}
ol.notes li{margin:.3rem 0}
"""

_JS = """
document.querySelectorAll('.kw').forEach(function(el){
  el.addEventListener('click',function(){el.classList.toggle('open');});
  el.addEventListener('keydown',function(e){if(e.key==='Enter'||e.key===' '){e.preventDefault();el.classList.toggle('open');}
    if(e.key==='Escape'){el.classList.remove('open');}});
});
"""


def _highlight(sentence: str, keyword: str) -> str:
    """The sentence, escaped, with the keyword's first case-insensitive occurrence marked."""
    at = sentence.casefold().find(keyword.casefold())
    if at < 0 or len(sentence.casefold()) != len(sentence):
        return html.escape(sentence)
    return (
        html.escape(sentence[:at])
        + "<mark>"
        + html.escape(sentence[at : at + len(keyword)])
        + "</mark>"
        + html.escape(sentence[at + len(keyword) :])
    )


def render_html(result: AttributionResult, *, title: str = "Answer with citations") -> str:
    """A self-contained page (inline CSS/JS, no network): each cited keyword is
    highlighted and focusable; hovering, focusing or clicking it shows its source sentence
    with the keyword marked. Unsupported keywords are marked in red with a dashed line,
    contradicted ones in dark red with the contradicting sentence, which the page also lists
    under the sources; answer sentences that are not fully supported end with a verdict badge."""
    notes = _footnotes(result)
    conflicts = _conflicts(result)
    text = result.response
    parts: list[str] = []
    pos = 0
    # Verdict badges after the answer sentences that are not fully supported.
    badges = [(v.end, v) for v in result.sentences if v.verdict != "supported"]
    events = sorted([(c.start, 0, c) for c in result.citations] + [(end, 1, v) for end, v in badges],
                    key=lambda e: (e[0], e[1]))
    for at, is_badge, item in events:
        if is_badge:
            parts.append(html.escape(text[pos:at]))
            word = _VERDICT_WORDS[item.verdict]
            parts.append(f'<span class="verdict {item.verdict}" title="sentence {item.index + 1}: {word}">{word}</span>')
            pos = at
            continue
        c = item
        parts.append(html.escape(text[pos : c.start]))
        kw = html.escape(text[c.start : c.end])
        if c.supported and c.best is not None:
            n = notes[c.best.source_id][0]
            label = html.escape(source_label(c.best))
            card = (
                f'<span class="card" role="tooltip"><span class="src">[{n}] {label}'
                f" (score {c.best.score:.2f})</span>{_highlight(c.best.sentence, c.text)}</span>"
            )
            parts.append(
                f'<span class="kw" tabindex="0" data-source="{html.escape(c.best.source_id, quote=True)}" '
                f'data-sentence="{c.best.sentence_index}" aria-label="{kw}, cited from {label}">'
                f"{kw}<sup>[{n}]</sup>{card}</span>"
            )
        elif c.status == "contradicted" and c.conflict is not None:
            n = conflicts[(c.conflict.source_id, c.conflict.sentence_index)][0]
            card = (
                f'<span class="card" role="tooltip"><span class="src">Contradicted by '
                f"{html.escape(source_label(c.conflict))}</span>{html.escape(c.conflict.sentence)}</span>"
            )
            parts.append(
                f'<span class="kw contradicted" tabindex="0" data-conflict="{html.escape(c.conflict.source_id, quote=True)}" '
                f'aria-label="{kw}, contradicted by {html.escape(source_label(c.conflict), quote=True)}">'
                f"{kw}<sup>x{n}</sup>{card}</span>"
            )
        else:
            card = '<span class="card" role="tooltip"><span class="src">Not supported</span>No source supports this keyword.</span>'
            parts.append(
                f'<span class="kw unsupported" tabindex="0" aria-label="{kw}, not supported by any source">'
                f"{kw}<sup>?</sup>{card}</span>"
            )
        pos = c.end
    parts.append(html.escape(text[pos:]))
    items = [
        f'<li value="{n}"><b>{html.escape(source_label(cited[0]))}</b>: '
        + " &hellip; ".join(f"&ldquo;{html.escape(a.sentence)}&rdquo;" for a in cited)
        + "</li>"
        for n, cited in notes.values()
    ]
    # The contradicting sentences, listed as the markdown's [^xN] notes are: a reader who
    # prints the page or cannot hover still sees what each x-marker points at.
    against = "".join(
        f'<li id="x{n}"><b>x{n}</b>: contradicted by <b>{html.escape(source_label(sent))}</b>: '
        f"&ldquo;{html.escape(sent.sentence)}&rdquo;</li>"
        for n, sent in conflicts.values()
    )
    contradicting = f'<h2>Contradicting sentences</h2><ul class="notes">{against}</ul>' if against else ""
    query = f"<p><b>Question:</b> {html.escape(result.query)}</p>" if result.query else ""
    data = html.escape(
        json.dumps({"citations": [c.to_dict() for c in result.citations],
                    "sentences": [v.to_dict() for v in result.sentences]}),
        quote=False,
    )
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>{query}<p class=\"answer\">{''.join(parts)}</p>"
        f"<h2>Sources</h2><ol class=\"notes\">{''.join(items)}</ol>{contradicting}"
        f'<script type="application/json" id="citations">{data}</script>'
        f"<script>{_JS}</script></body></html>\n"
    )
