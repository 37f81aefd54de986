"""Keyword segmentation and token-to-word mapping (no model)."""

import pytest

from tokenshapley_rag._segment import find_keywords, split_sentences, token_words, word_number_spans
from tokenshapley_rag._values import all_values


def _citable(text):
    return [(k.text, k.kind) for k in find_keywords(text) if k.citable]


def test_a_name_does_not_run_across_a_sentence_end():
    assert _citable("It is in Paris, France. It was named after Gustave Eiffel.") == [
        ("Paris", "name"),
        ("France", "name"),
        ("named", "word"),
        ("Gustave Eiffel", "name"),
    ]


def test_initials_and_abbreviations_stay_in_the_name():
    assert _citable("J. R. R. Tolkien lived in St. Louis. Dr. Who met Mr. Smith.") == [
        ("J. R. R. Tolkien", "name"),
        ("lived", "word"),
        ("St. Louis", "name"),
        ("Dr. Who", "name"),
        ("met", "word"),
        ("Mr. Smith", "name"),
    ]


def test_a_sentence_adverb_after_initials_or_an_acronym_starts_a_sentence():
    # "MS." in capitals is the acronym, not the title "Ms."; a sentence adverb after
    # initials opens the next sentence instead of joining a name.
    assert _citable("He was diagnosed with MS. Nevertheless, he kept working.") == [
        ("diagnosed", "word"),
        ("MS", "name"),
        ("kept", "word"),
        ("working", "word"),
    ]
    assert [k.text for k in find_keywords("Prices rose in the U.S. Meanwhile the Fed acted.") if k.kind == "name"] == [
        "U.S.",
        "Fed",
    ]
    assert _citable("Ms. Smith met the U.S. Army.") == [("Ms. Smith", "name"), ("met", "word"), ("U.S. Army", "name")]


def test_dates_numbers_and_names():
    assert _citable("In June 5, 2021 the Bank of America paid $3.5 million.") == [
        ("June 5, 2021", "date"),
        ("Bank of America", "name"),
        ("paid", "word"),
        ("$3.5 million", "number"),
    ]


def test_a_brand_with_a_capital_inside_the_word_is_a_name():
    # "iPhone" was a word, so "The iPhone 15 has a 4,575 mAh battery." had no subject and took
    # the Pixel's battery as supported
    assert _citable("The iPhone 15 has a 4,575 mAh battery.") == [
        ("iPhone 15", "name"), ("4,575", "number"), ("mAh", "word"), ("battery", "word"),
    ]
    assert _citable("I sold my iPad on eBay.") == [("sold", "word"), ("iPad", "name"), ("eBay", "name")]
    # units and prefixed acronyms stay words
    assert [k for k in _citable("It stores 5 kWh; macOS and mRNA too.") if k[1] != "number"] == [
        ("stores", "word"), ("macOS", "word"), ("mRNA", "word"),
    ]


def test_token_words_maps_digit_tokens_to_their_number():
    text = "Built in 2011, it is 330 m."
    offsets = [(0, 5), (5, 8), (8, 10), (10, 11), (11, 12), (12, 13), (13, 14), (14, 17), (17, 20), (20, 22), (22, 23), (23, 24), (24, 26), (26, 27)]
    assert token_words(text, offsets) == [
        "built", "in", "2011", "2011", "2011", "2011", ",", "it", "is", "330", "330", "330", "m", ".",
    ]


@pytest.mark.parametrize(
    "answer, citable",
    [
        ("Zürich has 421,878 people [1].", ["Zürich", "421,878", "people"]),
        ("Zürich has 421,878 people.[1][2]", ["Zürich", "421,878", "people"]),
        ("It opened in 1889 [2, 3] and is 330 m tall [4-5].", ["opened", "1889", "330 m", "tall"]),
        ("It opened in 1889 (source 2; doc 3).", ["opened", "1889"]),
        ("It opened in 1889 [Source 1] and [^2] \u30101\u2020source\u3011.", ["opened", "1889"]),
        # numbers in parentheses that number items from (1) on state nothing, as a numbered
        # list's "1." does not; a lone one is kept (an age, a count)
        ("Mix (1) flour and (2) water.", ["Mix", "flour", "water"]),
        ("Kane (30) scored.", ["Kane", "30", "scored"]),
    ],
)
def test_a_generators_citation_markers_are_not_keywords(answer, citable):
    assert [k.text for k in find_keywords(answer) if k.citable] == citable


