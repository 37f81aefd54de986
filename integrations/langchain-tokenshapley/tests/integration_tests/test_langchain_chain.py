"""Real retrieval chains: an InMemoryVectorStore over MiniLM embeddings, fixed-text LLMs, the real TokenShapley encoder.

The chain is the shape ``create_retrieval_chain`` builds, in LCEL:
``RunnablePassthrough.assign(context=itemgetter("input") | retriever).assign(answer=... | llm | StrOutputParser())``.
"""

from __future__ import annotations

import logging
import uuid
import warnings

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.tracers.context import collect_runs
from tokenshapley_rag.errors import InvalidInputError

from langchain_tokenshapley import TokenShapleyCallbackHandler, TokenShapleyCitations, TokenShapleySentenceSources
from langchain_tokenshapley._convert import SENTENCE_SOURCE_KEYS


def assert_reference_citations(citations, answer, context, lc):
    """The answer about the Eiffel Tower and Big Ben, attributed over the two retrieved documents."""
    assert answer == lc.ANSWER
    assert sorted(d.id for d in context) == ["bigben", "eiffel"]
    cites = lc.by_text(citations)
    assert cites["330 metres"]["doc_id"] == "eiffel"
    assert cites["330 metres"]["sentence"] == "It is 330 metres tall."
    assert cites["330 metres"]["metadata"] == {"title": "Eiffel", "n": 0}
    assert cites["1859"]["doc_id"] == "bigben"
    assert cites["1859"]["sentence"] == "It was completed in 1859."
    assert cites["330 metres"]["supported"] and cites["1859"]["supported"]
    assert (cites["330 metres"]["start"], cites["1859"]["start"]) == (20, 65)
    lc.check_offsets(citations, answer, context)


def assert_wall_citations(citations, answer, context, lc):
    assert answer == lc.WALL_ANSWER
    cites = lc.by_text(citations)
    assert cites["21,000 kilometres"]["doc_id"] == "wall"
    assert cites["21,000 kilometres"]["sentence"] == "It is more than 21,000 kilometres long."
    assert cites["21,000 kilometres"]["start"] == lc.WALL_ANSWER.index("21,000")
    assert {c["doc_id"] for c in citations if c["supported"]} == {"wall"}
    lc.check_offsets(citations, answer, context)


@pytest.fixture(scope="module")
def cite_chain(ts, retriever, prompt, keyed_llm, lc):
    return lc.rag_chain(retriever, prompt, keyed_llm).assign(citations=TokenShapleyCitations(ts))


# ---------------------------------------------------------------- TokenShapleyCitations in a chain


def test_runnable_invoke(cite_chain, lc):
    out = cite_chain.invoke({"input": lc.QUESTION})
    assert set(out) == {"input", "context", "answer", "citations"}
    assert_reference_citations(out["citations"], out["answer"], out["context"], lc)


@pytest.mark.asyncio
async def test_runnable_ainvoke(cite_chain, lc):
    out = await cite_chain.ainvoke({"input": lc.WALL_QUESTION})
    assert_wall_citations(out["citations"], out["answer"], out["context"], lc)


def test_runnable_batch_keeps_inputs_apart(cite_chain, lc):
    outs = cite_chain.batch([{"input": lc.WALL_QUESTION}, {"input": lc.QUESTION}])
    assert_wall_citations(outs[0]["citations"], outs[0]["answer"], outs[0]["context"], lc)
    assert_reference_citations(outs[1]["citations"], outs[1]["answer"], outs[1]["context"], lc)


def test_runnable_stream(ts, retriever, prompt, lc):
    llm = GenericFakeChatModel(messages=iter([AIMessage(lc.ANSWER)]))
    chain = lc.rag_chain(retriever, prompt, llm).assign(citations=TokenShapleyCitations(ts))
    chunks = list(chain.stream({"input": lc.QUESTION}))
    assert sum("answer" in c for c in chunks) > 1, "the answer streams in several chunks"
    assert [c for c in chunks if "citations" in c] == [chunks[-1]]
    answer = "".join(c["answer"] for c in chunks if "answer" in c)
    context = next(c["context"] for c in chunks if "context" in c)
    assert_reference_citations(chunks[-1]["citations"], answer, context, lc)


