"""The support flag on values written another way, end to end with the default model.

Two companies' reports that disagree, a weather note and a tower's page (written for this
test): amounts with abbreviated scales, measurements in other units, dates in digits,
decades and centuries, ranges, names with titles or initials, possessive subjects and
comparisons. Each row was a wrong status when the library was tried this way (docs/reports/
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
    ("When was it completed?", "The Eiffel Tower was completed in the late 19th century.", "19th century", "supported", "tower"),
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
]


@pytest.fixture(scope="module")
def ask(ts):
    memo = {}

    def run(question, answer):
        if (question, answer) not in memo:
            memo[question, answer] = ts.attribute(query=question, sources=SOURCES, response=answer)
        return memo[question, answer]

    return run


@pytest.mark.parametrize("question, answer, keyword, status, source", ROWS)
def test_values_written_another_way(ask, question, answer, keyword, status, source):
    res = ask(question, answer)
    c = next(c for c in res.citations if c.text == keyword)
    assert c.status == status
    if status == "supported":
        assert c.best is not None and c.best.source_id == source and c.conflict is None
    elif status == "contradicted":
        assert c.conflict is not None and c.conflict.source_id == source and c.best is None


def test_a_converted_measurement_is_cited_where_the_source_states_it(ask):
    res = ask("How tall is the Eiffel Tower?", "The Eiffel Tower is 1,083 feet tall.")
    c = next(c for c in res.citations if c.text == "1,083 feet")
    sentence = c.best.sentence
    assert sentence.startswith("The Eiffel Tower is 330 metres tall")
    # the cited range is the source's own measurement
    text = next(s["text"] for s in SOURCES if s["id"] == "tower")
    assert text[c.best.keyword_start : c.best.keyword_end] == "330 metres"
