"""A retrieval chain over pages that disagree, with TokenShapley's question embedder (the
default) and without it: a short answer to a lowercase question, taken from the retrieved page
about something else, is flagged; the right one stays supported (tokenshapley-rag's
docs/method.md §8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_tokenshapley import TokenShapleyCitations

PAGES = Path(__file__).resolve().parents[4] / "tests" / "data" / "competing_facts"
BRIDGES = json.loads((PAGES / "bridge_questions.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def bridge_retriever(embeddings):
    from langchain_core.vectorstores import InMemoryVectorStore

    docs = [
        Document(id=name, page_content=(PAGES / f"{name}.txt").read_text(encoding="utf-8")) for name in BRIDGES["pages"]
    ]
    return InMemoryVectorStore.from_documents(docs, embeddings).as_retriever(search_kwargs={"k": 4})


@pytest.fixture(scope="module")
def without_embedder(ts):
    from tokenshapley_rag import TokenShapley

    return TokenShapley(ts.encoder, cache_dir=ts.cache.root.parent if ts.cache.root else None, question_embedder=None)


@pytest.mark.parametrize("case", BRIDGES["cases"], ids=lambda case: f"{case['question']}-{case['answer']}")
def test_a_short_answer_from_the_other_retrieved_page_is_flagged(ts, without_embedder, bridge_retriever, prompt, lc, case):
    question, answer = case["question"], case["answer"]
    chain = lc.rag_chain(bridge_retriever, prompt, lc.KeyedFakeLLM(answers={question: answer}))
    out = chain.invoke({"input": question})
    assert {d.id for d in out["context"]} == set(BRIDGES["retrieved"])
    assert ts.config["question_embedder"] == "all-MiniLM-L6-v2"  # the default engine has it
    for engine, expected in ((without_embedder, case["without"]), (ts, case["with_embedder"])):
        (citation,) = TokenShapleyCitations(engine).invoke(out)
        assert (citation["text"], citation["status"]) == (answer, expected)
        assert (citation["doc_id"] is None) == (expected != "supported")
