"""A real generator: SmolLM2-135M (the encoder TokenShapley already loaded) through langchain-huggingface."""

from __future__ import annotations

import uuid

import pytest

from langchain_tokenshapley import TokenShapleyCallbackHandler, TokenShapleyCitations


@pytest.mark.slow
def test_smollm2_answer_is_cited(ts, retriever, lc):
    import transformers
    from langchain_core.prompts import PromptTemplate
    from langchain_huggingface import HuggingFacePipeline

    pipe = transformers.pipeline(
        "text-generation",
        model=ts.loaded.model,
        tokenizer=ts.loaded.tokenizer,
        max_new_tokens=10,
        do_sample=False,
        return_full_text=False,
    )
    llm = HuggingFacePipeline(pipeline=pipe)
    # The answer is primed so that a 135M model stays on topic within 10 greedy tokens.
    prompt = PromptTemplate.from_template("Context:\n{context}\n\nQuestion: {input}\nAnswer: The Eiffel Tower is")
    chain = lc.rag_chain(retriever, prompt, llm).assign(citations=TokenShapleyCitations(ts))
    handler = TokenShapleyCallbackHandler(ts)
    run_id = uuid.uuid4()

    out = chain.invoke({"input": "How tall is the Eiffel Tower?"}, config={"callbacks": [handler], "run_id": run_id})

    answer = out["answer"]
    assert "eiffel" in [d.id for d in out["context"]]
    assert "330 metres" in answer, f"greedy SmolLM2 output changed: {answer!r}"
    cite = lc.by_text(out["citations"])["330 metres"]
    assert cite["doc_id"] == "eiffel"
    assert cite["sentence"] == "It is 330 metres tall."
    assert cite["supported"] and cite["score"] > 0
    lc.check_offsets(out["citations"], answer, out["context"])
    # the handler saw the same generation (on_llm_end of a HuggingFacePipeline) and the same documents
    assert handler.errors_by_run == {}
    assert handler.results_by_run[run_id].response == answer
    assert handler.citations_by_run[run_id] == out["citations"]
