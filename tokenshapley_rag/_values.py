"""The values of numbers and dates as the match rule compares them (docs/method.md §8).

Pure functions over text. A number's value is :func:`~tokenshapley_rag._segment.number_value`
of its digits, or of its words ("fifteen", "second"), times a scale word after it ("2.9
million" = 2900000); a count the answer hedges ("about 870,000", "more than 500,000") is held
by the values it rounds or bounds (:func:`near_value`); an ISO date is read as the date it
writes out (:func:`spell_iso_dates`).
"""

from __future__ import annotations

import re
from decimal import Decimal

from tokenshapley_rag._segment import (
    is_ordinal,
    is_rank_superlative,
    number_value,
    rank_superlative_spans,
    value_spans,
    word_number_spans,
)

__all__ = [
    "MONTHS",
    "PLAIN_NUMBER",
    "all_values",
    "cardinal_values",
    "is_year",
    "near_value",
    "number_hedge",
    "rank_values",
    "spell_iso_dates",
]

# Month names and abbreviations (folded) and their numbers, 1-12.
MONTHS = {
    m: i + 1
    for i, names in enumerate(
        [
            ("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",),
            ("jun", "june"), ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"),
            ("oct", "october"), ("nov", "november"), ("dec", "december"),
        ]
    )
    for m in names
}
_MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November",
    "December",
)
# An ISO date, year-month-day (not a range of years: "1887-1889", "2022-23").
_ISO_DATE = re.compile(r"(?<![\d-])(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])(?![\d-])")


def spell_iso_dates(text: str) -> str:
    """``text`` with its ISO dates written out ("1889-03-31" as "31 March 1889"), so that the
    match rule reads their day, month and year as it reads any date's.

    >>> spell_iso_dates("Opened 1889-03-31; built 1887-1889.")
    'Opened 31 March 1889; built 1887-1889.'
    """
    return _ISO_DATE.sub(lambda m: f"{int(m.group(3))} {_MONTH_NAMES[int(m.group(2)) - 1]} {m.group(1)}", text)


def all_values(text: str) -> list[tuple[int, int, str]]:
    """The numbers of ``text`` in digits and in words, ``(start, end, value)`` in text order:
    "2nd" and "second", "15" and "fifteen" are one value each, and a superlative that states
    rank 1 ("the largest") is 1. A scale word after a number multiplies its value ("2.9
    million" is 2900000, as "2,900,000" is, and not "2.9 billion"); the span stays the number's.

    >>> [v for _, _, v in all_values("The second of 15 bridges, fifteen in all; the 2nd, the longest.")]
    ['2', '15', '15', '2', '1']
    >>> [v for _, _, v in all_values("2.9 million, 2,900,000, 2.9 billion, $4bn, two thousand, 1.5 km")]
    ['2900000', '2900000', '2900000000', '4000000000', '2000', '1.5']
    """
    values = value_spans(text) + word_number_spans(text)
    return sorted([(a, b, _scaled(text, b, v)) for a, b, v in values] + rank_superlative_spans(text))


# Scale words and their powers of ten: "2.9 million", "$4bn", "two thousand".
_SCALES = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12, "bn": 9}
_SCALE_AFTER = re.compile(r"[ \t\u00a0\u202f-]?(thousand|million|billion|trillion|bn)\b", re.IGNORECASE)
PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _scaled(text: str, end: int, value: str) -> str:
    """``value``, the number of ``text`` ending at ``end``, times the scale word right after
    it (:data:`_SCALES`), written as :func:`number_value` writes numbers."""
    m = _SCALE_AFTER.match(text, end)
    if m is None or not PLAIN_NUMBER.fullmatch(value):
        return value
    return number_value(format(Decimal(value).scaleb(_SCALES[m.group(1).lower()]), "f"))


