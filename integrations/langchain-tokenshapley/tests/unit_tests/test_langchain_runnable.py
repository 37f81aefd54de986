"""TokenShapleyCitations on hand-made chain dicts (no retriever, no LLM; the real encoder)."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tracers.context import collect_runs
from tokenshapley_rag import TokenShapley
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError, TokenShapleyError

from langchain_tokenshapley import TokenShapleyCitations
from langchain_tokenshapley._convert import CITATION_KEYS

KEYS = set(CITATION_KEYS)

@pytest.fixture(scope="module")
def base(ts, lc):
    """Citations of the reference answer over the three documents, and the traced run."""
    docs = lc.make_documents()
    with collect_runs() as cb:
        citations = TokenShapleyCitations(ts).invoke({"input": lc.QUESTION, "context": docs, "answer": lc.ANSWER})
    return citations, docs, cb.traced_runs


def test_cites_known_keywords(base, lc):
    citations, docs, _ = base
    cites = lc.by_text(citations)
    assert cites["330 metres"]["doc_id"] == "eiffel"
    assert cites["330 metres"]["sentence"] == "It is 330 metres tall."
    assert cites["330 metres"]["metadata"] == {"title": "Eiffel", "n": 0}
    assert cites["1859"]["doc_id"] == "bigben"
    assert cites["1859"]["sentence"] == "It was completed in 1859."
    assert cites["1859"]["metadata"] == {"title": "Bigben", "n": 1}
    for kw in ("330 metres", "1859"):
        assert cites[kw]["supported"] is True
        assert cites[kw]["score"] > 0
    # nothing in the answer comes from the Great Wall
    assert "wall" not in {c["doc_id"] for c in citations}


def test_citation_dicts_and_offsets(base, lc):
    citations, docs, _ = base
    assert citations, "the answer has keywords"
    for c in citations:
        assert set(c) == KEYS
        assert isinstance(c["start"], int) and isinstance(c["end"], int)
    # exact offsets into the answer and into the cited document's page_content
    lc.check_offsets(citations, lc.ANSWER, docs)
    cites = lc.by_text(citations)
    assert (cites["330 metres"]["start"], cites["330 metres"]["end"]) == (20, 30)
    assert (cites["1859"]["start"], cites["1859"]["end"]) == (65, 69)
    eiffel = lc.DOC_TEXTS["eiffel"]
    assert cites["330 metres"]["sentence_start"] == eiffel.index("It is 330")
    assert cites["330 metres"]["sentence_end"] == len(eiffel)
    # in answer order
    assert [c["start"] for c in citations] == sorted(c["start"] for c in citations)
    # each keyword's status and its answer sentence's verdict
    assert cites["330 metres"]["status"] == "supported" and cites["330 metres"]["kind"] == "number"
    assert cites["330 metres"]["conflict"] is None
    assert cites["330 metres"]["answer_sentence"]["verdict"] in ("supported", "partly", "unsupported", "contradicted")
    # unsupported keywords carry no source fields
    for c in citations:
        if c["doc_id"] is None:
            assert c["supported"] is False
            assert c["metadata"] is c["score"] is c["sentence"] is c["sentence_start"] is None


def test_traced_as_one_chain_run(base):
    citations, _, runs = base
    assert len(runs) == 1
    run = runs[0]
    assert run.name == "TokenShapleyCitations"
    assert run.run_type == "chain"
    assert run.outputs == {"output": citations}


def test_message_answer_and_question_key(ts, base, lc):
    citations, docs, _ = base
    out = TokenShapleyCitations(ts).invoke(
        {"question": HumanMessage(lc.QUESTION), "context": docs, "answer": AIMessage(lc.ANSWER)}
    )
    assert out == citations


def test_input_key_wins_over_question(ts, base, lc):
    citations, docs, _ = base
    out = TokenShapleyCitations(ts).invoke(
        {"input": lc.QUESTION, "question": 42, "context": docs, "answer": lc.ANSWER, "extra": object()}
    )
    assert out == citations


def test_documents_without_ids_are_cited_by_position(ts, lc):
    docs = [Document(page_content=lc.DOC_TEXTS["bigben"]), Document(page_content=lc.DOC_TEXTS["eiffel"])]
    cites = lc.by_text(TokenShapleyCitations(ts).invoke({"input": lc.QUESTION, "context": docs, "answer": lc.ANSWER}))
    assert cites["330 metres"]["doc_id"] == "1"
    assert cites["1859"]["doc_id"] == "0"
    assert cites["1859"]["metadata"] == {}


def test_supported_only(ts, base, lc):
    citations, docs, _ = base
    out = TokenShapleyCitations(ts, supported_only=True).invoke(
        {"input": lc.QUESTION, "context": docs, "answer": lc.ANSWER}
    )
    assert out == [c for c in citations if c["supported"]]


def test_repeated_document_counts_once(ts, base, lc):
    citations, docs, _ = base
    repeated = docs + [Document(id="eiffel", page_content=lc.DOC_TEXTS["eiffel"], metadata={"other": True})]
    out = TokenShapleyCitations(ts).invoke({"input": lc.QUESTION, "context": repeated, "answer": lc.ANSWER})
    assert out == citations  # the first copy (and its metadata) is the one cited


def test_attribute_returns_core_result(ts, base, lc):
    citations, docs, _ = base
    result = TokenShapleyCitations(ts).attribute({"input": lc.QUESTION, "context": docs, "answer": lc.ANSWER})
    assert result.response == lc.ANSWER
    assert [c.text for c in result.citations] == [c["text"] for c in citations]
    assert "[^1]" in result.to_markdown()


# ---------------------------------------------------------------- bad input (checked before any model call)


@pytest.fixture
def lazy():
    """A runnable without a TokenShapley: it would only load one if validation let a call through."""
    runnable = TokenShapleyCitations()
    yield runnable
    assert runnable._default is None, "validation must fail before the model is loaded"


DOC = Document(id="a", page_content="Paris is the capital of France.")


TYPE, VALUE = InvalidInputTypeError, InvalidInputError


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (["not", "a", "dict"], TYPE, r"expects a dict .* got list"),
        ({"context": [DOC], "answer": "Paris."}, VALUE, r"'input' or 'question'.*\['answer', 'context'\]"),
        ({"input": "q", "answer": "Paris."}, VALUE, r"missing the key 'context'"),
        ({"input": "q", "context": [DOC]}, VALUE, r"missing the key 'answer'"),
        ({"input": "q", "context": "Paris.", "answer": "P."}, TYPE, r"'context' must be a list of Document, got str"),
        ({"input": "q", "context": [DOC, "x"], "answer": "P."}, TYPE, r"context\[1\] must be a Document, got str"),
        ({"input": "q", "context": [DOC], "answer": 3}, TYPE, r"'answer' must be a str or a message .* got int"),
        ({"input": None, "context": [DOC], "answer": "Paris."}, TYPE, r"'input' must be a str or a message"),
        ({"question": 1.5, "context": [DOC], "answer": "Paris."}, TYPE, r"'question' must be a str"),
    ],
)
def test_bad_input_names_the_key(lazy, value, error, match):
    with pytest.raises(error, match=match) as info:
        lazy.invoke(value)
    assert isinstance(info.value, TokenShapleyError)
    assert isinstance(info.value, ValueError if error is InvalidInputError else TypeError)


def test_conflicting_document_ids(lazy):
    docs = [DOC, Document(id="b", page_content="x."), Document(id="a", page_content="Lyon is in France.")]
    with pytest.raises(InvalidInputError, match=r"context\[0\] and context\[2\] share the id 'a'"):
        lazy.invoke({"input": "q", "context": docs, "answer": "Paris."})


def test_custom_keys(lazy):
    runnable = TokenShapleyCitations(query_keys=("query",), context_key="docs", answer_key="result")
    with pytest.raises(InvalidInputError, match=r"expected the key 'query'"):
        runnable.invoke({"input": "q", "docs": [DOC], "result": "Paris."})
    with pytest.raises(InvalidInputError, match=r"missing the key 'docs'"):
        runnable.invoke({"query": "q", "context": [DOC], "result": "Paris."})
    with pytest.raises(InvalidInputError, match="at least one key"):
        TokenShapleyCitations(query_keys=())
    assert runnable._default is None


@pytest.mark.parametrize(
    "value",
    [
        {"input": "q", "context": [DOC], "answer": "   "},
        {"input": "q", "context": [DOC], "answer": AIMessage(content=[])},
    ],
    ids=["blank-answer", "empty-message"],
)
def test_nothing_to_attribute_gives_empty_list(lazy, value):
    assert lazy.invoke(value) == []
    assert lazy.attribute(value) is None


@pytest.mark.parametrize(
    "context", [[], [Document(page_content="  \n")]], ids=["no-documents", "blank-document"],
)
def test_an_answer_with_nothing_retrieved_is_unsupported(lazy, context):
    # no model loads: the keywords are found, and nothing supports them
    value = {"input": "q", "context": context, "answer": "Paris is the capital."}
    assert [(c["text"], c["status"], c["doc_id"]) for c in lazy.invoke(value)] == [
        ("Paris", "unsupported", None), ("capital", "unsupported", None)]
    assert [v.verdict for v in lazy.attribute(value).sentences] == ["unsupported"]


def test_given_tokenshapley_is_used_and_not_serialized(ts):
    runnable = TokenShapleyCitations(ts)
    assert runnable.tokenshapley is ts
    assert runnable._attributor() is ts
    assert "tokenshapley" not in runnable.model_dump()
    assert isinstance(ts, TokenShapley)


def test_chunks_of_one_loaded_file_are_one_document():
    from langchain_tokenshapley._convert import documents_to_sources

    docs = [
        Document(id="c1", page_content="The Eiffel Tower is in Paris.", metadata={"source": "/data/eiffel.md"}),
        Document(id="c2", page_content="It was completed in 1889.", metadata={"source": "/data/eiffel.md"}),
        Document(id="c3", page_content="Big Ben is in London.", metadata={"source": "  "}),
        Document(id="c4", page_content="Rome is old.", metadata={"source": 7}),
    ]
    sources, _ = documents_to_sources(docs)
    assert [s.document for s in sources] == ["/data/eiffel.md", "/data/eiffel.md", None, None]


def test_chunks_of_one_file_support_each_other(ts):
    """What a text splitter hands back for one loaded file: chunks that share its
    metadata["source"]. The subject is named in one chunk and its date stated in another;
    both are supported (each chunk its own source, the subject came out flagged)."""
    chunks = [
        "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.",
        "It is named after the engineer Gustave Eiffel, whose company designed and built the tower.",
        "Construction was completed on 31 March 1889, in time for the World's Fair.",
        "The tower is 330 metres tall, about the same height as an 81-storey building.",
    ]
    docs = [Document(id=f"eiffel-{i}", page_content=c, metadata={"source": "docs/eiffel.md"}) for i, c in enumerate(chunks)]
    out = TokenShapleyCitations(ts).invoke({
        "input": "When was the Eiffel Tower completed and how tall is it?", "context": docs,
        "answer": "The Eiffel Tower was completed on 31 March 1889. It is 330 metres tall.",
    })
    statuses = {c["text"]: c["status"] for c in out}
    assert statuses["Eiffel Tower"] == statuses["31 March 1889"] == statuses["330 metres"] == "supported"
    assert set(statuses.values()) == {"supported"}
