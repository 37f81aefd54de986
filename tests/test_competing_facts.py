"""The competing-facts corpus: documents that disagree on purpose (tests/data/competing_facts).

Every row of the corpus's CASES.md is asserted here with the default TokenShapley over all
15 documents: wrong numbers, dates and names are flagged (contradicted when the document that
states the claim holds another value), a fact taken from the wrong document is not supported,
copied words are never flagged, fillers are not keywords, and no keyword crosses a sentence.
"""

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CORPUS = Path(__file__).parent / "data" / "competing_facts"
SOURCES = [{"id": p.stem, "text": p.read_text(encoding="utf-8").strip()} for p in sorted(CORPUS.glob("*.txt"))]

# (answer, wrong keyword, the document whose sentence contradicts it or None for "unsupported")
WRONG_FACTS = [
    ("In 2020 Lyon had a population of 870,000 inhabitants.", "870,000", "lyon1"),
    ("Lyon had a population of 870,321 in 2020.", "870,321", "lyon1"),
    ("The Danube is 2,580 kilometres long and flows into the Black Sea.", "2,580 kilometres", None),
    ("The Golden Gate Bridge's main span is 1,450 metres long.", "1,450 metres", "goldengate1"),
    ("The Rhine is 1,320 kilometres long.", "1,320 kilometres", "rhine"),
    ("The Brooklyn Bridge's main span is 468 metres long.", "468 metres", "brooklyn1"),
    ("Marie Curie was born in Vienna in 1878.", "Vienna", "curie1"),
    ("Marie Curie was born in Vienna in 1878.", "1878", "curie1"),
    ("She won the Nobel Prize in 1944.", "1944", None),
    ("The Golden Gate Bridge opened to traffic in 1989.", "1989", "goldengate1"),
    ("The Brooklyn Bridge in New York City opened in 1887.", "1887", "brooklyn1"),
    ("Lise Meitner died in 1833 in Cambridge.", "1833", "meitner2"),
    # a rank written in words is a number: Marseille's rank, not Lyon's
    ("Lyon is the second-largest city in France.", "second-largest", "lyon1"),
    # a count is not held by a rank: no source says "two", and the Danube's
    # "second-longest" must not support it
    ("Marie Curie won two Nobel Prizes, in Physics and in Chemistry.", "two", None),
    # "the largest" is rank 1 by size: not the fourth-largest, nor rank 1 by age
    ("Toulouse is the largest city in France.", "largest", "toulouse"),
    ("The Danube is the longest river in Europe.", "longest", "danube"),
    ("Lyon is the largest city on the Rhône.", "largest", "lyon1"),
    # a claim with no other value: the subject against the page holding its words (Curie's
    # "She discovered polonium and radium.", which names no one: unsupported)
    ("Lise Meitner discovered polonium and radium.", "Lise Meitner", None),
    # two claims in one sentence: the second claim's 1883 is not the first's, so the Brooklyn
    # Bridge's "opened in 1883" states another date
    ("The Brooklyn Bridge opened in 1937 and the Golden Gate Bridge in 1883.", "1937", "brooklyn1"),
    # a hedged count is held by what it rounds, and Lyon's page rounds to no 870,000
    ("In 2020 Lyon had about 870,000 inhabitants.", "870,000", "lyon1"),
    # a length converted to miles is held only by its rounding (2,850 km is 1,771 miles)
    ("The Danube is 1,000 miles long.", "1,000 miles", "danube"),
]

