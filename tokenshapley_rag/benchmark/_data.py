"""Loaders for the six shared evaluation sets (JSONL, one example a line).

The files live outside the project, in ``<data folder>/<name>/<split>.jsonl`` (schema in the
data folder's ``README.md``). :func:`load_dataset` reads one of them into frozen dataclasses
and validates it on the way in, so every metric downstream can trust the offsets.

Where the data folder is
------------------------
The sets are not part of the package, and the package does not guess where they are:
``load_dataset(name, data_dir)`` (``tokenshapley eval --data PATH``) reads ``data_dir``;
without one, :func:`default_data_dir` returns the folder named by the environment variable
``TOKENSHAPLEY_DATA``. When neither is given, or the folder or file is missing,
:class:`DatasetNotFoundError` says what it looked for and how to point to the data.

Title handling (the same rule for every set)
---------------------------------------------
A source whose ``title`` is not null is attributed over ``title + "\\n" + text``: the
:class:`~tokenshapley_rag.Source` ``text`` is that concatenation, ``metadata["title"]``
keeps the title and ``metadata["text_offset"]`` is ``len(title) + 1``, the position of the
original text inside ``Source.text``. Every ``gold`` char range is shifted by that offset,
so ``gold`` ranges index into ``Source.text`` and still cover exactly the original text.
Sources without a title keep their text unchanged (``text_offset`` 0, ``title`` None).

Sets with titles: ``quotesum`` (every source; about 60 dev spans occur only in a title) and
``nq`` (every source: the Wikipedia page title). ``verigran``, ``kv`` and ``wice`` have no
titles (``title`` is null throughout). ``cnndm`` has no sources at all.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from numbers import Integral
from pathlib import Path
from typing import Any

from tokenshapley_rag._types import Source
from tokenshapley_rag.errors import (
    InvalidInputError,
    InvalidInputTypeError,
    TokenShapleyError,
)

__all__ = [
    "ATTRIBUTION_DATASETS",
    "DATASETS",
    "DATA_ENV_VAR",
    "SPAN_CHECKS",
    "SPAN_DATASETS",
    "AttributionExample",
    "DatasetFormatError",
    "DatasetNotFoundError",
    "GoldEvidence",
    "GoldSpan",
    "SummaryExample",
    "default_data_dir",
    "load_dataset",
]

#: Every set :func:`load_dataset` knows, in the README's order.
DATASETS: tuple[str, ...] = ("quotesum", "verigran", "kv", "nq", "cnndm", "wice")
#: Sets loaded as :class:`AttributionExample` (the others are :class:`SummaryExample`).
ATTRIBUTION_DATASETS: tuple[str, ...] = ("quotesum", "verigran", "kv", "nq", "wice")
#: Sets whose metric is span accuracy (keyword span -> source).
SPAN_DATASETS: tuple[str, ...] = ("quotesum", "verigran", "kv")
#: Span-accuracy checks built from another set (:mod:`tokenshapley_rag.benchmark._paraphrase`):
#: ``support-sentences``, each supported answer sentence of the support set -> its passage.
SPAN_CHECKS: tuple[str, ...] = ("support-sentences",)


#: Environment variable naming the data folder (see :func:`default_data_dir`). An explicit
#: ``data_dir`` / ``--data`` overrides it.
DATA_ENV_VAR = "TOKENSHAPLEY_DATA"


class DatasetNotFoundError(TokenShapleyError, FileNotFoundError):
    """The data directory or a set's JSONL file does not exist.

    The message names the path that was looked at, where that path came from (``data_dir`` /
    ``--data`` or ``TOKENSHAPLEY_DATA``; or that neither was given) and how to point to the
    data.
    """


class DatasetFormatError(InvalidInputError):
    """A data file line breaks the schema (the message names the file, line and example id)."""


@dataclass(frozen=True, slots=True)
class GoldSpan:
    """A gold keyword span of the answer and the source(s) it is attributed to.

    Parameters
    ----------
    start, end : int
        Character offsets into the example's ``answer`` (``answer[start:end] == text``).
    text : str
        The span text.
    source_ids : tuple of str
        Ids of the gold source(s) (every shared set has exactly one per span).

    Examples
    --------
    >>> GoldSpan(0, 5, "Paris", ("1",)).source_ids
    ('1',)
    """

    start: int
    end: int
    text: str
    source_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GoldEvidence:
    """A gold evidence char range inside one source.

    Parameters
    ----------
    source_id : str
        Id of the source the range is in.
    start, end : int
        Half-open character offsets into that :class:`~tokenshapley_rag.Source`'s ``text``
        (after the title shift, see the module docstring).

    Examples
    --------
    >>> GoldEvidence("3", 0, 42).end
    42
    """

    source_id: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class AttributionExample:
    """One example of an attribution set (quotesum, verigran, kv, nq, wice).

    Parameters
    ----------
    id : str
        Example id, unique within a file.
    question : str
        The query (``""`` for wice).
    sources : tuple of Source
        The context in order. ``Source.text`` is ``title + "\\n" + text`` when the set has
        titles; ``metadata`` holds ``title`` (str or None) and ``text_offset`` (int).
    answer : str
        Clean answer text (citation markup removed).
    spans : tuple of GoldSpan
        Gold keyword spans of the answer, in answer order (empty for wice and for 3
        verigran statements).
    gold : tuple of GoldEvidence
        Gold evidence ranges inside ``sources`` (empty when the set has none, e.g. quotesum).
    meta : Mapping
        Set-specific extras, unchanged from the file (see each set's PROVENANCE.md).
        Treat it as read-only.

    Examples
    --------
    >>> ex = AttributionExample(
    ...     id="toy", question="Capital of France?",
    ...     sources=(Source("a", "Berlin is in Germany."), Source("b", "Paris is in France.")),
    ...     answer="Paris", spans=(GoldSpan(0, 5, "Paris", ("b",)),), gold=(), meta={})
    >>> ex.source_ids
    ('a', 'b')
    >>> ex.gold_indices(ex.spans[0])
    frozenset({1})
    """

    id: str
    question: str
    sources: tuple[Source, ...]
    answer: str
    spans: tuple[GoldSpan, ...]
    gold: tuple[GoldEvidence, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def source_ids(self) -> tuple[str, ...]:
        """Ids of ``sources`` in context order."""
        return tuple(s.id for s in self.sources)

    def source_index(self, source_id: str) -> int:
        """Position of the source with id ``source_id`` in ``sources``.

        Raises
        ------
        InvalidInputError
            If no source has that id.
        """
        for i, s in enumerate(self.sources):
            if s.id == source_id:
                return i
        raise InvalidInputError(
            f"example {self.id!r} has no source with id {source_id!r}; "
            f"source ids are {list(self.source_ids)}"
        )

    def gold_indices(self, span: GoldSpan) -> frozenset[int]:
        """Positions in ``sources`` of ``span``'s gold source(s)."""
        return frozenset(self.source_index(sid) for sid in span.source_ids)


@dataclass(frozen=True, slots=True)
class SummaryExample:
    """One CNN/DailyMail article with its reference highlights.

    Parameters
    ----------
    id : str
        The CNN/DM id (sha1 hex).
    article : str
        The news article (at most 800 whitespace-separated words in the shared set).
    highlights : str
        Reference summary bullets, separated by ``"\\n"`` (original ``" ."`` spacing kept).
    meta : Mapping
        ``split``, ``row``, ``n_words``, ``n_highlights``, ``source``.

    Examples
    --------
    >>> SummaryExample("x", "A long article.", "Short .", {}).highlights
    'Short .'
    """

    id: str
    article: str
    highlights: str
    meta: Mapping[str, Any] = field(default_factory=dict)



def default_data_dir() -> Path:
    """The data folder used when no ``data_dir`` (``--data``) is given: ``$TOKENSHAPLEY_DATA``.

    ``~`` is expanded and a relative path is made absolute against the working directory.
    The folder need not exist: :func:`load_dataset` checks that.

    Raises
    ------
    DatasetNotFoundError
        ``TOKENSHAPLEY_DATA`` is not set (or empty); the message says how to point to the
        data.

    Examples
    --------
    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"TOKENSHAPLEY_DATA": "/srv/eval-sets"}):
    ...     default_data_dir().parts[-2:]
    ('srv', 'eval-sets')
    >>> with mock.patch.dict(os.environ, {"TOKENSHAPLEY_DATA": ""}):
    ...     default_data_dir()
    Traceback (most recent call last):
    ...
    tokenshapley_rag.benchmark._data.DatasetNotFoundError: no data folder given ...
    """
    env = os.environ.get(DATA_ENV_VAR, "")
    if not env:
        raise DatasetNotFoundError(f"no data folder given (neither --data / data_dir nor ${DATA_ENV_VAR}); {_HOW_TO_POINT}")
    return Path(os.path.abspath(os.path.expanduser(env)))


def _data_dir_origin(data_dir: str | os.PathLike[str] | None) -> str:
    """Where the folder :func:`load_dataset` reads came from, for error messages."""
    if data_dir is not None:
        return "given as data_dir (--data)"
    return f"from the {DATA_ENV_VAR} environment variable"


_HOW_TO_POINT = (
    "point to the folder that holds the set folders ("
    + ", ".join(f"{n}/" for n in DATASETS)
    + f") with --data PATH (tokenshapley eval), load_dataset(name, data_dir), "
    f"or the {DATA_ENV_VAR} environment variable"
)


def dataset_path(name: str, data_dir: str | os.PathLike[str] | None = None, split: str = "dev") -> Path:
    """``<data_dir>/<name>/<split>.jsonl`` (``data_dir`` None: :func:`default_data_dir`), or
    :class:`DatasetNotFoundError` saying where it looked, why there, and how to point
    elsewhere."""
    base = default_data_dir() if data_dir is None else Path(data_dir).expanduser()
    if not base.is_dir():
        raise DatasetNotFoundError(
            f"data directory {str(base)!r} does not exist ({_data_dir_origin(data_dir)}); "
            f"{_HOW_TO_POINT}"
        )
    path = base / name / f"{split}.jsonl"
    if not path.is_file():
        raise DatasetNotFoundError(
            f"dataset file {str(path)!r} does not exist (data directory {str(base)!r}, "
            f"{_data_dir_origin(data_dir)}); {_HOW_TO_POINT}"
        )
    return path


def load_dataset(
    name: str,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    limit: int | None = None,
    split: str = "dev",
) -> list[AttributionExample] | list[SummaryExample]:
    """Load and validate one evaluation set.

    Parameters
    ----------
    name : {"quotesum", "verigran", "kv", "nq", "cnndm", "wice"}
        The set (a folder of ``data_dir``).
    data_dir : str or path-like, default=None
        Folder holding the six set folders. None means :func:`default_data_dir`
        (``$TOKENSHAPLEY_DATA``). Any path is accepted.
    limit : int, default=None
        Keep only the first ``limit`` examples of the file (file order). None keeps all.
    split : str, default="dev"
        File stem inside the set folder (only ``dev`` is shared).

    Returns
    -------
    examples : list of AttributionExample, or list of SummaryExample for ``"cnndm"``
        In file order. Titles are folded into ``Source.text`` and ``gold`` ranges shifted
        accordingly (module docstring).

    Raises
    ------
    InvalidInputError
        Unknown ``name``, or ``limit`` not a positive integer.
    DatasetNotFoundError
        No data folder is given, or it or ``<name>/<split>.jsonl`` does not exist. The
        message names the path, where it came from, and how to point to the data (``--data``
        or ``TOKENSHAPLEY_DATA``).
    DatasetFormatError
        A line is not JSON, misses a field, has duplicate source ids, a span whose
        ``answer[start:end] != text``, a span or gold range citing an unknown source,
        or a gold range outside its source text. The message names the example id.

    Examples
    --------
    >>> ex = load_dataset("quotesum", limit=1)[0]
    >>> ex.id, len(ex.sources), len(ex.spans)
    ('PAQ_val_1234_0', 3, 3)
    >>> ex.sources[0].text.split("\\n")[0], ex.sources[0].metadata["text_offset"]
    ('11th Oklahoma Legislature', 26)
    """
    if not isinstance(name, str):
        raise InvalidInputTypeError(f"name must be a str, got {type(name).__name__}")
    if name not in DATASETS:
        raise InvalidInputError(f"unknown dataset {name!r}; expected one of {list(DATASETS)}")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, Integral):
            raise InvalidInputTypeError(f"limit must be an int or None, got {type(limit).__name__}")
        if limit < 1:
            raise InvalidInputError(f"limit must be >= 1, got {limit}")
    if not isinstance(split, str) or not split:
        raise InvalidInputError(f"split must be a non-empty str, got {split!r}")
    path = dataset_path(name, data_dir, split)

    parse = _parse_summary if name == "cnndm" else _parse_attribution
    out: list[Any] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if limit is not None and len(out) >= limit:
                break
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetFormatError(f"{where}: not valid JSON ({exc})") from None
            if not isinstance(raw, dict):
                raise DatasetFormatError(f"{where}: expected a JSON object, got {type(raw).__name__}")
            ex = parse(raw, where)
            if ex.id in seen:
                raise DatasetFormatError(f"{where}: duplicate example id {ex.id!r}")
            seen.add(ex.id)
            out.append(ex)
    return out


