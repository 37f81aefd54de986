"""The support flag on facts recombined within one document, and on names written another way,
end to end with the default model.

Pages written for this test: a health agency's report, release notes, a bank's quarter, a
Tudor king, a cold night, a football season, emissions, a World Cup's awards, the Curies'
prizes, the Moon landing and a company's history. Each row was a wrong status when the library
was tried this way (docs/reports/support.md, "One document, recombined"): a value or a name
taken from another sentence of the right page ("Kylian Mbappé won the Golden Ball."), an
acronym of a longer name ("CDC"), a name numbered the other way ("World War II"), a sign
written as a word ("minus 12.5"), a season ("2019/20"), a share written as a fraction
("almost half"). The rows that were already right guard the other direction: answers that
combine several sentences of one page correctly stay supported. The later groups of pages
(finals, casts, companies, films; phones, vaccines, a tower, quarters) are from the next round
(docs/reports/support.md, "A name from another page's sentence ..." and "Found on two phones
..."): names and values taken across pages. The writers' group is from the round after
("Found on writers, acquisitions and units"): a place or a price from another page, units told
apart by their prefix, citation markers and decomposed text.
"""

import pytest

pytestmark = pytest.mark.slow

SOURCES = [
    {"id": "agency", "text": (
        "The World Health Organization (WHO) declared the outbreak a pandemic on 11 March 2020. "
        "The U.S. Centers for Disease Control and Prevention reported 1.2 million cases by April. "
        "The U.K. entered a national lockdown on 23 March 2020."
    )},
    {"id": "python", "text": (
        "Python 3.11 was released on 24 October 2022 and is up to 25% faster than Python 3.10. "
        "Version 3.12, released in October 2023, removed the distutils module."
    )},
    {"id": "bank", "text": (
        "In the third quarter of 2023 the bank earned $1.2 billion, and its market share rose 2 percentage "
        "points to 45%. Chief executive Maria Gómez, aged 54, has led the bank since 2019."
    )},
    {"id": "tudor", "text": (
        "Henry VIII became king in 1509 and married Catherine of Aragon. He died on 28 January 1547 at the "
        "age of 55. The Second World War began in 1939."
    )},
    {"id": "oslo", "text": "The coldest night of the winter reached −12.5 °C in Oslo."},
    {"id": "club", "text": (
        "In the 2019–20 season Liverpool won the Premier League with 99 points, 18 points ahead of "
        "Manchester City. Jürgen Klopp has managed the club since October 2015."
    )},
    {"id": "climate", "text": (
        "Global CO2 emissions fell by 5.4% in 2020 to 34.8 billion tonnes. Emissions from aviation dropped "
        "by almost half."
    )},
    {"id": "worldcup", "text": (
        "Argentina won the 2022 FIFA World Cup, beating France on penalties in the final. Lionel Messi won "
        "the Golden Ball as the tournament's best player. Kylian Mbappé won the Golden Boot with eight goals. "
        "Emiliano Martínez was named the best goalkeeper."
    )},
    {"id": "nobel", "text": (
        "In 1903 Marie Curie shared the Nobel Prize in Physics with Pierre Curie and Henri Becquerel. In 1911 "
        "she won the Nobel Prize in Chemistry alone. Her daughter Irène Joliot-Curie won the Nobel Prize in "
        "Chemistry in 1935."
    )},
    {"id": "apollo", "text": (
        "Apollo 11 landed on the Moon on 20 July 1969. Neil Armstrong was the first person to walk on the "
        "Moon. Buzz Aldrin followed him 19 minutes later. Michael Collins stayed in lunar orbit aboard "
        "Columbia."
    )},
    {"id": "nokia", "text": (
        "Nokia was founded in 1865 in Tampere. The company moved its headquarters to Espoo in 1989. It sold "
        "its phone business to Microsoft in 2014 for 5.4 billion euros."
    )},
]