CORRECT = [
    "In 2020 the city of Lyon had a population of 522,250 inhabitants.",
    "Marseille had a population of 870,321 in 2020.",
    "The Danube is 2,850 kilometres long and flows into the Black Sea.",
    "The Danube is 2850 km long.",
    "The Golden Gate Bridge's main span is 1,280 metres long.",
    "The Rhine is 1,230 kilometres long.",
    "The Brooklyn Bridge opened in 1883 and its main span is 486 metres long.",
    "Marie Curie was born in Warsaw in 1867.",
    "Marie Curie won the Nobel Prize in Physics in 1903.",
    "Lise Meitner was born in Vienna in 1878 and died in 1968 in Cambridge.",
    "The Rhine flows into the North Sea. The Danube flows into the Black Sea.",
    "The Danube is very long.",
    "Lyon is the third-largest city in France.",
    "Marseille is the second-largest city in France.",
    "The Brooklyn Bridge opened in 1883 and the Golden Gate Bridge in 1937.",
    "In 2020 Marseille had about 870,000 inhabitants.",
    "In 2020 Lyon had more than 500,000 inhabitants.",
    # a preposition is a function word, never a keyword to flag
    "The Rhine is 1,230 km long and flows into the North Sea near Rotterdam.",
    "Marseille is the oldest city in France.",
    "The Danube is Europe's second-longest river.",
    "The Brooklyn Bridge was the longest suspension bridge in the world when it opened.",
    "Marie Curie discovered polonium and radium.",
    "Lise Meitner discovered protactinium.",
    # a measurement in another unit
    "The Danube is about 1,770 miles long.",
]


@pytest.fixture(scope="module")
def ask(attribute_once):
    """``ts.attribute`` over these sources, each (question, answer) attributed once."""
    return lambda question, answer: attribute_once(SOURCES, question, answer)


@pytest.fixture(scope="module")
def attribute(ask):
    """An answer attributed with no question."""
    return lambda answer: ask("", answer)


def _cite(result, text):
    return next(c for c in result.citations if c.text == text)


@pytest.mark.parametrize("answer, keyword, conflict", WRONG_FACTS)
def test_wrong_facts_are_flagged(attribute, answer, keyword, conflict):
    res = attribute(answer)
    c = _cite(res, keyword)
    assert c.status != "supported" and not c.supported
    assert c.sources == () and c.best is None  # no source is presented as its support
    if conflict is not None:
        assert c.status == "contradicted"
        assert c.conflict is not None and c.conflict.source_id == conflict
    verdict = next(v for v in res.sentences if v.start <= c.start < v.end)
    assert verdict.verdict in ("partly", "unsupported", "contradicted")


@pytest.mark.parametrize("answer", CORRECT)
def test_correct_facts_and_copied_words_are_supported(attribute, answer):
    res = attribute(answer)
    assert res.citations
    flagged = [(c.text, c.status) for c in res.citations if c.status != "supported"]
    assert flagged == []
    assert all(v.verdict == "supported" for v in res.sentences)
    for c in res.citations:
        assert c.best is not None and c.conflict is None


def test_wrong_document_fact_cites_the_subjects_document(attribute):
    res = attribute("Marie Curie was born in Vienna in 1878.")
    assert _cite(res, "Marie Curie").supported
    assert _cite(res, "Marie Curie").best.source_id == "curie1"
    assert _cite(res, "Vienna").conflict.sentence == "Marie Curie was born in Warsaw in 1867."
    assert res.sentences[0].verdict == "contradicted"


def test_a_wrong_value_does_not_flag_its_copied_subject(attribute):
    # The claim's only other word, "long", is the Rhine's page's alone: one word does not
    # make the Rhine's page the Danube's anchor (WORD_ANCHOR_MINIMUM).
    res = attribute("The Danube is 1,000 miles long.")
    assert _cite(res, "Danube").status == "supported" and _cite(res, "Danube").best.source_id == "danube"


def test_keywords_never_cross_a_sentence(attribute):
    res = attribute("The Rhine flows into the North Sea. The Danube flows into the Black Sea.")
    texts = [c.text for c in res.citations]
    assert "North Sea" in texts and "Danube" in texts
    assert all("." not in t for t in texts)
    assert _cite(res, "Danube").best.source_id == "danube"
    assert _cite(res, "North Sea").best.source_id == "rhine"


@pytest.mark.parametrize(
    "answer, word",
    [
        ("The Danube rises in the Black Forest.", "Danube"),
        ("Curie won the Nobel Prize in Physics.", "Physics"),
        ("The Danube is very long.", "long"),
    ],
)
def test_copied_words_are_never_flagged(attribute, answer, word):
    assert _cite(attribute(answer), word).supported


