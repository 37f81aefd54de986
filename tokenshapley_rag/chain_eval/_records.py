"""Question records: the JSONL input of :func:`~tokenshapley_rag.chain_eval.evaluate_chain`.

One JSON object a line::

    {"id": "q1", "question": "How tall is the Eiffel Tower?", "reference": "330 m"}
    {"question": "...", "sources": ["text", {"id": "d2", "text": "..."}], "answer": "..."}

``question`` is required; ``id`` (str or int), ``reference`` (or ``reference_answer``)
are optional. ``sources`` + ``answer`` make a *pre-computed* record, evaluated without a
chain. Everything is validated on the way in, so a bad file fails before any model work
with the line number in the message.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenshapley_rag._sources import coerce_sources
from tokenshapley_rag._types import Source
from tokenshapley_rag.errors import InvalidInputError, TokenShapleyError

__all__ = ["QuestionFileError", "QuestionRecord", "load_questions"]


class QuestionFileError(InvalidInputError):
    """A question file (or rows file) line breaks the schema; the message names the line."""


@dataclass(frozen=True, slots=True)
class QuestionRecord:
    """One question to evaluate.

    Parameters
    ----------
    index : int
        0-based position in the question set; the report keeps this order.
    id : str
        The record's ``id``, or ``str(index)`` when it has none. Rows of a resumed run
        are matched by it.
    question : str
    reference : str or None, default=None
        Reference answer, carried into the report untouched.
    sources : tuple of Source or None, default=None
        Pre-computed retrieved chunks, best first (rank 1 = ``sources[0]``).
    answer : str or None, default=None
        Pre-computed answer (may be empty: that becomes an error row, not a load error).
    line : int or None, default=None
        Line number in the question file, for messages.

    Examples
    --------
    >>> QuestionRecord.from_dict({"question": "Q?", "sources": ["a."], "answer": "a"}, index=3).id
    '3'
    """

    index: int
    id: str
    question: str
    reference: str | None = None
    sources: tuple[Source, ...] | None = None
    answer: str | None = None
    line: int | None = None

    @property
    def precomputed(self) -> bool:
        """Whether the record carries its own sources and answer."""
        return self.sources is not None and self.answer is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable dict that :meth:`from_dict` reads back (used to ship records to Ray)."""
        d: dict[str, Any] = {"index": self.index, "id": self.id, "question": self.question}
        if self.reference is not None:
            d["reference"] = self.reference
        if self.sources is not None:
            d["sources"] = [{"id": s.id, "text": s.text, "metadata": dict(s.metadata)} for s in self.sources]
        if self.answer is not None:
            d["answer"] = self.answer
        if self.line is not None:
            d["line"] = self.line
        return d

    @classmethod
    def from_dict(cls, obj: Any, *, index: int | None = None, line: int | None = None) -> QuestionRecord:
        """Validate one record (a mapping); ``index``/``line`` default to the mapping's own.

        Raises
        ------
        QuestionFileError
            Not an object, missing or empty ``question``, or a field of the wrong type.
        """
        where = f"line {line}" if line is not None else f"record {index}"
        if not isinstance(obj, Mapping):
            raise QuestionFileError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        idx = obj.get("index", index) if index is None else index
        if isinstance(idx, bool) or not isinstance(idx, int) or idx < 0:
            raise QuestionFileError(f"{where}: no valid record index (got {idx!r})")
        line = obj.get("line") if line is None else line
        question = obj.get("question")
        if not isinstance(question, str) or not question.strip():
            raise QuestionFileError(f"{where}: 'question' must be a non-empty string, got {question!r}")
        rid = obj.get("id")
        if rid is None:
            rid = str(idx)
        elif isinstance(rid, bool) or not isinstance(rid, (str, int)):
            raise QuestionFileError(f"{where}: 'id' must be a string or an integer, got {type(rid).__name__}")
        reference = obj.get("reference", obj.get("reference_answer"))
        if reference is not None and not isinstance(reference, str):
            raise QuestionFileError(f"{where}: 'reference' must be a string, got {type(reference).__name__}")
        answer = obj.get("answer")
        if answer is not None and not isinstance(answer, str):
            raise QuestionFileError(f"{where}: 'answer' must be a string, got {type(answer).__name__}")
        sources = obj.get("sources")
        srcs: tuple[Source, ...] | None = None
        if sources is not None:
            if not isinstance(sources, list):
                raise QuestionFileError(f"{where}: 'sources' must be a list, got {type(sources).__name__}")
            try:
                srcs = tuple(coerce_sources(sources))
            except TokenShapleyError as err:
                raise QuestionFileError(f"{where}: {err}") from None
        return cls(index=idx, id=str(rid), question=question, reference=reference, sources=srcs, answer=answer, line=line)


def load_questions(questions: str | os.PathLike[str] | Iterable[Any], *, limit: int | None = None) -> list[QuestionRecord]:
    """Read and validate a question set.

    Parameters
    ----------
    questions : path or iterable
        A JSONL file (one object a line, blank lines ignored), or an iterable of mappings
        or :class:`QuestionRecord` (re-indexed by position).
    limit : int or None, default=None
        Keep the first ``limit`` records.

    Returns
    -------
    records : list of QuestionRecord
        In input order, ``index`` 0, 1, ...

    Raises
    ------
    FileNotFoundError
        The path does not exist.
    QuestionFileError
        A line is not valid JSON or breaks the schema (the message names the line), or two
        records share an id (both lines named).

    Examples
    --------
    >>> recs = load_questions([{"id": "a", "question": "Q?"}, {"question": "R?"}])
    >>> [(r.index, r.id) for r in recs]
    [(0, 'a'), (1, '1')]
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidInputError(f"limit must be a non-negative integer or None, got {limit!r}")
    records: list[QuestionRecord] = []
    if isinstance(questions, (str, os.PathLike)):
        path = Path(questions)
        if not path.is_file():
            raise FileNotFoundError(f"question file {str(path)!r} does not exist")
        with path.open(encoding="utf-8") as fh:
            for lineno, text in enumerate(fh, start=1):
                if limit is not None and len(records) >= limit:
                    break
                if not text.strip():
                    continue
                try:
                    obj = json.loads(text)
                except json.JSONDecodeError as err:
                    raise QuestionFileError(f"{path}:{lineno}: not valid JSON ({err.msg} at column {err.colno})") from None
                try:
                    records.append(QuestionRecord.from_dict(obj, index=len(records), line=lineno))
                except QuestionFileError as err:
                    raise QuestionFileError(f"{path}:{err}") from None
    else:
        for item in questions:
            if limit is not None and len(records) >= limit:
                break
            if isinstance(item, QuestionRecord):
                item = item.to_dict()
                item.pop("index", None)
            records.append(QuestionRecord.from_dict(item, index=len(records), line=None))
    seen: dict[str, QuestionRecord] = {}
    for rec in records:
        if rec.id in seen:
            first = seen[rec.id]
            raise QuestionFileError(
                f"id {rec.id!r} is used twice ({_where(first)} and {_where(rec)}); ids key the rows of a "
                "resumed run, so they must be unique (a record without id gets its 0-based position)"
            )
        seen[rec.id] = rec
    return records


def _where(rec: QuestionRecord) -> str:
    return f"line {rec.line}" if rec.line is not None else f"record {rec.index}"