def test_a_decomposed_letter_stays_in_its_word():
    # "u" + U+0308 COMBINING DIAERESIS is the "ü" of "Zürich": one word, offsets into the text as given
    answer = "The city of Zu\u0308rich has 421,878 people."
    keywords = [k for k in find_keywords(answer) if k.citable]
    assert [k.text for k in keywords] == ["city", "Zu\u0308rich", "421,878", "people"]
    assert all(answer[k.start : k.end] == k.text for k in keywords)


@pytest.mark.parametrize(
    "answer, number",
    [
        ("The farm has 1,218 megawatts.", "1,218 megawatts"),
        ("It stores 3 kilowatt-hours.", "3 kilowatt-hours"),
        ("Take 2.4 mcg daily.", "2.4 mcg"),
        ("Take 2.4 µg daily.", "2.4 µg"),
        ("It holds 128 GB.", "128 GB"),
        ("The line has 100 Mbps.", "100 Mbps"),
        ("It travels at 343 km/s.", "343 km/s"),
        ("It runs at 5 GHz.", "5 GHz"),
    ],
)
def test_a_number_keeps_its_prefixed_unit(answer, number):
    assert [k.text for k in find_keywords(answer) if k.kind == "number"] == [number]


def _every_unit_the_match_rule_converts() -> list[str]:
    from tokenshapley_rag import _units

    tables = (_units.LENGTH, _units.MASS, _units.VOLUME, _units.AREA, _units.SPEED, _units.TEMPERATURE, _units.CURRENCIES)
    names = {u for table in tables for group in table for u in group} | set(_units.CASED_UNIT_SIZES) | set(_units.PERCENT)
    return sorted(u for u in names if any(ch.isalpha() for ch in u))


@pytest.mark.parametrize("unit", _every_unit_the_match_rule_converts())
def test_a_number_keeps_every_unit_the_match_rule_converts(unit):
    # one list of units for both: "75 Wh", "12 square kilometre", "40 metric tons" and "12 pct"
    # were split from their number, so a wrong unit was never compared
    answer = f"It measured 12 {unit} in all."
    assert [k.text for k in find_keywords(answer) if k.kind == "number"] == [f"12 {unit}"]


def test_a_numbered_lists_item_numbers_are_not_claims():
    # "1." opening a line was a sentence of its own and a number keyword, contradicted by
    # whatever number a source stated; the word after it opens its sentence
    answer = "1. Preheat the oven to 200 °C.\n2. Bake the bread for 30 minutes.\n3) Serve it."
    assert [answer[a:b] for a, b in split_sentences(answer)] == [
        "1. Preheat the oven to 200 °C.", "2. Bake the bread for 30 minutes.", "3) Serve it."]
    assert [(k.text, k.kind) for k in find_keywords(answer) if k.citable] == [
        ("Preheat", "word"), ("oven", "word"), ("200 °C", "number"), ("Bake", "word"), ("bread", "word"),
        ("30 minutes", "number"), ("Serve", "word")]
    # a number ending a sentence still ends it
    assert [k.text for k in find_keywords("He scored 2. Then he left.") if k.kind == "number"] == ["2"]
    assert len(split_sentences("He scored 2. Then he left.")) == 2


@pytest.mark.parametrize(
    "answer, keyword, kind",
    [
        # each was split, and a piece flagged: "v2" and "1", "2" and "5x", "R" and "D"
        ("The tool shipped version v2.1 in March.", "v2.1", "number"),
        ("It was fixed in v2.0.1 today.", "v2.0.1", "number"),
        ("The M3 is 2.5x faster than the M1.", "2.5x", "number"),
        ("It is 10× faster.", "10×", "number"),
        ("The R&D budget grew.", "R&D", "name"),
    ],
)
def test_versions_multiples_and_ampersand_names_are_one_keyword(answer, keyword, kind):
    assert (keyword, kind) in [(k.text, k.kind) for k in find_keywords(answer)]