def test_runnable_propagates_bad_context(ts, prompt, keyed_llm, lc):
    # the Runnable is a chain step the user asked for: its errors propagate (the handler's do not)
    chain = lc.rag_chain(ConflictingRetriever(), prompt, keyed_llm).assign(citations=TokenShapleyCitations(ts))
    with pytest.raises(InvalidInputError, match="context\\[0\\] and context\\[1\\] share the id 'same'"):
        chain.invoke({"input": lc.QUESTION})


# ---------------------------------------------------------------- TokenShapleySentenceSources


PARAPHRASE = "The Paris tower stands 330 metres high. London's great bell was finished in 1859."


def test_sentence_sources_in_a_chain_next_to_the_citations(ts, retriever, prompt, lc):
    """Each answer sentence's document, also where the sentence paraphrases it, in the
    citations' schema (doc_id, the document's metadata, its sentence's offsets)."""
    llm = lc.KeyedFakeLLM(answers={lc.QUESTION: PARAPHRASE})
    chain = lc.rag_chain(retriever, prompt, llm).assign(
        citations=TokenShapleyCitations(ts), sentence_sources=TokenShapleySentenceSources(ts)
    )
    out = chain.invoke({"input": lc.QUESTION})
    rows = out["sentence_sources"]
    assert [r["text"] for r in rows] == ["The Paris tower stands 330 metres high.", "London's great bell was finished in 1859."]
    assert [r["doc_id"] for r in rows] == ["eiffel", "bigben"]
    by_id = {d.id: d for d in out["context"]}
    for r in rows:
        assert list(r) == list(SENTENCE_SOURCE_KEYS)
        assert PARAPHRASE[r["start"] : r["end"]] == r["text"]
        assert by_id[r["doc_id"]].page_content[r["sentence_start"] : r["sentence_end"]] == r["sentence"]
        assert r["metadata"] == by_id[r["doc_id"]].metadata and r["score"] > 0
        assert [s["doc_id"] for s in r["sources"]][0] == r["doc_id"] and len(r["sources"]) == 2
    # the same result through the core: the runnable adds nothing of its own
    result = TokenShapleyCitations(ts).attribute({**out, "answer": PARAPHRASE})
    assert [a.best.source_id for a in ts.sentence_sources(result)] == ["eiffel", "bigben"]


def test_sentence_sources_of_an_empty_answer_or_context(ts, lc):
    runnable = TokenShapleySentenceSources(ts)
    assert runnable.invoke({"input": lc.QUESTION, "context": [], "answer": " "}) == []
    rows = runnable.invoke({"input": lc.QUESTION, "context": [], "answer": lc.ANSWER})
    assert [(r["text"], r["doc_id"], r["sources"], r["metadata"]) for r in rows] == [(lc.ANSWER, None, [], None)]
    assert TokenShapleySentenceSources(ts, supported_only=True).invoke(
        {"input": lc.QUESTION, "context": [], "answer": lc.ANSWER}) == []


# ---------------------------------------------------------------- TokenShapleyCallbackHandler


def test_handler_invoke_chat_model_matches_runnable(ts, retriever, prompt, lc):
    llm = FakeListChatModel(responses=[lc.ANSWER])
    chain = lc.rag_chain(retriever, prompt, llm).assign(citations=TokenShapleyCitations(ts))
    handler = TokenShapleyCallbackHandler(ts)
    run_id = uuid.uuid4()
    out = chain.invoke({"input": lc.QUESTION}, config={"callbacks": [handler], "run_id": run_id})
    assert list(handler.citations_by_run) == [run_id]
    assert handler.last_run_id == run_id
    assert handler.errors_by_run == {}
    # same query, documents and text: the handler and the Runnable agree exactly
    assert handler.citations_by_run[run_id] == handler.citations == out["citations"]
    assert_reference_citations(handler.citations, out["answer"], out["context"], lc)
    result = handler.results_by_run[run_id]
    assert result.response == lc.ANSWER
    assert result.query == lc.QUESTION
    assert [s.id for s in result.sources] == [d.id for d in out["context"]]


