"""The values of numbers and dates as the match rule compares them (docs/method.md §8).

Pure functions over text. A number's value is :func:`~tokenshapley_rag._segment.number_value`
of its digits, or of its words ("fifteen", "second"), times a scale word after it ("2.9
million" = 2900000); a count the answer hedges ("about 870,000", "more than 500,000") is held
by the values it rounds or bounds (:func:`near_value`); a date in digits is read as the date
it writes out (:func:`spell_numeric_dates`). Measurements and their units are in
:mod:`~tokenshapley_rag._measures`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal

from tokenshapley_rag._segment import (
    COUNTED_AFTER,
    EXPONENT,
    is_ordinal,
    is_rank_superlative,
    number_value,
    rank_superlative_spans,
    value_spans,
    word_number_spans,
    word_number_value,
)
from tokenshapley_rag._units import (
    CURRENCY_ABBREVIATION,
    CURRENCY_CODES,
    FOREIGN_MILLIARDS,
    FOREIGN_MILLIONS,
    FOREIGN_THOUSANDS,
    names_alternation,
)

__all__ = [
    "MONTHS",
    "PLAIN_NUMBER",
    "all_values",
    "cardinal_values",
    "date_readings",
    "is_year",
    "near_value",
    "number_hedge",
    "range_hedges",
    "rank_values",
    "significant_place",
    "spell_numeric_dates",
    "states_change",
    "year_range",
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
# The months of sources written in German, French, Spanish, Italian and Portuguese (folded:
# "März" is "marz"), so "31. März 1889" holds "31 March 1889". Words that are also English
# names are left out: "mars" (the planet), "mayo" (the clinic), "julio", "marco".
MONTHS |= {
    m: i + 1
    for i, names in enumerate(
        [
            ("januar", "janvier", "enero", "gennaio", "janeiro"), ("februar", "fevrier", "febrero", "febbraio", "fevereiro"),
            ("marz", "marzo"), ("avril", "abril", "aprile"), ("mai", "maggio", "maio"),
            ("juni", "juin", "junio", "giugno", "junho"), ("juli", "juillet", "luglio", "julho"),
            ("aout", "agosto"), ("septembre", "septiembre", "settembre", "setembro"),
            ("oktober", "octobre", "octubre", "ottobre", "outubro"), ("novembre", "noviembre", "novembro"),
            ("dezember", "decembre", "diciembre", "dicembre", "dezembro"),
        ]
    )
    for m in names
}
_MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November",
    "December",
)
# An ISO date, year-month-day (not a range of years: "1887-1889", "2022-23").
_ISO_DATE = re.compile(r"(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])(?![\d-])")
# A date in digits, day and month first: "31.03.1889", "14/07/2022", "7/14/2022".
# (What may stand before either is checked apart, `_opens_number`: a pattern opening with a
# lookbehind is tried at every position of the text, and every source sentence is read.)
_NUMERIC_DATE = re.compile(r"(\d{1,2})([./])(\d{1,2})\2(\d{4})(?!\d|[./]\d)")


def _spelled(day: int, month: int, year: str) -> str:
    return f"{day} {_MONTH_NAMES[month - 1]} {year}"


def _opens_number(m: re.Match[str], joiners: str) -> bool:
    """Whether the match starts a number: no digit right before it, nor a digit and one of
    ``joiners`` ("1887-1889" is a range of years, "123.04.2022" no date)."""
    text, a = m.string, m.start()
    if a and text[a - 1].isdigit():
        return False
    return not (a >= 2 and text[a - 1] in joiners and text[a - 2].isdigit())


def _iso_date(m: re.Match[str]) -> str:
    if not _opens_number(m, "-") or (m.start() and m.string[m.start() - 1] == "-"):
        return m.group()
    return _spelled(int(m.group(3)), int(m.group(2)), m.group(1))


def _numeric_date(m: re.Match[str]) -> str:
    """A date in digits written out when its reading is clear: dotted dates put the day
    first (31.03.1889); a slashed one is read by the part that cannot be a month (14/07
    is day first, 7/14 month first) and left as written when both parts could be."""
    if not _opens_number(m, "./"):
        return m.group()
    a, sep, b, year = int(m.group(1)), m.group(2), int(m.group(3)), m.group(4)
    if sep == "." or a > 12 or a == b:
        day, month = a, b
    elif b > 12:
        day, month = b, a
    else:
        return m.group()  # 03/04/2022: 3 April or March 4
    return _spelled(day, month, year) if 1 <= month <= 12 and 1 <= day <= 31 else m.group()


def date_readings(date: str) -> list[str]:
    """The two dates a slashed date whose day and month could be swapped may be ("03/04/2022":
    3 April or March 4), written out; [] for any other text.

    >>> date_readings("12/10/1815"), date_readings("14/07/2022"), date_readings("10/10/2020")
    (['12 October 1815', '10 December 1815'], [], [])
    """
    m = _NUMERIC_DATE.fullmatch(date.strip())
    if m is None or m.group(2) != "/":
        return []
    a, b = int(m.group(1)), int(m.group(3))
    if not (1 <= a <= 12 and 1 <= b <= 12) or a == b:
        return []
    return [_spelled(a, b, m.group(4)), _spelled(b, a, m.group(4))]


def spell_numeric_dates(text: str) -> str:
    """``text`` with its dates in digits written out ("1889-03-31" and "31.03.1889" as "31
    March 1889"), so that the match rule reads their day, month and year as it reads any
    date's. A slashed date whose day and month could be read either way ("03/04/2022") is
    left as written.

    >>> spell_numeric_dates("Opened 1889-03-31; built 1887-1889.")
    'Opened 31 March 1889; built 1887-1889.'
    >>> spell_numeric_dates("31.03.1889, 14/07/2022, 7/14/2022, 03/04/2022, 1.5.2.2021, 45/07/2022, on 1.4.1990.")
    '31 March 1889, 14 July 2022, 14 July 2022, 03/04/2022, 1.5.2.2021, 45/07/2022, on 1 April 1990.'
    """
    if _DIGITS_JOINED.search(text) is None:  # most sentences: no date in digits to read
        return text
    text = _ISO_DATE.sub(_iso_date, text)
    return _NUMERIC_DATE.sub(_numeric_date, text)


_DIGITS_JOINED = re.compile(r"\d[-./]\d")


def all_values(text: str) -> list[tuple[int, int, str]]:
    """The numbers of ``text`` in digits and in words, ``(start, end, value)`` in text order:
    "2nd" and "second", "15" and "fifteen" are one value each, and a superlative that states
    rank 1 ("the largest") is 1. A scale word after a number multiplies its value ("2.9
    million" is 2900000, as "2,900,000" is, and not "2.9 billion"); the span stays the number's.

    >>> [v for _, _, v in all_values("The second of 15 bridges, fifteen in all; the 2nd, the longest.")]
    ['2', '15', '15', '2', '1']
    >>> [v for _, _, v in all_values("2.9 million, 2,900,000, 2.9 billion, $4bn, two thousand, 1.5 km")]
    ['2900000', '2900000', '2900000000', '4000000000', '2000', '1.5']
    >>> [v for _, _, v in all_values("at 17:30, 5:30 pm, 5 p.m., 05:30, 12:15 am, 12 PM, 5 pm-ish")]
    ['17:30', '17:30', '17:00', '5:30', '0:15', '12:00', '17:00']
    >>> [v for _, _, v in all_values("$4.2bn, $500M, 3.5B users, 50k, €12.5m, 12.5m tall, 3 mln, EUR 2m")]
    ['4200000000', '500000000', '3500000000', '50000', '12500000', '12.5', '3000000', '2000000']
    >>> [v for _, _, v in all_values("1.5m visitors, 10m tonnes, the 100m sprint, the 400m hurdles")]
    ['1500000', '10000000', '100', '400']
    >>> [v for _, _, v in all_values("3,7 Millionen, 1,2 milliards, 4 millones, 2,5 Mio.")]
    ['3700000', '1200000000', '4000000', '2500000']
    >>> [v for _, _, v in all_values("in 44 BC, 753 BCE and AD 14")]
    ['-44', '-753', '14']
    >>> [v for _, _, v in all_values("6.022e23, 6.022 × 10^23, 6.022 × 10²³ and 1.6 x 10^-19")]
    ['602200000000000000000000', '602200000000000000000000', '602200000000000000000000', '0.00000000000000000016']
    """
    scientific = scientific_spans(text)
    values = [
        (a, b, v) for a, b, v in value_spans(text) if not any(s <= a < e for s, e, _ in scientific)
    ] + scientific + word_number_spans(text)
    return sorted(
        [(a, b, _before_christ(text, b, _clock(text, b, _scaled(text, a, b, v)))) for a, b, v in values]
        + rank_superlative_spans(text)
    )


_SCIENTIFIC = re.compile(
    rf"(?<![\w.,])(-?\d+(?:\.\d+)?)(?=[eE\s×x·])({EXPONENT})"
)
_POWER = re.compile(r"(?:[eE]|10\s?\^\s?|10)([-+\u2212⁻⁺]?[\d⁰¹²³⁴⁵⁶⁷⁸⁹]+)$")
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺\u2212", "0123456789-+-")


def scientific_spans(text: str) -> list[tuple[int, int, str]]:
    """Numbers in scientific notation, ``(start, end, value)``: "6.022e23", "6.022 × 10^23"
    and "6.022 × 10²³" are one value, written out as :func:`number_value` writes numbers."""
    out = []
    for m in _SCIENTIFIC.finditer(text):
        power = _POWER.search(m.group(2))
        if power is None:
            continue
        exponent = int(power.group(1).translate(_SUPERSCRIPTS))
        out.append((m.start(), m.end(), number_value(format(Decimal(m.group(1)).scaleb(exponent), "f"))))
    return out


# A year before the common era: "44 BC" is -44, which "44 AD" is not.
_BEFORE_CHRIST = re.compile(r"\s?(?:BCE?|B\.C\.(?:E\.)?)(?!\w)")


def _before_christ(text: str, end: int, value: str) -> str:
    """``value``, the number of ``text`` ending at ``end``, negative when an era before the
    common era follows it ("44 BC", "753 BCE")."""
    if value[:1] != "-" and value.isdigit() and _BEFORE_CHRIST.match(text, end):
        return "-" + value
    return value


# A time of day: "17:30", "5:30 pm", "5 p.m." are read on one 24-hour clock.
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})")
_MERIDIEM = re.compile(r"\s?([ap])\.?m\.?(?!\w)", re.IGNORECASE)


def _clock(text: str, end: int, value: str) -> str:
    """``value``, the number of ``text`` ending at ``end``, as a 24-hour time when it is
    one ("17:30"; "5:30 pm" and "5 p.m." after an hour; "05:30" as "5:30"); else as it is."""
    meridiem = _MERIDIEM.match(text, end)
    clock = _CLOCK.fullmatch(value)
    if clock is None and not (meridiem and value.isdigit()):
        return value
    hour, minute = (int(clock.group(1)), clock.group(2)) if clock else (int(value), "00")
    if meridiem is not None:
        if not 1 <= hour <= 12:
            return value
        hour = hour % 12 + (12 if meridiem.group(1).lower() == "p" else 0)
    return f"{hour}:{minute}" if hour < 24 and int(minute) < 60 else value


# Scale words and their powers of ten: "2.9 million", "$4bn", "two thousand", "$500M", "50k".
# A source in German, French, Spanish, Italian or Portuguese scales its numbers with its own
# words ("3,7 Millionen Einwohner", "1,2 milliard", "4 millones"): a milliard is 10^9.
_SCALES = {
    "thousand": 3, "million": 6, "billion": 9, "trillion": 12, "bn": 9, "bln": 9, "tn": 12, "mn": 6, "mln": 6,
    "k": 3, "m": 6, "b": 9,
    **dict.fromkeys(FOREIGN_THOUSANDS, 3), **dict.fromkeys(FOREIGN_MILLIONS, 6), **dict.fromkeys(FOREIGN_MILLIARDS, 9),
}
_SCALE_AFTER = re.compile(
    r"[ \t\u00a0\u202f-]?(thousand|million|billion|trillion|bn|bln|tn|mn|mln|"
    + names_alternation(FOREIGN_THOUSANDS + FOREIGN_MILLIONS + FOREIGN_MILLIARDS)
    + r")(?!\w)",
    re.IGNORECASE,
)
# A letter glued to the digits: K, M and B scale any number ("3.5M users"), a lowercase k
# too ("50k"); a lowercase m after a currency sign ("€12.5m") or before what it counts, a
# plural ("1.5m visitors", "10m tonnes"): "12.5m" alone is metres, and so is "100m sprint"
# or "400m hurdles".
_SCALE_GLUED = re.compile(r"([kKMB])(?!\w)|(m)(?!\w)")
_CURRENCY_BEFORE = re.compile(rf"(?:[$€£¥₹]|\b(?:{'|'.join(CURRENCY_CODES)})|{CURRENCY_ABBREVIATION})\s?-?$")
PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _scaled(text: str, start: int, end: int, value: str) -> str:
    """``value``, the number ``text[start:end]``, times the scale word right after it
    (:data:`_SCALES`), written as :func:`number_value` writes numbers."""
    if not PLAIN_NUMBER.fullmatch(value):
        return value
    m = _SCALE_AFTER.match(text, end)
    scale = m.group(1).lower() if m is not None else None
    if scale is None and (g := _SCALE_GLUED.match(text, end)) is not None:
        if g.group(1) or _CURRENCY_BEFORE.search(text, max(0, start - 5), start) or COUNTED_AFTER.match(text, g.end()):
            scale = (g.group(1) or g.group(2)).lower()
    if scale is None:
        return value
    return number_value(format(Decimal(value).scaleb(_SCALES[scale]), "f"))


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


# Words before a number that state it as a change ("rose by $400 million", "an increase of
# 10.5%", "up 10.5%"), within its clause.
_CHANGE_BEFORE = re.compile(
    r"\b(?:rose|risen|rise|rises|grew|grown|grow|grows|growth|increased?|increases|fell|fallen|falls?|dropped|drops?|"
    r"declined?|declines|decreased?|decreases|jumped|jumps?|climbed|climbs?|gained|gains?|lost|loses|up|down|"
    r"change[sd]?|difference|more|less|higher|lower)\b(?:[^.;:!?\n]|\.(?=\d)){0,30}$",
    re.IGNORECASE,
)


def states_change(text: str, start: int) -> bool:
    """Whether the number at ``start`` of ``text`` is stated as a change ("rose by 10.5%",
    "an increase of $400 million", "up 10.5%"): a change word before it in its clause.

    >>> t = "Revenue rose by $400 million, or 10.5%."
    >>> states_change(t, t.index("$400")), states_change(t, t.index("10.5"))
    (True, True)
    >>> states_change("Revenue was $4.2 billion.", 12)
    False
    """
    return _CHANGE_BEFORE.search(text, max(0, start - 60), start) is not None


_RANGE_OPENER = re.compile(r"\bbetween\s+$", re.IGNORECASE)
_RANGE_JOINER = re.compile(r"\s+and\s+", re.IGNORECASE)
# A spread's ends are facts of their own: "salaries range between $57,200 and $95,870".
_SPREAD = re.compile(r"\b(?:range[sd]?|ranging|var(?:y|ies|ied|ying)|spread|from)\b[^.;:]*$", re.IGNORECASE)


def range_hedges(text: str, numbers: Sequence[tuple[int, int]]) -> dict[int, str]:
    """The hedges of number keywords that bound one value together ("between $4 billion and
    $4.5 billion"): ``{start: "between LOW HIGH"}`` for both ends, whose values
    :func:`near_value` then takes anywhere between them. ``numbers``: the number keywords'
    ``(start, end)`` in ``text``, in order. A spread's ends ("salaries range between $57,200
    and $95,870", "rose from 10% to 15%") are facts of their own and keep their values, and
    so do two ends a thousandfold apart ("between 2 and 3 million": the first end's scale is
    unwritten).

    >>> t = "Revenue was between $4 billion and $4.5 billion; it rose from 10% to 15%."
    >>> range_hedges(t, [(20, 30), (35, 47), (63, 66), (70, 73)])
    {20: 'between 4000000000 4500000000', 35: 'between 4000000000 4500000000'}
    >>> range_hedges("Pay ranges between $57,200 and $95,870.", [(20, 27), (32, 39)])
    {}
    """
    out: dict[int, str] = {}
    for (a, b), (c, d) in zip(numbers, numbers[1:]):
        if not (_RANGE_OPENER.search(text, max(0, a - 12), a) and _RANGE_JOINER.fullmatch(text, b, c)):
            continue
        if _SPREAD.search(text, max(0, a - 60), a):
            continue
        first, second = [v for _, _, v in all_values(text[a:b])], [v for _, _, v in all_values(text[c:d])]
        if len(first) != 1 or len(second) != 1 or not (PLAIN_NUMBER.fullmatch(first[0]) and PLAIN_NUMBER.fullmatch(second[0])):
            continue
        low, high = sorted((Decimal(first[0]), Decimal(second[0])))
        if low <= 0 or high >= 1000 * low:
            continue
        out[a] = out[c] = f"between {number_value(format(low, 'f'))} {number_value(format(high, 'f'))}"
    return out


def significant_place(value: str) -> Decimal:
    """The place of a plain number's last significant digit, the precision a hedge reads it
    to: its last decimal place, else its last non-zero digit's (870000: ten thousands).

    >>> [str(significant_place(v)) for v in ("870000", "2900000", "1.5", "-0.25", "0")]
    ['1E+4', '1E+5', '0.1', '0.01', '1']
    """
    digits = value.lstrip("-")
    if "." in digits:
        return Decimal(1).scaleb(-len(digits.partition(".")[2]))
    zeros = len(digits) - len(digits.rstrip("0"))
    return Decimal(1).scaleb(zeros) if digits.strip("0") else Decimal(1)


def near_value(value: str, held: str, hedge: str) -> bool:
    """Whether a source's count ``held`` holds the answer's ``value`` under ``hedge``
    (:func:`number_hedge`). The answer's precision is its last significant place (870,000:
    ten thousands; 2.9 million: hundred thousands; 1.5: tenths): "about" holds the values
    within half of it (its roundings), "at least" the values from it up to one more of it,
    "at most" from one less of it up to it; a range's end (:func:`range_hedges`, "between
    LOW HIGH") the values from LOW to HIGH; no hedge, the value itself.

    >>> [near_value("870000", v, "about") for v in ("870321", "874999", "876000", "870000")]
    [True, True, False, True]
    >>> near_value("500000", "522250", "at least"), near_value("500000", "622250", "at least")
    (True, False)
    >>> near_value("522251", "522252", "about"), near_value("870000", "870321", "")
    (False, False)
    >>> near_value("4000000000", "4200000000", "between 4000000000 4500000000")  # a range holds what is in it
    True
    """
    if not (PLAIN_NUMBER.fullmatch(value) and PLAIN_NUMBER.fullmatch(held)):
        return value == held
    answer, source = Decimal(value), Decimal(held)
    if hedge.startswith("between "):
        low, high = (Decimal(v) for v in hedge.split()[1:])
        return low <= source <= high
    place = significant_place(value)
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


_PART_OF = re.compile(r"(?i)\b(early|mid|late)[\s-]")
_DECADE = re.compile(r"\b((?:1\d|20)\d)0['’]?s(?!\w)")
_CENTURY = re.compile(r"(?i)\b([a-z0-9]+(?:-[a-z]+)?)[\s-]+centur(?:y|ies)(?!\w)(?!\s+(?:BC|BCE)(?!\w))")
# The share of a span "early", "mid" and "late" name: the first 40%, the middle 40%, the last 40%.
_PARTS = {"early": (0.0, 0.4), "mid": (0.3, 0.7), "late": (0.6, 1.0)}


def year_range(date: str) -> tuple[int, int] | None:
    """The years a decade or a century keyword spans, first and last (a century's first
    and last years both ways of counting: the 19th is 1800 to 1900), narrowed by "early",
    "mid" or "late" (:data:`_PARTS`); None for any other date. Centuries before the common
    era are left out.

    >>> year_range("1880s"), year_range("mid-1960s"), year_range("19th century"), year_range("5th century BC")
    ((1880, 1889), (1963, 1966), (1800, 1900), None)
    >>> year_range("the fifteenth century"), year_range("late 19th century"), year_range("early 1820s")
    ((1400, 1500), (1860, 1900), (1820, 1824))
    """
    m = _DECADE.search(date)
    if m is not None:
        first, last = int(m.group(1)) * 10, int(m.group(1)) * 10 + 9
    elif (m := _CENTURY.search(date)) is not None:
        ordinal = m.group(1)
        n = int(re.sub(r"\D", "", ordinal)) if ordinal[:1].isdigit() else word_number_value(ordinal)
        if n is None or int(n) < 1:
            return None
        first, last = 100 * (int(n) - 1), 100 * int(n)
    else:
        return None
    part = _PART_OF.search(date, 0, m.start() + 1)
    if part is None:
        return first, last
    a, b = _PARTS[part.group(1).lower()]
    span = last - first
    return first + round(a * span), first + round(b * span)
