"""The support flag on answers as chat generators format and combine them, end to end with
the default model: markdown (underscore emphasis, a source named in prose, sections, label
bullets), chunks that go on about a subject without naming it, values swapped within one
source sentence or in another subject's clause, numbered names ("Apollo 12", "iPhone 15 Pro"), another year's figures, scientific notation, units named in another language,
claims that name no subject, clauses about no name, a name's other name ("Oscars"), abbreviated
species ("E. coli"), thousands written with a period, and a subject the question does not ask
about. Each row was a wrong status when the
library was tried this way (docs/reports/support.md, "Found on formatted answers, chunks and
values swapped within a sentence"); the rows that were already right guard the other
direction."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

NAPOLEON = ["Napoleon Bonaparte was born in Ajaccio on 15 August 1769.", "He died on Saint Helena on 5 May 1821."]
EIFFEL = ["The Eiffel Tower is 330 metres tall.", "The tower welcomed 6.3 million visitors in 2023."]
BRIDGES = ["The Golden Gate Bridge opened in 1937.", "The Brooklyn Bridge opened in 1883."]
RESULTS = ["Revenue was $5.2 billion and net income was $1.1 billion."]
CURIE = ["Marie Curie was born on 7 November 1867 and died on 4 July 1934."]
APOLLO = ["Neil Armstrong and Buzz Aldrin landed the lunar module Eagle on 20 July 1969.",
          "The astronauts collected 21.5 kg of lunar samples."]
JWST = ["The James Webb Space Telescope launched on 25 December 2021 on an Ariane 5 rocket.",
        "Its primary mirror is 6.5 metres across and made of 18 hexagonal segments."]
GLOBEX = ["Globex sales rose 12% in the third quarter of 2023.", "Globex sales fell 3% in the second quarter of 2023."]
APOLLOS = ["Apollo 11 landed on the Moon on 20 July 1969.", "Apollo 12 landed in the Ocean of Storms on 19 November 1969."]
IPHONES = ["The iPhone 15 Pro has a 6.1-inch Super Retina XDR display and starts with 128 GB of storage.",
           "The iPhone 15 Pro Max has a 6.7-inch display and starts at 256 GB."]
GENES = ["BRCA1 is located on chromosome 17, and BRCA2 on chromosome 13."]
MOONS = ["Uranus has 28 known moons, and Neptune has 16."]
PHONES = ["In 2019, Apple sold 5 million units, while Samsung sold 8 million."]
NORVALE = ["Norvale Foods reported revenue of $2.4 billion for fiscal 2021, up 6% from 2020. Net income was $180 million.",
           "In fiscal 2022 Norvale Foods had revenue of $2.7 billion and net income of $205 million."]
PORTS = ["The development server listens on port 8080.", "The metrics endpoint is served on port 9090."]
ACME = ["Acme Corp reported revenue of $4.2 billion in 2023. The company employs 18,500 people. "
        "Its CEO, Maria Lopez, was appointed in March 2019.",
        "In 2021, Acme Corp's revenue was $3.1 billion. The company opened a factory in Monterrey, Mexico in 2022."]
REPORT = ("## Eiffel Tower\n\nThe Eiffel Tower is 330 metres tall. It welcomed 6.3 million visitors in 2023.\n\n"
          "## Acme Corp\n\nIts CEO, Maria Lopez, was appointed in March 2019.")

GDPR = ["The right to erasure is in Article 17, and the right to data portability is in Article 20."]
ICD = ["In ICD-10, type 2 diabetes mellitus is coded E11; type 1 diabetes is E10."]
RUPEES = ["The phone costs Rs 79,900 in India and $799 in the US."]
MUSEUM = ["The museum welcomed 1.5 million visitors in 2023.", "Profit rose 6 percent to £1.5bn."]
TRAIN = ["The train reaches 320 km/h.", "The line is 6 miles long."]
CITIES = ["Lyon has 522,250 inhabitants.", "Marseille has 870,321 inhabitants."]
YEARLY = ["Acme Corp revenue by year:\n- 2022: $3.8 billion\n- 2023: $4.2 billion"]
YEARLY_ONE_LINE = ["Acme Corp revenue by year: 2022: $3.8 billion; 2023: $4.2 billion."]
UTI = ["E. coli causes about 80% of urinary tract infections.", "S. saprophyticus causes about 10% of them."]
REVENUES = ["Acme Corp reported revenue of $4.2 billion in 2023, up from $3.8 billion in 2022.",
            "Globex reported revenue of $2.1 billion in 2023."]
NORVALE_NEWS = ["Norvale Foods said on 14 February 2023 that its 2022 revenue reached $2.9 billion. Dana Whitfield will "
                "step down as chief executive in June 2023 and will be succeeded by Marcus Oyelaran, the current finance chief."]
FILMS = ["Titanic won eleven Academy Awards, including Best Picture.", "Avatar won three Academy Awards."]
BACTERIA = ["Escherichia coli is a Gram-negative bacterium commonly found in the lower intestine.",
            "Staphylococcus aureus is a Gram-positive bacterium."]
LENGTHS = ["The Danube is 2,850 kilometres long and flows into the Black Sea.",
           "The Rhine is 1,230 kilometres long and flows into the North Sea."]
WINDOWS = ["Windows 10 was released on 29 July 2015.", "Windows 11 was released on 5 October 2021."]
CURIE_PRIZES = ["Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1903 and the Nobel Prize "
                "in Chemistry in 1911. She discovered polonium and radium."]
MEITNER = ["Lise Meitner was born in Vienna in 1878. Together with Otto Hahn she discovered protactinium in 1917.",
           "Lise Meitner died in 1968 in Cambridge."]
BIRTHS = ["Marie Curie was born in Warsaw in 1867.", "Lise Meitner was born in Vienna in 1878."]
# QuoteSum's PAQ_val_1164 sources (title line, text), cut: the second names Sarvodaya three
# sentences before its own declaration of the holidays
HOLIDAYS = [
    "Tajikistan\nTajikistan considers itself a secular state with a Constitution providing for freedom of "
    "religion. The Government has declared two Islamic holidays, Eid ul-Fitr and Eid al-Adha, as state holidays.",
    "Persecution of Muslims\nlike Dharmapāla's teachings by example, by having a focus upon Sinhalese culture and "
    "ethnicity sanctioning the use of violence in defence of dhamma, while Sarvodaya has emphasized the "
    "application of Buddhist values in order to transform society and campaigning for peace. Sunni Islam of the "
    "Hanafi school has been officially recognized by the government since 2009. Tajikistan considers itself a "
    "secular state with a Constitution providing for freedom of religion. The Government has declared two Islamic "
    "holidays, Id Al-Fitr and Idi Qurbon, as State holidays.",
]
# ... and the same passage cut mid-text, without its title: its first sentence is any sentence
HOLIDAYS_CUT = [HOLIDAYS[0], HOLIDAYS[1].split("\n", 1)[1]]
HOLIDAYS_QUESTION = "what are the two islamic holidays the government has declared as state holidays?"
# a page whose lead opens with its subject states its claims about it in any sentence
LYON_PAGE = [
    "Lyon is the third-largest city in France. The old town is a UNESCO World Heritage Site. The silk industry made "
    "the city rich in the 16th century. Its two rivers meet south of the centre. In 2020 the city had 522,250 "
    "inhabitants.",
    "Marseille is the second-largest city in France. In 2020 Marseille had 870,321 inhabitants.",
]
# ... a page that names its topic only in its title (PAQ_val_1672), one that names a value two
# sentences before the claim it is tied to (PAQ_val_1760), and a bare answer's page whose
# title states the question (nq-open-oracle-0088), cut
DORESTAD = [
    "Dorestad\nBy the 9th century, it seems that the need for international trade was waning as regional trade gained "
    "importance. The majority of the information known about the emporium comes from a combination of historical "
    "documents, archaeological finds and numismatic evidence. To find out more about the settlement and its "
    "prominence in the early Middle Ages the site was excavated.",
    "Pinellas County, Florida\nUniversity of South Florida archaeologists excavated the site in 1977 after Alfred C. "
    "Wyllie discovered an underground ammunition bunker while digging a swimming pool on his estate.",
]
ZEN = [
    'Zen ranks and hierarchy\nOne may become a "dai-oshō", resident priest in a Zen-temple. It takes further training '
    'in a "sōdō-ango", an officially recognized Sōtō-shū training centre. A prerequisite to become "dai-oshō" is to '
    'do "ango", "to stay in peace" or "safe shelter". "Ango" is a period of 90 or 100 days of intensive practice.',
    "Buddhism in Thailand\nThe Thai tradition supports laymen to go into a monastery, dress and act as monks, and "
    "study while there. The time line is based on threes, staying as a monk for three days, or three weeks.",
]
HYMN = [
    "What a Friend We Have in Jesus\n\"What a Friend We Have in Jesus\" is a Christian hymn originally written by "
    "Joseph M. Scriven as a poem in 1855 to comfort his mother who was living in Ireland while he was in Canada. "
    "Scriven originally published the poem anonymously, and only received full credit for it in the 1880s. The "
    "tune to the hymn was composed by Charles Crozat Converse in 1868. William Bolcom composed a setting of the "
    "hymn.",
    "I Think We're Alone Now\n\"I Think We're Alone Now\" is a song written and composed by Ritchie Cordell that "
    "was the title selection from a same-named album released by Tommy James and the Shondells.",
]
CHROMOSOMES = ["BRCA1 is located on chromosome 17.", "BRCA2 is located on chromosome 13."]
FLIGHTS = ["British Airways flight BA117 departs London Heathrow at 08:25 for New York JFK.",
           "Flight BA115 departs London Heathrow at 14:20 for New York JFK."]
ARTEMIS = ["Artemis I was an uncrewed test flight launched on 16 November 2022.",
           "Artemis II will be the first crewed flight of the programme."]

CORPUS = Path(__file__).parent / "data" / "competing_facts"


def page(name: str) -> str:
    return (CORPUS / f"{name}.txt").read_text(encoding="utf-8").strip()


RIVERS = [page("rhine"), page("danube")]

# (question, sources, answer, keyword, status, the source it is cited to or the conflicting source)
ROWS = [
    # found on answers the bundled generator wrote: the second item of "X and Y are ..." was
    # judged against X's page; a correct name whose holder names the subject was overturned by
    # another sentence of the subject's pages
    ("Compare the Rhine and the Danube.", RIVERS, "The Rhine and the Danube are two rivers.", "Danube", "supported", "1"),
    ("Compare the Rhine and the Danube.", RIVERS, "The Danube and the Rhine are rivers.", "Rhine", "supported", "0"),
    ("What colour is the Golden Gate Bridge?", [page("goldengate2"), page("goldengate1")],
     "The Golden Gate Bridge in San Francisco is painted in a colour called International Orange.", "San Francisco", "supported", "1"),
    ("Tell me about Lise Meitner.", [page("meitner2"), page("meitner1")],
     "Lise Meitner was born in 1878 in Vienna and died in 1968 in Cambridge.", "Vienna", "supported", "1"),
    # the generator's words about its sources and its answer are not claims
    ("How long is the Danube?", RIVERS, "The answer to the question is: The Danube is 2,850 kilometres long.",
     "2,850 kilometres", "supported", "1"),
    # a chunk that goes on about the question's subject without naming it: its values were
    # contradicted by the subject's other chunk ("1821" by the birth sentence) or unsupported
    ("Tell me about Napoleon.", NAPOLEON, "Napoleon Bonaparte was born in Ajaccio in 1769. He died on Saint Helena in 1821.",
     "1821", "supported", "1"),
    ("Tell me about Napoleon.", NAPOLEON, "Napoleon Bonaparte was born in Ajaccio in 1769. He died on Saint Helena in 1821.",
     "Saint Helena", "supported", "1"),
    ("Tell me about the Eiffel Tower.", EIFFEL, "The Eiffel Tower is 330 metres tall. The tower welcomed 6.3 million visitors in 2023.",
     "6.3 million", "supported", "1"),
    ("Tell me about the Titanic.", ["RMS Titanic sank on 15 April 1912.", "More than 1,500 passengers and crew died."],
     "The Titanic sank on 15 April 1912, and more than 1,500 passengers and crew died.", "1,500", "supported", "1"),
    # ... while a value that another named subject's sentence holds is still another claim's
    ("When did the Golden Gate Bridge open?", BRIDGES, "The Golden Gate Bridge opened in 1883.", "1883", "contradicted", "0"),
    # copies were contradicted by their own sentence: the model number read as the subject's value
    ("Screen?", ["The iPhone 15 Pro has a 6.1-inch display."], "The iPhone 15 Pro has a 6.1-inch display.", "6.1-inch", "supported", "0"),
    ("Storage?", ["The PlayStation 5 has 825 GB of SSD storage."], "The PlayStation 5 has 825 GB of SSD storage.", "825 GB", "supported", "0"),
    ("RAM?", ["The Galaxy S24 has a 4,000 mAh battery and 8 GB of RAM."], "The Galaxy S24 has a 4,000 mAh battery and 8 GB of RAM.",
     "8 GB", "supported", "0"),
    # values swapped within one source sentence were supported by it
    ("What were earnings per share?", ["Earnings per share came in at $1.27, beating the consensus of $1.19."],
     "Earnings per share came in at $1.19, beating the consensus of $1.27.", "$1.19", "contradicted", "0"),
    ("What were the results?", RESULTS, "Net income was $5.2 billion and revenue was $1.1 billion.", "$5.2 billion", "contradicted", "0"),
    ("What was net income?", RESULTS, "Net income was $1.1 billion.", "$1.1 billion", "supported", "0"),
    ("When was she born?", CURIE, "Marie Curie was born on 4 July 1934.", "4 July 1934", "contradicted", "0"),
    ("When was she born?", CURIE, "Marie Curie was born on 7 November 1867 and died on 4 July 1934.", "4 July 1934", "supported", "0"),
    ("Haaland goals?", ["Erling Haaland scored 36 goals, Harry Kane 30 and Ivan Toney 20."], "Erling Haaland scored 30 goals.",
     "30", "contradicted", "0"),
    ("When did Globex sales grow 12%?", GLOBEX, "Globex sales grew 12% in Q2 2023.", "Q2", "contradicted", "0"),
    ("How did Globex do?", GLOBEX, "Globex sales grew 12% in Q3 2023 and fell 3% in Q2 2023.", "Q2", "supported", "1"),
    ("What goes in?", ["Mix 500 g of flour with 10 g of salt and 7 g of yeast."],
     "Mix 500 g of flour with 7 g of salt and 10 g of yeast.", "7 g", "contradicted", "0"),
    ("What was the population?", ["The population grew from 1.2 million in 2000 to 1.5 million in 2020."],
     "The population grew to 1.5 million in 2020.", "1.5 million", "supported", "0"),
    # a claim that names no subject: another source's sentence holding the rest of it decides
    ("Give me an overview of Apollo 11.", APOLLO,
     "Armstrong and Aldrin landed Eagle on 20 July 1969. The astronauts collected 23.5 kg of lunar samples.", "23.5 kg", "contradicted", "1"),
    # ... and a chunk going on about the subject holds the rest of the claim: it is the
    # conflict, not the subject's launch sentence
    ("Tell me about the JWST.", JWST, "The James Webb Space Telescope's primary mirror is 2.4 metres across.",
     "2.4 metres", "contradicted", "1"),
    ("Tell me about the JWST.", JWST, "The James Webb Space Telescope's primary mirror is 6.5 metres across.",
     "6.5 metres", "supported", "1"),
    ("Port?", PORTS, "The development server listens on port 9090.", "9090", "contradicted", "0"),
    ("Port?", PORTS, "The development server listens on port 8080.", "8080", "supported", "0"),
    # an era: "44 AD" was supported by "44 BC"
    ("When did Caesar die?", ["Julius Caesar was assassinated in 44 BC."], "Julius Caesar was assassinated in 44 AD.", "44 AD", "contradicted", "0"),
    # durations in other units: "30,000 ms" was contradicted by "30 seconds", "75 minutes" by "1 hour 15 minutes"
    ("Timeout?", ["The default request timeout is 30 seconds."], "The default request timeout is 30,000 ms.", "30,000 ms", "supported", "0"),
    ("Timeout?", ["The default request timeout is 30 seconds."], "The default request timeout is 45,000 ms.", "45,000 ms", "contradicted", "0"),
    ("How long?", ["The film runs 1 hour 15 minutes."], "The film runs 75 minutes.", "75 minutes", "supported", "0"),
    ("How long?", ["The film runs 1 hour 15 minutes."], "The film runs 95 minutes.", "95 minutes", "contradicted", "0"),
    # a range's first value takes its second's unit: "10 minutes" is held by "10 to 15 minutes"
    ("How long?", ["This should only take about 10 to 15 minutes."], "Set the timer for 10 minutes.", "10 minutes", "supported", "0"),
    # the same ratio or time in another notation was contradicted by the sentence holding it
    ("What were the odds?", ["The odds were 12 to 1 against the horse."], "The odds were 12:1 against the horse.",
     "12:1", "unsupported", None),
    ("What was his time?", ["He ran the mile in 3 minutes 43.13 seconds in 1999."], "He ran the mile in 3:43.13 in 1999.",
     "3:43.13", "unsupported", None),
    ("What were the odds?", ["The odds were 12 to 1 against the horse."], "The odds were 15:1 against the horse.",
     "15:1", "contradicted", "0"),
    # a numbered name is one name: "Apollo 12" took Apollo 11's date, "iPhone 15 Pro" the Pro Max's storage
    ("When did Apollo 12 land?", APOLLOS, "Apollo 12 landed on the Moon on 20 July 1969.", "20 July 1969", "contradicted", "1"),
    ("When did Apollo 12 land?", APOLLOS, "Apollo 12 landed in the Ocean of Storms on 19 November 1969.",
     "19 November 1969", "supported", "1"),
    ("Base storage?", IPHONES, "The iPhone 15 Pro starts at 256 GB of storage.", "256 GB", "contradicted", "0"),
    ("Base storage?", IPHONES, "The iPhone 15 Pro Max starts at 256 GB of storage.", "256 GB", "supported", "1"),
    ("Screen?", IPHONES, "The iPhone 15 Pro has a 6.1-inch display and starts at 128 GB.", "6.1-inch", "supported", "0"),
    # a date with its era is one date: "15 March" was contradicted by "15 March 44 BC"
    ("When was Caesar killed?", ["Julius Caesar was assassinated on the Ides of March, 15 March 44 BC, in Rome."],
     "Julius Caesar was assassinated in Rome on 15 March 44 BC.", "15 March 44 BC", "supported", "0"),
    # each clause's values are its own subject's
    ("Where is BRCA2?", GENES, "BRCA2 is located on chromosome 17.", "17", "contradicted", "0"),
    ("Where is BRCA2?", GENES, "BRCA2 is located on chromosome 13.", "13", "supported", "0"),
    ("Neptune's moons?", MOONS, "Neptune has 28 known moons.", "28", "contradicted", "0"),
    ("Neptune's moons?", MOONS, "Neptune has 16 known moons.", "16", "supported", "0"),
    ("Uranus's moons?", MOONS, "Uranus has 28 known moons.", "28", "supported", "0"),
    ("Sales?", PHONES, "Samsung sold 5 million units in 2019.", "5 million", "contradicted", "0"),
    ("Sales?", PHONES, "Samsung sold 8 million units in 2019.", "2019", "supported", "0"),
    # a value placed beside the claim's subject is the subject's, whatever stands beside another value
    ("Le Pen's share?", ["In the 2017 second round, Emmanuel Macron won 66.1% of the vote against Marine Le Pen's 33.9%."],
     "Marine Le Pen won 33.9% of the vote.", "33.9%", "supported", "0"),
    # ... and one the holder states of another name it is about is that name's
    ("Le Pen's share?", ["In the 2017 second round, Emmanuel Macron won 66.1% of the vote against Marine Le Pen's 33.9%."],
     "Marine Le Pen won 66.1% of the vote.", "66.1%", "contradicted", "0"),
    ("Galaxy S24 RAM?", ["The Samsung Galaxy S24 has a 4,000 mAh battery and 8 GB of RAM."],
     "The Galaxy S24 has a 4,000 mAh battery and 8 GB of RAM.", "8 GB", "supported", "0"),
    # scientific notation is one value, however written: "6.022e23" was "6" (contradicted) and "022e23"
    ("Avogadro's number?", ["The Avogadro constant is 6.022 × 10^23 per mole."], "Avogadro's constant is 6.022e23 per mole.",
     "6.022e23 per mole", "supported", "0"),
    ("Avogadro's number?", ["The Avogadro constant is 6.022 × 10^23 per mole."],
     "The Avogadro constant is 6.022 × 10^22 per mole.", "6.022 × 10^22 per mole", "contradicted", "0"),
    ("Earth's mass?", ["The mass of the Earth is 5.97 × 10²⁴ kg."], "The Earth's mass is 5.97 × 10^24 kg.",
     "5.97 × 10^24 kg", "supported", "0"),
    ("Speed of light?", ["The speed of light in vacuum is exactly 299,792,458 m/s."], "The speed of light is about 3 × 10^8 m/s.",
     "3 × 10^8 m/s", "supported", "0"),
    # an answer in another language over English sources: its units are units
    ("Longueur ?", ["The Danube is 2,850 kilometres long."], "Le Danube mesure 2 850 kilomètres.", "2 850 kilomètres", "supported", "0"),
    ("Wie lang?", ["The Danube is 2,850 kilometres long."], "Die Donau ist 2850 Kilometer lang.", "2850 Kilometer", "supported", "0"),
    ("Wie lange?", ["The film runs 1 hour 30 minutes."], "Der Film dauert 90 Minuten.", "90 Minuten", "supported", "0"),
    # a figure from another year's report, when the answer names the year
    ("Revenue in 2022?", NORVALE, "Norvale Foods' revenue in 2022 was $2.4 billion, up 6% from 2021.",
     "$2.4 billion", "contradicted", "1"),
    ("Revenue in 2022?", NORVALE, "Norvale Foods' revenue in 2022 was $2.7 billion.", "$2.7 billion", "supported", "1"),
    ("Revenue in 2021?", NORVALE, "Norvale Foods' revenue in 2021 was $2.4 billion, up 6% from 2020.",
     "$2.4 billion", "supported", "0"),
    # markdown: underscore emphasis, a source named in prose
    ("What was Acme's revenue?", ACME, "Acme's revenue was _$4.2 billion_ in 2023.", "$4.2 billion", "supported", "0"),
    ("Where did Acme build a factory?", ACME, "According to Source 2, Acme opened a factory in Monterrey in 2022.", "Monterrey", "supported", "1"),
    # label bullets answering a request for an overview: judged against a revenue sentence
    ("Acme facts?", ACME, "Acme facts:\n\n- Revenue: $4.2 billion\n- CEO: Maria Lopez", "Maria Lopez", "supported", "0"),
    # a section's heading ends the subject before it: the CEO was the Eiffel Tower's
    ("Write a report on the Eiffel Tower and Acme.", [*EIFFEL, *ACME], REPORT, "Maria Lopez", "supported", "2"),
    ("Write a report on the Eiffel Tower and Acme.", [*EIFFEL, *ACME], REPORT, "March 2019", "supported", "2"),
    # a clause about no name: its value is its own words' ("data portability" is Article 20's)
    ("Where is the right to data portability?", GDPR, "The right to data portability is in Article 17.",
     "Article 17", "contradicted", "0"),
    ("Where is the right to data portability?", GDPR, "The right to data portability is in Article 20.",
     "Article 20", "supported", "0"),
    ("Where is the right to erasure?", GDPR, "The right to erasure is in Article 17.", "Article 17", "supported", "0"),
    # ... told apart by a number too ("type 1" is not "type 2")
    ("ICD-10 code for type 2 diabetes?", ICD, "The ICD-10 code for type 2 diabetes is E10.", "E10", "contradicted", "0"),
    ("ICD-10 code for type 2 diabetes?", ICD, "The ICD-10 code for type 2 diabetes is E11.", "E11", "supported", "0"),
    ("ICD-10 code for type 1 diabetes?", ICD, "Type 1 diabetes is coded E10 in ICD-10.", "E10", "supported", "0"),
    # the rupee's "Rs" is its currency sign
    ("Price in India?", RUPEES, "The phone costs Rs 79,900 in India.", "Rs 79,900", "supported", "0"),
    ("Price in India?", RUPEES, "The phone costs Rs 799 in India.", "Rs 799", "contradicted", "0"),
    # "1.5m visitors" is 1.5 million, not 1.5 metres; a number in words keeps its unit
    ("How many visitors?", MUSEUM, "The museum welcomed 1.5m visitors in 2023.", "1.5m visitors", "supported", "0"),
    ("How many visitors?", MUSEUM, "The museum welcomed 2.5m visitors in 2023.", "2.5m visitors", "contradicted", "0"),
    ("Profit?", MUSEUM, "Profit rose six per cent to 1.5 billion pounds.", "six per cent", "supported", "1"),
    ("How long is the line?", TRAIN, "The line is six miles long.", "six miles", "supported", "1"),
    ("How long is the line?", TRAIN, "The line is six kilometres long.", "six kilometres", "contradicted", "1"),
    # another city's figure, however the claim words it, is contradicted by the subject's page
    ("Population?", CITIES, "The population of Lyon is 870,321.", "870,321", "contradicted", "0"),
    ("Population?", CITIES, "The population of Lyon is 522,250.", "522,250", "supported", "0"),
    ("Population?", CITIES, "Marseille has about twice the population of Lyon (522,250).", "522,250", "supported", "0"),
    # ... also when the question names the city; a population is counted in inhabitants
    ("What is the population of Lyon?", CITIES, "The population of Lyon is 870,321.", "870,321", "contradicted", "0"),
    ("What is the population of Lyon?", CITIES, "The population of Lyon is 870,321.", "population", "supported", "0"),
    ("What is the population of Lyon?", CITIES, "The population of Lyon is 522,250.", "522,250", "supported", "0"),
    ("What is the population of Lyon?", CITIES, "Lyon has 522,250 residents.", "residents", "supported", "0"),
    ("What is the population of Lyon?", CITIES, "Lyon has 870,321 residents.", "870,321", "contradicted", "0"),
    # a species written in full is one name, held by a source abbreviating its genus
    ("What causes most UTIs?", UTI, "Escherichia coli causes about 80% of urinary tract infections.", "Escherichia coli",
     "supported", "0"),
    ("What causes most UTIs?", UTI, "Most are caused by Escherichia coli.", "Escherichia coli", "supported", "0"),
    ("What causes most UTIs?", UTI, "Staphylococcus saprophyticus causes about 80% of urinary tract infections.",
     "Staphylococcus saprophyticus", "contradicted", "0"),
    # a list's lines date each value: another year's line contradicts the value taken from it
    ("What was Acme's revenue in 2023?", YEARLY, "Acme's revenue was $3.8 billion in 2023.", "$3.8 billion", "contradicted", "0"),
    ("What was Acme's revenue in 2023?", YEARLY, "Acme's revenue was $4.2 billion in 2023.", "$4.2 billion", "supported", "0"),
    ("What was Acme's revenue in 2022?", YEARLY, "Acme's revenue was $3.8 billion in 2022.", "$3.8 billion", "supported", "0"),
    ("What was Acme's revenue?", YEARLY, "Acme's revenue was $3.8 billion.", "$3.8 billion", "supported", "0"),
    # ... and so do the clauses of one line
    ("What was Acme's revenue in 2023?", YEARLY_ONE_LINE, "Acme's revenue was $3.8 billion in 2023.", "$3.8 billion",
     "contradicted", "0"),
    ("What was Acme's revenue in 2023?", YEARLY_ONE_LINE, "Acme's revenue was $4.2 billion in 2023.", "$4.2 billion",
     "supported", "0"),
    ("How did Acme's revenue change?", YEARLY_ONE_LINE, "Acme's revenue rose from $3.8 billion in 2022 to $4.2 billion in 2023.",
     "$3.8 billion", "supported", "0"),
    ("How did Acme's revenue change?", YEARLY, "Acme's revenue rose from $3.8 billion in 2022 to $4.2 billion in 2023.",
     "$3.8 billion", "supported", "0"),
    # "one and a half million" is one number, 1,500,000, not the words "half" and "million"
    ("How many people live in Lyon?", CITIES, "About one and a half million people live in Lyon.",
     "one and a half million", "contradicted", "0"),
    ("How many inhabitants?", CITIES, "Lyon has a million and a half inhabitants.", "a million and a half", "contradicted", "0"),
    # people are counted as a place's inhabitants
    ("How many people live in Lyon?", CITIES, "About one and a half million people live in Lyon.", "people", "supported", "0"),
    ("How many people live in Lyon?", CITIES, "About 522,250 people live in Lyon.", "522,250", "supported", "0"),
    # ... and living, residing or dwelling there is what they do: copied words, never flagged
    ("How many people live in Lyon?", CITIES, "About 522,250 people live in Lyon.", "live", "supported", "0"),
    ("", CITIES, "522,250 people lived in Lyon in 2020.", "lived", "supported", "0"),
    ("", CITIES, "1,500,000 people live in Lyon.", "1,500,000", "contradicted", "0"),
    ("", CITIES, "About 870,321 people reside in Marseille.", "reside", "supported", "1"),
    # a name no source holds is contradicted only by a sentence that states the claim, not by the
    # page's best sentence about something else ("Nobel Prize" is another name, not another place)
    ("", CURIE_PRIZES, "Marie Curie lived in Paris.", "Paris", "unsupported", None),
    ("", CURIE_PRIZES, "Marie Curie worked in Paris.", "Paris", "unsupported", None),
    ("", CURIE_PRIZES, "Marie Curie was born in Paris.", "Paris", "contradicted", "0"),
    ("", MEITNER, "Lise Meitner discovered protactinium with Niels Bohr.", "Niels Bohr", "contradicted", "0"),
    # a name is held by a page that states the claim only if a sentence holding it, or next to
    # one, states it: not by the page's declaration three sentences on
    (HOLIDAYS_QUESTION, HOLIDAYS, "The Government of Tajikistan has declared two Sarvodaya holidays, Eid ul-Fitr and "
     "Eid al-Adha, as state holidays.", "Sarvodaya", "contradicted", "0"),
    (HOLIDAYS_QUESTION, HOLIDAYS, "The Government of Tajikistan has declared two Islamic holidays, Eid ul-Fitr and "
     "Eid al-Adha, as state holidays.", "Islamic", "supported", "0"),
    (HOLIDAYS_QUESTION, HOLIDAYS_CUT, "The Government of Tajikistan has declared two Sarvodaya holidays, Eid ul-Fitr "
     "and Eid al-Adha, as state holidays.", "Sarvodaya", "contradicted", "0"),
    # ... but a page states a claim about what its title or its lead names, a value is tied to
    # the claim by the claim's words its sentence holds, and a bare answer's question may be any
    # sentence
    ("", LYON_PAGE, "Lyon had 522,250 inhabitants in 2020.", "Lyon", "supported", "0"),
    ("Why was the site excavated?", DORESTAD, "To find out more about the settlement and its prominence in the "
     "early Middle Ages the site in Dorestad was excavated.", "Dorestad", "supported", "0"),
    ("", ZEN, 'In a Zen-temple, a prerequisite to become "dai-oshō" is to do "ango", a period of 90 or 100 days of '
     "intensive practice.", "Zen-temple", "supported", "0"),
    ("who wrote song what a friend we have in jesus", HYMN, "Charles Crozat Converse", "Charles Crozat Converse",
     "supported", "0"),
    # the page holding the claim's other value is not the one stating the claim when a page
    # holding this value says more of its words: that other value is what is wrong
    ("", MEITNER, "Lise Meitner died in Vienna in 1968.", "1968", "supported", "1"),
    ("", MEITNER, "Lise Meitner died in Vienna in 1968.", "Vienna", "contradicted", "1"),
    ("", MEITNER, "Lise Meitner died in 1968 in Vienna.", "1968", "supported", "1"),
    # a change computed from two amounts one sentence states is held by it; another is not
    ("How did Acme's revenue change?", REVENUES, "Acme's revenue rose by $400 million in 2023.", "$400 million", "supported", "0"),
    ("How did Acme's revenue change?", REVENUES, "Acme's revenue rose by about 10.5% to $4.2 billion in 2023.", "10.5%", "supported", "0"),
    ("How did Acme's revenue change?", REVENUES, "Acme's revenue rose by $500 million in 2023.", "$500 million", "contradicted", "0"),
    ("How did Acme's revenue change?", REVENUES, "Acme's revenue rose 12% in 2023.", "12%", "contradicted", "0"),
    ("What was Acme's revenue?", REVENUES, "Acme's revenue was $400 million in 2023.", "$400 million", "contradicted", "0"),
    # what a comparison compares with is a claim of its own: the Rhine's length is the Rhine's
    ("How long is the Danube?", LENGTHS, "The Danube is more than twice as long as the Rhine.", "Rhine", "supported", "1"),
    ("How long is the Danube?", LENGTHS, "The Danube (2,850 km) is more than twice as long as the Rhine (1,230 km).",
     "1,230 km", "supported", "1"),
    ("How long is the Danube?", LENGTHS, "The Danube (2,850 km) is more than twice as long as the Rhine (1,230 km).",
     "2,850 km", "supported", "0"),
    # ... so the Danube's length given to the Rhine is what is wrong, not the Rhine
    ("How long is the Danube?", LENGTHS, "The Danube is more than twice as long as the Rhine (2,850 km).",
     "2,850 km", "contradicted", "1"),
    ("How long is the Danube?", LENGTHS, "The Danube is more than twice as long as the Rhine (2,850 km).",
     "Rhine", "supported", "1"),
    ("", LENGTHS, "The Danube is more than twice as long as the Rhine (2,850 km).", "2,850 km", "contradicted", "1"),
    # a title by its acronym ("CEO": "chief executive"), and apart from the company after it
    ("Who is the CEO of Norvale Foods?", NORVALE_NEWS, "The CEO of Norvale Foods is Dana Whitfield.", "CEO", "supported", "0"),
    ("Who is the CEO of Norvale Foods?", NORVALE_NEWS, "The CEO of Norvale Foods is Dana Whitfield.", "Norvale Foods", "supported", "0"),
    ("Who is the CFO of Norvale Foods?", NORVALE_NEWS, "The CFO of Norvale Foods is Marcus Oyelaran.", "CFO", "supported", "0"),
    # another name of the same thing is the same name
    ("How many Oscars did Titanic win?", FILMS, "Titanic won 11 Oscars.", "Oscars", "supported", "0"),
    ("How many Oscars did Titanic win?", FILMS, "Titanic won 11 Oscars.", "11", "supported", "0"),
    ("How many Oscars did Titanic win?", FILMS, "Titanic won 3 Oscars.", "3", "contradicted", "0"),
    # a species under its abbreviated genus
    ("What kind of bacterium is E. coli?", BACTERIA, "E. coli is a Gram-negative bacterium.", "E. coli", "supported", "0"),
    ("What kind of bacterium is E. coli?", BACTERIA, "E. coli is a Gram-positive bacterium.", "Gram-positive", "contradicted", "0"),
    ("What kind of bacterium is S. aureus?", BACTERIA, "S. aureus is a Gram-negative bacterium.", "Gram-negative", "contradicted", "1"),
    # thousands written with a period, in German and Spanish
    ("Wie lang ist die Donau?", LENGTHS, "Die Donau ist 2.850 Kilometer lang.", "2.850 Kilometer", "supported", "0"),
    ("¿Cuánto mide el Danubio?", LENGTHS, "El Danubio mide 2.850 kilómetros.", "2.850 kilómetros", "supported", "0"),
    # a subject the question does not ask about, with the values of the one it asks about
    ("When was Windows 10 released?", WINDOWS, "Windows 11 was released on 29 July 2015.", "Windows 11", "contradicted", "0"),
    ("When was Windows 10 released?", WINDOWS, "Windows 11 was released on 29 July 2015.", "29 July 2015", "supported", "0"),
    ("When was Windows 10 released?", WINDOWS, "Windows 11 was released on 5 October 2021.", "Windows 11", "supported", "1"),
    ("Where was Marie Curie born?", BIRTHS, "Lise Meitner was born in Warsaw in 1867.", "Lise Meitner", "contradicted", "0"),
    ("Where was Marie Curie born?", BIRTHS, "Lise Meitner was born in Warsaw in 1867.", "Warsaw", "supported", "0"),
    ("Where was Marie Curie born?", BIRTHS, "Lise Meitner was born in Vienna in 1878.", "Lise Meitner", "supported", "1"),
    # ... also when the question asks for the value and the subject's page states another
    ("Which gene is on chromosome 13?", CHROMOSOMES, "BRCA1 is located on chromosome 13.", "BRCA1", "contradicted", "1"),
    ("Which gene is on chromosome 13?", CHROMOSOMES, "BRCA2 is located on chromosome 13.", "BRCA2", "supported", "1"),
    ("Which flight leaves Heathrow at 08:25 for New York?", FLIGHTS,
     "Flight BA115 departs London Heathrow at 08:25 for New York JFK.", "Flight BA115", "contradicted", "0"),
    ("Which flight leaves Heathrow at 08:25 for New York?", FLIGHTS,
     "Flight BA117 departs London Heathrow at 08:25 for New York JFK.", "Flight BA117", "supported", "0"),
    # a Roman numeral numbers a name as digits do: "Artemis" does not name "Artemis II"
    ("Which Artemis mission was uncrewed?", ARTEMIS, "Artemis II was an uncrewed test flight launched on 16 November 2022.",
     "Artemis II", "contradicted", "0"),
    ("Which Artemis mission was uncrewed?", ARTEMIS, "Artemis I was an uncrewed test flight launched on 16 November 2022.",
     "16 November 2022", "supported", "0"),
    # a name the question does not ask about, beside values no page of it contradicts, stands
    ("When was the Golden Gate Bridge opened?", ["Joseph Strauss was an American engineer.", "The Golden Gate Bridge opened in 1937."],
     "Joseph Strauss designed the Golden Gate Bridge, which opened in 1937.", "1937", "supported", "1"),
]


@pytest.mark.parametrize("question, sources, answer, keyword, status, source", ROWS)
def test_formatted_and_combined_answers(keyword_status_of, question, sources, answer, keyword, status, source):
    keyword_status_of(sources, question, answer, keyword, status, source)


def test_the_generators_words_about_its_sources_are_not_claims(ts):
    res = ts.attribute(query="How long is the Danube?", sources=RIVERS,
                       response="According to the passage, the Danube is 2,850 kilometres long.")
    assert [c.text for c in res.citations] == ["Danube", "2,850 kilometres", "long"]
    assert [v.verdict for v in res.sentences] == ["supported"]


def test_a_source_named_in_prose_and_a_refusal_leave_the_verdicts_alone(ts):
    res = ts.attribute(
        query="Where did Acme build a factory?", sources=ACME,
        response="According to Source 2, Acme opened a factory in Monterrey in 2022. The sources do not say what it makes.",
    )
    assert [(v.verdict, v.n_keywords) for v in res.sentences] == [("supported", 5), ("supported", 0)]
