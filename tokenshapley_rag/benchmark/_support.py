"""The support benchmark: does an attribution flag a span that is *wrong*?

Two protocols (documented in ``docs/evaluation.md``, section "Support"):

* **Changed answers** (:func:`make_changes`, :func:`run_changed_eval`; span sets quotesum,
  verigran, nq). From each gold span, deterministically (no RNG: choices come from a sha1 of
  the example id, the span offset and the kind), changed answers that differ from the gold
  answer in exactly one keyword: a number changed in its own format, a date shifted, a name
  swapped for one that another source of the example holds (and the span's gold source does
  not), a name invented (taken from another example; no source of this one holds it). The
  unchanged answer is the control: its number/date/name keywords that some source holds word
  for word must *not* be flagged. Each answer is attributed; a span is *flagged* when a
  citation overlapping it is not ``supported`` (or none covers it). The lexical baseline
  flags a span that no source holds verbatim (case-insensitive, whole words).
* **Support set** (:func:`run_support_set_eval`; ``support`` and ``wice``): the whole answer
  is attributed; the claim's score is the mean verdict score of the answer sentences that
  overlap it; AUROC of supported vs not_supported, beside a word-overlap baseline.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tokenshapley_rag._segment import STOPWORDS, find_keywords, spell_number, split_sentences, word_number_value
from tokenshapley_rag._values import all_values
from tokenshapley_rag._types import Source
from tokenshapley_rag.benchmark._data import AttributionExample, GoldSpan, dataset_path, default_data_dir
from tokenshapley_rag.benchmark._metrics import auroc
from tokenshapley_rag.errors import InvalidInputError, TextTooLongError

__all__ = [
    "CHANGE_KINDS",
    "CHANGED_DATASETS",
    "SUPPORT_SET_DATASETS",
    "ChangedAnswer",
    "SupportClaim",
    "Target",
    "add_support_arguments",
    "change_date",
    "change_number",
    "control_spans",
    "flag_span",
    "format_table",
    "holds",
    "lexical_flag",
    "load_support_set",
    "make_changes",
    "name_pool",
    "run_changed_eval",
    "run_support_cli",
    "run_support_set_eval",
    "sentence_scores",
    "swap_name_in_source",
    "targets",
    "truncate_source",
    "word_overlap",
]

#: Kinds of changed answers, in reporting order (the control is reported beside them).
CHANGE_KINDS: tuple[str, ...] = ("number", "date", "name_swap", "name_in_source", "name_invented")
#: Span sets the changed-answers protocol runs on.
CHANGED_DATASETS: tuple[str, ...] = ("quotesum", "verigran", "nq")
#: Sets the support-set protocol runs on (claim-level labels).
SUPPORT_SET_DATASETS: tuple[str, ...] = ("support", "wice")
#: Default cap of the support-set protocol: each source is cut to its first sentences
#: within this many characters (see :func:`truncate_source`).
DEFAULT_SOURCE_CHARS = 6000

_MONTHS = (
    "january february march april may june july august september october november december".split()
)
_MONTH_ABBR = {m[:3]: i + 1 for i, m in enumerate(_MONTHS)}
_MONTH_ABBR["sept"] = 9
_WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())
_MONTH_RE = (
    r"(?P<month>Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)(?P<dot>\.?)"
)
_DATE_FORMS = (
    # June 5, 2021 / June 5th 2021
    re.compile(rf"^{_MONTH_RE}(?P<sep1>\s+)(?P<day>\d{{1,2}})(?P<ord>st|nd|rd|th)?(?P<sep2>,?\s+)(?P<year>\d{{3,4}})$"),
    # 5 June 2021 / 5th of June 2021
    re.compile(rf"^(?P<day>\d{{1,2}})(?P<ord>st|nd|rd|th)?(?P<sep1>\s+(?:of\s+)?){_MONTH_RE}(?P<sep2>\s+)(?P<year>\d{{3,4}})$"),
    # June 2021
    re.compile(rf"^{_MONTH_RE}(?P<sep2>\s+)(?P<year>\d{{4}})$"),
    # 2021-06-05
    re.compile(r"^(?P<year>\d{4})-(?P<mnum>\d{2})-(?P<day>\d{2})$"),
    # a year alone
    re.compile(r"^(?P<year>1\d{3}|20\d{2})$"),
)
_ORDINAL = re.compile(r"(?<!\d)(\d+)(st|nd|rd|th)\b")
_NUMBER_RUN = re.compile(r"\d+(?:[,.\u202f]\d+)*")
_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"\w+")


# --------------------------------------------------------------------------- text helpers


def _hash(*parts: Any) -> int:
    """A stable integer from ``parts`` (sha1; the same on every machine and run)."""
    return int.from_bytes(hashlib.sha1("\x1f".join(map(str, parts)).encode("utf-8")).digest()[:8], "big")


@functools.lru_cache(maxsize=65536)
def _phrase_re(phrase: str) -> re.Pattern[str]:
    body = r"\s+".join(re.escape(w) for w in phrase.split())
    return re.compile(rf"(?<!\w){body}(?!\w)", re.IGNORECASE)


def holds(text: str, phrase: str) -> bool:
    """Whether ``text`` holds ``phrase`` word for word: case-insensitive, as whole words
    (not inside a longer word), any run of whitespace matching any other.

    Examples
    --------
    >>> holds("Paris is big.", "paris"), holds("Parisian food", "Paris"), holds("New\\nYork", "new york")
    (True, False, True)
    """
    phrase = phrase.strip()
    return bool(phrase) and _phrase_re(phrase).search(text) is not None


def lexical_flag(sources: Sequence[Source] | Sequence[str], text: str) -> bool:
    """The lexical baseline: flag ``text`` when no source holds it (:func:`holds`).

    Examples
    --------
    >>> lexical_flag(["It cost 2,850 dollars."], "2,850"), lexical_flag(["It cost 2,850 dollars."], "2,580")
    (False, True)
    """
    return not any(holds(s if isinstance(s, str) else s.text, text) for s in sources)


def _numbers_held(texts: Iterable[str]) -> set[str]:
    """Every number of ``texts``, normalised (thousands separators removed), and every
    maximal run of digits in them (so "1927-29" holds 1927 and 29)."""
    out: set[str] = set()
    for t in texts:
        for m in _NUMBER_RUN.finditer(t):
            out.add(_norm_number(m.group()))
        out.update(m.group() for m in _DIGITS.finditer(t))
    return out


def _norm_number(text: str) -> str:
    """Digits and decimal point of a number: ``"2,850.5"`` -> ``"2850.5"``."""
    core = re.sub(r"(?<=\d)[,\u202f ](?=\d{3}(?!\d))", "", text)
    m = _NUMBER_RUN.search(core)
    return m.group().replace(",", ".") if m else core


def _ordinal_suffix(n: int) -> str:
    if 10 <= n % 100 <= 20:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def _fix_ordinals(text: str) -> str:
    return _ORDINAL.sub(lambda m: m.group(1) + _ordinal_suffix(int(m.group(1))), text)


# --------------------------------------------------------------------------- numbers


def _with_digits(text: str, positions: Sequence[int], digits: Sequence[str]) -> str:
    chars = list(text)
    for p, d in zip(positions, digits):
        chars[p] = d
    return _fix_ordinals("".join(chars))


def _number_candidates(text: str, h: int) -> list[str]:
    """Changed spellings of the number ``text``, in the order tried (see :func:`change_number`)."""
    pos = [i for i, ch in enumerate(text) if ch.isdigit()]
    if not pos:
        return []
    d = [text[p] for p in pos]
    n = len(d)

    def ok(new: Sequence[str]) -> bool:  # no new leading zero in a multi-digit number
        return not (n > 1 and new[0] == "0" and d[0] != "0")

    lead = list(d)
    lead[0] = str(int(d[0]) + 1) if d[0] != "9" else "8"
    swap: list[str] | None = None
    for i in [*range(1, n - 1), 0]:  # the first adjacent pair after the leading digit, else the leading pair
        if i + 1 < n and d[i] != d[i + 1]:
            cand = list(d)
            cand[i], cand[i + 1] = cand[i + 1], cand[i]
            if ok(cand):
                swap = cand
                break
    nz = max((i for i in range(n) if d[i] != "0"), default=n - 1)
    last = list(d)
    v = (int(d[nz]) + 2) % 10
    last[nz] = str(v if v or nz else int(d[nz]) - 2)
    rules = [lead, swap, last]
    k = h % 3
    ordered = rules[k:] + rules[:k]
    # Then every single-digit substitution, left to right, digits ascending.
    for i in range(n):
        for v in "0123456789":
            if v != d[i]:
                cand = list(d)
                cand[i] = v
                ordered.append(cand)
    out: list[str] = []
    for cand in ordered:
        if cand is None or cand == d or not ok(cand):
            continue
        s = _with_digits(text, pos, cand)
        if s not in out:
            out.append(s)
    return out


_NUMBER_WORD_HEAD = re.compile(r"(?i)^(?:(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)-)?[a-z]+")


def change_number_words(text: str, sources: Sequence[str], key: str = "") -> str | None:
    """A number written in words (``word_number_value``) changed in its own format: the
    number part respelled for another value, cardinal or ordinal as before, its capital and
    the rest of a hyphenated word kept ("second-largest" -> "third-largest"). Values tried:
    +1, +2, -1, +3, -2, ... in an order rotated by ``sha1(key)``; the first that no source
    holds (in digits or in words) is returned, None when none is left.

    >>> change_number_words("Second-largest", [], "a"), change_number_words("fifty-seven", ["58"], "a")
    ('Third-largest', 'fifty-nine')
    >>> change_number_words("fifteen", [], "b"), change_number_words("one", [], "a")
    ('seventeen', None)
    """
    value = word_number_value(text)
    head = _NUMBER_WORD_HEAD.match(text)
    if value is None or head is None:
        return None
    number_part = head.group()
    if word_number_value(number_part) != value:  # "forty-two-year-old": the head is "forty-two"
        return None
    ordinal = number_part.casefold().split("-")[-1] not in {spell_number(n) for n in range(2, 20)} | {
        spell_number(n) for n in range(20, 100, 10)
    }
    held = {v for t in sources for _, _, v in all_values(t)}
    n = int(value)
    steps = [1, 2, -1, 3, -2, 4, -3, 5]
    k = _hash(key) % 2
    for step in steps[k:] + steps[:k]:
        word = spell_number(n + step, ordinal=ordinal)
        if word is None or str(n + step) in held:
            continue
        if number_part[:1].isupper():
            word = word[:1].upper() + word[1:]
        return word + text[len(number_part) :]
    return None


def change_number(text: str, sources: Sequence[str], key: str = "") -> str | None:
    """The number ``text`` changed in its own format, or None when every change is held.

    Only digits change, so separators, decimals, currency, units and width stay (an
    ordinal suffix follows its new number); a number in words is respelled in words
    (:func:`change_number_words`). Three rules, tried in an order chosen by
    ``sha1(key)`` (so a set mixes them): the leading digit + 1 (9 -> 8); the first pair of
    adjacent different digits after the leading one swapped; the last non-zero digit
    + 2 (mod 10). Then every single-digit substitution. The first candidate whose value
    (thousands separators removed) no source holds as a number or digit run is returned.

    Examples
    --------
    >>> [change_number("2,850", [], k) for k in ("a", "c", "f")]  # swap, leading digit, last digit
    ['2,580', '3,850', '2,870']
    >>> change_number("2,850", ["2580 and 2,870 and 3,850"], "a")
    '1,850'
    >>> change_number("21st", [], "b"), change_number("$3.5 million", [], "a")
    ('12th', '$5.3 million')
    """
    if not any(ch.isdigit() for ch in text):
        return change_number_words(text, sources, key)
    held = _numbers_held(sources)
    for cand in _number_candidates(text, _hash(key)):
        if _norm_number(cand) in held or cand.casefold() == text.casefold():
            continue
        return cand
    return None


# --------------------------------------------------------------------------- dates


def _parse_date(text: str) -> tuple[re.Match[str], int | None, int | None, int] | None:
    """(match, month, day, year) of a date keyword in one of the supported forms."""
    for form in _DATE_FORMS:
        m = form.match(text.strip())
        if m is None:
            continue
        gd = m.groupdict()
        month = None
        if gd.get("month"):
            month = _MONTH_ABBR.get(gd["month"].lower()[:4] if gd["month"].lower().startswith("sept") else gd["month"].lower()[:3])
        elif gd.get("mnum"):
            month = int(gd["mnum"])
        day = int(gd["day"]) if gd.get("day") else None
        return m, month, day, int(gd["year"])
    return None


def _dates_held(texts: Iterable[str]) -> tuple[set[tuple[int | None, int | None, int]], set[str]]:
    """(month, day, year) of every date keyword of ``texts``, and their digit runs."""
    dates: set[tuple[int | None, int | None, int]] = set()
    for t in texts:
        for kw in find_keywords(t):
            if kw.kind in ("date", "number"):
                p = _parse_date(kw.text)
                if p is not None:
                    dates.add((p[1], p[2], p[3]))
    return dates, _numbers_held(texts)


def _month_name(month: int, like: str) -> str:
    """Month ``month`` spelled like ``like``: full name or abbreviation, same case."""
    full = _MONTHS[month - 1]
    if like.lower() in _MONTHS:
        name = full
    else:  # an abbreviation: Jan, Sept
        name = "sept" if month == 9 and like.lower().startswith("sept") else full[:3]
    if like.isupper() and len(like) > 1:
        return name.upper()
    return name.capitalize() if like[:1].isupper() else name


def _render_date(m: re.Match[str], month: int | None, day: int | None, year: int) -> str:
    gd = m.groupdict()
    text = m.string.strip()
    spans: list[tuple[int, int, str]] = []
    if gd.get("year") is not None:
        spans.append((*m.span("year"), str(year).zfill(len(gd["year"]))))
    if gd.get("month") is not None and month is not None:
        spans.append((*m.span("month"), _month_name(month, gd["month"])))
    if gd.get("mnum") is not None and month is not None:
        spans.append((*m.span("mnum"), f"{month:02d}"))
    if gd.get("day") is not None and day is not None:
        spans.append((*m.span("day"), f"{day:0{len(gd['day'])}d}" if gd["day"].startswith("0") else str(day)))
        if gd.get("ord"):
            spans.append((*m.span("ord"), _ordinal_suffix(day)))
    for a, b, new in sorted(spans, reverse=True):
        text = text[:a] + new + text[b:]
    return text


_YEAR_STEPS = (1, -1, 2, -2, 3, -3, 5, -5, 10, -10, 4, -4, 6, -6, 7, -7, 8, -8, 9, -9)
_MONTH_STEPS = (3, -3, 1, -1, 2, -2, 4, -4, 5, -5, 6)
_DAY_STEPS = (7, -7, 3, -3, 1, -1, 2, -2, 10, -10, 5, -5)


def change_date(text: str, sources: Sequence[str], key: str = "") -> str | None:
    """The date ``text`` shifted in its own format, or None when it is no supported date or
    every shift is held.

    Forms: ``June 5, 2021``, ``5 June 2021`` (ordinals, ``of``, abbreviations kept),
    ``June 2021``, ``2021-06-05`` and a year alone (1000-2099). The shift is one of: the
    year moved by k (1, -1, 2, -2, 3, -3, 5, ...), the month moved by k (3, -3, 1, ...), the
    day moved by k (7, -7, 3, ...; within 1..28 of a month), the kinds applicable to the
    form tried in an order chosen by ``sha1(key)``. A candidate is rejected when any source
    holds the same (month, day, year) as a date, or, for a year alone, holds the year as a
    digit run.

    Examples
    --------
    >>> change_date("1927", [], "a"), change_date("1927", ["in 1928"], "a")
    ('1928', '1926')
    >>> change_date("June 5th, 2021", [], "a"), change_date("June 5, 2021", [], "c"), change_date("5 Sept 2021", [], "f")
    ('September 5th, 2021', 'June 5, 2022', '12 Sept 2021')
    >>> change_date("2021-06-05", [], "b"), change_date("5th of Jan. 2021", [], "a")
    ('2021-09-05', '5th of Apr. 2021')
    """
    parsed = _parse_date(text)
    if parsed is None:
        return None
    m, month, day, year = parsed
    dates, numbers = _dates_held(sources)
    rules: list[list[tuple[int | None, int | None, int]]] = [
        [(month, day, year + k) for k in _YEAR_STEPS if 1000 <= year + k <= 2099],
    ]
    if month is not None:
        rules.append([((month - 1 + k) % 12 + 1, day, year) for k in _MONTH_STEPS])
    if day is not None:
        rules.append([(month, day + k, year) for k in _DAY_STEPS if 1 <= day + k <= 28])
    k = _hash(key) % len(rules)
    for cands in rules[k:] + rules[:k]:
        for mo, dy, yr in cands:
            if (mo, dy, yr) == (month, day, year) or (mo, dy, yr) in dates:
                continue
            if month is None and day is None and str(yr) in numbers:
                continue
            new = _render_date(m, mo, dy, yr)
            if new.casefold() != text.strip().casefold() and not any(holds(s, new) for s in sources):
                return new
    return None


# --------------------------------------------------------------------------- targets


@dataclass(frozen=True, slots=True)
class Target:
    """A keyword of a gold span that a changed answer can change.

    ``kind`` is ``"number"``, ``"date"`` (a date keyword, or a number that is a bare year
    1000-2099) or ``"name"``; ``span_index`` is the gold span it lies in.
    """

    start: int
    end: int
    text: str
    kind: str
    span_index: int


def _kind_of(answer: str, kw: Any) -> str | None:
    text = kw.text
    glued = (kw.start > 0 and answer[kw.start - 1].isalnum()) or (kw.end < len(answer) and answer[kw.end].isalnum())
    if kw.kind == "date":
        return "date" if _parse_date(text) else None
    if kw.kind == "number":
        if glued or not (any(ch.isdigit() for ch in text) or word_number_value(text)):
            return None
        return "date" if _DATE_FORMS[-1].match(text) else "number"
    if kw.kind == "name":
        low = text.casefold()
        if glued or len(text) < 2 or low in STOPWORDS or low in _MONTHS or low in _MONTH_ABBR or low in _WEEKDAYS:
            return None
        if any(ch.isdigit() for ch in text):
            return None
        return "name"
    return None


def targets(example: AttributionExample) -> list[Target]:
    """Number, date and name keywords of ``example``'s gold spans, in answer order.

    Keywords are :func:`~tokenshapley_rag._segment.find_keywords` of the whole answer (so a
    name keeps its kind in context) that lie entirely inside a gold span; each keyword
    counts once even when gold spans overlap. A capitalised single word that is a whole gold
    span (an NQ answer "Tennessee") counts as a name; a name's possessive ending is left out of
    the target ("Zeldin’s" -> "Zeldin"). Excluded: names that are a month, weekday or
    stopword, or hold a digit; numbers glued to letters ("COVID19"); date keywords in a form
    :func:`change_date` does not know.

    Examples
    --------
    >>> ex = AttributionExample("t", "q", (Source("a", "x"),), "Paris had 2,850 people in 1927.",
    ...                         (GoldSpan(0, 30, "Paris had 2,850 people in 1927", ("a",)),))
    >>> [(t.text, t.kind) for t in targets(ex)]  # "Paris" opens the sentence: a word, not a name
    [('2,850', 'number'), ('1927', 'date')]
    """
    out: list[Target] = []
    seen: set[tuple[int, int]] = set()
    whole = {(sp.start, sp.end) for sp in example.spans}
    for kw in find_keywords(example.answer):
        if kw.kind == "word" and (kw.start, kw.end) in whole and kw.text[:1].isupper():
            kw = type(kw)(kw.start, kw.end, kw.text, "name")  # a capitalised word that is a whole gold span
        kind = _kind_of(example.answer, kw)
        if kind is None or (kw.start, kw.end) in seen:
            continue
        text = _strip_possessive(kw.text) if kind == "name" else kw.text
        for i, sp in enumerate(example.spans):
            if sp.start <= kw.start and kw.end <= sp.end:
                out.append(Target(kw.start, kw.start + len(text), text, kind, i))
                seen.add((kw.start, kw.end))
                break
    return out


_POSSESSIVE = re.compile(r"(?:['’]s|['’])$")


def _strip_possessive(name: str) -> str:
    """``name`` without a possessive ending or trailing apostrophe ("Zeldin’s" -> "Zeldin")."""
    return _POSSESSIVE.sub("", name)


# --------------------------------------------------------------------------- names


_CONTINUES = re.compile(r"[^.!?\n]*?\w")


def _sentence_initial(text: str, start: int) -> bool:
    """Whether only spaces stand between ``start`` and the text's start or a sentence end."""
    i = start - 1
    while i >= 0 and text[i].isspace():
        i -= 1
    return i < 0 or text[i] in ".!?\n"