@pytest.mark.parametrize("answer", ["I don't know.", "Every city is making progress, which makes sense."])
def test_fillers_are_not_keywords(attribute, answer):
    texts = [c.text.lower() for c in attribute(answer).citations]
    for filler in ("i", "don't", "know", "every", "making", "makes"):
        assert filler not in texts


def test_a_count_is_contradicted_only_by_another_count(ts):
    # With the question asked, the predicate game ranked Curie's "died in 1934" sentence
    # first, and a year was taken as the "other value" of the count "two": a count's rival
    # must state another count (a rank another rank), not a date.
    res = ts.attribute(query="Marie Curie?", sources=SOURCES,
                       response="Marie Curie won two Nobel Prizes, in Physics and in Chemistry.")
    two = _cite(res, "two")
    assert two.status == "unsupported" and two.conflict is None and two.best is None


# Asked about the subject, the claim is about it (docs/method.md §8, "The question names the
# topic"): a value only another document holds was taken from another claim.
# (question, answer, wrong keyword, the document whose sentence contradicts it or None)
ASKED_WRONG = [
    # its page's "opened to traffic in 1937" holds the rest of the claim: contradicted (was unsupported)
    ("When did the Golden Gate Bridge open?", "The Golden Gate Bridge opened in 1883.", "1883", "goldengate1"),
    ("Who designed the Golden Gate Bridge?", "The Golden Gate Bridge was designed by John Augustus Roebling.",
     "John Augustus Roebling", "goldengate1"),
    ("Who was the chief engineer of the Brooklyn Bridge?",
     "The chief engineer of the Brooklyn Bridge was Joseph Strauss.", "Joseph Strauss", "brooklyn1"),
    ("When did Marie Curie die?", "Marie Curie died in 1968 in Cambridge.", "1968", "curie2"),
    ("When did Marie Curie die?", "Marie Curie died in 1968 in Cambridge.", "Cambridge", None),
    ("Who founded Lyon?", "Lyon was founded by Greek settlers from Phocaea.", "Phocaea", "lyon2"),
    ("Who founded Marseille?", "Marseille was founded by the Romans in 43 BC.", "43 BC", "marseille2"),
    ("Where does the Rhine flow?", "The Rhine rises in the Black Forest and flows into the Black Sea.", "Black Sea",
     "rhine"),
    # a sentence opening with a pronoun goes on about the previous sentence's subject
    ("Tell me about Lise Meitner.", "Lise Meitner was born in Vienna in 1878. She died in 1934 in Warsaw.", "1934",
     "meitner2"),
    ("Tell me about Lise Meitner.", "Lise Meitner was born in Vienna in 1878. She died in 1934 in Warsaw.", "Warsaw",
     "meitner2"),
    ("When did Marie Curie die?", "Marie Curie was born in Warsaw in 1867, and she died in 1968.", "1968", "curie2"),
    # ... and so does a sentence that names no one
    ("Tell me about Lyon.", "Lyon is the third-largest city in France. In 2020 the city had a population of "
     "870,321 inhabitants.", "870,321", "lyon1"),
    ("Tell me about the Golden Gate Bridge.", "The Golden Gate Bridge is in San Francisco. The bridge opened in 1883.",
     "1883", "goldengate1"),
    # Toulouse's page only opens sentences with it, so the answer's opener is a name by the
    # question's spelling: the claim's subject, and Lyon's rank is not Toulouse's
    ("Tell me about Toulouse.", "Toulouse is the third-largest city in France.", "third-largest", "toulouse"),
    ("How many people live in Toulouse?", "Toulouse had a population of 522,250 in 2020.", "522,250", "toulouse"),
    # a denial is not a fact: the subject's page denies what the answer affirms, or affirms
    # what it denies
    ("Did Lise Meitner win a Nobel Prize?", "Lise Meitner won a Nobel Prize.", "Nobel Prize", "meitner2"),
    ("Did Lise Meitner win a Nobel Prize?", "Lise Meitner received a Nobel Prize.", "Nobel Prize", "meitner2"),
    ("Where was Marie Curie born?", "Marie Curie was not born in Warsaw.", "Warsaw", "curie1"),
    ("Is Marseille the oldest city in France?", "Marseille is not the oldest city in France.", "oldest",
     "marseille2"),
]

