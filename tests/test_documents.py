"""Chunks of one document back each other when support is checked (Source.document).

A retriever returns chunks: the subject of a claim may be named in one chunk of a page and
its date stated in the next ("The Eiffel Tower is ..." / "Construction was completed on 31
March 1889 ..."). The anchor of a claim is then the document, not the chunk.
"""

import dataclasses

import pytest

from tokenshapley_rag import Source
from tokenshapley_rag._sources import coerce_sources, document_index
from tokenshapley_rag.errors import InvalidInputTypeError

QUESTION = "When was the Eiffel Tower completed and how tall is it?"
CHUNKS = [
    Source(
        "eiffel.md#2",
        "Construction was completed on 31 March 1889, in time for the World's Fair. The tower is 330 metres "
        "tall, about the same height as an 81-storey building.",
        document="eiffel.md",
    ),
    Source(
        "bigben.txt#2",
        "The tower, now called the Elizabeth Tower, was completed in 1859. It stands 96 metres tall and is one "
        "of the most prominent symbols of the United Kingdom.",
        document="bigben.txt",
    ),
    Source(
        "eiffel.md#1",
        "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is named "
        "after the engineer Gustave Eiffel, whose company designed and built the tower.",
        document="eiffel.md",
    ),
]


def test_document_is_read_from_mappings_and_objects():
    class Node:
        id, text, metadata, document = "n1", "Some text.", {}, "guide.md"

    got = coerce_sources([{"id": "a", "text": "A.", "document": "a.md"}, Node(), "Plain."])
    assert [s.document for s in got] == ["a.md", "guide.md", None]


@pytest.mark.parametrize("document", [3, b"a.md", ["a.md"]])
def test_a_document_that_is_not_a_string_is_refused(document):
    with pytest.raises(InvalidInputTypeError, match=r"sources\[0\]\.document must be a str or None, got "):
        coerce_sources([{"id": "a", "text": "A.", "document": document}])


def test_document_index_groups_named_documents_only():
    sources = [Source("a#1", "x", document="a"), Source("b", "y"), Source("a#2", "z", document="a"),
               Source("c", "w"), Source("d#1", "v", document="d")]
    assert document_index(sources) == [0, 1, 0, 2, 3]
    # a document named like a source id is still its own group: ids and documents never mix
    assert document_index([Source("a", "x"), Source("b", "y", document="a")]) == [0, 1]


def _statuses(result):
    return {c.text: c.status for c in result.citations}


def test_a_chunk_without_a_title_is_shown_by_its_document(ts):
    # a chunk's id is often a random node id; its document names it for a reader
    answer = "The Eiffel Tower was completed on 31 March 1889, in time for the World's Fair."
    chunks = [dataclasses.replace(s, id=f"node-{i}") for i, s in enumerate(CHUNKS)]
    res = ts.attribute(QUESTION, chunks, answer)
    date = next(c for c in res.citations if c.text == "31 March 1889")
    assert (date.best.source_id, date.best.display_name) == ("node-0", "eiffel.md")
    assert "eiffel.md" in res.to_markdown() and "node-0" not in res.to_markdown()
    titled = [dataclasses.replace(s, metadata={"title": "The tower"}) for s in chunks]
    date = next(c for c in ts.attribute(QUESTION, titled, answer).citations if c.text == "31 March 1889")
    assert date.best.display_name == "The tower"  # a title still wins


@pytest.mark.slow
def test_a_subject_from_one_chunk_and_its_date_from_the_next_are_supported(ts):
    answer = "The Eiffel Tower was completed on 31 March 1889, in time for the World's Fair."
    got = _statuses(ts.attribute(QUESTION, CHUNKS, answer))
    assert got == {"Eiffel Tower": "supported", "completed": "supported", "31 March 1889": "supported",
                   "time": "supported", "World's Fair": "supported"}
    # Without documents each chunk stands alone: the chunk naming the tower does not state
    # "was completed", the chunk that does names no tower, and the rule cannot tell a
    # chunked page from a date taken from another page (method.md §8). The question names
    # the tower, so the claim is about it and the date is what is flagged.
    alone = [dataclasses.replace(s, document=None) for s in CHUNKS]
    got = _statuses(ts.attribute(QUESTION, alone, answer))
    assert got["Eiffel Tower"] == "supported" and got["31 March 1889"] == "unsupported"


@pytest.mark.slow
def test_a_date_from_another_document_still_fails_the_claim(ts):
    # Big Ben's "was completed in 1859" states the predicate far better than the Eiffel
    # Tower's "Construction was completed on ...". Without a question the rule reads the
    # claim as Big Ben's and contradicts its subject (method.md §8, step 3); asked about
    # the Eiffel Tower, the claim is about the tower and the date is contradicted by the
    # tower's page. The claim is flagged either way.
    result = ts.attribute("", CHUNKS, "The Eiffel Tower was completed in 1859.")
    assert result.sentences[0].verdict == "contradicted"
    contradicted = [c for c in result.citations if c.status == "contradicted"]
    assert [c.text for c in contradicted] == ["Eiffel Tower"]
    assert contradicted[0].conflict.source_id == "bigben.txt#2"
    result = ts.attribute(QUESTION, CHUNKS, "The Eiffel Tower was completed in 1859.")
    assert result.sentences[0].verdict == "contradicted"
    contradicted = [c for c in result.citations if c.status == "contradicted"]
    assert [c.text for c in contradicted] == ["1859"]
    assert contradicted[0].sources == () and contradicted[0].conflict.source_id.startswith("eiffel.md#")
    # a date's rival states another date, not any number ("The tower is 330 metres tall")
    assert contradicted[0].conflict.sentence.startswith("Construction was completed on 31 March 1889")
    assert [s["document"] for s in result.to_dict()["sources"]] == ["eiffel.md", "bigben.txt", "eiffel.md"]
