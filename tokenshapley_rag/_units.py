"""The units a number keyword keeps and the match rule converts, in one place.

The segmenter (:mod:`tokenshapley_rag._segment`) keeps every unit named here with its number
("12 square kilometres", "75 Wh" are one keyword each), and the match rule
(:mod:`tokenshapley_rag._measures`) converts them (docs/method.md §8). A unit added here is
read by both. Plain data, no imports from the package.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "AREA", "CASED_UNIT_SIZES", "CURRENCIES", "CURRENCY_ABBREVIATION", "CURRENCY_CODES", "CURRENCY_OF", "DURATION",
    "LENGTH", "MASS", "PERCENT", "PERIOD_GROUPING_WORDS", "SPEED", "TEMPERATURE", "UNIT_SIZES", "VOLUME",
    "FOREIGN_THOUSANDS", "FOREIGN_MILLIONS", "FOREIGN_MILLIARDS", "names_alternation", "unit_names_pattern",
]

# Scale words of sources written in German, French, Spanish, Italian and Portuguese (folded
# to lower case when read): thousands, millions and milliards (10^9).
FOREIGN_THOUSANDS = ("tausend", "mille", "mil", "mila")
FOREIGN_MILLIONS = (
    "millionen", "mio.", "mio", "millions", "millón", "millon", "millones", "milione", "milioni", "milhão", "milhões",
)
FOREIGN_MILLIARDS = ("milliarde", "milliarden", "mrd.", "mrd", "milliard", "milliards", "miliardo", "miliardi")

# Currency codes a number may carry ("EUR 45.50", "12 USD"), written in capitals.
CURRENCY_CODES = ("USD", "EUR", "GBP", "JPY", "CNY", "INR", "CHF", "AUD", "CAD")
# Abbreviations written before an amount as a currency sign is, as a regular expression: the
# rupee's "Rs" and "Rs." ("Rs 79,900", "Rs. 1.5 lakh").
CURRENCY_ABBREVIATION = r"\bRs\.?"

# Durations, in seconds: "30,000 ms" is "30 seconds", "3 days" "72 hours". Years and
# months are left out (their length depends on the calendar).
DURATION = {
    ("ms", "millisecond", "milliseconds", "msec"): 0.001,
    ("sec", "secs", "second", "seconds"): 1.0,  # not "s": "1990s" is a decade
    ("min", "mins", "minute", "minutes"): 60.0,
    ("h", "hr", "hrs", "hour", "hours"): 3600.0,
    ("day", "days"): 86400.0,
    ("week", "weeks"): 604800.0,
    # German, French, Spanish, Italian and Portuguese names (an answer in one of them over
    # English sources): "90 Minuten" is "1.5 hours".
    **(FOREIGN_DURATION := {
        ("Sekunde", "Sekunden", "seconde", "secondes", "segundo", "segundos", "secondi"): 1.0,
        ("Minute", "Minuten", "minuto", "minutos", "minuti"): 60.0,
        ("Stunde", "Stunden", "heure", "heures", "hora", "horas"): 3600.0,
        ("Tage", "Tagen", "jour", "jours", "día", "días", "dias", "giorno", "giorni"): 86400.0,
    }),
}

# Units the match rule reads (docs/method.md §8, the match rule): each unit's dimension,
# its size in the dimension's base unit (metre, kilogram, litre, square metre, metre per
# second, kelvin; durations above, in seconds) and its zero there (temperature only). Units
# whose reading depends on context are left out: "in" (a preposition), "t", "ton" (short or metric), "degrees"
# without a scale, "L" and "l" (a letter).
LENGTH = {
    ("nm", "nanometre", "nanometres", "nanometer", "nanometers"): 1e-9,
    ("µm", "μm", "micrometre", "micrometres", "micrometer", "micrometers", "micron", "microns"): 1e-6,
    ("mm", "millimetre", "millimetres", "millimeter", "millimeters"): 0.001,
    ("cm", "centimetre", "centimetres", "centimeter", "centimeters"): 0.01,
    ("m", "metre", "metres", "meter", "meters"): 1.0,
    ("km", "kilometre", "kilometres", "kilometer", "kilometers"): 1000.0,
    # ... in German, French, Spanish, Italian and Portuguese ("metro", a city's railway, left out)
    **(FOREIGN_LENGTH := {
        ("Millimeter", "millimètre", "millimètres", "milímetro", "milímetros", "millimetro", "millimetri"): 0.001,
        ("Zentimeter", "centimètre", "centimètres", "centímetro", "centímetros", "centimetro", "centimetri"): 0.01,
        ("Meter", "mètre", "mètres", "metros", "metri"): 1.0,
        ("Kilometer", "kilomètre", "kilomètres", "kilómetro", "kilómetros", "quilômetro", "quilômetros", "chilometro",
         "chilometri"): 1000.0,
    }),
    ("inch", "inches"): 0.0254,
    ("ft", "foot", "feet"): 0.3048,
    ("yd", "yard", "yards"): 0.9144,
    ("mi", "mile", "miles"): 1609.344,
}
MASS = {
    ("µg", "μg", "mcg", "ug", "microgram", "micrograms"): 1e-9,
    ("ng", "nanogram", "nanograms"): 1e-12,
    ("mg", "milligram", "milligrams"): 1e-6,
    ("g", "gram", "grams", "gramme", "grammes"): 0.001,
    ("kg", "kilogram", "kilograms", "kilogramme", "kilogrammes", "kilo", "kilos"): 1.0,
    ("tonne", "tonnes", "metric ton", "metric tons"): 1000.0,
    **(FOREIGN_MASS := {
        ("Gramm", "gramo", "gramos", "grammo", "grammi"): 0.001,
        ("Kilogramm", "kilogramo", "kilogramos", "chilogrammo", "chilogrammi"): 1.0,
        ("Tonne", "Tonnen", "tonelada", "toneladas", "tonnellata", "tonnellate"): 1000.0,
    }),
    ("lb", "lbs", "pound", "pounds"): 0.45359237,
    ("oz", "ounce", "ounces"): 0.028349523125,
}
VOLUME = {
    ("ml", "mL", "millilitre", "millilitres", "milliliter", "milliliters"): 0.001,
    ("litre", "litres", "liter", "liters"): 1.0,
    **(FOREIGN_VOLUME := {("Liter", "litro", "litros", "litri"): 1.0}),
    ("gallon", "gallons"): 3.785411784,
}
AREA = {
    ("m²", "m2", "square metre", "square metres", "square meter", "square meters", "sq m"): 1.0,
    ("km²", "km2", "square kilometre", "square kilometres", "square kilometer", "square kilometers", "sq km"): 1e6,
    ("ha", "hectare", "hectares"): 1e4,
    ("acre", "acres"): 4046.8564224,
    ("sq mi", "square mile", "square miles"): 2589988.110336,
}
SPEED = {
    ("km/h", "kph", "kilometres per hour", "kilometers per hour"): 1 / 3.6,
    ("mph", "miles per hour"): 0.44704,
    ("m/s", "metres per second", "meters per second"): 1.0,
    ("km/s", "kilometres per second", "kilometers per second"): 1000.0,
}
# Units whose prefix is told apart by its case ("MW" megawatts, "mW" milliwatts; "MB"
# megabytes, "Mb" megabits): read as written, with their spelled-out names. A number with
# another prefix of the same unit is another measurement ("1,218 kW" is not "1,218 MW").
SI_PREFIXES = {"m": 1e-3, "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
SI_NAMES = {"m": "milli", "": "", "k": "kilo", "M": "mega", "G": "giga", "T": "tera"}
PREFIXED = (
    # dimension, symbol, name, the prefixes written with it, the size of the unprefixed unit
    ("power", "W", "watt", "mkMGT", 1.0),
    ("energy", "Wh", "watt-hour", "kMGT", 1.0),
    ("frequency", "Hz", "hertz", "kMGT", 1.0),
    ("voltage", "V", "volt", "mk", 1.0),
    ("data", "B", "byte", "kMGT", 1.0),
    ("data", "b", "bit", "kMGT", 0.125),  # a bit is an eighth of a byte: "128 Gb" is 16 GB
    ("bitrate", "bps", "bit per second", "kMGT", 1.0),
)


def _cased_unit_sizes() -> dict[str, tuple[str, float, float]]:
    """Each prefixed unit of :data:`PREFIXED` as written ("MW", "Mb", "kbit/s") and spelled
    out ("megawatt", "megawatts", "megabits per second"): its dimension, size and zero."""
    sizes: dict[str, tuple[str, float, float]] = {}
    for dimension, symbol, name, prefixes, base in PREFIXED:
        for prefix in ["", *prefixes]:
            unit = (dimension, base * SI_PREFIXES[prefix], 0.0)
            if prefix or symbol not in ("b", "B"):  # a bare "B" or "b" is a letter ("Plan B")
                sizes[prefix + symbol] = unit
            if prefix == "k" and symbol == "B":
                sizes["KB"] = unit
            if symbol == "bps" and prefix:
                sizes[f"{prefix}bit/s"] = unit
            spelled = SI_NAMES[prefix] + name
            sizes[spelled] = unit
            if not spelled.endswith("z"):  # "hertz" is its own plural
                sizes[spelled.replace(" per", "s per") if " per" in spelled else spelled + "s"] = unit
    return sizes


CASED_UNIT_SIZES = _cased_unit_sizes()
FOREIGN_PERCENT = ("Prozent", "pour cent", "por ciento", "per cento", "por cento")
PERCENT = ("%", "percent", "per cent", "pct", *FOREIGN_PERCENT)
# The words after which a number written "2.850" is 2,850, not 2.85: the unit, percent and
# scale words of the languages above, most of which write thousands with a period ("2.850
# Kilometer", "1.500 millones"). Matched as written: "Meter" is German, "meter" English.
PERIOD_GROUPING_WORDS = frozenset(
    [u for table in (FOREIGN_DURATION, FOREIGN_LENGTH, FOREIGN_MASS, FOREIGN_VOLUME) for names in table for u in names]
    + [*FOREIGN_PERCENT]
    + [w for scale in (*FOREIGN_THOUSANDS, *FOREIGN_MILLIONS, *FOREIGN_MILLIARDS) for w in (scale, scale.capitalize())]
)
TEMPERATURE = {
    ("°C", "° C", "degrees Celsius", "degree Celsius", "Celsius", "degrees C", "C°"): (1.0, 273.15),
    ("°F", "° F", "degrees Fahrenheit", "degree Fahrenheit", "Fahrenheit", "degrees F", "F°"): (5 / 9, 273.15 - 160 / 9),
}
# Money: each currency is a unit of its own dimension that is never converted (rates
# change), so the same number in another currency is another amount. A dollar is any
# dollar, and "¥" (yen or yuan) and "pounds" (a mass too) name no currency here.
CURRENCIES = {
    ("$", "dollar", "dollars", "USD", "AUD", "CAD"): 1.0,
    ("€", "euro", "euros", "EUR"): 2.0,
    ("£", "GBP", "sterling", "pounds sterling"): 3.0,
    ("yen", "JPY"): 4.0,
    ("yuan", "renminbi", "CNY", "RMB"): 5.0,
    ("₹", "rupee", "rupees", "INR", "Rs", "Rs."): 6.0,
    ("franc", "francs", "CHF"): 7.0,
}
CURRENCY_OF = {u.casefold(): size for names, size in CURRENCIES.items() for u in names}
UNIT_SIZES: dict[str, tuple[str, float, float]] = {
    **{u.casefold(): ("length", size, 0.0) for names, size in LENGTH.items() for u in names},
    **{u.casefold(): ("mass", size, 0.0) for names, size in MASS.items() for u in names},
    **{u.casefold(): ("volume", size, 0.0) for names, size in VOLUME.items() for u in names},
    **{u.casefold(): ("area", size, 0.0) for names, size in AREA.items() for u in names},
    **{u.casefold(): ("speed", size, 0.0) for names, size in SPEED.items() for u in names},
    **{u.casefold(): ("time", size, 0.0) for names, size in DURATION.items() for u in names},
    **{u.casefold(): ("temperature", size, zero) for names, (size, zero) in TEMPERATURE.items() for u in names},
    **{u: ("money", size, 0.0) for u, size in CURRENCY_OF.items() if u.isalpha() or " " in u},
    **{u: ("percent", 1.0, 0.0) for u in PERCENT},
}


def unit_names_pattern() -> str:
    """A regular expression alternation of every unit name above as it is written ("km²",
    "MW", "square kilometres", "USD"), the longest first, a space matching any run of
    whitespace; currency signs and "%" are left out (the segmenter reads them apart)."""
    names = {u for table in (LENGTH, MASS, VOLUME, AREA, SPEED, DURATION, TEMPERATURE, CURRENCIES) for group in table for u in group}
    names |= set(CASED_UNIT_SIZES) | set(PERCENT)
    return names_alternation(u for u in names if any(ch.isalpha() for ch in u))


def names_alternation(names: Iterable[str]) -> str:
    """A regular expression alternation of ``names`` as written, the longest first (so a
    longer unit is not read as its prefix, "km/h" as "km"), a space matching any run of
    whitespace ("square  metres").

    >>> print(names_alternation(["km", "km/h", "sq m"]))
    km/h|sq\\s+m|km
    """
    return "|".join(re.escape(u).replace(r"\ ", r"\s+") for u in sorted(set(names), key=lambda u: (-len(u), u)))