ASKED_CORRECT = [
    ("When did the Golden Gate Bridge open?", "The Golden Gate Bridge opened to traffic in 1937."),
    ("Who founded Lyon?", "Lyon was founded by the Romans in 43 BC under the name Lugdunum."),
    ("Where was Marie Curie born?", "Marie Curie was born in Warsaw in 1867."),
    ("What did Lise Meitner discover?", "Lise Meitner discovered protactinium together with Otto Hahn in 1917."),
    ("How long is the Danube?", "The Danube is 2,850 kilometres long and flows into the Black Sea."),
    ("Tell me about Lise Meitner.", "Lise Meitner was born in Vienna in 1878. She died in 1968 in Cambridge."),
    ("How many vehicles cross the Brooklyn Bridge?", "About 116,000 vehicles cross the Brooklyn Bridge each day."),
    ("Tell me about Lyon.", "Lyon is the third-largest city in France. In 2020 it had a population of 522,250 "
     "inhabitants."),
    ("Tell me about Toulouse.", "Toulouse is the fourth-largest city in France, with a population of 498,003 in "
     "2020."),
    ("Did Lise Meitner win a Nobel Prize?", "Lise Meitner never received a Nobel Prize."),
    ("Did Lise Meitner win a Nobel Prize?", "No, Lise Meitner did not receive a Nobel Prize."),
    # ", and" opens a second claim, about its own subject
    ("When did the Golden Gate Bridge open?", "The Golden Gate Bridge opened to traffic in 1937, and the Brooklyn "
     "Bridge opened in 1883."),
]

# The subject the question names, and the documents that may be cited for it.
ASKED_SUBJECT = {"Golden Gate Bridge": {"goldengate1", "goldengate2"}, "Brooklyn Bridge": {"brooklyn1", "brooklyn2"},
                 "Marie Curie": {"curie1", "curie2"}, "Lyon": {"lyon1", "lyon2"},
                 "Marseille": {"marseille1", "marseille2"}, "Rhine": {"rhine"},
                 "Lise Meitner": {"meitner1", "meitner2"}, "Toulouse": {"toulouse"}}


@pytest.mark.parametrize("question, answer, keyword, conflict", ASKED_WRONG)
def test_a_value_from_another_documents_claim_is_flagged(ask, question, answer, keyword, conflict):
    res = ask(question, answer)
    c = _cite(res, keyword)
    assert c.sources == () and c.best is None  # never cited to the other document
    if conflict is None:
        assert c.status == "unsupported" and c.conflict is None
    else:
        assert c.status == "contradicted" and c.conflict.source_id == conflict
    # The subject the user asked about is supported, by its own documents.
    subject = next(s for s in ASKED_SUBJECT if s in question)
    cited = _cite(res, subject)
    assert cited.status == "supported" and cited.best.source_id in ASKED_SUBJECT[subject]
    verdict = next(v for v in res.sentences if v.start <= c.start < v.end)
    assert verdict.verdict in ("partly", "unsupported", "contradicted")


def test_a_denial_no_source_of_the_subject_holds_is_unsupported(ask):
    # "not in 1944": no source denies it, none holds it; the clause before it stands
    res = ask("Did Marie Curie win a Nobel Prize?", "Marie Curie won the Nobel Prize, but not in 1944.")
    assert [(c.text, c.status) for c in res.citations] == [
        ("Marie Curie", "supported"), ("won", "supported"), ("Nobel Prize", "supported"), ("1944", "unsupported"),
    ]
    # Vienna is Lise Meitner's birthplace: her page neither denies nor supports the denial,
    # and no rival "born in Warsaw" contradicts it (a denied value is not claimed)
    vienna = _cite(ask("Where was Marie Curie born?", "Marie Curie was not born in Vienna."), "Vienna")
    assert vienna.status == "unsupported" and vienna.conflict is None and vienna.sources == ()