def test_a_count_of_hundreds_in_words_is_one_number():
    # "Two hundred and fifty delegates" was "Two" and "fifty": 250 in an answer was contradicted by it
    answer = "Two hundred and fifty delegates came; about three thousand four hundred stayed."
    assert [k.text for k in find_keywords(answer) if k.kind == "number"] == ["Two hundred and fifty", "three thousand four hundred"]
    assert [v for _, _, v in word_number_spans(answer)] == ["250", "3400"]
    # ... and so are millions and dozens: "two million" was "two" (2) and a word
    assert [k.text for k in find_keywords("It has two million people and half a million cars, a dozen each.")
            if k.kind == "number"] == ["two million", "half a million", "a dozen"]
    assert [v for _, _, v in word_number_spans("two million, half a million, a dozen")] == ["2000000", "500000", "12"]
    # ... unless a name runs out of it: every word keeps its one unit
    assert [k.text for k in find_keywords("Seven Thousand Islands is a band.") if k.citable] == ["Seven Thousand Islands", "band"]


def test_a_sentence_in_capitals_is_read_in_lower_case():
    # "BARACK OBAMA WAS BORN IN HONOLULU" was one unsupported name
    answer = "BARACK OBAMA WAS BORN IN HONOLULU. NASA launched it."
    assert [(k.text, k.kind) for k in find_keywords(answer) if k.citable] == [
        ("BARACK", "word"), ("OBAMA", "word"), ("BORN", "word"), ("HONOLULU", "word"), ("NASA", "name"), ("launched", "word")]


def test_markup_is_not_a_claim():
    # a heading, a table's header row and HTML tags label the answer: no keyword of theirs is cited
    answer = "## Facts\n\n| name | height |\n|---|---|\n| Eiffel Tower | 330 m |\n\nIt is in <b>Paris</b>.<br/>"
    assert [k.text for k in find_keywords(answer) if k.citable] == ["Eiffel Tower", "330 m", "Paris"]
    # a source's heading names its topic: read with skip_markup=False (sentence_facts does)
    assert [k.text for k in find_keywords("# Acme Corp\n\nIts revenue rose.", skip_markup=False) if k.citable] == [
        "Acme Corp", "revenue", "rose"]
    # a "#" inside a line and a table row with no separator under it are text
    assert [k.text for k in find_keywords("It ranked #4 in 2020.\n| Lyon | 522,250 |") if k.citable] == [
        "ranked", "#4", "2020", "Lyon", "522,250"]


@pytest.mark.parametrize(
    "answer, citable",
    [
        ("La tour Eiffel mesure 330 mètres et a été achevée en 1889.",
         ["tour", "Eiffel", "mesure", "330 mètres", "achevée", "1889"]),
        ("Der Dom ist 157 Meter hoch und wurde 1880 vollendet.", ["Der Dom", "157 Meter", "hoch", "1880", "vollendet"]),
        # English words that are also foreign function words stay keywords; names keep their articles
        ("His son will pour it on par with Los Angeles and La Paz.", ["son", "pour", "par", "Los Angeles", "La Paz"]),
    ],
)
def test_foreign_function_words_are_not_keywords(answer, citable):
    assert [k.text for k in find_keywords(answer) if k.citable] == citable