def _opens_sentence(text: str, start: int, end: int) -> bool:
    """Whether the capitalised run ``text[start:end]`` opens a sentence that goes on after
    it (then its capital may be the sentence's, not a name's: "Considering Congress ...")."""
    return _sentence_initial(text, start) and _CONTINUES.match(text, end) is not None


def _names(text: str) -> list[str]:
    """Name keywords of ``text`` (first occurrences, in order) usable as replacements:
    filtered as targets are, possessive dropped, at least 3 characters, and not opening a
    sentence that goes on (a capitalised opener is often no name: "Considering Congress")."""
    out: list[str] = []
    seen: set[str] = set()
    for kw in find_keywords(text):
        if kw.kind != "name" or _kind_of(text, kw) != "name" or _opens_sentence(text, kw.start, kw.end):
            continue
        name = _strip_possessive(kw.text)
        if "\n" in name or name.split()[-1].casefold() in STOPWORDS:  # "UK. The": two sentences
            continue
        if len(name) >= 3 and name.casefold() not in seen:
            seen.add(name.casefold())
            out.append(name)
    return out


def _pick(cands: Sequence[str], target: str, h: int) -> str | None:
    """A candidate with as many words as ``target`` when there is one, by ``h``."""
    if not cands:
        return None
    n = len(target.split())
    same = [c for c in cands if len(c.split()) == n]
    pool = same or list(cands)
    return pool[h % len(pool)]


