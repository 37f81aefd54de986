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

    These are the ``n`` of the ``[^n]`` markers of :func:`render_markdown` (``[^tsn]`` when
    the answer has footnotes of its own) and of the HTML page: a source is numbered by the
    first supported keyword whose best source it is.
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


# ---------------------------------------------------------------------------------------------
# Where a footnote marker may go. A marker is placed right after its keyword unless that
# would break the answer's own markdown: inside a code span it would show as code, inside a
# link target, autolink or bare URL it breaks the link, inside a link's text it nests a link
# in a link, inside math it breaks KaTeX/MathJax, inside a task box "- [x]" the box stops
# being a box. Such a marker moves to just after the construct. A fenced code block (or a
# display-math block, or a link reference definition) cannot hold a marker on any of its
# lines: even after its closing fence a marker stops the fence from closing. The markers of
# its keywords follow the block on a line of their own, so a reader still sees which sources
# the block's commands or values come from.

# An opening code fence: its container prefix (blockquote ">", indentation, a list item's
# marker: "- ```sh") and its fence; a backtick fence's info string holds no backtick (CommonMark).
_FENCE = re.compile(r"(?P<prefix>(?:[ \t>]|[-*+][ \t]|\d{1,9}[.)][ \t])*?)(?P<fence>`{3,}(?=[^`]*$)|~{3,})")
# A link reference definition ("[docs]: https://..."), not a footnote definition "[^1]: ...".
_LINK_DEFINITION = re.compile(r"[ \t]{0,3}\[(?!\^)[^\[\]\n]+\]:[ \t]*\S")
# Inline constructs a marker may not go inside, in the order markdown reads them at a place.
# A code span, link text, comment or math span is looked for over at most 400 characters (a
# link target over 1,000): an opener with no closer would otherwise scan to the paragraph's
# end, for each opener (quadratic in a long answer full of stray "`", "[" or "\("); a longer
# span may get a marker inside.
_INLINE = re.compile(
    r"(?P<code>(?P<ticks>`+)(?!`)(?:[^\n]|\n(?![ \t]*\n)){1,400}?(?<!`)(?P=ticks)(?!`))"
    r"|\[\^[^\]\s]+\]"  # a footnote reference the answer already has
    # an inline link or image, text and target: "[text](url "title")" ("\[" is no link)
    r"|(?<!\\)!?\[(?:[^\[\]\n\\]|\\.|\[[^\[\]\n]{0,400}\]){0,400}\]"
    r"\((?:<[^<>\n]{0,1000}>|(?:[^()\s\\]|\\.|\([^()\s]{0,1000}\)){0,1000})(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*\)"
    r"|(?<!\\)!?\[(?:[^\[\]\n\\]|\\.){1,400}\]\[[^\[\]\n]{0,400}\]"  # a reference link "[text][ref]"
    r"|<[A-Za-z][A-Za-z0-9.+-]{1,31}:[^\s<>]*>|<[^\s<>@]+@[^\s<>]+>"  # an autolink
    r"|<!--(?:[^\n]|\n(?![ \t]*\n)){0,400}?-->|</?[A-Za-z][A-Za-z0-9-]*"  # an HTML comment or tag
    r"(?:\s+[A-Za-z_:][\w.:-]*(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s\"'=<>`]+))?)*\s*/?>"
    # math: "$$...$$", "\(...\)", "\[...\]" (within a paragraph: no blank line inside)
    r"|\$\$(?:[^\n]|\n(?![ \t]*\n)){1,400}?\$\$|\\\((?:[^\n]|\n(?![ \t]*\n)){1,400}?\\\)|\\\[(?:[^\n]|\n(?![ \t]*\n)){1,400}?\\\]"
    # inline math "$E = mc^2$", not two amounts ("$4.2 billion and $3.1 billion"): the
    # opening "$" is followed and the closing one preceded by a non-space, and no digit
    # follows the closing one (pandoc's rule)
    r"|(?<![\\$\w])\$(?![\s$])(?:[^$\n\\]|\\.){1,400}?(?<![\s\\])\$(?![\d$])"
    # a bare URL; a "|" ends it, as it ends a table cell
    r"|(?P<url>(?<![\w/@.:-])(?:(?:https?|ftp)://|www\.)(?:[^\s<>()|]|\([^\s<>()|]*\))+)"
    r"|(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"  # a bare e-mail address
    r"|(?m:^)[ \t>]*(?:[-*+]|\d{1,9}[.)])[ \t]+\[[ xX]\][ \t]+",  # a task-list box and its space
    re.DOTALL,
)
# A bare URL's trailing punctuation ends the sentence, not the URL (as GitHub reads it).
_URL_TAIL = re.compile(r"[?!.,:;*_~'\"]+$")
# A run of closing emphasis ("**bold**", "_it_", "~~struck~~") right after a keyword.
_EMPHASIS_CLOSE = re.compile(r"(?:\*{1,3}|_{1,3}|~~)(?!\w)")