@pytest.mark.parametrize(
    "answer, citable",
    [
        # underscore emphasis was glued to the keyword: "_", "$4.2" and "billion_", "__Paris__"
        ("Revenue was _$4.2 billion_ in __Paris__; set ACME_TOKEN.", ["Revenue", "$4.2 billion", "Paris", "set", "ACME_TOKEN"]),
        # a source named in prose, a superscript marker
        ("According to Source 2, revenue rose.", ["revenue", "rose"]),
        ("As stated in Documents 1 and 3, its CEO is Maria Lopez^1.", ["stated", "CEO", "Maria Lopez"]),
        # a link's target, an autolink and a bare URL are addresses; the link's text is not
        ("See [the 2023 report](https://acme.com/2023/annual-4.2.pdf) or <https://acme.com/2023>.", ["See", "2023", "report"]),
        ("Details: https://www.toureiffel.paris/en/news-2023.", ["Details"]),
        # the generator's list of its sources
        ("It is 330 m tall.\n\nSources:\n1. Acme 10-K (2023)\n2. Wikipedia", ["330 m", "tall"]),
        ("It is 330 m tall.\n\n**References:**\n- [1] Eiffel Tower (Wikipedia)", ["330 m", "tall"]),
        # headings: setext, a bold line alone over more text; a fence's info string; a task box
        ("Key Facts\n=========\nIt opened in 1889.", ["opened", "1889"]),
        ("**Visitors**\nNearly 7 million people visit it.", ["7 million", "people", "visit"]),
        ("Run:\n```bash\npip install acme\n```", ["Run", "pip", "install", "acme"]),
        ("- [x] Done in 2019", ["2019"]),
        ("Revenue rose in 2023[^1].\n\n[^1]: Acme 2021 filing", ["Revenue", "rose", "2023"]),
        # a list's preamble that only announces it; one that says something stays
        ("Here are the key facts:\n\n- Revenue: $4.2 billion", ["Revenue", "$4.2 billion"]),
        ("Here is what changed in 2023: revenue rose.", ["changed", "2023", "revenue", "rose"]),
        # a bold list item may be an answer: it stays
        ("The cities are:\n- **Paris**\n- **Lyon**", ["cities", "Paris", "Lyon"]),
        # a possessive before an acronym ends a name; a closing quote is not part of one
        ("Acme’s CEO Maria Lopez lives in ‘Denver’; Joe's Garage is not.", ["Acme’s", "CEO Maria Lopez", "lives", "Denver", "Joe's Garage"]),
        # a sentence saying what the sources do not say claims nothing; a claim after it does
        ("The sources do not say who painted it, but it was completed in 1889.", ["completed", "1889"]),
        ("This is not stated in the provided context. I don't know.", []),
    ],
)
def test_formatting_and_references_are_not_claims(answer, citable):
    assert [k.text for k in find_keywords(answer) if k.citable] == citable


def test_a_year_before_the_common_era_is_negative():
    from tokenshapley_rag._values import all_values

    assert [v for _, _, v in all_values("Caesar died in 44 BC, Augustus in AD 14, Rome was founded in 753 B.C.")] == [
        "-44", "14", "-753"]


@pytest.mark.parametrize(
    "answer, citable",
    [
        # a name's number is part of the name: Apollo 12 is not Apollo 11
        ("Apollo 12 landed on the Moon.", [("Apollo 12", "name"), ("landed", "word"), ("Moon", "name")]),
        ("The iPhone 15 Pro Max starts at 256 GB.", [("iPhone 15 Pro Max", "name"), ("starts", "word"), ("256 GB", "number")]),
        ("Article 17 of the GDPR sets it.", [("Article 17", "name"), ("GDPR", "name"), ("sets", "word")]),
        ("The right to data portability is in Article 20.",
         [("right", "word"), ("data", "word"), ("portability", "word"), ("Article 20", "name")]),
        # a code opening its sentence is a name
        ("BRCA1 is located on chromosome 13.", [("BRCA1", "name"), ("located", "word"), ("chromosome", "word"), ("13", "number")]),
        # ... but not a list of values, what a number counts, a year, or a hedged count
        ("Haaland scored 36 goals, and Harry Kane 30.",
         [("Haaland", "word"), ("scored", "word"), ("36", "number"), ("goals", "word"), ("Harry Kane", "name"), ("30", "number")]),
        ("He played for Chelsea 3 seasons.", [("played", "word"), ("Chelsea", "name"), ("3", "number"), ("seasons", "word")]),
        ("In Q3 2023 revenue rose.", [("Q3", "name"), ("2023", "date"), ("revenue", "word"), ("rose", "word")]),
        ("Another 12 people died.", [("Another", "word"), ("12", "number"), ("people", "word"), ("died", "word")]),
        # a number in scientific notation is one number, with its unit
        ("It is 6.022e23 per mole.", [("6.022e23 per mole", "number")]),
        ("It weighs 5.97 × 10²⁴ kg.", [("weighs", "word"), ("5.97 × 10²⁴ kg", "number")]),
        ("A proton has 1.67 x 10^-27 kg.", [("proton", "word"), ("1.67 x 10^-27 kg", "number")]),
        # a date with its era is one date
        ("Caesar was killed on 15 March 44 BC.", [("Caesar", "word"), ("killed", "word"), ("15 March 44 BC", "date")]),
    ],
)
def test_numbered_names_codes_scientific_notation_and_dates_with_an_era(answer, citable):
    assert _citable(answer) == citable