@pytest.mark.parametrize("question, answer", ASKED_CORRECT)
def test_asked_correct_facts_stay_supported(ask, question, answer):
    res = ask(question, answer)
    assert [(c.text, c.status) for c in res.citations if c.status != "supported"] == []
    assert all(v.verdict == "supported" for v in res.sentences)


# Bare answers (the answer is the value alone): the question states the claim's predicate
# (the question's game) and names its subject, whose documents are the anchor.
# (question, answer, the document whose sentence contradicts it)
BARE_WRONG = [
    ("Where was Marie Curie born?", "Vienna", "curie1"),
    ("Where was Marie Curie born?", "Vienna.", "curie1"),
    ("When did the Golden Gate Bridge open?", "1883", "goldengate1"),
    ("When did the Golden Gate Bridge open?", "In 1883.", "goldengate1"),
    ("Who discovered protactinium?", "Marie Curie", "meitner1"),
    ("What is the population of Lyon?", "870,321", "lyon1"),
    ("Where does the Rhine flow into?", "The Black Sea", "rhine"),
    ("How long is the Danube?", "1,230 kilometres", "danube"),
    # the question's rank joins its name: Marseille's page holds both
    ("Which city is the second-largest in France?", "Lyon", "marseille1"),
]

BARE_CORRECT = [
    ("Where was Marie Curie born?", "Warsaw", {"curie1"}),
    ("When did the Golden Gate Bridge open?", "1937", {"goldengate1"}),
    ("Who discovered protactinium?", "Lise Meitner and Otto Hahn", {"meitner1"}),
    # curie1 says "She discovered polonium and radium."; the question names nothing a source
    # holds, so the documents that state it (curie1) are the answer's anchor
    ("Who discovered polonium?", "Marie Curie", {"curie1"}),
    ("What is the population of Lyon?", "522,250", {"lyon1"}),
    ("Where does the Rhine flow into?", "The North Sea", {"rhine"}),
    ("How long is the Danube?", "2,850 kilometres", {"danube"}),
    ("Which city is the second-largest in France?", "Marseille", {"marseille1"}),
]


@pytest.mark.parametrize("question, answer, conflict", BARE_WRONG)
def test_a_bare_answer_from_another_document_is_contradicted(ask, question, answer, conflict):
    (c,) = ask(question, answer).citations
    assert (c.status, c.conflict.source_id, c.sources) == ("contradicted", conflict, ())


@pytest.mark.parametrize("question, answer, documents", BARE_CORRECT)
def test_a_bare_correct_answer_is_supported_by_its_document(ask, question, answer, documents):
    res = ask(question, answer)
    assert {c.status for c in res.citations} == {"supported"}
    assert {c.best.source_id for c in res.citations} <= documents


def test_without_the_question_the_tolerance_rule_decides(attribute):
    # No question: "Marie Curie" and the two values come from two documents, and the
    # document holding the values states "died in ... in" better, so the subject is what
    # the rule overturns (method.md §8, step 3); the values are not cited to Curie's page.
    res = attribute("Marie Curie died in 1968 in Cambridge.")
    assert _cite(res, "Marie Curie").status == "contradicted"
    assert res.sentences[0].verdict == "contradicted"


def test_streamed_sentences_go_on_with_the_subject(ts):
    # The chat page streams sentence by sentence: the second sentence, returned before the
    # answer ends, is already judged against the first sentence's subject.
    stream = ts.stream(query="Tell me about Lise Meitner.", sources=SOURCES)
    answer = "Lise Meitner was born in Vienna in 1878. She died in 1934 in Warsaw. She was a physicist."
    done = [s for i in range(0, len(answer), 9) for s in stream.feed(answer[i : i + 9])]
    done += stream.finish()
    second = next(s for s in done if s.index == 1)
    assert [(c.text, c.status) for c in second.citations if c.kind != "word"] == [
        ("1934", "contradicted"), ("Warsaw", "contradicted"),
    ]
    assert second.verdict == "contradicted" and done[0].verdict == "supported"