def _lines(text: str) -> list[tuple[int, int]]:
    """Each line's (start, end) in ``text``, without its ``\\n`` (markdown's lines: "\\r" is
    left on the line, and no other separator splits one).

    >>> _lines("a\\nbc\\n")
    [(0, 1), (2, 4), (5, 5)]
    """
    out, pos = [], 0
    for line in text.split("\n"):
        out.append((pos, pos + len(line)))
        pos += len(line) + 1
    return out


def _blocks(text: str) -> list[tuple[int, int, str, str]]:
    """The blocks no marker may go in: fenced code, ``$$`` display math on lines of its own
    and link reference definitions, each as (start, end, prefix, closer). ``end`` is the end
    of its last line; ``prefix`` is its container's (blockquote, list indentation), for the
    line of markers after it; ``closer`` is the fence that closes a fence the answer left open
    (it would take everything after it, the footnotes too, into the code), else "".

    >>> _blocks("Run:\\n\\n```bash\\npip install x\\n```\\n\\nDone.")
    [(6, 31, '', '')]
    >>> _blocks("> ~~~\\n> code")
    [(0, 12, '> ', '\\n> ~~~')]
    """
    lines = _lines(text)
    out = []
    i = 0
    while i < len(lines):
        a, b = lines[i]
        line = text[a:b]
        opening = _FENCE.match(line)
        if opening is not None:
            # the markers' line continues the container: a list marker becomes its width in spaces
            prefix, fence = re.sub(r"[^ \t>]", " ", opening["prefix"]), opening["fence"]
            close = re.compile(rf"[ \t>]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*\r?$")
            j = next((k for k in range(i + 1, len(lines)) if close.match(text[lines[k][0]:lines[k][1]])), None)
            if j is None:
                out.append((a, len(text), prefix, "\n" + prefix + fence))
                break
            out.append((a, lines[j][1], prefix, ""))
            i = j + 1
            continue
        stripped = line.lstrip(" \t>")
        if stripped.startswith("$$") and "$$" not in stripped[2:]:
            j = next((k for k in range(i + 1, len(lines)) if "$$" in text[lines[k][0]:lines[k][1]]), None)
            if j is not None:
                out.append((a, lines[j][1], line[: len(line) - len(stripped)], ""))
                i = j + 1
                continue
        if _LINK_DEFINITION.match(line):
            out.append((a, b, "", ""))
        i += 1
    return out


def _inline_spans(text: str, blocks: list[tuple[int, int, str, str]]) -> list[tuple[int, int]]:
    """The inline constructs outside ``blocks`` that no marker may go inside, in order.

    >>> text = "See [Denver](https://x.org/wiki/Denver), `a`, $E = mc^2$ and www.acme.com."
    >>> [text[a:b] for a, b in _inline_spans(text, [])]
    ['[Denver](https://x.org/wiki/Denver)', '`a`', '$E = mc^2$', 'www.acme.com']
    >>> [text[a:b] for a, b in _inline_spans("It rose from $3.1 billion to $4.2 billion.", [])]
    []
    """
    out = []
    pos = 0
    for start, end, _, _ in [*blocks, (len(text), len(text), "", "")]:
        for m in _INLINE.finditer(text, pos, start):
            a, b = m.span()
            tail = _URL_TAIL.search(m["url"]) if m["url"] is not None else None
            out.append((a, b - len(tail[0]) if tail else b))
        pos = end
    return out