@pytest.mark.parametrize(
    "answer, citable",
    [
        # a species under its abbreviated genus is one name, also after "The"
        ("E. coli is a Gram-negative bacterium.", [("E. coli", "name"), ("Gram-negative", "name"), ("bacterium", "word")]),
        ("Infection with H. pylori causes ulcers.",
         [("Infection", "word"), ("H. pylori", "name"), ("causes", "word"), ("ulcers", "word")]),
        ("The T. rex lived in North America.", [("T. rex", "name"), ("lived", "word"), ("North America", "name")]),
        # ... not an initial before a function word, nor a person's initial
        ("He got grade A. then he left.", [("grade", "word"), ("left", "word")]),
        ("Dr. J. Smith wrote it.", [("Dr. J. Smith", "name"), ("wrote", "word")]),
        # thousands written with periods, before a unit of a language that writes them so
        ("Die Donau ist 2.850 Kilometer lang.", [("Die Donau", "name"), ("2.850 Kilometer", "number"), ("lang", "word")]),
        # a number in words keeps its unit as one in digits does; a glued "m" before what it
        # counts is a million, before anything else metres
        ("Profit rose six per cent.", [("Profit", "word"), ("rose", "word"), ("six per cent", "number")]),
        ("It is six kilometres long.", [("six kilometres", "number"), ("long", "word")]),
        ("The museum welcomed 1.5m visitors.", [("museum", "word"), ("welcomed", "word"), ("1.5m visitors", "number")]),
        ("He won the 100m sprint.", [("won", "word"), ("100m", "number"), ("sprint", "word")]),
        # a title's acronym before "of" is a role apart from the name after it
        ("The CEO of Norvale Foods is Dana Whitfield.", [("CEO", "name"), ("Norvale Foods", "name"), ("Dana Whitfield", "name")]),
        ("The President of France is Emmanuel Macron.", [("President of France", "name"), ("Emmanuel Macron", "name")]),
        # items numbered in parentheses from (1) on: their numbers state nothing; a lone one may
        ("(1) Common Distributed Application Protocol (2) Chronic Disease Assistance Programme.",
         [("Common Distributed Application Protocol", "name"), ("Chronic Disease Assistance Programme", "name")]),
        ("Haaland (23) scored.", [("Haaland", "word"), ("23", "number"), ("scored", "word")]),
        # the rupee's abbreviation is a currency sign, and "Rs." ends no sentence
        ("It costs Rs. 1,200 here.", [("costs", "word"), ("Rs. 1,200", "number")]),
        ("It costs Rs 79,900.", [("costs", "word"), ("Rs 79,900", "number")]),
    ],
)
def test_abbreviated_species_and_period_thousands(answer, citable):
    assert _citable(answer) == citable


@pytest.mark.parametrize(
    "text, values",
    [
        ("Die Donau ist 2.850 Kilometer lang.", ["2850"]),
        ("El Danubio mide 2.850 kilómetros.", ["2850"]),
        ("Es kostet 1.500 Millionen Euro.", ["1500000000"]),
        ("Sie hat 1.234.567 Einwohner.", ["1234567"]),
        ("Er ist 2.850,5 Meter hoch.", ["2850.5"]),
        # one group before an English unit, or before nothing, is a decimal point
        ("It weighs 2.850 kg.", ["2.85"]),
        ("The ratio was 2.850 overall.", ["2.85"]),
        ("It rose 12.5 Prozent.", ["12.5"]),
        # a glued "m": a million before a plural it counts, else metres
        ("It had 1.5m visitors and 3m users.", ["1500000", "3000000"]),
        ("It is 12.5m tall; the 400m hurdles.", ["12.5", "400"]),
    ],
)
def test_thousands_written_with_periods_and_a_glued_million(text, values):
    assert [v for _, _, v in all_values(text)] == values