def _name_ok(cand: str, target: str, answer: str) -> bool:
    c, t = cand.casefold(), target.casefold()
    return c != t and c not in t and t not in c and not holds(answer, cand)


def swap_name(example: AttributionExample, target: Target, key: str = "") -> str | None:
    """A name another source of ``example`` holds and no gold source of ``target``'s span
    does (nor the answer), with as many words as the target when possible; None if none.

    Candidates are the name keywords of the non-gold sources (titles included), in source
    and then text order; the pick among them is ``sha1(key)`` modulo their number.
    """
    gold = example.spans[target.span_index].source_ids
    gold_texts = [s.text for s in example.sources if s.id in gold]
    others = [s.text for s in example.sources if s.id not in gold]
    return _pick(_name_candidates(others, target, example.answer, gold_texts), target.text, _hash(key))


def _name_candidates(texts: Iterable[str], target: Target, answer: str, avoid: Sequence[str]) -> list[str]:
    """The usable names (:func:`_names`) of ``texts``, in order, once each: not the target
    nor the answer's (:func:`_name_ok`), and held by none of ``avoid``."""
    cands: list[str] = []
    for text in texts:
        for nm in _names(text):
            if nm not in cands and _name_ok(nm, target.text, answer) and not any(holds(t, nm) for t in avoid):
                cands.append(nm)
    return cands