# (question, answer, keyword, expected status, the source it is cited to or conflicts with)
ROWS = [
    # an acronym of a longer name, or dotted initials inside one, was contradicted
    ("How many cases?", "The CDC reported 1.2 million cases by April.", "CDC", "supported", "agency"),
    ("How many cases?", "The US CDC reported 1.2 million cases by April.", "US CDC", "supported", "agency"),
    ("When was the pandemic declared?", "WHO declared a pandemic on 11 March 2020.", "WHO", "supported", "agency"),
    ("When did the UK lock down?", "The UK entered a national lockdown on 23 March 2020.", "UK", "supported", "agency"),
    # a name numbered the other way was contradicted
    ("When did the war begin?", "World War II began in 1939.", "World War II", "supported", "tudor"),
    ("When did the war begin?", "World War I began in 1939.", "World War I", "contradicted", "tudor"),
    # a minus sign written as a word was unsupported
    ("How cold was Oslo?", "Oslo reached minus 12.5 degrees Celsius.", "minus 12.5 degrees Celsius", "supported", "oslo"),
    ("How cold was Oslo?", "Oslo reached 12.5 °C, the coldest night of the winter.", "12.5 °C", "contradicted", "oslo"),
    # a season with a slash was a fraction
    ("How did Liverpool do?", "Liverpool won the 2019/20 Premier League with 99 points.", "2019/20", "supported", "club"),
    ("How did Liverpool do?", "Liverpool won the 2018-19 Premier League with 99 points.", "2018-19", "contradicted", "club"),
    # a share written as a fraction in the source was contradicted by it
    ("What happened to emissions?", "Aviation emissions fell by almost 50%.", "50%", "supported", "climate"),
    ("What happened to emissions?", "CO2 emissions fell by 4.5% in 2020.", "4.5%", "contradicted", "climate"),
    # a quarter by its code was unsupported
    ("How did the bank do?", "The bank earned $1.2 billion in Q3 2023.", "Q3", "supported", "bank"),
    # a value from another sentence of the subject's page, where the claim's own sentence
    # states another one beside the same word: supported
    ("Who runs the bank?", "Maria Gómez, aged 45, has led the bank since 2019.", "45", "contradicted", "bank"),
    ("Who runs the bank?", "Maria Gomez, 54, has led the bank since 2019.", "54", "supported", "bank"),
    ("When was Python 3.11 released?", "Python 3.12 was released on 24 October 2022.", "3.12", "contradicted", "python"),
    ("When was Python 3.11 released?", "Python 3.11 was released on 24 October 2022.", "3.11", "supported", "python"),
    ("Tell me about Nokia.", "Nokia was founded in Tampere in 1989.", "1989", "contradicted", "nokia"),
    # ... and a name from another sentence of the same page
    ("Tell me about Nokia.", "Nokia was founded in Espoo in 1865.", "Espoo", "contradicted", "nokia"),
    ("Who won the Golden Ball?", "Kylian Mbappé won the Golden Ball.", "Kylian Mbappé", "contradicted", "worldcup"),
    ("Who won the Golden Ball?", "Messi won the Golden Boot with eight goals.", "Messi", "contradicted", "worldcup"),
    ("Who walked on the Moon?", "Buzz Aldrin was the first person to walk on the Moon.", "Buzz Aldrin", "contradicted", "apollo"),
    ("What did Curie win?", "Marie Curie won the Nobel Prize in Physics in 1911.", "Physics", "contradicted", "nobel"),
    # ", and" before a name and its verb opens a second claim, not a list's last item: the
    # first claim was too long for the rule
    ("Who won the Golden Ball?", "Kylian Mbappé won the Golden Ball, and Argentina beat France on penalties.", "Kylian Mbappé", "contradicted", "worldcup"),
    ("Who won the Golden Ball?", "Kylian Mbappé won the Golden Ball, and Argentina beat France on penalties.", "Argentina", "supported", "worldcup"),
    ("Who won the Golden Ball?", "Lionel Messi won the Golden Ball, and Mbappé won the Golden Boot with eight goals.", "Lionel Messi", "supported", "worldcup"),
    ("Who won the Golden Ball?", "Lionel Messi won the Golden Ball, and Mbappé won the Golden Boot with eight goals.", "Mbappé", "supported", "worldcup"),
    # answers that combine a page's sentences correctly stay supported
    ("Who won the Golden Ball?", "Lionel Messi won the Golden Ball.", "Lionel Messi", "supported", "worldcup"),
    ("Who won the Golden Ball?", "Mbappé won the Golden Boot with eight goals, and Messi won the Golden Ball.", "Mbappé", "supported", "worldcup"),
    ("Who won the Golden Ball?", "Mbappé won the Golden Boot with eight goals, and Messi won the Golden Ball.", "Messi", "supported", "worldcup"),
    ("What did Curie win?", "Marie Curie shared the 1903 Nobel Prize in Physics with Henri Becquerel, and won the Chemistry prize in 1911.", "1911", "supported", "nobel"),
    ("What did Curie win?", "Marie Curie shared the 1903 Nobel Prize in Physics with Henri Becquerel, and won the Chemistry prize in 1911.", "Physics", "supported", "nobel"),
    ("Who walked on the Moon?", "Buzz Aldrin followed Armstrong 19 minutes later, while Michael Collins stayed in orbit.", "Michael Collins", "supported", "apollo"),
    ("Who walked on the Moon?", "Buzz Aldrin followed Armstrong 19 minutes later, while Michael Collins stayed in orbit.", "Armstrong", "supported", "apollo"),
    ("Tell me about Nokia.", "Nokia was founded in Tampere in 1865 and moved to Espoo in 1989.", "Espoo", "supported", "nokia"),
    ("Tell me about Nokia.", "Nokia was founded in Tampere in 1865 and moved to Espoo in 1989.", "1989", "supported", "nokia"),
    ("Tell me about Nokia.", "In 2014, Nokia, founded in 1865, sold its phone business to Microsoft.", "1865", "supported", "nokia"),
    ("How much faster is Python 3.11?", "Python 3.11 is up to 25 percent faster than Python 3.10.", "25 percent", "supported", "python"),
]