def _field(raw: Mapping[str, Any], key: str, typ: type | tuple[type, ...], where: str) -> Any:
    if key not in raw:
        raise DatasetFormatError(f"{where}: missing field {key!r}")
    val = raw[key]
    if not isinstance(val, typ) or (isinstance(val, bool) and typ is int):
        raise DatasetFormatError(
            f"{where}: field {key!r} should be {getattr(typ, '__name__', typ)}, "
            f"got {type(val).__name__}"
        )
    return val


def _parse_summary(raw: Mapping[str, Any], where: str) -> SummaryExample:
    ex_id = _field(raw, "id", str, where)
    where = f"{where} (example {ex_id!r})"
    return SummaryExample(
        id=ex_id,
        article=_field(raw, "article", str, where),
        highlights=_field(raw, "highlights", str, where),
        meta=dict(raw.get("meta") or {}),
    )


def _parse_attribution(raw: Mapping[str, Any], where: str) -> AttributionExample:
    ex_id = _field(raw, "id", str, where)
    where = f"{where} (example {ex_id!r})"
    question = _field(raw, "question", str, where)
    answer = _field(raw, "answer", str, where)

    sources: list[Source] = []
    offsets: dict[str, int] = {}
    raw_len: dict[str, int] = {}
    for j, s in enumerate(_field(raw, "sources", list, where)):
        if not isinstance(s, dict):
            raise DatasetFormatError(f"{where}: sources[{j}] is not an object")
        sid = _field(s, "id", str, f"{where} sources[{j}]")
        text = _field(s, "text", str, f"{where} sources[{j}]")
        title = s.get("title")
        if title is not None and not isinstance(title, str):
            raise DatasetFormatError(f"{where}: sources[{j}].title should be str or null")
        if sid in offsets:
            raise DatasetFormatError(f"{where}: duplicate source id {sid!r}")
        offset = len(title) + 1 if title is not None else 0
        full = f"{title}\n{text}" if title is not None else text
        offsets[sid] = offset
        raw_len[sid] = len(text)
        sources.append(Source(id=sid, text=full, metadata={"title": title, "text_offset": offset}))

    spans: list[GoldSpan] = []
    for j, sp in enumerate(raw.get("spans") or []):
        w = f"{where} spans[{j}]"
        if not isinstance(sp, dict):
            raise DatasetFormatError(f"{w}: not an object")
        start = _field(sp, "start", int, w)
        end = _field(sp, "end", int, w)
        text = _field(sp, "text", str, w)
        sids = _field(sp, "source_ids", list, w)
        if not 0 <= start < end <= len(answer):
            raise DatasetFormatError(
                f"{w}: expected 0 <= start < end <= len(answer) = {len(answer)}, "
                f"got start={start}, end={end}"
            )
        if answer[start:end] != text:
            raise DatasetFormatError(
                f"{w}: answer[{start}:{end}] = {answer[start:end]!r} != span text {text!r}"
            )
        if not sids:
            raise DatasetFormatError(f"{w}: empty source_ids")
        for sid in sids:
            if sid not in offsets:
                raise DatasetFormatError(
                    f"{w}: cites source {sid!r}, not among source ids {list(offsets)}"
                )
        spans.append(GoldSpan(start=start, end=end, text=text, source_ids=tuple(sids)))

    gold: list[GoldEvidence] = []
    for j, g in enumerate(raw.get("gold") or []):
        w = f"{where} gold[{j}]"
        if not isinstance(g, dict):
            raise DatasetFormatError(f"{w}: not an object")
        sid = _field(g, "source_id", str, w)
        start = _field(g, "start", int, w)
        end = _field(g, "end", int, w)
        if sid not in offsets:
            raise DatasetFormatError(f"{w}: unknown source id {sid!r}")
        if not 0 <= start <= end <= raw_len[sid]:
            raise DatasetFormatError(
                f"{w}: expected 0 <= start <= end <= len(source text) = {raw_len[sid]}, "
                f"got start={start}, end={end}"
            )
        off = offsets[sid]
        gold.append(GoldEvidence(source_id=sid, start=start + off, end=end + off))

    return AttributionExample(
        id=ex_id,
        question=question,
        sources=tuple(sources),
        answer=answer,
        spans=tuple(spans),
        gold=tuple(gold),
        meta=dict(raw.get("meta") or {}),
    )