def swap_name_in_source(example: AttributionExample, target: Target, key: str = "") -> str | None:
    """A name that another sentence of a gold source of ``target``'s span holds, and that no
    sentence of that source holding the target does (nor the answer), with as many words as
    the target when possible; None if none ("Lionel Messi won the Golden Ball." -> "Kylian
    Mbappé won ...", when the next sentence of the page says Mbappé won the Golden Boot).

    Candidates are the name keywords (as for :func:`swap_name`) of the sentences
    (:func:`split_sentences`) of the span's gold sources that do not hold the target, in
    source and then text order; the pick among them is ``sha1(key)`` modulo their number.
    """
    gold = example.spans[target.span_index].source_ids
    cands: list[str] = []
    for s in example.sources:
        if s.id not in gold:
            continue
        sentences = [s.text[a:b] for a, b in split_sentences(s.text)]
        holding = [t for t in sentences if holds(t, target.text)]
        others = [t for t in sentences if t not in holding]
        cands += [nm for nm in _name_candidates(others, target, example.answer, holding) if nm not in cands]
    return _pick(cands, target.text, _hash(key))


def name_pool(examples: Iterable[AttributionExample]) -> list[tuple[str, str]]:
    """``(example id, name)`` of every name target of ``examples`` (file order) of at least
    3 characters that does not open a longer sentence: where invented names come from."""
    return [
        (ex.id, t.text)
        for ex in examples
        for t in targets(ex)
        if t.kind == "name" and len(t.text) >= 3 and not _opens_sentence(ex.answer, t.start, t.end)
    ]


def invent_name(example: AttributionExample, target: Target, pool: Sequence[tuple[str, str]], key: str = "") -> str | None:
    """A name from another example of ``pool`` that no source of ``example`` holds (nor its
    answer or question), with as many words as the target when possible; None if none."""
    texts = [s.text for s in example.sources] + [example.question]
    seen: set[str] = set()
    cands: list[str] = []
    for ex_id, nm in pool:
        if ex_id == example.id or nm.casefold() in seen:
            continue
        seen.add(nm.casefold())
        if _name_ok(nm, target.text, example.answer) and not any(holds(t, nm) for t in texts):
            cands.append(nm)
    return _pick(cands, target.text, _hash(key))


# --------------------------------------------------------------------------- changed answers


@dataclass(frozen=True, slots=True)
class ChangedAnswer:
    """An answer that differs from the gold answer in exactly one keyword.

    ``answer[start:end] == new``; ``orig_start`` / ``orig_end`` locate ``old`` in the gold
    answer. ``kind`` is one of :data:`CHANGE_KINDS`.
    """

    example_id: str
    kind: str
    answer: str
    start: int
    end: int
    old: str
    new: str
    orig_start: int
    orig_end: int
    span_index: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "start": self.start, "end": self.end, "old": self.old, "new": self.new,
            "orig_start": self.orig_start, "orig_end": self.orig_end, "span_index": self.span_index,
        }


