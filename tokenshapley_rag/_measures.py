"""Measurements as the match rule compares them (docs/method.md §8): a number with a unit of
length, mass, volume, area, speed, temperature, money or percent.

Pure functions over text. A measurement is a range of values in its dimension's base unit
(a number covers half of its last written place), so "1,083 feet" is held by "330 metres"
(:func:`same_measure`, converted) and "88 km²" by "87.88 km²" (:func:`rounds_measure`, in
its own unit); money is never converted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from decimal import Decimal

from tokenshapley_rag._segment import number_value, period_groups_at
from tokenshapley_rag._units import CASED_UNIT_SIZES, CURRENCY_ABBREVIATION, CURRENCY_CODES, CURRENCY_OF, UNIT_SIZES, names_alternation
from tokenshapley_rag._values import PLAIN_NUMBER, all_values, number_hedge, significant_place

__all__ = [
    "DIMENSIONS", "Measure", "derived_change", "fraction_measures", "measures", "rounds_measure", "same_measure", "same_unit_and_value",
]


# The unit right after a number: a space, a no-break space or a hyphen ("a 330-metre
# tower") between them, the longest unit first; no letter, digit or slash may follow ("km"
# is not read from "km/l").
_SCALED = r"(?:[ \u00a0\u202f-]?(?:thousand|million|billion|trillion)(?=[ \u00a0\u202f-]))?"  # the value is scaled
_SIGN_BEFORE = re.compile(rf"([$€£₹]|\b(?:{'|'.join(CURRENCY_CODES)})\b|{CURRENCY_ABBREVIATION})\s?-?$")
_UNIT_AFTER = re.compile(
    _SCALED + r"[ \u00a0\u202f-]?("
    + names_alternation(UNIT_SIZES)
    + r")(?![\w°²/])",
    re.IGNORECASE,
)
_CASED_UNIT_AFTER = re.compile(
    _SCALED + r"[ \u00a0\u202f-]?("
    + names_alternation(CASED_UNIT_SIZES)
    + r")(?![\w°²/])"
)


Measure = tuple[str, float, float, float]  # dimension, low and high in its base unit, the unit's size
# Every dimension a measurement may have, in a fixed order.
DIMENSIONS = tuple(sorted({d for d, *_ in UNIT_SIZES.values()} | {d for d, *_ in CASED_UNIT_SIZES.values()} | {"money", "percent"}))


def measures(
    text: str, hedge: str | None = "", values: list[tuple[int, int, str]] | None = None
) -> list[tuple[int, int, Measure]]:
    """The measurements of ``text``: ``(start, end, (dimension, low, high, size))`` for each
    number with a unit the match rule reads, after it ("330 metres", "45.50 euros") or, for
    money, a currency sign or code before it ("$4.2 billion"). ``low`` and ``high`` bound the value
    in the dimension's base unit: a number covers half of its last decimal place either
    side (330 m: 329.5 to 330.5 metres); ``hedge`` (:func:`number_hedge`) widens that to
    the values :func:`near_value` allows, and None reads each number's own hedge in
    ``text``. ``size`` tells units apart (the unit's size in the base unit). ``values``:
    :func:`all_values` of ``text`` when the caller has them.

    >>> [(text[a:b], m[0], round(m[1], 2), round(m[2], 2)) for text in ["It is 330 metres (1,083 ft) tall."]
    ...  for a, b, m in measures(text)]
    [('330 metres', 'length', 329.5, 330.5), ('1,083 ft', 'length', 329.95, 330.25)]
    >>> [(m[0], round(m[1] - 273.15, 3)) for _, _, m in measures("It reached 112.3 °F and 45 degrees Celsius.")]
    [('temperature', 44.583), ('temperature', 44.5)]
    >>> [(round(m[1] - 273.15), round(m[2] - 273.15)) for _, _, m in measures("about 40 °C", hedge=None)]
    [(35, 45)]
    >>> [(m[0], round(m[1]), round(m[2])) for _, _, m in measures("10.1 million kilograms")]  # to 0.1 million
    [('mass', 10050000, 10150000)]
    >>> [(t[a:b], m[0], m[3]) for t in ["$4.2 billion, 45.50 euros, €45.50, 12 USD, EUR 9"] for a, b, m in measures(t)]
    [('4.2', 'money', 1.0), ('45.50 euros', 'money', 2.0), ('45.50', 'money', 2.0), ('12 USD', 'money', 1.0), ('9', 'money', 2.0)]
    """
    out = []
    found = all_values(text) if values is None else values
    for i, (a, b, value) in enumerate(found):
        if not PLAIN_NUMBER.fullmatch(value):
            continue
        unit, unit_size = _unit_after(text, b)
        if unit is not None and unit.group(1) == "m" and unit.start(1) == b and value != number_value(text[a:b]):
            unit, unit_size = None, None  # a glued "m" that scales its number is a million ("1.5m visitors")
        unit_end = unit.end() if unit is not None else b
        if unit is None and i + 1 < len(found) and _RANGE_JOINER.fullmatch(text, b, found[i + 1][0]):
            # A range's first value has its second's unit ("10 to 15 minutes", "5-7 kg"); its
            # span stays the number's.
            unit, unit_size = _unit_after(text, found[i + 1][1])
            if unit_size is None or unit_size[0] == "money":
                unit, unit_size = None, None
            unit_end = b
        sign = _SIGN_BEFORE.search(text, max(0, a - 5), a)
        currency = CURRENCY_OF.get(sign.group(1).casefold()) if sign is not None else None
        if currency is not None:  # "$4.2 billion", "€45.50": the sign is the unit
            dimension, size, zero, end = "money", currency, 0.0, b
            if unit_size is not None and unit_size[0] == "money":
                end = unit_end
        elif unit_size is None:
            continue
        else:
            dimension, size, zero = unit_size
            end = unit_end
        # The precision is the number's as written, scaled with it ("10.1 million": to 0.1 million).
        written = number_value(text[a:b], period_groups_at(text, a, b))
        scale = float(Decimal(value) / Decimal(written)) if PLAIN_NUMBER.fullmatch(written) and float(written) else 1.0
        hedge_here = number_hedge(text, a) if hedge is None else hedge
        if hedge_here.startswith("between "):  # a range's ends are written values already
            low, high = (float(v) for v in hedge_here.split()[1:])
        else:
            low, high = _value_bounds(written if scale != 1.0 else value, hedge_here)
            low, high = low * scale, high * scale
        if dimension == "money":  # an amount keeps its value; the size names its currency
            out.append((a, end, (dimension, low, high, size)))
        else:
            out.append((a, end, (dimension, low * size + zero, high * size + zero, size)))
    return out + _compound_durations(text, out)


# What joins a range's two values ("10 to 15 minutes", "5-7 kg", "between 3 and 4 m").
_RANGE_JOINER = re.compile(r"\s*(?:[-–—]|to|and)\s*")


def _unit_after(text: str, end: int) -> tuple[re.Match | None, tuple[str, float, float] | None]:
    """The unit written right after position ``end`` of ``text`` and its (dimension, size,
    zero), as the match rule reads it; (None, None) when there is none."""
    unit = _CASED_UNIT_AFTER.match(text, end)
    if unit is not None:
        return unit, CASED_UNIT_SIZES.get(re.sub(r"\s+", " ", unit.group(1)))
    unit = _UNIT_AFTER.match(text, end)
    # (The pattern ignores case as Unicode does, casefold() not always: "İ" is an i.)
    return unit, (UNIT_SIZES.get(re.sub(r"\s+", " ", unit.group(1)).casefold()) if unit is not None else None)


_DURATION_JOINER = re.compile(r"(?:\s*,\s*|\s+and\s+|\s+)")


def _compound_durations(text: str, found: list[tuple[int, int, Measure]]) -> list[tuple[int, int, Measure]]:
    """A duration written in two units, the larger first ("1 hour 15 minutes", "2 hours and
    30 minutes"), as one more measurement: their sum, to the precision of the smaller one.

    >>> [(text[a:b], m[1], m[2]) for text in ["It took 1 hour 15 minutes."] for a, b, m in _compound_durations(text, measures(text))]
    [('1 hour 15 minutes', 4470.0, 4530.0)]
    """
    out = []
    for (a, b, first), (c, d, second) in zip(found, found[1:]):
        if first[0] == second[0] == "time" and second[3] < first[3] and _DURATION_JOINER.fullmatch(text, b, c):
            whole = (first[1] + first[2]) / 2
            out.append((a, d, ("time", whole + second[1], whole + second[2], second[3])))
    return out


# Shares written as fractions ("half", "two-thirds", "one in five"): percents in another unit.
_FRACTION = re.compile(
    r"(?i)\b(?:(?P<whole>half)|(?:a|one)[\s-](?P<part>third|quarter|fifth|tenth)|(?P<many>two|three)[\s-](?P<parts>thirds|quarters|fifths)"
    r"|(?:one|1)\s+(?:in|out\s+of)\s+(?P<of>\d{1,3}|two|three|four|five|six|seven|eight|nine|ten|twenty|hundred|a\s+hundred))\b"
)
_PARTS = {"third": 3, "quarter": 4, "fifth": 5, "tenth": 10, "thirds": 3, "quarters": 4, "fifths": 5}
_OF = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "twenty": 20,
       "hundred": 100, "a hundred": 100}
# A fraction's unit: its size only tells it apart from "%", so that the match rule compares
# the two as a conversion (value ranges that overlap).
_FRACTION_SIZE = 100.0


def fraction_measures(text: str) -> frozenset[Measure]:
    """The shares ``text`` writes as fractions, as percents: "half" 50, "a third" 33.3,
    "three quarters" 75, "one in five" 20, each to half a percentage point either side
    ("almost half" holds "almost 50%"; "48%" is not half).

    >>> sorted(round(m[1] + 0.5, 1) for m in fraction_measures("Half agreed, a third refused, one in ten abstained."))
    [10.0, 33.3, 50.0]
    """
    out = set()
    for m in _FRACTION.finditer(text):
        if m["whole"]:
            share = 50.0
        elif m["part"]:
            share = 100.0 / _PARTS[m["part"].lower()]
        elif m["parts"]:
            share = 100.0 * (2 if m["many"].lower() == "two" else 3) / _PARTS[m["parts"].lower()]
        else:
            of = m["of"].lower()
            n = int(of) if of.isdigit() else _OF[re.sub(r"\s+", " ", of)]
            if n < 2:
                continue
            share = 100.0 / n
        out.add(("percent", share - 0.5, share + 0.5, _FRACTION_SIZE))
    return frozenset(out)


def _value_bounds(value: str, hedge: str) -> tuple[float, float]:
    """The values a number written as ``value`` stands for under ``hedge``: half of its last
    decimal place either side when exact, else what :func:`near_value` allows."""
    digits = value.lstrip("-")
    places = len(digits.partition(".")[2])
    exact = float(Decimal(1).scaleb(-places)) / 2
    v = float(value)
    if not hedge:
        return v - exact, v + exact
    place = float(significant_place(value))
    if hedge == "about":
        return v - place / 2, v + place / 2
    if hedge == "at least":
        return v, v + place
    return v - place, v  # at most


def rounds_measure(answer: Measure, source: Measure) -> bool:
    """Whether the answer's measurement is the source's, in the same unit, rounded to the
    answer's last written place: the source's value lies within half of that place of the
    answer's ("88 square kilometres" for 87.88 km², "62%" for 61.8 percent; not "87.88 km²"
    for 88 km², which is more precise than its source).

    >>> area, = (m for _, _, m in measures("87.88 km²"))
    >>> [rounds_measure(measures(t)[0][2], area) for t in ("88 km²", "87.9 km²", "89 km²", "88 sq mi")]
    [True, True, False, False]
    >>> rounds_measure(area, measures("88 km²")[0][2])
    False
    """
    middle = (source[1] + source[2]) / 2
    return _same_unit(answer, source) and (
        answer[1] - _ROUNDING * abs(answer[1]) <= middle <= answer[2] + _ROUNDING * abs(answer[2])
    )


def same_unit_and_value(answer: Measure, source: Measure) -> bool:
    """Whether two measurements are in one unit and their value ranges meet.

    >>> same_unit_and_value(measures("330 m")[0][2], measures("330 metres")[0][2])
    True
    >>> same_unit_and_value(measures("2,850 miles")[0][2], measures("2,850 km")[0][2])
    False
    """
    return _same_unit(answer, source) and answer[1] <= source[2] and source[1] <= answer[2]


def same_measure(answer: Measure, source: Measure) -> bool:
    """Whether a source's measurement holds the answer's in another unit: the same
    dimension, another unit, and value ranges that overlap (the answer's value is a
    rounding of the source's, converted). A measurement in the same unit is the match
    rule's plain value comparison, not this, and money is never converted.

    >>> tower = measures("330 m")[0][2]
    >>> [same_measure(measures(t)[0][2], tower) for t in ("1,083 feet", "1,000 feet", "0.33 km", "330 metres")]
    [True, False, True, False]
    """
    return (
        answer[0] == source[0] != "money" and not _same_unit(answer, source)
        # Overlap, with room for the conversion's float rounding (0.33 km is 330 m).
        and answer[1] <= source[2] + _ROUNDING * abs(source[2]) and source[1] <= answer[2] + _ROUNDING * abs(answer[2])
    )


_ROUNDING = 1e-9


def derived_change(answer: Measure, source: Sequence[Measure]) -> bool:
    """Whether the answer's measurement is the change between two of a sentence's
    measurements, computed from their values as written: their difference, in the same
    dimension and unit size (money in the same currency: "$400 million" from "$4.2 billion
    ..., up from $3.8 billion"), or, for a percentage, their difference relative to either
    (10.5% from the same two amounts), within the answer's own precision (and hedge).
    Percentages are not taken from two percentages (points, or percent of percent?).

    >>> pair = [m for _, _, m in measures("revenue of $4.2 billion in 2023, up from $3.8 billion")]
    >>> [derived_change(measures(t)[0][2], pair) for t in ("$400 million", "10.5%", "$500 million", "12%", "9.5%")]
    [True, True, False, False, True]
    """
    for i, a in enumerate(source):
        for b in source[i + 1 :]:
            if a[0] != b[0] or a[0] == "percent" or (a[0] == "money" and not math.isclose(a[3], b[3])):
                continue
            x, y = (a[1] + a[2]) / 2, (b[1] + b[2]) / 2  # the values as written
            if answer[0] == "percent":
                changes = [abs(x - y) / base * 100 for base in (x, y) if base > 0]
            else:
                changes = [abs(x - y)] if answer[0] == a[0] and (a[0] != "money" or math.isclose(answer[3], a[3])) else []
            if any(c > 0 and answer[1] - _ROUNDING * abs(c) <= c <= answer[2] + _ROUNDING * abs(c) for c in changes):
                return True
    return False


def _same_unit(a: Measure, b: Measure) -> bool:
    """Whether two measurements are of one dimension and in one unit (the unit's size)."""
    return a[0] == b[0] and math.isclose(a[3], b[3], rel_tol=1e-9)
