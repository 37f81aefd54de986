"""A real generator in a chain: ChatTokenShapley (SmolLM2-135M, the encoder TokenShapley already loaded)."""

from __future__ import annotations

import uuid

import pytest

from langchain_tokenshapley import ChatTokenShapley, TokenShapleyCallbackHandler, TokenShapleyCitations


@pytest.mark.slow
def test_smollm2_answer_is_cited(ts, retriever, lc):
    from langchain_core.prompts import ChatPromptTemplate

    llm = ChatTokenShapley(ts, max_new_tokens=24)
    prompt = ChatPromptTemplate.from_messages(
        [("human", "Answer the question in one sentence using only the passages.\n\n{context}\n\nQuestion: {input}")]
    )
    chain = lc.rag_chain(retriever, prompt, llm).assign(citations=TokenShapleyCitations(ts))
    handler = TokenShapleyCallbackHandler(ts)
    run_id = uuid.uuid4()

    out = chain.invoke({"input": "How tall is the Eiffel Tower?"}, config={"callbacks": [handler], "run_id": run_id})

    answer = out["answer"]
    assert "eiffel" in [d.id for d in out["context"]]
    assert "Eiffel Tower" in answer, f"greedy SmolLM2 output changed: {answer!r}"
    cite = lc.by_text(out["citations"])["Eiffel Tower"]
    assert cite["doc_id"] == "eiffel" and cite["supported"] and cite["score"] > 0
    lc.check_offsets(out["citations"], answer, out["context"])
    # the handler saw the same generation (on_llm_end of the chat model) and the same documents
    assert handler.errors_by_run == {}
    assert handler.results_by_run[run_id].response == answer
    assert handler.citations_by_run[run_id] == out["citations"]