def _replace(example: AttributionExample, t: Target, kind: str, new: str) -> ChangedAnswer:
    a = example.answer
    return ChangedAnswer(
        example.id, kind, a[: t.start] + new + a[t.end :], t.start, t.start + len(new), t.text, new, t.start, t.end,
        t.span_index,
    )


def make_changes(example: AttributionExample, pool: Sequence[tuple[str, str]] = ()) -> list[ChangedAnswer]:
    """Every changed answer of ``example``: for each gold span, one per applicable kind.

    For each gold span and kind (number, date, name_swap, name_in_source, name_invented)
    the span's first target of that kind (:func:`targets`) for which a change exists is
    changed (:func:`change_number`, :func:`change_date`, :func:`swap_name`,
    :func:`swap_name_in_source`, :func:`invent_name`;
    ``key = example.id | target start | kind``). Pure and deterministic: the same example
    and pool give the same list. ``pool`` is :func:`name_pool` of the set (no invented names
    when empty).
    """
    texts = [s.text for s in example.sources]
    out: list[ChangedAnswer] = []
    tg = targets(example)
    for si in range(len(example.spans)):
        mine = [t for t in tg if t.span_index == si]
        for kind in CHANGE_KINDS:
            want = "name" if kind.startswith("name") else kind
            for t in (t for t in mine if t.kind == want):
                key = f"{example.id}|{t.start}|{kind}"
                if kind == "number":
                    new = change_number(t.text, texts, key)
                elif kind == "date":
                    new = change_date(t.text, texts, key)
                elif kind == "name_swap":
                    new = swap_name(example, t, key)
                elif kind == "name_in_source":
                    new = swap_name_in_source(example, t, key)
                else:
                    new = invent_name(example, t, pool, key)
                if new is not None:
                    out.append(_replace(example, t, kind, new))
                    break
    return out


def control_spans(example: AttributionExample) -> list[Target]:
    """The targets of the unchanged answer that some source holds word for word."""
    return [t for t in targets(example) if not lexical_flag(example.sources, t.text)]


# --------------------------------------------------------------------------- flagging


def flag_span(citations: Iterable[Any], start: int, end: int) -> dict[str, Any]:
    """Whether the answer span ``[start, end)`` is flagged.

    Flagged when a :class:`~tokenshapley_rag.KeywordCitation` overlapping it
    (``c.start < end and c.end > start``) has a ``status`` other than ``"supported"``, or
    when no citation overlaps it (an answer span the attribution does not cite cannot be
    called supported).

    Returns ``{"flagged", "covered", "statuses", "texts", "supports", "kinds", "best",
    "conflict"}``: for the overlapping citations, in answer order, their statuses, texts,
    support values, kinds, best source ``[id, sentence]`` and conflicting source
    ``[id, sentence]`` (None where absent).

    Examples
    --------
    >>> from tokenshapley_rag import KeywordCitation
    >>> cs = [KeywordCitation("Paris", 0, 5, (), True, 0.9, "supported", "name"),
    ...       KeywordCitation("1929", 9, 13, (), False, 0.0, "contradicted", "date")]
    >>> flag_span(cs, 0, 5)["flagged"], flag_span(cs, 9, 13)["flagged"], flag_span(cs, 6, 8)["flagged"]
    (False, True, True)
    """
    over = [c for c in citations if c.start < end and c.end > start]
    statuses = [str(c.status) for c in over]
    return {
        "flagged": not over or any(s != "supported" for s in statuses),
        "covered": bool(over),
        "statuses": statuses,
        "texts": [c.text for c in over],
        "supports": [float(c.support) for c in over],
        "kinds": [c.kind for c in over],
        "best": [[c.best.source_id, c.best.sentence[:240]] if c.best is not None else None for c in over],
        "conflict": [[c.conflict.source_id, c.conflict.sentence[:240]] if c.conflict is not None else None for c in over],
    }


# --------------------------------------------------------------------------- runners


def _iterate(examples, header, compute, *, resume_path, progress, desc):
    from tokenshapley_rag.benchmark._protocols import _iterate as iterate

    return iterate(examples, header, compute, resume_path=resume_path, progress=progress, desc=desc)


def _mean(xs: Sequence[float]) -> float | None:
    return float(np.mean(xs)) if len(xs) else None


def _attribute(ts: Any, query: str, sources: Sequence[Source], response: str) -> tuple[Any, float]:
    t0 = time.perf_counter()
    res = ts.attribute(query=query, sources=list(sources), response=response)
    return res, time.perf_counter() - t0


