"""The support flag on values written another way, end to end with the default model.

Two companies' reports that disagree, a weather note, a tower's page, a short biography, a
timetable, a poll, a drug's approval, a match and a city (written for this test): amounts with abbreviated scales, measurements
in other units, roundings, dates in digits, decades and centuries, ranges, scores, times,
currencies, names with titles or initials, acronyms, possessive subjects and comparisons. Each row was a wrong status when the library was tried this way (docs/reports/
support.md, "Other formats"); the rows that were already right guard the other direction.
"""

import pytest

pytestmark = pytest.mark.slow

SOURCES = [
    {"id": "acme", "text": (
        "Acme Corp reported revenue of $4.2 billion for fiscal 2023, up 12% from the previous year. "
        "Its operating margin was 18.5 percent. The company employs 14,300 people and is headquartered in "
        "Denver. Acme was founded in 1987 by Laura Chen."
    )},
    {"id": "globex", "text": (
        "Globex Inc. posted revenue of $3.1 billion in fiscal 2023, a decline of 4%. Its operating margin "
        "fell to 9.2 percent. Globex employs 22,000 people and is based in Chicago. The company was founded "
        "in 1962 by Martin Hale."
    )},
    {"id": "weather", "text": (
        "On 14 July 2022 the temperature in Seville reached 44.6 °C, the highest that summer. Rainfall in "
        "2022 totalled 312 mm, about half the long-term average of 620 mm."
    )},
    {"id": "tower", "text": (
        "The Eiffel Tower is 330 metres tall and weighs about 10,100 tonnes. It was completed on 31 March "
        "1889 after two years, two months and five days of construction. Gustave Eiffel's company built it."
    )},
    {"id": "bio", "text": (
        "Ada Lovelace was born on 10 December 1815 in London and died on 27 November 1852, aged 36. She "
        "worked with Charles Babbage on the Analytical Engine."
    )},
    {"id": "train", "text": "The first train leaves at 17:30 and arrives at 21:05. A ticket costs €45.50."},
    {"id": "poll", "text": "In the survey, 62 percent of respondents backed the plan, while 25% opposed it."},
    {"id": "drug", "text": "The drug was approved in the United States in 1974."},
    {"id": "match", "text": "France beat Croatia 4–2 in the 2018 World Cup final in Moscow on 15 July 2018."},
    {"id": "city", "text": "Zurich has a population of 421,878 (2020) and covers 87.88 km²."},
]