@pytest.mark.parametrize("question, answer, keyword, status, source", ROWS)
def test_facts_recombined_within_a_document(keyword_status_of, question, answer, keyword, status, source):
    keyword_status_of(SOURCES, question, answer, keyword, status, source)


def test_a_hedge_word_is_not_a_keyword(attribute_once):
    # "nearly" was an unsupported keyword next to the source's "almost"
    res = attribute_once(SOURCES, "What happened to emissions?", "Aviation emissions dropped by nearly half.")
    assert [c.text for c in res.citations] == ["Aviation", "emissions", "dropped", "half"]
    assert all(c.status == "supported" for c in res.citations)


# Two finals, two games' casts, two companies and two films, written for this test: a name
# inside a longer name the answer also names ("Madrid" in "Real Madrid"), a name taken from
# another page's list, and a title that opens its page's sentences.
OTHER_SOURCES = [
    {"id": "final", "text": (
        "Real Madrid beat Liverpool 1–0 in the 2022 Champions League final in Paris. Vinícius Júnior scored "
        "the only goal."
    )},
    {"id": "final2", "text": (
        "Liverpool beat Tottenham 2–0 in the 2019 final in Madrid. Mohamed Salah scored a penalty in the "
        "second minute."
    )},
    {"id": "persona3", "text": (
        "Persona 3 follows a silent protagonist. The main characters of Persona 3 are Makoto, Yukari, Junpei, "
        "Akihiko and Mitsuru."
    )},
    {"id": "persona4", "text": "In Persona 4, Yu and his friends, along with Teddie, form an investigation team."},
    {"id": "acme", "text": (
        "Acme Corp is headquartered in Denver. Its chief executive is Laura Chen, who succeeded Mark Davis in "
        "2019."
    )},
    {"id": "globex", "text": (
        "Globex is headquartered in Austin. Its chief executive is Mark Davis, who joined from Acme in 2019."
    )},
    {"id": "film1", "text": "Inception is a 2010 film directed by Christopher Nolan. It grossed $837 million worldwide."},
    {"id": "film2", "text": "Interstellar is a 2014 film directed by Christopher Nolan. It grossed $701 million worldwide."},
]

