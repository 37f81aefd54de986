"""The support flag on answers as generators write them, end to end with the default model:
numbered lists, denials, versions and multiples, counts in words, other languages' scale
words, acronyms, a sentence drawing on two sources, and pages about several people. Each row
was a wrong status when the library was tried this way (docs/reports/support.md, "Found on
lists, denials, versions and pages about several people"); the rows that were already right
guard the other direction."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

BREAD = ["First, preheat the oven to 200 °C. Then bake the bread for 30 minutes."]
FOUNDERS = ["Microsoft was founded by Bill Gates in 1975.", "Apple was founded by Steve Jobs in 1976."]
CURIES = ["Pierre Curie was born in 1859 in Paris. Marie Curie was born in 1867 in Warsaw."]
MOONS = ["| Planet | Moons |\n|---|---|\n| Jupiter | 95 |\n| Uranus | 28 |"]
SHIPPING = ["Halvorsen Shipping did not pay a dividend.", "Pellucid Software sold two tankers' worth of code."]

# (question, sources, answer, keyword, status, the source it is cited to or the conflicting source)
ROWS = [
    # a numbered list's item numbers were number keywords, contradicted by the steps' numbers
    ("What are the steps?", BREAD, "1. Preheat the oven to 200 °C.\n2. Bake the bread for 30 minutes.", "200 °C", "supported", "0"),
    ("What are the steps?", BREAD, "1. Preheat the oven to 220 °C.\n2. Bake the bread for 30 minutes.", "220 °C", "contradicted", "0"),
    # a denied fact was supported by the sentence denying it, and a denial by the fact
    ("Did Halvorsen pay a dividend?", SHIPPING, "Halvorsen Shipping paid a dividend.", "paid", "contradicted", "0"),
    ("Did Halvorsen pay a dividend?", SHIPPING, "Halvorsen Shipping did not pay a dividend.", "pay", "supported", "0"),
    ("Did it sell tankers?", ["Halvorsen Shipping sold two tankers."], "Halvorsen Shipping did not sell any tankers.", "sell", "contradicted", "0"),
    # "v2.0.1" was "v2" and "0.1"; "2.5x" was "2" (contradicted) and "5x"
    ("Which version fixed it?", ["The bug was fixed in version 2.0.1."], "The bug was fixed in v2.0.1.", "v2.0.1", "supported", "0"),
    ("Which version fixed it?", ["The bug was fixed in version 2.0.1."], "The bug was fixed in v2.0.2.", "v2.0.2", "contradicted", "0"),
    ("How much faster?", ["The M3 is 2.5 times faster than the M1."], "The M3 is 2.5x faster than the M1.", "2.5x", "supported", "0"),
    # a count of hundreds in words was its parts, "Two" and "fifty", which contradicted 250
    ("How many delegates?", ["Two hundred and fifty delegates attended."], "250 delegates attended.", "250", "supported", "0"),
    ("How many delegates?", ["Two hundred and fifty delegates attended."], "260 delegates attended.", "260", "contradicted", "0"),
    # "two million" was "two" (2), unsupported against "2 million"; "a dozen" was a word
    ("How many people?", ["The city has 2 million inhabitants."], "The city has two million inhabitants.", "two million", "supported", "0"),
    ("How many people?", ["The city has 2 million inhabitants."], "The city has three million inhabitants.", "three million", "contradicted", "0"),
    ("How many eggs?", ["The recipe needs 12 eggs."], "The recipe needs a dozen eggs.", "a dozen", "supported", "0"),
    # a German source's scale word ("Millionen") was not read: 3.7 million was contradicted by 3,7
    ("How many people live in Berlin?", ["Berlin hat rund 3,7 Millionen Einwohner."], "Berlin has about 3.7 million inhabitants.", "3.7 million", "supported", "0"),
    # a German or French source's date: its month name was not read
    ("When did it open?", ["Der Eiffelturm wurde am 31. März 1889 eröffnet."], "The Eiffel Tower opened on 31 March 1889.", "31 March 1889", "supported", "0"),
    ("When was it taken?", ["La Bastille fut prise le 14 juillet 1789."], "The Bastille was stormed on July 14, 1789.", "July 14, 1789", "supported", "0"),
    # "USA" was contradicted by the sentence naming the United States; "JFK" was a word
    ("Where is it?", ["The Statue of Liberty stands in New York City, United States."], "The Statue of Liberty is in NYC, USA.", "USA", "supported", "0"),
    ("Who was shot?", ["John F. Kennedy was assassinated in Dallas in 1963."], "JFK was assassinated in 1963.", "JFK", "supported", "0"),
    # a number the question states is what was asked about: "3.12" was contradicted by 3.11's page
    ("When was Python 3.12 released?", ["Python 3.11 was released on 24 October 2022.", "Python 3.12 was released on 2 October 2023."],
     "Python 3.12 was released on 24 October 2022.", "3.12", "supported", "1"),
    ("When was Python 3.12 released?", ["Python 3.11 was released on 24 October 2022.", "Python 3.12 was released on 2 October 2023."],
     "Python 3.12 was released on 24 October 2022.", "24 October 2022", "contradicted", "1"),
    # a count in words held nowhere, against the sentence holding the rest of its claim
    ("How many moons does Mars have?", ["Mars has two small moons, Phobos and Deimos."], "Mars has three moons.", "three", "contradicted", "0"),
    # an answer in capitals was one unsupported name
    ("WHERE WAS OBAMA BORN?", ["Barack Obama was born in Honolulu."], "BARACK OBAMA WAS BORN IN HONOLULU.", "HONOLULU", "supported", "0"),
    # a clause that leaves its verb out ("and Apple in 1976 by Steve Jobs") was the first clause's list item
    ("Who founded Microsoft and Apple?", FOUNDERS, "Microsoft was founded in 1975 by Bill Gates, and Apple in 1976 by Steve Jobs.", "Steve Jobs", "supported", "1"),
    ("Who founded Microsoft and Apple?", FOUNDERS, "Microsoft was founded in 1975 by Bill Gates, and Apple in 1976 by Steve Jobs.", "1976", "supported", "1"),
    ("Who founded Microsoft and Apple?", FOUNDERS, "Microsoft was founded in 1976 by Bill Gates, and Apple in 1975 by Steve Jobs.", "1975", "contradicted", "1"),
    # a value from the page's sentence about another person, or a table's other row, was supported
    ("When was Marie Curie born?", CURIES, "Marie Curie was born in 1859.", "1859", "contradicted", "0"),
    ("Where was Marie Curie born?", CURIES, "Marie Curie was born in Paris.", "Paris", "contradicted", "0"),
    ("When was Marie Curie born?", CURIES, "Marie Curie was born in 1867.", "1867", "supported", "0"),
    ("When was Pierre Curie born?", CURIES, "Marie Curie married Pierre Curie, who was born in 1859.", "1859", "supported", "0"),
    ("How many moons does Uranus have?", MOONS, "Uranus has 95 moons.", "95", "contradicted", "0"),
    ("How many moons does Uranus have?", MOONS, "Uranus has 28 moons.", "28", "supported", "0"),
    # a number from another company's page: the subject the question names stands, and the
    # number is not contradicted by the subject's page counting something else
    ("How many employees does Halvorsen have?", ["Pellucid Software has 3,400 employees.", "Halvorsen Shipping operates 64 vessels."],
     "Halvorsen Shipping has 3,400 employees.", "Halvorsen Shipping", "supported", "1"),
    ("How many employees does Halvorsen have?", ["Pellucid Software has 3,400 employees.", "Halvorsen Shipping operates 64 vessels."],
     "Halvorsen Shipping has 3,400 employees.", "3,400", "unsupported", None),
    # one sentence holding two values, each beside its own name: the other name's was supported
    ("How tall is K2?", ["Mount Everest (8,849 m) is taller than K2 (8,611 m)."], "K2 is 8,849 m high.", "8,849 m", "contradicted", "0"),
    ("How tall is K2?", ["Mount Everest (8,849 m) is taller than K2 (8,611 m)."], "K2 is 8,611 m high.", "8,611 m", "supported", "0"),
    ("How tall is Everest?", ["Mount Everest (8,849 m) is taller than K2 (8,611 m)."], "Mount Everest is 8,849 m high.", "8,849 m", "supported", "0"),
    # the same number in another unit, or another currency, is another value
    ("How much does it store?", ["The Model X battery stores 75 kWh of energy."], "The Model X battery stores 75 Wh of energy.", "75 Wh", "contradicted", "0"),
    ("How much was the fine?", ["The bank was fined £1.5 million."], "The bank was fined $1.5 million.", "$1.5 million", "contradicted", "0"),
]


@pytest.mark.parametrize("question, sources, answer, keyword, status, source", ROWS)
def test_answers_as_generators_write_them(ts, question, sources, answer, keyword, status, source):
    res = ts.attribute(query=question, sources=sources, response=answer)
    found = [c for c in res.citations if c.text == keyword]
    assert found, [c.text for c in res.citations]
    c = found[0]
    assert c.status == status, [(x.text, x.status) for x in res.citations]
    cited = c.best if status == "supported" else c.conflict
    if source is None:
        assert cited is None
    else:
        assert cited is not None and cited.source_id == source


def test_a_numbered_lists_sentences_are_its_items(ts):
    res = ts.attribute(query="What are the steps?", sources=BREAD,
                       response="1. Preheat the oven to 200 °C.\n2. Bake the bread for 30 minutes.")
    assert [v.verdict for v in res.sentences] == ["supported", "supported"]
    assert [c.text for c in res.citations if c.kind == "number"] == ["200 °C", "30 minutes"]


def test_the_page_lists_the_contradicting_sentences(ts):
    # the contradicting sentence was only in a hover card; the markdown lists it as [^x1]
    res = ts.attribute(query="When was Marie Curie born?", sources=CURIES, response="Marie Curie was born in 1859.")
    page = res.to_html()
    listed = page[page.index("<h2>Contradicting sentences</h2>"):]
    assert "Pierre Curie was born in 1859 in Paris. Marie Curie was born in 1867 in Warsaw." not in listed
    assert "x1</b>: contradicted by" in listed and "Marie Curie was born in 1867 in Warsaw." in listed
    assert '[^x1]: Contradicted by 0: "Marie Curie was born in 1867 in Warsaw."' in res.to_markdown()