def _place(at: int, text: str, spans: list[tuple[int, int]]) -> int:
    """Where a marker for a keyword ending at ``at`` goes: after an inline construct that
    holds ``at``, then after the emphasis that the keyword ends ("**1889**" -> after "**").

    >>> text = "In [Paris](https://paris.fr) on **31 March 1889**."
    >>> spans = _inline_spans(text, [])
    >>> text[:_place(text.index("Paris") + 5, text, spans)]
    'In [Paris](https://paris.fr)'
    >>> text[:_place(text.index("1889") + 4, text, spans)]
    'In [Paris](https://paris.fr) on **31 March 1889**'
    """
    at = next((b for a, b in spans if a < at < b), at)
    close = _EMPHASIS_CLOSE.match(text, at)
    if close is not None and at > 0 and not text[at - 1].isspace():
        at = close.end()
    return at


def _labels(text: str) -> str:
    """The prefix of the footnote labels: "" (``[^1]``, ``[^x1]``, ``[^?]``) unless the answer
    has footnotes of its own, then the first of "ts", "ts-", "ts--", ... whose labels
    (``[^ts1]``, ``[^tsx1]``, ``[^ts?]``) none of the answer's labels can be.

    >>> _labels("Paris is in France.")
    ''
    >>> _labels("Revenue rose[^1].\\n\\n[^1]: Annual report")
    'ts'
    >>> _labels("See[^ts2] and[^ts-x1].")
    'ts--'
    """
    used = set(re.findall(r"\[\^([^\]\s]+)\]", text))
    if not used:
        return ""
    prefix = "ts"
    while any(label.startswith(prefix) and re.fullmatch(r"\d+|x\d+|\?", label[len(prefix):]) for label in used):
        prefix += "-"
    return prefix