OTHER_ROWS = [
    # "Madrid" was held by the 2022 final's "Real Madrid": supported
    ("Who won the 2022 final?", "Real Madrid beat Liverpool 1–0 in Madrid.", "Madrid", "contradicted", "final"),
    ("Who won the 2022 final?", "Real Madrid beat Liverpool 1–0 in Madrid.", "Real Madrid", "supported", "final"),
    ("Who won the 2022 final?", "Real Madrid beat Liverpool 1–0 in Paris.", "Paris", "supported", "final"),
    ("Where was the 2019 final?", "Liverpool beat Tottenham 2–0 in Madrid.", "Madrid", "supported", "final2"),
    # Teddie, from Persona 4's page, was supported in Persona 3's cast
    ("Who are Persona 3's characters?", "The main characters of Persona 3 are Teddie, Yukari, Junpei, Akihiko and Mitsuru.", "Teddie", "contradicted", "persona3"),
    ("Who are Persona 3's characters?", "The main characters of Persona 3 are Makoto, Yukari, Junpei, Akihiko and Mitsuru.", "Makoto", "supported", "persona3"),
    ("Who is in Persona 4?", "In Persona 4, Yu and his friends, along with Teddie, form a team.", "Teddie", "supported", "persona4"),
    # ... but only from a page about the claim's subject: Globex's page does not name Laura Chen
    ("Who runs Acme?", "Laura Chen is the chief executive of Acme Corp.", "Acme Corp", "supported", "acme"),
    ("Who runs Acme?", "Laura Chen is the chief executive of Acme Corp.", "Laura Chen", "supported", "acme"),
    # a title the pages write only capitalised, opening their sentences, is the claim's subject:
    # the other film's figure was supported
    ("How much did they gross?", "Inception grossed $701 million worldwide.", "$701 million", "contradicted", "film1"),
    ("How much did they gross?", "Inception grossed $837 million worldwide.", "$837 million", "supported", "film1"),
    # ... and the film stands: its own page contradicts the figure (Interstellar's "It grossed
    # $701 million" had flagged it too)
    ("How much did they gross?", "Inception grossed $701 million worldwide.", "Inception", "supported", "film1"),
    ("How much did they gross?", "Interstellar grossed $701 million worldwide.", "$701 million", "supported", "film2"),
]


# Two phones, a page on vaccines, a tower and two quarters, written for this test: a brand
# written with a capital inside the word ("iPhone"), a passive's agent ("developed by Edward
# Jenner"), and claims that name nothing.
PRODUCT_SOURCES = [
    {"id": "phone1", "text": (
        "The Pixel 8 was released in October 2023. It has a 6.2-inch display and a 4,575 mAh battery. It "
        "starts at $699."
    )},
    {"id": "phone2", "text": (
        "The iPhone 15 was released in September 2023. It has a 6.1-inch display and a 3,349 mAh battery. It "
        "starts at $799."
    )},
    {"id": "vaccine", "text": (
        "The first vaccine was developed by Edward Jenner in 1796 against smallpox. Louis Pasteur developed a "
        "rabies vaccine in 1885."
    )},
    {"id": "tower", "text": (
        "Construction of the Burj Khalifa began in 2004 and it opened in January 2010. At 828 metres it is the "
        "tallest building in the world."
    )},
    {"id": "q3", "text": (
        "In the third quarter, revenue rose 12% to $4.2 billion, while operating profit fell 3% to $610 million."
    )},
    {"id": "q2", "text": "In the second quarter, revenue rose 8% to $3.9 billion and operating profit rose 5% to $630 million."},
]