# (question, answer, keyword, expected status, the source it is cited to or conflicts with)
ROWS = [
    # an abbreviated scale is one value: "$4.2bn" was "$4" (contradicted) and "2bn"
    ("What was Acme's revenue?", "Acme reported revenue of $4.2bn in 2023.", "$4.2bn", "supported", "acme"),
    ("What was Acme's revenue?", "Acme reported revenue of $4.2m in 2023.", "$4.2m", "contradicted", "acme"),
    # a possessive subject is the claim's subject: Globex's 9.2% and 4% were supported for Acme
    ("What was Acme's margin?", "Acme's operating margin was 9.2%.", "9.2%", "contradicted", "acme"),
    ("What was Acme's revenue?", "Acme's revenue fell 4% in fiscal 2023.", "4%", "contradicted", "acme"),
    ("What was Acme's margin?", "Acme's operating margin was 18.5%.", "18.5%", "supported", "acme"),
    # a measurement converted to another unit was contradicted by the source's own
    ("How tall is the Eiffel Tower?", "The Eiffel Tower is 1,083 feet tall.", "1,083 feet", "supported", "tower"),
    ("How tall is the Eiffel Tower?", "The Eiffel Tower is 0.33 km tall.", "0.33 km", "supported", "tower"),
    ("How tall is the Eiffel Tower?", "The Eiffel Tower is 1,000 feet tall.", "1,000 feet", "contradicted", "tower"),
    ("How much rain fell?", "Rainfall in 2022 was 31.2 cm.", "31.2 cm", "supported", "weather"),
    ("How hot was Seville?", "Seville reached 112.3 °F in July 2022.", "112.3 °F", "supported", "weather"),
    ("How heavy is the tower?", "The Eiffel Tower weighs 10.1 million kilograms.", "10.1 million kilograms", "supported", "tower"),
    # a date in digits was unsupported
    ("When was Seville hottest?", "Seville reached 44.6 °C on 14/07/2022.", "14/07/2022", "supported", "weather"),
    ("When was Seville hottest?", "Seville reached 44.6 °C on 14.06.2022.", "14.06.2022", "contradicted", "weather"),
    # a decade or a century holding the date was unsupported
    ("When was it completed?", "The Eiffel Tower was completed in the 1880s.", "1880s", "supported", "tower"),
    ("When was it completed?", "The Eiffel Tower was completed in the late 19th century.", "late 19th century", "supported", "tower"),
    ("When was it completed?", "The Eiffel Tower was completed in the nineteenth century.", "nineteenth century", "supported", "tower"),
    # a date another document holds, against the subject's page that states the claim's own
    # words with another date: 1815 was supported by Ada Lovelace's birth
    ("When was it completed?", "The Eiffel Tower was completed in 1815.", "1815", "contradicted", "tower"),
    ("When was it completed?", "The Eiffel Tower was completed in the early 19th century.", "early 19th century", "contradicted", "tower"),
    # a range holding the value: both ends were contradicted
    ("What was Acme's revenue?", "Acme's revenue was between $4 billion and $4.5 billion.", "$4 billion", "supported", "acme"),
    ("What was Acme's revenue?", "Acme's revenue was between $4 billion and $4.5 billion.", "$4.5 billion", "supported", "acme"),
    # a title or an initial in a name: unsupported, or contradicted by the full name
    ("Who founded Acme?", "Acme was founded by Dr. Laura Chen in 1987.", "Dr. Laura Chen", "supported", "acme"),
    ("Who founded Acme?", "Acme was founded by L. Chen in 1987.", "L. Chen", "supported", "acme"),
    ("Who founded Acme?", "Acme was founded by M. Hale in 1987.", "M. Hale", "contradicted", "acme"),
    # a comparison's second term is its own claim: "Acme" and Globex's 22,000 were contradicted
    ("Compare the two.", "Acme, with 14,300 employees, is smaller than Globex, which has 22,000.", "Acme", "supported", "acme"),
    ("Compare the two.", "Acme, with 14,300 employees, is smaller than Globex, which has 22,000.", "22,000", "supported", "globex"),
    ("Compare the two.", "Acme, with 22,000 employees, is larger than Globex, which has 14,300.", "22,000", "contradicted", "acme"),
    # a slashed date that may be read either way was contradicted (12/10 is December 10)
    ("When was she born?", "Ada Lovelace was born on 12/10/1815.", "12/10/1815", "supported", "bio"),
    ("When was she born?", "Ada Lovelace was born on 12/11/1815.", "12/11/1815", "contradicted", "bio"),
    # a time on the 12-hour clock was contradicted by the same time on the 24-hour clock
    ("When does it leave?", "The first train leaves at 5:30 pm.", "5:30 pm", "supported", "train"),
    ("When does it leave?", "The first train leaves at 6:30 pm.", "6:30 pm", "contradicted", "train"),
    # a currency written as a word: "euros" was an unsupported word; another currency is
    # another amount, which the sentence stating the price in euros contradicts
    ("How much is a ticket?", "A ticket costs 45.50 euros.", "45.50 euros", "supported", "train"),
    ("How much is a ticket?", "A ticket costs 45.50 dollars.", "45.50 dollars", "contradicted", "train"),
    ("How much is a ticket?", "A ticket costs EUR 45.50.", "EUR 45.50", "supported", "train"),
    ("What was Acme's revenue?", "Acme's revenue was 4.2 billion euros in 2023.", "4.2 billion euros", "contradicted", "acme"),
    # a count in words opening the sentence was a word ("Sixty-two" unsupported)
    ("What did the survey find?", "Sixty-two percent backed the plan.", "Sixty-two percent", "supported", "poll"),
    # dotted initials are an acronym: "U.S." was contradicted by "United States"
    ("Where was it approved?", "The drug was approved in the U.S. in 1974.", "U.S.", "supported", "drug"),
    # a score's values the other way round were supported
    ("Who won the final?", "France won the 2018 World Cup final 2-4 against Croatia.", "2-4", "unsupported", None),
    ("Who won the final?", "France won the 2018 World Cup final 4-2 against Croatia.", "4-2", "supported", "match"),
    # a value rounded from one with more decimals was contradicted by it
    ("How big is Zurich?", "Zurich covers 88 square kilometres.", "88 square kilometres", "supported", "city"),
    ("How big is Zurich?", "Zurich covers 89 square kilometres.", "89 square kilometres", "contradicted", "city"),
]


@pytest.fixture(scope="module")
def ask(attribute_once):
    """``ts.attribute`` over these sources, each (question, answer) attributed once."""
    return lambda question, answer: attribute_once(SOURCES, question, answer)


@pytest.mark.parametrize("question, answer, keyword, status, source", ROWS)
def test_values_written_another_way(keyword_status_of, question, answer, keyword, status, source):
    keyword_status_of(SOURCES, question, answer, keyword, status, source)


def test_a_converted_measurement_is_cited_where_the_source_states_it(ask):
    res = ask("How tall is the Eiffel Tower?", "The Eiffel Tower is 1,083 feet tall.")
    c = next(c for c in res.citations if c.text == "1,083 feet")
    sentence = c.best.sentence
    assert sentence.startswith("The Eiffel Tower is 330 metres tall")
    # the cited range is the source's own measurement
    text = next(s["text"] for s in SOURCES if s["id"] == "tower")
    assert text[c.best.keyword_start : c.best.keyword_end] == "330 metres"