def render_markdown(result: AttributionResult) -> str:
    """The answer with ``[^n]`` after each supported keyword (``n`` numbers its best source,
    labelled with its display name and page; the footnote quotes the cited sentences),
    ``[^xk]`` after contradicted ones (the contradicting sentence) and ``[^?]`` after
    unsupported ones, then the footnotes quoting the sentences and, under "Sentences to
    check:", a list of the answer sentences that are not fully supported, with their verdicts.

    Consecutive keywords citing the same source in one sentence share one marker, placed
    after the last of them, so a sentence-long quote gets one footnote, not ten.

    The answer's own markdown stays intact: a marker never goes inside a code span, a link
    (it follows the whole ``[text](url)``), an autolink, a bare URL, math, an HTML tag or a
    task-list box, and follows the emphasis that its keyword ends (``**1889**[^1]``). The
    markers of keywords in a fenced code block follow the block on a line of their own. When
    the answer has footnotes of its own, the library's are labelled ``[^ts1]``, ``[^tsx1]``
    and ``[^ts?]`` so that none collides with them.

    >>> from tokenshapley_rag._result import AttributionResult, TokenScores
    >>> from tokenshapley_rag._types import KeywordCitation, SourceAttribution
    >>> cited = SourceAttribution("eiffel", 1.0, "It was completed in 1889.", 0, 25, 0)
    >>> answer = "It opened in [1889](https://www.toureiffel.paris)."
    >>> kw = KeywordCitation("1889", 14, 18, (cited,), supported=True)
    >>> print(render_markdown(AttributionResult("", answer, [], [kw], {}, [], TokenScores.empty())))
    It opened in [1889](https://www.toureiffel.paris)[^1].
    <BLANKLINE>
    [^1]: eiffel: "It was completed in 1889."
    <BLANKLINE>
    """
    notes = _footnotes(result)
    numbers = {key: n for key, (n, _) in notes.items()}
    conflicts = _conflicts(result)
    text = result.response
    ts = _labels(text)
    inserts: list[tuple[int, str]] = []
    cites = sorted(result.citations, key=lambda c: c.start)
    for i, c in enumerate(cites):
        if c.supported and c.best is not None:
            marker = f"[^{ts}{numbers[c.best.source_id]}]"
        elif c.status == "contradicted" and c.conflict is not None:
            marker = f"[^{ts}x{conflicts[(c.conflict.source_id, c.conflict.sentence_index)][0]}]"
        else:
            marker = f"[^{ts}?]"
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
    out = "".join(_with_markers(text, inserts))
    lines = [out, ""]
    for n, cited in notes.values():
        quotes = " … ".join(f'"{_quote(a.sentence)}"' for a in cited)
        lines.append(f"[^{ts}{n}]: {_quote(source_label(cited[0]))}: {quotes}")
    for n, sent in conflicts.values():
        lines.append(f'[^{ts}x{n}]: Contradicted by {_quote(source_label(sent))}: "{_quote(sent.sentence)}"')
    if any(c.status == "unsupported" for c in cites):
        lines.append(f"[^{ts}?]: Not supported by any source.")
    checks = [v for v in result.sentences if v.verdict != "supported"]
    if checks:
        # A paragraph before the list: after an answer that ends in a list, a renderer that
        # takes the footnote definitions out would otherwise run the two lists together.
        lines += ["", "**Sentences to check:**", ""]
        for v in checks:
            lines.append(f'- Sentence {v.index + 1} is {_VERDICT_WORDS[v.verdict]}: "{_quote(v.text)}"')
    return "\n".join(lines).rstrip() + "\n"


def _with_markers(text: str, inserts: list[tuple[int, str]]) -> list[str]:
    """``text`` cut at the markers' places (see :func:`_place`), with the markers in between:
    those of a block's keywords on a line of their own after the block, each marker once per
    place, in the order of the keywords.

    >>> "".join(_with_markers("Run:\\n```sh\\nrun x\\n```\\nDone.", [(3, "[^?]"), (14, "[^1]"), (25, "[^1]")]))
    'Run[^?]:\\n```sh\\nrun x\\n```\\n\\n[^1]\\n\\nDone[^1].'
    """
    blocks = _blocks(text)
    spans = _inline_spans(text, blocks)
    at_place: dict[int, list[str]] = {}
    after_block: dict[int, list[str]] = {}
    for at, marker in inserts:
        block = next((k for k, (a, b, _, _) in enumerate(blocks) if a <= at <= b), None)
        group = after_block.setdefault(block, []) if block is not None else at_place.setdefault(_place(at, text, spans), [])
        if marker not in group:
            group.append(marker)
    for k, (_, end, prefix, closer) in enumerate(blocks):
        if closer or k in after_block:
            # After the block: a blank line, the markers, and a blank line unless one follows.
            blank = "\n" + prefix.rstrip()
            line = ""
            if k in after_block:
                line = blank + "\n" + prefix + "".join(after_block[k])
                if not _blank_next(text, end):
                    line += blank
            closer = closer[1:] if closer and text.endswith("\n") else closer
            at_place.setdefault(end, []).insert(0, closer + line)
    out, pos = [], 0
    for at in sorted(at_place):
        out += [text[pos:at], "".join(at_place[at])]
        pos = at
    out.append(text[pos:])
    return out


def _blank_next(text: str, end: int) -> bool:
    """Whether the line after the one ending at ``end`` is blank (or the text ends there)."""
    if end >= len(text):
        return True
    nxt = text.find("\n", end + 1)
    return not text[end + 1 : len(text) if nxt < 0 else nxt].strip(" \t\r>")


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
