"""Per-question result rows, how one question is evaluated, and the resumable rows file."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from tokenshapley_rag.chain_eval._chains import ChainOutput, run_chain
from tokenshapley_rag.chain_eval._metrics import (
    Concentration,
    citation_concentration,
    share,
)
from tokenshapley_rag.chain_eval._records import QuestionFileError, QuestionRecord
from tokenshapley_rag.errors import EmptyTextError, InvalidInputError

__all__ = ["TIMING_FIELDS", "KeywordRow", "QuestionRow", "RowsFile", "SourceUse", "evaluate_question"]

#: Row fields that measure time; excluded when comparing two runs (``to_dict(timing=False)``).
TIMING_FIELDS: tuple[str, ...] = ("seconds_chain", "seconds_attribution")


@dataclass(frozen=True, slots=True)
class SourceUse:
    """One retrieved source of an answer and how much the answer used it.

    Attributes
    ----------
    rank : int
        1-based retrieval rank.
    id : str
        Source id (node id, ``Document.id``, the record's source id, or the 0-based
        position when the chunk has none).
    n_citations : int
        Supported keywords of the answer whose best source sentence is in this source.
    score : float or None
        ``AttributionResult.source_scores[id]``: the Shapley values of all answer tokens
        summed over this source's datastore entries (None in an error row).
    """

    rank: int
    id: str
    n_citations: int
    score: float | None

    @property
    def used(self) -> bool:
        """Cited at least once (False: retrieved for nothing, retrieval noise)."""
        return self.n_citations > 0


@dataclass(frozen=True, slots=True)
class KeywordRow:
    """One keyword of an answer: ``answer[start:end] == text`` (char offsets).

    ``source_id`` / ``rank`` name the cited source (the keyword's best source sentence's
    source) when the keyword is supported, and are None otherwise. ``support`` is
    ``KeywordCitation.support``. ``status`` is ``KeywordCitation.status`` ("supported",
    "unsupported" or "contradicted"); a contradicted keyword's ``conflict`` is the source
    sentence stating another value, and ``conflict_source_id`` its source (else None).
    """

    text: str
    start: int
    end: int
    supported: bool
    support: float
    source_id: str | None
    rank: int | None
    status: str = ""
    conflict: str | None = None
    conflict_source_id: str | None = None

    def __post_init__(self) -> None:
        if not self.status:  # a rows file written before statuses: supported or not
            object.__setattr__(self, "status", "supported" if self.supported else "unsupported")


@dataclass(frozen=True, slots=True)
class QuestionRow:
    """The evaluation of one question (one line of the rows file).

    Attributes
    ----------
    index : int
        Position in the question set (the report's order).
    id : str
        Question id (rows of a resumed run are matched by it).
    question, reference, answer : str or None
        ``answer`` is None when the chain failed before answering.
    status : {"ok", "error"}
    error_type, error, error_stage : str or None
        For an error row: the exception's class name (e.g. ``"TextTooLongError"``), its
        message, and ``"chain"`` (the chain raised or returned something unusable) or
        ``"attribution"`` (empty answer, no source, text too long, ...).
    sources : tuple of SourceUse
        Retrieved sources in rank order (kept in an error row when known, unscored).
    keywords : tuple of KeywordRow
        The answer's keywords in answer order (empty in an error row).
    seconds_chain, seconds_attribution : float
        Wall-clock seconds spent in the chain and in ``TokenShapley.attribute``.
    """

    index: int
    id: str
    question: str
    reference: str | None
    answer: str | None
    status: str
    error_type: str | None
    error: str | None
    error_stage: str | None
    sources: tuple[SourceUse, ...]
    keywords: tuple[KeywordRow, ...]
    seconds_chain: float
    seconds_attribution: float

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def seconds(self) -> float:
        """Total seconds for the question (chain + attribution)."""
        return self.seconds_chain + self.seconds_attribution

    @property
    def n_keywords(self) -> int:
        return len(self.keywords)

    @property
    def n_supported(self) -> int:
        return sum(1 for k in self.keywords if k.supported)

    @property
    def supported_share(self) -> float | None:
        """Share of the answer's keywords that are supported (None without keywords)."""
        return share(self.n_supported, self.n_keywords)

    @property
    def unsupported(self) -> tuple[str, ...]:
        """Texts of the unsupported keywords, in answer order."""
        return tuple(k.text for k in self.keywords if not k.supported)

    @property
    def concentration(self) -> Concentration:
        """Concentration of the answer's citations over its retrieved sources."""
        return citation_concentration([s.n_citations for s in self.sources])

    def to_dict(self, *, timing: bool = True, derived: bool = True) -> dict[str, Any]:
        """JSON-ready dict; ``timing=False`` drops :data:`TIMING_FIELDS` (to compare runs),
        ``derived=True`` adds the computed fields (``n_keywords``, ``supported_share``,
        ``unsupported``, ``concentration``) for readers of the file; :meth:`from_dict`
        ignores them."""
        d: dict[str, Any] = {
            "index": self.index,
            "id": self.id,
            "question": self.question,
            "reference": self.reference,
            "answer": self.answer,
            "status": self.status,
            "error_type": self.error_type,
            "error": self.error,
            "error_stage": self.error_stage,
            "sources": [{"rank": s.rank, "id": s.id, "n_citations": s.n_citations, "score": s.score} for s in self.sources],
            "keywords": [
                {
                    "text": k.text,
                    "start": k.start,
                    "end": k.end,
                    "supported": k.supported,
                    "support": k.support,
                    "source_id": k.source_id,
                    "rank": k.rank,
                    "status": k.status,
                    "conflict": k.conflict,
                    "conflict_source_id": k.conflict_source_id,
                }
                for k in self.keywords
            ],
        }
        if derived:
            c = self.concentration
            d.update(
                n_keywords=self.n_keywords,
                n_supported=self.n_supported,
                supported_share=self.supported_share,
                unsupported=list(self.unsupported),
                concentration={f: getattr(c, f) for f in c.__slots__},
            )
        if timing:
            d.update(seconds_chain=self.seconds_chain, seconds_attribution=self.seconds_attribution)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> QuestionRow:
        """Read back a :meth:`to_dict` row (KeyError/TypeError when it is not one)."""
        return cls(
            index=int(d["index"]),
            id=str(d["id"]),
            question=d["question"],
            reference=d.get("reference"),
            answer=d.get("answer"),
            status=d["status"],
            error_type=d.get("error_type"),
            error=d.get("error"),
            error_stage=d.get("error_stage"),
            sources=tuple(SourceUse(int(s["rank"]), str(s["id"]), int(s["n_citations"]), s.get("score")) for s in d["sources"]),
            keywords=tuple(
                KeywordRow(k["text"], int(k["start"]), int(k["end"]), bool(k["supported"]), float(k["support"]),
                           k.get("source_id"), k.get("rank"), k.get("status") or "", k.get("conflict"),
                           k.get("conflict_source_id"))
                for k in d["keywords"]
            ),
            seconds_chain=float(d.get("seconds_chain", 0.0)),
            seconds_attribution=float(d.get("seconds_attribution", 0.0)),
        )


def evaluate_question(record: QuestionRecord, chain: Any, attributor: Any, *, input_key: str | None = None) -> QuestionRow:
    """Run the chain on one question (or take the record's pre-computed answer) and attribute it.

    Never raises for a failing question: any exception from the chain or from
    ``attributor.attribute`` (``TextTooLongError``, ``EmptyTextError``, ...) becomes an
    error row with its type and message, so a run goes on past it.

    Parameters
    ----------
    record : QuestionRecord
    chain : query engine, runnable or None
        None: use ``record.sources`` / ``record.answer``.
    attributor : TokenShapley
        Anything with ``attribute(query=, sources=, response=) -> AttributionResult``.
    input_key : str or None
        See :func:`~tokenshapley_rag.chain_eval.run_chain`.

    Returns
    -------
    QuestionRow
    """
    t0 = time.perf_counter()
    out: ChainOutput | None = None
    stage = "chain"
    t_chain = 0.0
    try:
        if chain is None:
            if not record.precomputed:
                raise InvalidInputError(f"question {record.id!r} has no chain and no pre-computed sources and answer")
            sources = record.sources or ()
            out = ChainOutput(record.answer or "", tuple(sources), tuple(range(1, len(sources) + 1)))
        else:
            out = run_chain(chain, record.question, input_key=input_key)
        t_chain = time.perf_counter() - t0
        stage = "attribution"
        if not out.answer.strip():
            raise EmptyTextError("the answer is empty or only whitespace: there is nothing to attribute")
        if not out.sources:
            raise EmptyTextError("no source with text was retrieved: there is nothing to attribute to")
        res = attributor.attribute(query=record.question, sources=list(out.sources), response=out.answer)
    except Exception as err:  # noqa: BLE001  (any failure of one question is recorded; the run goes on)
        t_end = time.perf_counter() - t0
        if stage == "chain":
            t_chain = t_end
        return QuestionRow(
            index=record.index,
            id=record.id,
            question=record.question,
            reference=record.reference,
            answer=out.answer if out is not None else None,
            status="error",
            error_type=type(err).__name__,
            error=str(err),
            error_stage=stage,
            sources=tuple(SourceUse(r, s.id, 0, None) for r, s in zip(out.ranks, out.sources)) if out else (),
            keywords=(),
            seconds_chain=t_chain,
            seconds_attribution=t_end - t_chain,
        )
    t_attr = time.perf_counter() - t0 - t_chain
    rank_of = dict(zip((s.id for s in out.sources), out.ranks))
    counts = dict.fromkeys(rank_of, 0)
    keywords = []
    for c in res.citations:
        cited = c.best.source_id if c.supported and c.best is not None else None
        if cited is not None:
            counts[cited] += 1
        keywords.append(
            KeywordRow(c.text, int(c.start), int(c.end), bool(c.supported), float(c.support), cited,
                       rank_of[cited] if cited is not None else None, c.status,
                       c.conflict.sentence if c.conflict is not None else None,
                       c.conflict.source_id if c.conflict is not None else None)
        )
    return QuestionRow(
        index=record.index,
        id=record.id,
        question=record.question,
        reference=record.reference,
        answer=out.answer,
        status="ok",
        error_type=None,
        error=None,
        error_stage=None,
        sources=tuple(
            SourceUse(r, s.id, counts[s.id], float(res.source_scores.get(s.id, 0.0)))
            for r, s in zip(out.ranks, out.sources)
        ),
        keywords=tuple(keywords),
        seconds_chain=t_chain,
        seconds_attribution=t_attr,
    )


class RowsFile:
    """The JSONL rows file of a run: one :class:`QuestionRow` a line, appended and flushed
    (and fsynced) as each question finishes, so a killed run loses at most the question in
    flight.

    Parameters
    ----------
    path : path-like
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fh: IO[str] | None = None

    def load(self, records: Sequence[QuestionRecord], *, retry_errors: bool = False) -> dict[str, QuestionRow]:
        """Finished rows of ``records`` already in the file, by question id.

        A truncated last line (a run killed mid-write) is dropped and that question is
        redone (a complete last row that only lacks its newline is kept); duplicate rows keep the first; with ``retry_errors`` error rows
        are dropped so their questions run again. The file is then rewritten atomically
        when anything was dropped, so rows are never duplicated. Rows of ids not in
        ``records`` are kept in the file and ignored.

        Raises
        ------
        QuestionFileError
            A line other than the last is not a valid row (the message names it).
        InvalidInputError
            A row's question differs from the record with the same id (the file belongs to
            another question set).
        """
        if not self.path.exists():
            return {}
        raw = self.path.read_text(encoding="utf-8")
        lines = raw.split("\n")
        # split() leaves "" after a final newline; anything else there is an unterminated line
        last = len(lines) - 1
        by_id = {r.id: r for r in records}
        keep: list[str] = []
        done: dict[str, QuestionRow] = {}
        dirty = lines[-1] != ""
        for lineno, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                row = QuestionRow.from_dict(obj)
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                if lineno - 1 == last or not any(rest.strip() for rest in lines[lineno:]):
                    dirty = True  # killed mid-write: drop it, the question is redone
                    continue
                raise QuestionFileError(
                    f"{self.path}:{lineno}: not a result row, in the middle of the rows file; "
                    "fix or delete the file (or run without resume)"
                ) from None
            rec = by_id.get(row.id)
            if rec is not None:
                if rec.question != row.question:
                    raise InvalidInputError(
                        f"{self.path}:{lineno}: row {row.id!r} is for the question {row.question!r}, but this "
                        f"question set has {rec.question!r} under that id; use another output path"
                    )
                if row.id in done:
                    dirty = True
                    continue
                if retry_errors and not row.ok:
                    dirty = True
                    continue
                # the question set may have been reordered since: report order follows it
                done[row.id] = replace(row, index=rec.index)
            keep.append(line)
        if dirty:
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text("".join(line + "\n" for line in keep), encoding="utf-8")
            os.replace(tmp, self.path)
        return done

    def reset(self) -> None:
        """Start the file over (empty)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("", encoding="utf-8")

    def append(self, row: QuestionRow) -> None:
        """Write one row and make it durable before the next question starts."""
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("a", encoding="utf-8")
        try:
            line = json.dumps(row.to_dict(), ensure_ascii=False)
            line.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate (in an answer or an error message) cannot be written as
            # UTF-8; JSON's \\u escapes keep it, and the file stays valid UTF-8.
            line = json.dumps(row.to_dict(), ensure_ascii=True)
        self._fh.write(line + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