PRODUCT_ROWS = [
    # "iPhone" was a word: the claim had no subject, and the Pixel's figures were supported
    ("What battery does it have?", "The iPhone 15 has a 4,575 mAh battery.", "4,575", "contradicted", "phone2"),
    ("What battery does it have?", "The iPhone 15 has a 3,349 mAh battery.", "3,349", "supported", "phone2"),
    ("Compare the phones.", "The Pixel 8 starts at $799, while the iPhone 15 starts at $699.", "$799", "contradicted", "phone1"),
    ("Compare the phones.", "The Pixel 8 starts at $799, while the iPhone 15 starts at $699.", "$699", "contradicted", "phone2"),
    ("Compare the phones.", "The Pixel 8 starts at $699, while the iPhone 15 starts at $799.", "$799", "supported", "phone2"),
    # "developed by Edward Jenner" did not place him where "Louis Pasteur developed" stands
    ("Who developed the first vaccine?", "Louis Pasteur developed the first vaccine in 1796.", "Louis Pasteur", "contradicted", "vaccine"),
    ("Who developed the first vaccine?", "Edward Jenner developed the first vaccine in 1796, against smallpox.", "Edward Jenner", "supported", "vaccine"),
    ("Who developed a rabies vaccine?", "Louis Pasteur developed a rabies vaccine in 1885.", "Louis Pasteur", "supported", "vaccine"),
    ("How tall is it?", "The Burj Khalifa is 828 m tall and opened in 2010.", "2010", "supported", "tower"),
    ("How tall is it?", "The Burj Khalifa is 828 m tall and opened in January 2004.", "January 2004", "contradicted", "tower"),
    # a claim that names nothing had each value supported wherever it was held
    ("How did the quarter go?", "Revenue rose 8% to $4.2 billion in the third quarter.", "8%", "contradicted", "q3"),
    ("How did the quarter go?", "Revenue rose 12% to $4.2 billion in the third quarter.", "12%", "supported", "q3"),
    ("How did the quarter go?", "In the third quarter, operating profit rose 5% to $630 million.", "third", "contradicted", "q2"),
    ("How did the quarter go?", "In the second quarter, operating profit rose 5% to $630 million.", "5%", "supported", "q2"),
]


# Two writers, two acquisitions, a wind farm, a dose, two cities and two trains, written for
# this test (docs/reports/support.md, "Found on writers, acquisitions and units"): a place
# only another person's page holds (also in a sentence that names him by a pronoun), a value
# from another page about the same subject, units told apart by their prefix, a generator's
# citation markers, and text in Unicode's decomposed form.
WRITER_SOURCES = [
    {"id": "kafka", "text": "Franz Kafka was born in Prague on 3 July 1883. He died in Kierling in 1924."},
    {"id": "musil", "text": "Robert Musil was born in Klagenfurt on 6 November 1880. He died in Geneva in 1942."},
    {"id": "instagram", "text": "Facebook acquired Instagram in April 2012 for $1 billion in cash and stock."},
    {"id": "whatsapp", "text": "Facebook acquired WhatsApp in February 2014 for $19 billion."},
    {"id": "plant", "text": "The wind farm has a capacity of 1,218 MW and stores 128 GB of data a day."},
    {"id": "dose", "text": "Adults should take 2.4 µg of vitamin B12 daily. Sound travels at 343 m/s in air."},
    {"id": "zurich", "text": "Zürich has a population of 421,878."},
    {"id": "geneva", "text": "Geneva has a population of 203,856."},
    {"id": "nice", "text": "The TGV from Paris to Nice leaves at 14:30 and arrives at 20:12."},
    {"id": "lyon", "text": "The TGV from Paris to Lyon leaves at 16:00 and arrives at 17:56."},
    {"id": "eiffel", "text": "The Eiffel Tower is a wrought-iron lattice tower in Paris. It is 330 metres tall."},
    {"id": "wall", "text": (
        "The Great Wall of China is a series of fortifications in northern China. It is more than 21,000 "
        "kilometres long."
    )},
]