# Words before a count that make it approximate or a bound, and what they make it
# (docs/method.md §8): "about 870,000" is held by 870,321, "more than 500,000" by 522,250.
_HEDGES = sorted(
    [(w, "about") for w in (
        "about", "around", "approximately", "approx.", "approx", "roughly", "nearly", "almost", "circa", "ca.",
        "some", "close to", "an estimated", "estimated", "~", "\u2248",
    )]
    + [(w, "at least") for w in ("over", "more than", "at least", "upwards of", "in excess of", "above", ">", "\u2265")]
    + [(w, "at most") for w in ("under", "less than", "fewer than", "below", "at most", "up to", "<", "\u2264")],
    key=lambda pair: -len(pair[0]),
)


def number_hedge(text: str, start: int) -> str:
    """How the words right before the number at ``text[start:]`` qualify it: "about" (it is
    rounded: "about 870,000", "roughly 3 million"), "at least" ("more than 500,000"), "at
    most" ("fewer than 20"), or "" (exact). A currency sign between them is skipped.

    >>> [number_hedge(t, t.index("8")) for t in ("about 870,000", "More than $8bn", "under 80", "it is 870")]
    ['about', 'at least', 'at most', '']
    """
    before = text[max(0, start - 24) : start].casefold().rstrip(" \t\u00a0\u202f$\u20ac\u00a3\u00a5")
    for phrase, hedge in _HEDGES:
        if before.endswith(phrase) and (
            not phrase[-1].isalnum() or len(before) == len(phrase) or not before[-len(phrase) - 1].isalnum()
        ):
            return hedge
    return ""


def near_value(value: str, held: str, hedge: str) -> bool:
    """Whether a source's count ``held`` holds the answer's ``value`` under ``hedge``
    (:func:`number_hedge`). The answer's precision is its last significant place (870,000:
    ten thousands; 2.9 million: hundred thousands; 1.5: tenths): "about" holds the values
    within half of it (its roundings), "at least" the values from it up to one more of it,
    "at most" from one less of it up to it; no hedge, the value itself.

    >>> [near_value("870000", v, "about") for v in ("870321", "874999", "876000", "870000")]
    [True, True, False, True]
    >>> near_value("500000", "522250", "at least"), near_value("500000", "622250", "at least")
    (True, False)
    >>> near_value("522251", "522252", "about"), near_value("870000", "870321", "")
    (False, False)
    """
    if not (PLAIN_NUMBER.fullmatch(value) and PLAIN_NUMBER.fullmatch(held)):
        return value == held
    answer, source = Decimal(value), Decimal(held)
    digits = value.lstrip("-")
    if "." in digits:
        place = Decimal(1).scaleb(-len(digits.partition(".")[2]))
    else:
        zeros = len(digits) - len(digits.rstrip("0"))
        place = Decimal(1).scaleb(zeros) if digits.strip("0") else Decimal(1)
    if hedge == "about":
        return 2 * abs(source - answer) <= place
    if hedge == "at least":
        return answer <= source < answer + place
    if hedge == "at most":
        return answer - place < source <= answer
    return source == answer


def cardinal_values(text: str) -> frozenset[str]:
    """The values of ``text``'s numbers written as counts, not ranks (:func:`is_ordinal`):
    "two" is 2 and "second" is 2, but a count is not held by a rank.

    >>> sorted(cardinal_values("two rivers, the 2nd and second-largest, 15 km, fifteen"))
    ['15', '2']
    >>> sorted(cardinal_values("the second-longest river, in the 21st century"))
    []
    """
    return frozenset(v for a, b, v in all_values(text) if not is_ordinal(text, a, b))


def rank_values(text: str) -> frozenset[str]:
    """The values a number keyword states as ranks ("second-largest": 2; "largest", a
    superlative :func:`~tokenshapley_rag._segment.find_keywords` cut from its "the": 1)."""
    ranks = {v for a, b, v in all_values(text) if is_ordinal(text, a, b)}
    if not ranks and is_rank_superlative(text.strip()):
        ranks.add("1")
    return frozenset(ranks)


def is_year(value: str) -> bool:
    """Whether a number value reads as a year in a date (four digits)."""
    return len(value) == 4 and value.isdigit()