def _changed_metrics(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    changed = [c for r in rows for c in r.get("changed", [])]
    per_kind: dict[str, Any] = {}
    for kind in CHANGE_KINDS:
        cs = [c for c in changed if c["kind"] == kind]
        flagged = [c for c in cs if c["flagged"]]
        entry: dict[str, Any] = {
            "n": len(cs),
            "flagged": _mean([c["flagged"] for c in cs]),
            "lexical_flagged": _mean([c["lexical"] for c in cs]),
            "n_uncovered": sum(1 for c in cs if not c["covered"]),
        }
        if kind in ("number", "date"):
            entry["contradicted_of_flagged"] = _mean([any(s == "contradicted" for s in c["statuses"]) for c in flagged])
        per_kind[kind] = entry
    ctrl = [s for r in rows for s in r.get("control", [])]
    control = {
        "n": len(ctrl),
        "flagged": _mean([s["flagged"] for s in ctrl]),
        "lexical_flagged": _mean([s["lexical"] for s in ctrl]),
        "n_uncovered": sum(1 for s in ctrl if not s["covered"]),
        "per_target_kind": {
            k: {"n": sum(1 for s in ctrl if s["kind"] == k), "flagged": _mean([s["flagged"] for s in ctrl if s["kind"] == k])}
            for k in ("number", "date", "name")
        },
    }
    skipped: dict[str, int] = {}
    for r in rows:
        for k, v in (r.get("no_change") or {}).items():
            skipped[k] = skipped.get(k, 0) + v
    return {
        "per_kind": per_kind,
        "control": control,
        "n_examples": len(rows),
        "n_changed_answers": len(changed),
        "n_targets_without_change": skipped,
        "seconds_per_attribution": _mean([s for r in rows for s in r.get("seconds", [])]),
    }


def run_changed_eval(
    dataset_name: str,
    ts: Any,
    examples: Sequence[AttributionExample],
    *,
    pool: Sequence[tuple[str, str]] | None = None,
    max_per_kind: int | None = None,
    progress: bool = True,
    resume_path: str | os.PathLike[str] | None = None,
    extra_config: Mapping[str, Any] | None = None,
) -> Any:
    """The changed-answers protocol on a span set (module docstring, docs/evaluation.md).

    For each example with gold spans: the unchanged answer is attributed once (its control
    spans, :func:`control_spans`, are judged in it) and every :func:`make_changes` answer
    once; each changed span and control span gets :func:`flag_span` and the lexical
    baseline (:func:`lexical_flag`). ``ts`` needs ``attribute(query=, sources=, response=)``.
    ``max_per_kind`` keeps at most that many changed answers of each kind per example (the
    first in span order; None keeps all), to bound the run time.

    Returns
    -------
    EvalReport
        ``metrics["per_kind"][kind]``: ``n``, ``flagged`` (share), ``lexical_flagged``,
        ``n_uncovered``, and for number/date ``contradicted_of_flagged``;
        ``metrics["control"]``: ``n``, ``flagged``, ``lexical_flagged``, ``n_uncovered``.
    """
    from tokenshapley_rag.benchmark._runner import EvalReport

    if dataset_name not in CHANGED_DATASETS:
        raise InvalidInputError(f"the changed-answers protocol is for {list(CHANGED_DATASETS)}, got {dataset_name!r}")
    examples = [ex for ex in examples if ex.spans]
    pool = name_pool(examples) if pool is None else list(pool)
    header = {
        "dataset": dataset_name, "method": "tokenshapley", "protocol": "support-changed", "max_per_kind": max_per_kind,
    }

    def compute(ex: AttributionExample) -> dict[str, Any]:
        seconds: list[float] = []
        row: dict[str, Any] = {"control": [], "changed": [], "seconds": seconds}
        srcs = list(ex.sources)
        try:
            res, sec = _attribute(ts, ex.question, srcs, ex.answer)
            seconds.append(sec)
            for t in control_spans(ex):
                f = flag_span(res.citations, t.start, t.end)
                row["control"].append({"text": t.text, "kind": t.kind, "start": t.start, "end": t.end, "lexical": False, **f})
            every = make_changes(ex, pool)
            changes = _capped(every, max_per_kind)
            tg = targets(ex)
            done = {(c.span_index, c.kind) for c in every}
            row["no_change"] = {
                kind: sum(
                    1 for si in {t.span_index for t in tg if t.kind == ("name" if kind.startswith("name") else kind)}
                    if (si, kind) not in done
                )
                for kind in CHANGE_KINDS
            }
            for ch in changes:
                res, sec = _attribute(ts, ex.question, srcs, ch.answer)
                seconds.append(sec)
                f = flag_span(res.citations, ch.start, ch.end)
                sent = next(((a, b) for a, b in split_sentences(ch.answer) if a <= ch.start < b), (0, len(ch.answer)))
                row["changed"].append(
                    {**ch.to_dict(), "lexical": lexical_flag(srcs, ch.new), "sentence": ch.answer[sent[0] : sent[1]][:400], **f}
                )
        except TextTooLongError as err:
            return {"skipped": "too_long", "message": str(err)[:300]}
        return row

    rows, n_resumed, path = _iterate(
        examples, header, compute, resume_path=resume_path, progress=progress, desc=f"support/{dataset_name}"
    )
    kept = [r for r in rows if "skipped" not in r]
    metrics = _changed_metrics(kept)
    metrics["n_skipped"] = len(rows) - len(kept)
    config: dict[str, Any] = {
        "protocol": "changed answers: one keyword of a gold span changed per answer; flagged = a citation "
        "overlapping it is not 'supported', or none covers it",
        "kinds": list(CHANGE_KINDS),
        "control": "number/date/name keywords of gold spans in the unchanged answer that some source holds "
        "word for word (case-insensitive, whole words)",
        "lexical_baseline": "flags a span no source holds word for word (case-insensitive, whole words)",
        "name_pool_size": len(pool),
        "max_per_kind": max_per_kind,
        "n_resumed": n_resumed,
        "resume_path": str(path) if path is not None else None,
    }
    if extra_config:
        config.update(dict(extra_config))
    secs = [sum(r["seconds"]) for r in kept]
    return EvalReport(
        dataset=dataset_name, method="tokenshapley", n=len(kept), metrics=metrics,
        seconds_per_example=_mean(secs) or 0.0, config=config, records=tuple(rows),
    )


def _capped(changes: list[ChangedAnswer], cap: int | None) -> list[ChangedAnswer]:
    if cap is None:
        return changes
    count: dict[str, int] = {}
    out = []
    for c in changes:
        count[c.kind] = count.get(c.kind, 0) + 1
        if count[c.kind] <= cap:
            out.append(c)
    return out


# --------------------------------------------------------------------------- support set


@dataclass(frozen=True, slots=True)
class SupportClaim:
    """One row of a claim-labelled set: the answer, the claim span in it and its label."""

    id: str
    question: str
    sources: tuple[Source, ...]
    answer: str
    start: int
    end: int
    label: str
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def claim(self) -> str:
        return self.answer[self.start : self.end]


def load_support_set(data_dir: str | os.PathLike[str] | None = None, *, limit: int | None = None) -> list[SupportClaim]:
    """Read ``<data_dir>/support/dev.jsonl`` (schema in its PROVENANCE.md); titles are folded
    into the source text as :func:`~tokenshapley_rag.benchmark.load_dataset` does."""
    path = dataset_path("support", data_dir)
    out: list[SupportClaim] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if limit is not None and len(out) >= limit:
                break
            if not line.strip():
                continue
            raw = json.loads(line)
            srcs = tuple(
                Source(
                    str(s["id"]),
                    s["text"] if s.get("title") is None else f"{s['title']}\n{s['text']}",
                    {"title": s.get("title"), "text_offset": 0 if s.get("title") is None else len(s["title"]) + 1},
                )
                for s in raw["sources"]
            )
            c = raw["claim"]
            if raw["answer"][c["start"] : c["end"]] != c["text"]:
                raise InvalidInputError(f"{path}:{lineno}: claim offsets do not match its text")
            out.append(
                SupportClaim(raw["id"], raw["question"], srcs, raw["answer"], c["start"], c["end"], raw["label"], raw.get("meta") or {})
            )
    return out


def _wice_claims(examples: Sequence[AttributionExample]) -> list[SupportClaim]:
    return [
        SupportClaim(ex.id, ex.question, ex.sources, ex.answer, 0, len(ex.answer), str(ex.meta.get("label")), ex.meta)
        for ex in examples
    ]


def truncate_source(text: str, max_chars: int | None) -> str:
    """``text`` cut to its first sentences that fit in ``max_chars`` characters (a first
    sentence longer than that is cut at the last space before the cap); unchanged when
    ``max_chars`` is None or the text is short enough.

    >>> truncate_source("One two. Three four. Five.", 20)
    'One two. Three four.'
    """
    if max_chars is None or len(text) <= max_chars:
        return text
    end = 0
    for _a, b in split_sentences(text):
        if b > max_chars:
            break
        end = b
    if end == 0:
        cut = text.rfind(" ", 0, max_chars)
        end = cut if cut > 0 else max_chars
    return text[:end]


def word_overlap(claim: str, sources: Sequence[Source] | Sequence[str]) -> float:
    """Share of the claim's content words (``\\w+``, lowercased, stopwords removed) that
    occur in the sources; 1.0 when the claim has no content word.

    >>> word_overlap("The tower is in Paris", ["Paris is a city."])
    0.5
    """
    words = [w for w in (x.lower() for x in _WORD.findall(claim)) if w not in STOPWORDS]
    if not words:
        return 1.0
    vocab = {w.lower() for s in sources for w in _WORD.findall(s if isinstance(s, str) else s.text)}
    return sum(w in vocab for w in words) / len(words)


def sentence_scores(result: Any) -> list[dict[str, Any]]:
    """The answer-sentence verdicts of ``result`` (``AttributionResult.sentences``) as
    ``{"start", "end", "score", "verdict"}`` dicts, in answer order."""
    return [
        {"start": int(s.start), "end": int(s.end), "score": float(s.score), "verdict": s.verdict}
        for s in result.sentences
    ]


def _claim_score(sents: Sequence[Mapping[str, Any]], start: int, end: int) -> tuple[float | None, list[Any]]:
    over = [s for s in sents if s["start"] < end and s["end"] > start]
    if not over:
        return None, []
    return float(np.mean([s["score"] for s in over])), [s["verdict"] for s in over]


def _separation(scores: Sequence[float], labels: Sequence[str]) -> dict[str, Any]:
    y = [lb == "supported" for lb in labels]
    keep = [i for i, lb in enumerate(labels) if lb in ("supported", "not_supported")]
    ys = [y[i] for i in keep]
    return {
        "auroc": auroc([scores[i] for i in keep], ys) if keep and any(ys) and not all(ys) else None,
        "n_supported": sum(ys),
        "n_not_supported": len(ys) - sum(ys),
    }


def run_support_set_eval(
    dataset_name: str,
    ts: Any,
    claims: Sequence[SupportClaim],
    *,
    max_source_chars: int | None = DEFAULT_SOURCE_CHARS,
    progress: bool = True,
    resume_path: str | os.PathLike[str] | None = None,
    extra_config: Mapping[str, Any] | None = None,
) -> Any:
    """The support-set protocol: AUROC of the claim's answer-sentence verdict score.

    Each row's whole answer is attributed (query = the question, sources cut by
    :func:`truncate_source` to ``max_source_chars``). The claim's score is the mean
    ``score`` of the answer sentences overlapping the claim (:func:`sentence_scores`;
    ``SentenceVerdict.score``).
    Reported: AUROC supported vs not_supported (other labels, e.g. WiCE's
    partially_supported, left out of it), beside the word-overlap baseline
    (:func:`word_overlap`) over the same cut sources and over the full sources.
    """
    from tokenshapley_rag.benchmark._runner import EvalReport

    if dataset_name not in SUPPORT_SET_DATASETS:
        raise InvalidInputError(f"the support-set protocol is for {list(SUPPORT_SET_DATASETS)}, got {dataset_name!r}")
    header = {"dataset": dataset_name, "method": "tokenshapley", "protocol": "support-set", "max_source_chars": max_source_chars}

    def compute(cl: SupportClaim) -> dict[str, Any]:
        cut = [Source(s.id, truncate_source(s.text, max_source_chars), s.metadata) for s in cl.sources]
        cut = [s for s in cut if s.text.strip()]
        row: dict[str, Any] = {
            "label": cl.label,
            "subset": cl.meta.get("subset"),
            "source_chars": sum(len(s.text) for s in cl.sources),
            "source_chars_used": sum(len(s.text) for s in cut),
            "overlap": word_overlap(cl.claim, cut),
            "overlap_full": word_overlap(cl.claim, cl.sources),
        }
        try:
            res, sec = _attribute(ts, cl.question, cut, cl.answer)
        except TextTooLongError as err:
            return {**row, "skipped": "too_long", "message": str(err)[:300]}
        sents = sentence_scores(res)
        score, verdicts = _claim_score(sents, cl.start, cl.end)
        inside = [c for c in res.citations if c.start < cl.end and c.end > cl.start]
        sup = [float(c.support) for c in inside]
        return {
            **row,
            "seconds": sec,
            "score": 0.0 if score is None else score,
            "no_sentence": score is None,
            "verdicts": verdicts,
            "keyword_support_mean": float(np.mean(sup)) if sup else 0.0,
            "keyword_support_min": float(np.min(sup)) if sup else 0.0,
            "share_flagged_keywords": _mean([c.status != "supported" for c in inside]) or 0.0,
        }

    rows, n_resumed, path = _iterate(
        claims, header, compute, resume_path=resume_path, progress=progress, desc=f"support-set/{dataset_name}"
    )
    kept = [r for r in rows if "skipped" not in r]
    labels = [r["label"] for r in kept]
    metrics: dict[str, Any] = {
        "verdict_score": _separation([r["score"] for r in kept], labels),
        "word_overlap": _separation([r["overlap"] for r in kept], labels),
        "word_overlap_full_sources": _separation([r["overlap_full"] for r in kept], labels),
        "keyword_support_mean": _separation([r["keyword_support_mean"] for r in kept], labels),
        "keyword_support_min": _separation([r["keyword_support_min"] for r in kept], labels),
        "share_flagged_keywords": _separation([-r["share_flagged_keywords"] for r in kept], labels),
        "n_examples": len(kept),
        "n_skipped": len(rows) - len(kept),
        "n_truncated": sum(1 for r in kept if r["source_chars_used"] < r["source_chars"]),
        "n_no_sentence": sum(1 for r in kept if r.get("no_sentence")),
        "seconds_per_example": _mean([r["seconds"] for r in kept]),
    }
    if dataset_name == "wice":
        pv = [r for r in kept if r["label"] in ("partially_supported", "not_supported")]
        metrics["verdict_score_partial_vs_not"] = (
            auroc([r["score"] for r in pv], [r["label"] == "partially_supported" for r in pv])
            if pv and len({r["label"] for r in pv}) == 2 else None
        )
    subsets = sorted({r["subset"] for r in kept if r.get("subset")})
    if subsets:
        metrics["per_subset"] = {
            sub: {
                "verdict_score": _separation([r["score"] for r in kept if r["subset"] == sub], [r["label"] for r in kept if r["subset"] == sub]),
                "word_overlap": _separation([r["overlap"] for r in kept if r["subset"] == sub], [r["label"] for r in kept if r["subset"] == sub]),
            }
            for sub in subsets
        }
    verdicts = sorted({str(v) for r in kept for v in r.get("verdicts", [])})
    metrics["verdicts_by_label"] = {
        lb: {v: sum(1 for r in kept if r["label"] == lb for x in r.get("verdicts", []) if str(x) == v) for v in verdicts}
        for lb in sorted(set(labels))
    }
    config: dict[str, Any] = {
        "protocol": "support set: claim score = mean verdict score of the answer sentences overlapping the claim; "
        "AUROC supported vs not_supported",
        "max_source_chars": max_source_chars,
        "cap": "each source cut to its first sentences within max_source_chars characters (truncate_source)",
        "word_overlap_baseline": "share of the claim's content words (lowercased, stopwords removed) found in the sources",
        "sentence_score": "AttributionResult.sentences[].score (SentenceVerdict.score, in [-1, 1])",
        "n_resumed": n_resumed,
        "resume_path": str(path) if path is not None else None,
    }
    if extra_config:
        config.update(dict(extra_config))
    return EvalReport(
        dataset=dataset_name, method="tokenshapley", n=len(kept), metrics=metrics,
        seconds_per_example=metrics["seconds_per_example"] or 0.0, config=config, records=tuple(rows),
    )


# --------------------------------------------------------------------------- CLI


def add_support_arguments(parser: argparse.ArgumentParser) -> None:
    """``--protocol support``, ``--max-per-kind N`` (changed answers) and
    ``--max-source-chars N`` (support-set cap)."""
    parser.add_argument(
        "--protocol",
        choices=["support"],
        default=None,
        help="support: changed answers on quotesum/verigran/nq, claim AUROC on support/wice (docs/evaluation.md)",
    )
    parser.add_argument(
        "--max-per-kind",
        type=int,
        default=None,
        metavar="N",
        help="changed answers: at most N of each kind per example (the first spans; default: all)",
    )
    parser.add_argument(
        "--max-source-chars",
        type=int,
        default=DEFAULT_SOURCE_CHARS,
        metavar="N",
        help=f"support set: cut each source to its first sentences within N chars (default {DEFAULT_SOURCE_CHARS}; 0: no cap)",
    )


def wants_support(args: argparse.Namespace) -> bool:
    """Whether ``args`` ask for a support protocol."""
    return getattr(args, "protocol", None) == "support" or args.dataset == "support"


def run_support_cli(args: argparse.Namespace, attributor_factory: Callable[[str, Any], Any]) -> int:
    """``tokenshapley eval --protocol support`` / ``--dataset support``: run, print, write."""
    from tokenshapley_rag.benchmark._runner import emit_report, partial_path
    from tokenshapley_rag.benchmark._data import load_dataset

    ds = args.dataset
    if ds not in CHANGED_DATASETS + SUPPORT_SET_DATASETS:
        print(f"error: the support protocol runs on {list(CHANGED_DATASETS + SUPPORT_SET_DATASETS)}, not {ds!r}", file=sys.stderr)
        return 2
    if args.method != "tokenshapley":
        print("error: the support protocol needs --method tokenshapley (it reads citation statuses)", file=sys.stderr)
        return 2
    json_out = getattr(args, "json", None)
    if args.resume and json_out is None:
        print("error: --resume needs --json OUT (the partial file is OUT.partial.jsonl)", file=sys.stderr)
        return 2
    if ds == "support":
        items: Any = load_support_set(args.data, limit=args.limit)
    else:
        items = load_dataset(ds, args.data, limit=args.limit)
        full = load_dataset(ds, args.data) if args.limit is not None else items
    attributor = attributor_factory("tokenshapley", args)
    ts = getattr(attributor, "ts", attributor)
    resume = None
    if json_out is not None:
        resume = partial_path(json_out)
        if not args.resume and resume.exists():
            resume.unlink()
    extra = {
        "data": str(Path(args.data) if args.data is not None else default_data_dir()),
        "split": "dev",
        "limit": args.limit,
        **({"method_config": ts.config} if hasattr(ts, "config") else {}),
    }
    if ds in CHANGED_DATASETS:
        cap = args.max_per_kind if args.max_per_kind and args.max_per_kind > 0 else None
        report = run_changed_eval(
            ds, ts, items, pool=name_pool(full), max_per_kind=cap, resume_path=resume, extra_config=extra
        )
    else:
        if ds == "wice":
            items = _wice_claims(items)
        cap = args.max_source_chars if args.max_source_chars and args.max_source_chars > 0 else None
        report = run_support_set_eval(ds, ts, items, max_source_chars=cap, resume_path=resume, extra_config=extra)
    out = report.to_json()
    emit_report(out, json_out)
    print(format_table(out), file=sys.stderr)
    return 0


def _pct(x: Any) -> str:
    return "n/a" if x is None else f"{100 * x:5.1f}%"


def _f3(x: Any) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def format_table(report: Mapping[str, Any]) -> str:
    """A plain-text table of a support report (``EvalReport.to_json()``)."""
    m = report["metrics"]
    lines = [f"{report['dataset']} / support: n={report['n']}  s/example={report['seconds_per_example']:.2f}"]
    if "per_kind" in m:
        lines.append(f"{'kind':<15}{'n':>6}{'flagged':>10}{'lexical':>10}{'uncovered':>11}{'contradicted':>14}")
        for kind, e in m["per_kind"].items():
            lines.append(
                f"{kind:<15}{e['n']:>6}{_pct(e['flagged']):>10}{_pct(e['lexical_flagged']):>10}{e['n_uncovered']:>11}"
                f"{_pct(e.get('contradicted_of_flagged')) if kind in ('number', 'date') else '':>14}"
            )
        c = m["control"]
        lines.append(f"{'control':<15}{c['n']:>6}{_pct(c['flagged']):>10}{_pct(c['lexical_flagged']):>10}{c['n_uncovered']:>11}")
    else:
        lines.append(f"{'score':<28}{'AUROC':>8}{'n sup':>7}{'n not':>7}")
        for key in ("verdict_score", "word_overlap", "word_overlap_full_sources", "keyword_support_mean", "keyword_support_min", "share_flagged_keywords"):
            e = m[key]
            lines.append(f"{key:<28}{_f3(e['auroc']):>8}{e['n_supported']:>7}{e['n_not_supported']:>7}")
    return "\n".join(lines)
