"""A retrieval chain over pages that disagree, with TokenShapley's question embedder: a short
answer to a lowercase question, taken from the retrieved page about something else, is
flagged; the right one stays supported (tokenshapley-rag's docs/method.md §8)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_tokenshapley import TokenShapleyCitations

PAGES = Path(__file__).resolve().parents[4] / "tests" / "data" / "competing_facts"


@pytest.fixture(scope="module")
def bridge_retriever(embeddings):
    from langchain_core.vectorstores import InMemoryVectorStore

    docs = [Document(id=name, page_content=(PAGES / f"{name}.txt").read_text(encoding="utf-8"))
            for name in ("brooklyn1", "brooklyn2", "goldengate1", "goldengate2", "curie1", "meitner1")]
    return InMemoryVectorStore.from_documents(docs, embeddings).as_retriever(search_kwargs={"k": 4})


@pytest.fixture(scope="module")
def with_embedder(ts):
    from tokenshapley_rag import TokenShapley

    return TokenShapley(ts.encoder, cache_dir=ts.cache.root.parent if ts.cache.root else None,
                        question_embedder="all-MiniLM-L6-v2")


@pytest.mark.parametrize(
    "question, answer, without, with_option",
    [
        ("when did the brooklyn bridge open", "1937", "supported", "contradicted"),  # the Golden Gate's year
        ("when did the brooklyn bridge open", "1883", "supported", "supported"),
        ("who was the chief engineer of the golden gate bridge", "Washington Roebling", "supported", "contradicted"),
        ("who was the chief engineer of the golden gate bridge", "Joseph Strauss", "supported", "supported"),
    ],
)
def test_a_short_answer_from_the_other_retrieved_page_is_flagged(
    ts, with_embedder, bridge_retriever, prompt, lc, question, answer, without, with_option
):
    chain = lc.rag_chain(bridge_retriever, prompt, lc.KeyedFakeLLM(answers={question: answer}))
    out = chain.invoke({"input": question})
    assert {d.id for d in out["context"]} == {"brooklyn1", "brooklyn2", "goldengate1", "goldengate2"}
    for engine, expected in ((ts, without), (with_embedder, with_option)):
        (citation,) = TokenShapleyCitations(engine).invoke(out)
        assert (citation["text"], citation["status"]) == (answer, expected)
        assert (citation["doc_id"] is None) == (expected != "supported")