WRITER_ROWS = [
    # another writer's birthplace, and his place of death, were supported
    ("", "Franz Kafka was born in Klagenfurt on 3 July 1883.", "Klagenfurt", "contradicted", "kafka"),
    ("Where was Kafka born?", "Franz Kafka was born in Prague on 3 July 1883.", "Prague", "supported", "kafka"),
    ("", "Franz Kafka died in Geneva in 1924.", "Geneva", "contradicted", "kafka"),
    ("", "Franz Kafka died in Kierling in 1924. Robert Musil died in Geneva in 1942.", "Geneva", "supported", "musil"),
    # a page about the same subject stating another acquisition: its price was supported
    ("", "Facebook acquired Instagram in April 2012 for $19 billion.", "$19 billion", "contradicted", "instagram"),
    ("", "Facebook acquired Instagram in February 2014 for $1 billion.", "February 2014", "contradicted", "instagram"),
    ("", "Facebook acquired Instagram in April 2012 for $1 billion.", "$1 billion", "supported", "instagram"),
    ("", "Facebook acquired WhatsApp in February 2014 for $19 billion.", "$19 billion", "supported", "whatsapp"),
    ("", "The TGV from Paris to Nice leaves at 16:00 and arrives at 20:12.", "16:00", "contradicted", "nice"),
    ("", "The TGV from Paris to Nice leaves at 16:00 and arrives at 20:12.", "20:12", "supported", "nice"),
    ("", "The TGV from Paris to Lyon leaves at 16:00 and arrives at 17:56.", "16:00", "supported", "lyon"),
    # another page's "It is 330 metres tall." was the Great Wall's height: its "It" is the tower
    ("Tell me about these places.", "The Great Wall of China is 330 metres tall.", "Great Wall of China", "contradicted", "eiffel"),
    ("How tall is the Eiffel Tower?", "The Eiffel Tower is 330 metres tall.", "330 metres", "supported", "eiffel"),
    # another prefix of the unit was the same value
    ("", "The wind farm has a capacity of 1,218 kW.", "1,218 kW", "contradicted", "plant"),
    ("", "The wind farm has a capacity of 1,218 megawatts.", "1,218 megawatts", "supported", "plant"),
    ("", "The wind farm stores 128 TB of data a day.", "128 TB", "contradicted", "plant"),
    # ... and is contradicted by the sentence stating the value in its own unit
    ("", "Adults should take 2.4 mg of vitamin B12 daily.", "2.4 mg", "contradicted", "dose"),
    ("", "Adults should take 2.4 mcg of vitamin B12 daily.", "2.4 mcg", "supported", "dose"),
    ("", "Sound travels at 343 km/s in air.", "343 km/s", "contradicted", "dose"),
    # a citation marker was an unsupported number; a decomposed "ü" split the name
    ("", "Zürich has a population of 421,878 [1].", "421,878", "supported", "zurich"),
    ("", "Zu\u0308rich has a population of 421,878.", "Zu\u0308rich", "supported", "zurich"),
    ("", "Zu\u0308rich has a population of 203,856.", "203,856", "contradicted", "zurich"),
]


# Three elements' pages (a page writing "wrought-iron" would make "iron" a common word).
ELEMENT_SOURCES = [
    {"id": "iron", "text": "Iron is a chemical element with atomic number 26 and symbol Fe."},
    {"id": "cobalt", "text": "Cobalt is a chemical element with atomic number 27 and symbol Co."},
    {"id": "nickel", "text": "Nickel is a chemical element with atomic number 28 and symbol Ni."},
]

ELEMENT_ROWS = [
    # asked in lower case, "Iron" was no name, so Nickel's 28 was supported; "cobalt", named
    # by the question, is the second claim's subject
    ("What is the atomic number of iron?", "Iron is a chemical element with atomic number 28.", "28", "contradicted", "iron"),
    ("What is the atomic number of iron?", "Iron is a chemical element with atomic number 26.", "26", "supported", "iron"),
    ("", "Iron is a chemical element with atomic number 28.", "Iron", "supported", "iron"),
    ("", "Iron is a chemical element with atomic number 28.", "28", "contradicted", "iron"),
    ("What are the atomic numbers of Iron and Cobalt?", "Iron has atomic number 26 and cobalt has atomic number 27.", "27", "supported", "cobalt"),
]


def test_citation_markers_are_not_keywords(attribute_once):
    res = attribute_once(WRITER_SOURCES, "", "Zürich has a population of 421,878 [1][2]. Geneva has 203,856 (source 2).")
    assert [c.text for c in res.citations] == ["Zürich", "population", "421,878", "Geneva", "203,856"]
    assert all(c.status == "supported" for c in res.citations)


@pytest.mark.parametrize(
    "sources, question, answer, keyword, status, source",
    [pytest.param(OTHER_SOURCES, *row, id=f"other-{i}") for i, row in enumerate(OTHER_ROWS)]
    + [pytest.param(PRODUCT_SOURCES, *row, id=f"product-{i}") for i, row in enumerate(PRODUCT_ROWS)]
    + [pytest.param(WRITER_SOURCES, *row, id=f"writer-{i}") for i, row in enumerate(WRITER_ROWS)]
    + [pytest.param(ELEMENT_SOURCES, *row, id=f"element-{i}") for i, row in enumerate(ELEMENT_ROWS)],
)
def test_names_and_values_across_pages(keyword_status_of, sources, question, answer, keyword, status, source):
    keyword_status_of(sources, question, answer, keyword, status, source)