@pytest.mark.asyncio
async def test_handler_ainvoke(ts, retriever, prompt, keyed_llm, lc):
    handler = TokenShapleyCallbackHandler(ts)
    run_id = uuid.uuid4()
    out = await lc.rag_chain(retriever, prompt, keyed_llm).ainvoke(
        {"input": lc.WALL_QUESTION}, config={"callbacks": [handler], "run_id": run_id}
    )
    assert list(handler.citations_by_run) == [run_id]
    assert_wall_citations(handler.citations_by_run[run_id], out["answer"], out["context"], lc)


def test_handler_batch_keys_each_root_run(ts, retriever, prompt, keyed_llm, lc):
    handler = TokenShapleyCallbackHandler(ts)
    inputs = [{"input": lc.QUESTION}, {"input": lc.WALL_QUESTION}, {"input": lc.QUESTION}]
    chain = lc.rag_chain(retriever, prompt, keyed_llm)
    with collect_runs() as cb:
        outs = chain.batch(inputs, config={"callbacks": [handler], "max_concurrency": 3})
    roots = {run.inputs["input"]: [] for run in cb.traced_runs}
    for run in cb.traced_runs:
        roots[run.inputs["input"]].append(run.id)
    # one entry per root run (run ids as traced), nothing else
    assert len(cb.traced_runs) == 3
    assert set(handler.citations_by_run) == {run.id for run in cb.traced_runs}
    assert handler.errors_by_run == {}
    by_run = handler.citations_by_run
    for run in cb.traced_runs:
        out = outs[[i["input"] for i in inputs].index(run.inputs["input"])]
        if run.inputs["input"] == lc.QUESTION:
            assert_reference_citations(by_run[run.id], out["answer"], out["context"], lc)
        else:
            assert_wall_citations(by_run[run.id], out["answer"], out["context"], lc)
    first, second = roots[lc.QUESTION]
    assert first != second and by_run[first] == by_run[second]


def test_handler_batch_with_explicit_run_ids(ts, retriever, prompt, keyed_llm, lc):
    handler = TokenShapleyCallbackHandler(ts)
    ids = [uuid.uuid4(), uuid.uuid4()]
    outs = lc.rag_chain(retriever, prompt, keyed_llm).batch(
        [{"input": lc.WALL_QUESTION}, {"input": lc.QUESTION}],
        config=[{"callbacks": [handler], "run_id": i} for i in ids],
    )
    assert set(handler.citations_by_run) == set(ids)
    assert_wall_citations(handler.citations_by_run[ids[0]], outs[0]["answer"], outs[0]["context"], lc)
    assert_reference_citations(handler.citations_by_run[ids[1]], outs[1]["answer"], outs[1]["context"], lc)


@pytest.mark.asyncio
async def test_handler_abatch(ts, retriever, prompt, keyed_llm, lc):
    handler = TokenShapleyCallbackHandler(ts)
    ids = [uuid.uuid4(), uuid.uuid4()]
    outs = await lc.rag_chain(retriever, prompt, keyed_llm).abatch(
        [{"input": lc.QUESTION}, {"input": lc.WALL_QUESTION}],
        config=[{"callbacks": [handler], "run_id": i} for i in ids],
    )
    assert set(handler.citations_by_run) == set(ids)
    assert_reference_citations(handler.citations_by_run[ids[0]], outs[0]["answer"], outs[0]["context"], lc)
    assert_wall_citations(handler.citations_by_run[ids[1]], outs[1]["answer"], outs[1]["context"], lc)


