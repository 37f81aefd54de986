"""The report of a chain evaluation: summary metrics, timing, and JSON/markdown/HTML/PNG output."""

from __future__ import annotations

import base64
import html
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tokenshapley_rag._json import jsonable
from tokenshapley_rag.chain_eval._metrics import (
    RankUtilization,
    mean_or_none,
    share,
    utilization_by_rank,
)
from tokenshapley_rag.chain_eval._rows import QuestionRow

__all__ = ["ChainReport", "ChainSummary", "ChainTiming", "summarize", "summarize_timing"]


@dataclass(frozen=True, slots=True)
class ChainSummary:
    """Quality metrics over the answered (``status == "ok"``) questions; no timing, so two
    runs of the same questions compare equal whatever engine ran them.

    Attributes
    ----------
    n_questions, n_ok, n_errors : int
    errors_by_type : dict of str to int
        Error rows per exception class name.
    n_keywords, n_supported : int
        Keywords of all answers, and how many of them are supported.
    supported_share : float or None
        ``n_supported / n_keywords`` (pooled over keywords).
    mean_supported_share : float or None
        Mean over answers with at least one keyword of each answer's supported share.
    n_retrieved, n_used : int
        Retrieved sources over all answers, and how many were cited at least once.
    noise_share : float or None
        ``1 - n_used / n_retrieved``: retrieved but never cited.
    n_citations : int
        Citations (supported keywords) over all answers.
    top_rank_share : float or None
        Share of all citations that went to a rank-1 source (pooled).
    mean_max_share, mean_normalized_entropy, mean_gini : float or None
        Means over answers with at least one citation of
        :class:`~tokenshapley_rag.chain_eval.Concentration` fields.
    utilization : tuple of RankUtilization
        Per retrieval rank.
    """

    n_questions: int
    n_ok: int
    n_errors: int
    errors_by_type: dict[str, int]
    n_keywords: int
    n_supported: int
    supported_share: float | None
    mean_supported_share: float | None
    n_retrieved: int
    n_used: int
    noise_share: float | None
    n_citations: int
    top_rank_share: float | None
    mean_max_share: float | None
    mean_normalized_entropy: float | None
    mean_gini: float | None
    utilization: tuple[RankUtilization, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        d = {f: getattr(self, f) for f in self.__slots__ if f != "utilization"}
        d["errors_by_type"] = dict(self.errors_by_type)
        d["utilization"] = [{f: getattr(u, f) for f in u.__slots__} for u in self.utilization]
        return d


@dataclass(frozen=True, slots=True)
class ChainTiming:
    """Wall-clock time per question (chain + attribution), over every row, errors included.

    Resumed rows keep the time measured when they ran. ``wall_seconds`` is the whole run in
    this process (model loading, Ray start-up and resumed rows' absence included).
    """

    n: int
    n_resumed: int
    seconds_mean: float | None
    seconds_median: float | None
    seconds_p90: float | None
    seconds_max: float | None
    chain_seconds_mean: float | None
    attribution_seconds_mean: float | None
    wall_seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}


def summarize(rows: Sequence[QuestionRow]) -> ChainSummary:
    """Summary metrics of ``rows`` (pure; see :class:`ChainSummary`).

    Examples
    --------
    >>> from tokenshapley_rag.chain_eval import KeywordRow, QuestionRow, SourceUse
    >>> row = QuestionRow(0, "q", "Q?", None, "Paris, 1923", "ok", None, None, None,
    ...     (SourceUse(1, "a", 1, 2.0), SourceUse(2, "b", 0, 0.1)),
    ...     (KeywordRow("Paris", 0, 5, True, 1.0, "a", 1), KeywordRow("1923", 7, 11, False, 0.0, None, None)),
    ...     0.0, 0.1)
    >>> s = summarize([row])
    >>> s.supported_share, s.noise_share, s.top_rank_share, [u.utilization for u in s.utilization]
    (0.5, 0.5, 1.0, [1.0, 0.0])
    """
    ok = [r for r in rows if r.ok]
    errors: dict[str, int] = {}
    for r in rows:
        if not r.ok:
            errors[r.error_type or "Error"] = errors.get(r.error_type or "Error", 0) + 1
    n_kw = sum(r.n_keywords for r in ok)
    n_sup = sum(r.n_supported for r in ok)
    n_ret = sum(len(r.sources) for r in ok)
    n_used = sum(1 for r in ok for s in r.sources if s.used)
    n_cit = sum(s.n_citations for r in ok for s in r.sources)
    n_top = sum(s.n_citations for r in ok for s in r.sources if s.rank == 1)
    conc = [r.concentration for r in ok]
    used_share = share(n_used, n_ret)
    return ChainSummary(
        n_questions=len(rows),
        n_ok=len(ok),
        n_errors=len(rows) - len(ok),
        errors_by_type=dict(sorted(errors.items())),
        n_keywords=n_kw,
        n_supported=n_sup,
        supported_share=share(n_sup, n_kw),
        mean_supported_share=mean_or_none(r.supported_share for r in ok),
        n_retrieved=n_ret,
        n_used=n_used,
        noise_share=None if used_share is None else 1.0 - used_share,
        n_citations=n_cit,
        top_rank_share=share(n_top, n_cit),
        mean_max_share=mean_or_none(c.max_share for c in conc),
        mean_normalized_entropy=mean_or_none(c.normalized_entropy for c in conc),
        mean_gini=mean_or_none(c.gini for c in conc),
        utilization=utilization_by_rank([(s.rank, s.n_citations) for s in r.sources] for r in ok),
    )