def test_handler_stream_attributes_when_the_stream_ends(ts, retriever, prompt, lc):
    llm = GenericFakeChatModel(messages=iter([AIMessage(lc.ANSWER)]))
    handler = TokenShapleyCallbackHandler(ts)
    run_id = uuid.uuid4()
    chunks = []
    for chunk in lc.rag_chain(retriever, prompt, llm).stream(
        {"input": lc.QUESTION}, config={"callbacks": [handler], "run_id": run_id}
    ):
        assert run_id not in handler.citations_by_run, "attributed before the run ended"
        chunks.append(chunk)
    assert sum("answer" in c for c in chunks) > 1
    answer = "".join(c["answer"] for c in chunks if "answer" in c)
    context = next(c["context"] for c in chunks if "context" in c)
    assert_reference_citations(handler.citations_by_run[run_id], answer, context, lc)


@pytest.mark.asyncio
async def test_handler_astream(ts, retriever, prompt, lc):
    llm = GenericFakeChatModel(messages=iter([AIMessage(lc.WALL_ANSWER)]))
    handler = TokenShapleyCallbackHandler(ts)
    run_id = uuid.uuid4()
    chunks = [
        c
        async for c in lc.rag_chain(retriever, prompt, llm).astream(
            {"input": lc.WALL_QUESTION}, config={"callbacks": [handler], "run_id": run_id}
        )
    ]
    answer = "".join(c["answer"] for c in chunks if "answer" in c)
    context = next(c["context"] for c in chunks if "context" in c)
    assert_wall_citations(handler.citations_by_run[run_id], answer, context, lc)


class ConflictingRetriever(BaseRetriever):
    """Returns two different documents under one id, which the attribution rejects."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [
            Document(id="same", page_content="The Eiffel Tower is 330 metres tall."),
            Document(id="same", page_content="Big Ben was completed in 1859."),
        ]


def test_handler_failure_never_breaks_the_chain(ts, prompt, lc, caplog):
    handler = TokenShapleyCallbackHandler(ts)
    run_id = uuid.uuid4()
    chain = lc.rag_chain(ConflictingRetriever(), prompt, FakeListLLM(responses=[lc.ANSWER]))
    with caplog.at_level(logging.WARNING, logger="langchain_tokenshapley.callbacks"):
        out = chain.invoke({"input": lc.QUESTION}, config={"callbacks": [handler], "run_id": run_id})
    assert out["answer"] == lc.ANSWER
    err = handler.errors_by_run[run_id]
    assert isinstance(err, InvalidInputError)
    assert "documents[0] and documents[1] share the id 'same'" in str(err)
    assert run_id not in handler.citations_by_run and handler.citations == []
    assert any(str(run_id) in r.getMessage() for r in caplog.records)


def test_handler_warns_when_documents_do_not_come_from_a_retriever(ts, retriever, prompt, keyed_llm, lc):
    """Documents from a RunnableLambda (a common LCEL pattern): the handler cannot see them. It
    used to leave handler.citations empty without a word; it now says what is missing."""
    from langchain_core.runnables import RunnableLambda

    docs = lc.make_documents()[:2]
    chain = lc.rag_chain(RunnableLambda(lambda q: docs), prompt, keyed_llm)
    handler = TokenShapleyCallbackHandler(ts)
    with pytest.warns(UserWarning, match="no retriever run") as caught:
        out = chain.invoke({"input": lc.QUESTION}, config={"callbacks": [handler]})
    assert out["answer"] == lc.ANSWER
    assert handler.citations == [] and handler.citations_by_run == {}
    message = str(next(w.message for w in caught if "no retriever run" in str(w.message)))
    assert "BaseRetriever" in message and "TokenShapleyCitations" in message
    # the fix the message names works on the same chain
    out = chain.assign(citations=TokenShapleyCitations(ts)).invoke({"input": lc.QUESTION})
    assert_reference_citations(out["citations"], out["answer"], out["context"], lc)
    # and a real retriever gives no warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lc.rag_chain(retriever, prompt, keyed_llm).invoke({"input": lc.QUESTION}, config={"callbacks": [handler]})
    assert not [w for w in caught if "no retriever run" in str(w.message)]
    assert_reference_citations(handler.citations, lc.ANSWER, docs, lc)