def summarize_timing(rows: Sequence[QuestionRow], *, n_resumed: int = 0, wall_seconds: float | None = None) -> ChainTiming:
    """Time per question over ``rows`` (see :class:`ChainTiming`)."""
    secs = np.array([r.seconds for r in rows], dtype=np.float64)
    if secs.size == 0:
        return ChainTiming(0, n_resumed, None, None, None, None, None, None, wall_seconds)
    return ChainTiming(
        n=int(secs.size),
        n_resumed=n_resumed,
        seconds_mean=float(secs.mean()),
        seconds_median=float(np.median(secs)),
        seconds_p90=float(np.quantile(secs, 0.9)),
        seconds_max=float(secs.max()),
        chain_seconds_mean=float(np.mean([r.seconds_chain for r in rows])),
        attribution_seconds_mean=float(np.mean([r.seconds_attribution for r in rows])),
        wall_seconds=wall_seconds,
    )


@dataclass(frozen=True, slots=True)
class ChainReport:
    """Result of :func:`~tokenshapley_rag.chain_eval.evaluate_chain`.

    Attributes
    ----------
    rows : tuple of QuestionRow
        One per question, in question order (resumed rows included).
    summary : ChainSummary
    timing : ChainTiming
    config : dict
        How the run was made (engine, attributor config, chain kind, output path, ...).

    Two runs agree when ``a.to_dict(timing=False, config=False) == b.to_dict(timing=False,
    config=False)``: same rows in the same order and the same summary.
    """

    rows: tuple[QuestionRow, ...]
    summary: ChainSummary
    timing: ChainTiming
    config: dict[str, Any] = field(default_factory=dict)

    def unsupported(self) -> list[dict[str, Any]]:
        """Every keyword no source supports, with its question id, offsets, whole answer and
        status: "unsupported", or "contradicted" with the source sentence stating another
        value (``conflict``) and its source (``conflict_source_id``)."""
        return [
            {"id": r.id, "keyword": k.text, "start": k.start, "end": k.end, "answer": r.answer, "status": k.status,
             "conflict": k.conflict, "conflict_source_id": k.conflict_source_id}
            for r in self.rows
            if r.ok
            for k in r.keywords
            if not k.supported
        ]

    def to_dict(self, *, timing: bool = True, config: bool = True) -> dict[str, Any]:
        """JSON-ready dict ``{"summary", "unsupported", "rows"}`` plus ``"timing"`` and
        ``"config"`` unless switched off (timing differs between two runs of the same set)."""
        d: dict[str, Any] = {"summary": self.summary.to_dict(), "unsupported": self.unsupported()}
        if timing:
            d["timing"] = self.timing.to_dict()
        if config:
            d["config"] = jsonable(self.config)
        d["rows"] = [r.to_dict(timing=timing) for r in self.rows]
        return d

    def to_json(self, **kwargs: Any) -> str:
        """:meth:`to_dict` as indented JSON."""
        return json.dumps(self.to_dict(**kwargs), indent=2, ensure_ascii=False)

    # ------------------------------------------------------------------ rendering

    def to_markdown(self, images: Mapping[str, str] | None = None) -> str:
        """A readable report. ``images`` maps ``"utilization"`` / ``"supported_share"`` to
        paths (relative to the markdown file) of the PNG plots to link."""
        s, t = self.summary, self.timing
        images = images or {}
        out = ["# Chain evaluation with TokenShapley attribution", ""]
        out.append(f"{s.n_questions} questions: {s.n_ok} answered and attributed, {s.n_errors} failed (error rows).")
        out += ["", "## Summary", "", "| metric | value |", "|---|---|"]
        for name, value in _summary_lines(s, t):
            out.append(f"| {name} | {value} |")
        out += ["", "## Source utilization by retrieval rank", ""]
        out.append("A source is *used* when at least one supported keyword cites it; retrieved but never used is retrieval noise.")
        out += ["", "| rank | answers with a source at this rank | used | utilization | citations |", "|---:|---:|---:|---:|---:|"]
        for u in s.utilization:
            out.append(f"| {u.rank} | {u.n_retrieved} | {u.n_used} | {_pct(u.utilization)} | {u.n_citations} |")
        if "utilization" in images:
            out += ["", f"![utilization by rank]({images['utilization']})"]
        if "supported_share" in images:
            out += ["", "## Supported share per answer", "", f"![supported share]({images['supported_share']})"]
        unsup = self.unsupported()
        n_contradicted = sum(u["status"] == "contradicted" for u in unsup)
        out += ["", f"## Unsupported and contradicted keywords ({len(unsup)}, {n_contradicted} contradicted)", ""]
        if unsup:
            out += ["| question | keyword | status | answer | contradicted by |", "|---|---|---|---|---|"]
            for u in unsup:
                a = u["answer"] or ""
                marked = a[: u["start"]] + "**" + a[u["start"] : u["end"]] + "**" + a[u["end"] :]
                conflict = f"{_md(u['conflict_source_id'] or '')}: {_md(u['conflict'])}" if u["conflict"] else ""
                out.append(f"| {_md(u['id'])} | {_md(u['keyword'])} | {u['status']} | {_md(marked)} | {conflict} |")
        else:
            out.append("None.")
        errs = [r for r in self.rows if not r.ok]
        out += ["", f"## Errors ({len(errs)})", ""]
        if errs:
            out += ["| question | stage | error | message |", "|---|---|---|---|"]
            for r in errs:
                out.append(f"| {_md(r.id)} | {r.error_stage} | {r.error_type} | {_md(_clip(r.error or '', 200))} |")
        else:
            out.append("None.")
        out += ["", "## Questions", "", "| # | id | status | keywords | supported | used ranks | unused ranks | seconds |",
                "|---:|---|---|---:|---:|---|---|---:|"]
        for r in self.rows:
            used = ",".join(str(x.rank) for x in r.sources if x.used) or "-"
            unused = ",".join(str(x.rank) for x in r.sources if not x.used) or "-"
            out.append(
                f"| {r.index} | {_md(r.id)} | {r.status} | {r.n_keywords} | {_pct(r.supported_share)} | "
                f"{used if r.ok else '-'} | {unused if r.ok else '-'} | {r.seconds:.2f} |"
            )
        return "\n".join(out) + "\n"

    def to_html(self, images: Mapping[str, bytes] | None = None) -> str:
        """A self-contained HTML page; ``images`` maps ``"utilization"`` /
        ``"supported_share"`` to PNG bytes, embedded inline. Unsupported keywords are
        marked in each answer."""
        s, t = self.summary, self.timing
        images = images or {}
        e = html.escape
        parts = [
            "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Chain evaluation</title><style>",
            _CSS,
            "</style></head><body><h1>Chain evaluation with TokenShapley attribution</h1>",
            f"<p>{s.n_questions} questions: {s.n_ok} answered and attributed, {s.n_errors} failed (error rows).</p>",
            "<h2>Summary</h2><table>",
        ]
        parts += [f"<tr><th>{e(n)}</th><td>{e(v)}</td></tr>" for n, v in _summary_lines(s, t)]
        parts.append("</table><h2>Source utilization by retrieval rank</h2>")
        parts.append("<p>A source is <em>used</em> when at least one supported keyword cites it; retrieved but never used is retrieval noise.</p>")
        parts.append("<table><tr><th>rank</th><th>answers with a source at this rank</th><th>used</th><th>utilization</th><th>citations</th></tr>")
        for u in s.utilization:
            parts.append(f"<tr><td>{u.rank}</td><td>{u.n_retrieved}</td><td>{u.n_used}</td><td>{_pct(u.utilization)}</td><td>{u.n_citations}</td></tr>")
        parts.append("</table>")
        for key, title in (("utilization", "Utilization by rank"), ("supported_share", "Supported share per answer")):
            if key in images:
                b64 = base64.b64encode(images[key]).decode("ascii")
                parts.append(f"<h3>{title}</h3><img alt='{title}' src='data:image/png;base64,{b64}'>")
        parts.append("<h2>Answers</h2><p><mark class='sup'>supported</mark> and <mark class='unsup'>unsupported or contradicted</mark> keywords (a contradicted keyword's title quotes the sentence that contradicts it).</p><table>")
        parts.append("<tr><th>id</th><th>question</th><th>answer</th><th>used ranks</th><th>seconds</th></tr>")
        for r in self.rows:
            if r.ok:
                body = _marked_html(r)
                used = ", ".join(f"{x.rank} ({e(x.id)}: {x.n_citations})" for x in r.sources if x.used) or "none"
            else:
                body = f"<span class='err'>{e(r.error_type or '')} ({e(r.error_stage or '')}): {e(_clip(r.error or '', 300))}</span>"
                used = "-"
            parts.append(f"<tr><td>{e(r.id)}</td><td>{e(r.question)}</td><td>{body}</td><td>{used}</td><td>{r.seconds:.2f}</td></tr>")
        parts.append("</table></body></html>")
        return "\n".join(parts) + "\n"

    def write(self, out_dir: str | os.PathLike[str], *, plots: bool = True) -> dict[str, Path]:
        """Write ``report.json``, ``report.md``, ``report.html`` and (with ``plots``, which
        needs matplotlib) ``utilization_by_rank.png`` and ``supported_share.png`` into
        ``out_dir``; returns the paths by kind."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths: dict[str, Path] = {}
        pngs: dict[str, bytes] = {}
        if plots:
            from tokenshapley_rag.chain_eval._plots import (
                supported_share_png,
                utilization_png,
            )

            pngs = {"utilization": utilization_png(self.summary), "supported_share": supported_share_png(self.rows)}
            for key, name in (("utilization", "utilization_by_rank.png"), ("supported_share", "supported_share.png")):
                paths[key] = out / name
                paths[key].write_bytes(pngs[key])
        paths["json"] = out / "report.json"
        paths["json"].write_text(self.to_json() + "\n", encoding="utf-8")
        paths["markdown"] = out / "report.md"
        paths["markdown"].write_text(
            self.to_markdown({k: paths[k].name for k in pngs}), encoding="utf-8"
        )
        paths["html"] = out / "report.html"
        paths["html"].write_text(self.to_html(pngs), encoding="utf-8")
        return paths

_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:70em;margin:2em auto;padding:0 1em}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .5em;"
    "text-align:left;vertical-align:top}mark.unsup{background:#fdd;border-bottom:2px dashed #c00}"
    "mark.sup{background:#dfd}.err{color:#a00}img{max-width:100%}"
)


def _summary_lines(s: ChainSummary, t: ChainTiming) -> list[tuple[str, str]]:
    lines = [
        ("answer keywords supported", f"{_pct(s.supported_share)} ({s.n_supported} of {s.n_keywords})"),
        ("mean supported share per answer", _pct(s.mean_supported_share)),
        ("retrieved sources never cited (noise)", f"{_pct(s.noise_share)} ({s.n_retrieved - s.n_used} of {s.n_retrieved})"),
        ("citations to the rank-1 source", f"{_pct(s.top_rank_share)} ({s.n_citations} citations)"),
        ("mean share of the most-cited source", _pct(s.mean_max_share)),
        ("mean normalized citation entropy", _num(s.mean_normalized_entropy)),
        ("mean citation Gini", _num(s.mean_gini)),
        ("errors", ", ".join(f"{k}: {v}" for k, v in s.errors_by_type.items()) or "none"),
        ("seconds per question (mean / median / p90 / max)",
         " / ".join(_num(x, 2) for x in (t.seconds_mean, t.seconds_median, t.seconds_p90, t.seconds_max)) + f" (n={t.n})"),
        ("seconds per question in the chain / in attribution (mean)",
         f"{_num(t.chain_seconds_mean, 2)} / {_num(t.attribution_seconds_mean, 2)}"),
    ]
    if t.n_resumed:
        lines.append(("rows resumed from an earlier run", str(t.n_resumed)))
    if t.wall_seconds is not None:
        lines.append(("wall time of this run (s)", _num(t.wall_seconds, 1)))
    return lines


def _marked_html(r: QuestionRow) -> str:
    a = r.answer or ""
    parts, pos = [], 0
    for k in sorted(r.keywords, key=lambda k: k.start):
        if k.start < pos:
            continue
        parts.append(html.escape(a[pos : k.start]))
        cls = "sup" if k.supported else "unsup"
        if k.supported:
            title = f"rank {k.rank}, source {k.source_id}, support {k.support:.2f}"
        elif k.status == "contradicted" and k.conflict:
            title = f"contradicted by source {k.conflict_source_id}: {k.conflict}"
        else:
            title = f"unsupported (support {k.support:.2f})"
        parts.append(f"<mark class='{cls}' title='{html.escape(title)}'>{html.escape(a[k.start : k.end])}</mark>")
        pos = k.end
    parts.append(html.escape(a[pos:]))
    return "".join(parts)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _md(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


