"""TokenShapleyCallbackHandler bookkeeping, driven by hand-made callback events and a recording stub
in place of TokenShapley (what the handler hands to the core is asserted exactly)."""

from __future__ import annotations

import logging
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from uuid import UUID, uuid4

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, Generation, LLMResult

from langchain_tokenshapley import TokenShapleyCallbackHandler


class RecordingCore:
    """Stands in for TokenShapley: records each call, returns no citations (or raises)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[tuple[str, list[tuple[str, str]], str]] = []
        self.error = error
        self.lock = threading.Lock()

    def attribute(self, query, sources, response):
        with self.lock:
            self.calls.append((query, [(s.id, s.text) for s in sources], response))
        if self.error is not None:
            raise self.error
        return SimpleNamespace(citations=[], response=response)


def doc(i: str) -> Document:
    return Document(id=i, page_content=f"Sentence of {i}.")


def rag_run(
    h: TokenShapleyCallbackHandler, root: UUID, query: str, docs: list[Document], answer: str, *, chat: bool
) -> None:
    """The events of `RunnablePassthrough.assign(context=retriever).assign(answer=prompt | llm)`:
    the retriever and the LLM sit under different sub-chains (siblings, not parent and child)."""
    ctx_chain, ret, ans_chain, llm = uuid4(), uuid4(), uuid4(), uuid4()
    h.on_chain_start(None, {"input": query}, run_id=root, parent_run_id=None)
    h.on_chain_start(None, {"input": query}, run_id=ctx_chain, parent_run_id=root)
    h.on_retriever_start(None, query, run_id=ret, parent_run_id=ctx_chain, name="VectorStoreRetriever")
    h.on_retriever_end(docs, run_id=ret, parent_run_id=ctx_chain)
    h.on_chain_end({}, run_id=ctx_chain, parent_run_id=root)
    h.on_chain_start(None, {}, run_id=ans_chain, parent_run_id=root)
    if chat:
        h.on_chat_model_start(None, [[HumanMessage(query)]], run_id=llm, parent_run_id=ans_chain)
        gen = ChatGeneration(message=AIMessage(answer))
    else:
        h.on_llm_start(None, [query], run_id=llm, parent_run_id=ans_chain)
        gen = Generation(text=answer)
    h.on_llm_end(LLMResult(generations=[[gen]]), run_id=llm, parent_run_id=ans_chain)
    h.on_chain_end({}, run_id=ans_chain, parent_run_id=root)
    h.on_chain_end({"answer": answer}, run_id=root, parent_run_id=None)


def assert_clean(h: TokenShapleyCallbackHandler) -> None:
    assert h._root_of == {} and h._members == {} and h._captures == {}


@pytest.mark.parametrize("chat", [False, True], ids=["llm", "chat-model"])
def test_sibling_retriever_and_llm_are_joined_by_root(chat):
    core = RecordingCore()
    h = TokenShapleyCallbackHandler(core)
    root = uuid4()
    rag_run(h, root, "q?", [doc("a"), doc("b")], "The answer.", chat=chat)
    assert core.calls == [("q?", [("a", "Sentence of a."), ("b", "Sentence of b.")], "The answer.")]
    assert h.citations_by_run == {root: []}
    assert h.last_run_id == root
    assert h.errors_by_run == {}
    assert_clean(h)


def test_chat_model_start_is_implemented():
    # BaseCallbackHandler.on_chat_model_start raises NotImplementedError (the manager then
    # falls back to on_llm_start); ours registers the run.
    h = TokenShapleyCallbackHandler(RecordingCore())
    run = uuid4()
    assert h.on_chat_model_start(None, [[HumanMessage("hi")]], run_id=run, parent_run_id=None) is None
    assert h._root_of == {run: run}


def test_interleaved_runs_stay_apart():
    core = RecordingCore()
    h = TokenShapleyCallbackHandler(core)
    r1, r2 = uuid4(), uuid4()
    c1, c2, ret1, ret2, llm1, llm2 = (uuid4() for _ in range(6))
    h.on_chain_start(None, {}, run_id=r1, parent_run_id=None)
    h.on_chain_start(None, {}, run_id=r2, parent_run_id=None)
    h.on_chain_start(None, {}, run_id=c1, parent_run_id=r1)
    h.on_chain_start(None, {}, run_id=c2, parent_run_id=r2)
    h.on_retriever_start(None, "q2", run_id=ret2, parent_run_id=c2)
    h.on_retriever_start(None, "q1", run_id=ret1, parent_run_id=c1)
    h.on_retriever_end([doc("x")], run_id=ret1, parent_run_id=c1)
    h.on_retriever_end([doc("y")], run_id=ret2, parent_run_id=c2)
    h.on_llm_start(None, ["p"], run_id=llm2, parent_run_id=r2)
    h.on_llm_start(None, ["p"], run_id=llm1, parent_run_id=r1)
    h.on_llm_end(LLMResult(generations=[[Generation(text="answer two")]]), run_id=llm2, parent_run_id=r2)
    h.on_llm_end(LLMResult(generations=[[Generation(text="answer one")]]), run_id=llm1, parent_run_id=r1)
    h.on_chain_end({}, run_id=c1, parent_run_id=r1)
    h.on_chain_end({}, run_id=c2, parent_run_id=r2)
    h.on_chain_end({}, run_id=r2, parent_run_id=None)
    assert core.calls == [("q2", [("y", "Sentence of y.")], "answer two")]
    h.on_chain_end({}, run_id=r1, parent_run_id=None)
    assert core.calls[1] == ("q1", [("x", "Sentence of x.")], "answer one")
    assert list(h.citations_by_run) == [r2, r1]
    assert h.last_run_id == r1
    assert_clean(h)


def test_pools_retrievers_and_keeps_last_generation():
    core = RecordingCore()
    h = TokenShapleyCallbackHandler(core)
    root, ret1, ret2, llm1, llm2 = (uuid4() for _ in range(5))
    h.on_chain_start(None, {}, run_id=root, parent_run_id=None)
    h.on_llm_start(None, ["rewrite"], run_id=llm1, parent_run_id=root)
    h.on_llm_end(LLMResult(generations=[[Generation(text="rewritten query")]]), run_id=llm1, parent_run_id=root)
    h.on_retriever_start(None, "first query", run_id=ret1, parent_run_id=root)
    h.on_retriever_end([doc("a"), doc("b")], run_id=ret1, parent_run_id=root)
    h.on_retriever_start(None, "second query", run_id=ret2, parent_run_id=root)
    h.on_retriever_end([doc("b"), doc("c")], run_id=ret2, parent_run_id=root)  # "b" again: kept once
    h.on_llm_start(None, ["answer"], run_id=llm2, parent_run_id=root)
    h.on_llm_end(LLMResult(generations=[[Generation(text="final answer")]]), run_id=llm2, parent_run_id=root)
    h.on_chain_end({}, run_id=root, parent_run_id=None)
    query, sources, answer = core.calls[0]
    assert (query, [i for i, _ in sources], answer) == ("first query", ["a", "b", "c"], "final answer")


def test_attribution_failure_is_recorded_not_raised(caplog):
    core = RecordingCore(error=RuntimeError("encoder exploded"))
    h = TokenShapleyCallbackHandler(core)
    assert h.raise_error is False
    ok_root, bad_root = uuid4(), uuid4()
    h._record(ok_root, citations=[{"text": "old"}])  # an earlier successful run
    with caplog.at_level(logging.WARNING, logger="langchain_tokenshapley.callbacks"):
        rag_run(h, bad_root, "q", [doc("a")], "An answer.", chat=False)  # must not raise
    assert isinstance(h.errors_by_run[bad_root], RuntimeError)
    assert bad_root not in h.citations_by_run
    assert h.last_run_id == bad_root
    assert h.citations == []  # the last run failed
    assert any("attribution failed" in r.getMessage() and str(bad_root) in r.getMessage() for r in caplog.records)
    assert h.citations_by_run == {ok_root: [{"text": "old"}]}
    assert_clean(h)
    # the same run id run again, successfully: the stale error goes
    core.error = None
    rag_run(h, bad_root, "q", [doc("a")], "An answer.", chat=False)
    assert h.errors_by_run == {} and h.citations_by_run[bad_root] == []


def test_failed_root_run_is_not_attributed():
    core = RecordingCore()
    h = TokenShapleyCallbackHandler(core)
    root, ret, llm = uuid4(), uuid4(), uuid4()
    h.on_chain_start(None, {}, run_id=root, parent_run_id=None)
    h.on_retriever_start(None, "q", run_id=ret, parent_run_id=root)
    h.on_retriever_end([doc("a")], run_id=ret, parent_run_id=root)
    h.on_llm_start(None, ["p"], run_id=llm, parent_run_id=root)
    h.on_llm_error(ValueError("rate limit"), run_id=llm, parent_run_id=root)
    h.on_chain_error(ValueError("rate limit"), run_id=root, parent_run_id=None)
    assert core.calls == [] and h.citations_by_run == {} and h.errors_by_run == {}
    assert_clean(h)


def llm_only_run(h: TokenShapleyCallbackHandler, root: UUID, *, chat: bool, calls: int = 1) -> None:
    """An LCEL chain whose documents come from a RunnableLambda: only chains and the LLM report."""
    h.on_chain_start(None, {}, run_id=root, parent_run_id=None)
    lam = uuid4()
    h.on_chain_start(None, {}, run_id=lam, parent_run_id=root)  # the lambda returning documents
    h.on_chain_end([doc("a")], run_id=lam, parent_run_id=root)
    for _ in range(calls):
        llm = uuid4()
        if chat:
            h.on_chat_model_start(None, [[HumanMessage("p")]], run_id=llm, parent_run_id=root)
            gen = ChatGeneration(message=AIMessage("text"))
        else:
            h.on_llm_start(None, ["p"], run_id=llm, parent_run_id=root)
            gen = Generation(text="text")
        h.on_llm_end(LLMResult(generations=[[gen]]), run_id=llm, parent_run_id=root)
    h.on_chain_end({}, run_id=root, parent_run_id=None)


def test_runs_without_retriever_or_llm_are_ignored():
    core = RecordingCore()
    h = TokenShapleyCallbackHandler(core)
    # an LLM chain without retrieval: ignored, with the warning tested below
    with pytest.warns(UserWarning, match="no retriever run"):
        llm_only_run(h, uuid4(), chat=False)
    # a retriever called on its own (it is its own root): no LLM, nothing to say
    ret = uuid4()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h.on_retriever_start(None, "q", run_id=ret, parent_run_id=None)
        h.on_retriever_end([doc("a")], run_id=ret, parent_run_id=None)
    assert core.calls == [] and h.citations_by_run == {} and h.last_run_id is None
    assert_clean(h)


@pytest.mark.parametrize("chat", [False, True], ids=["llm", "chat-model"])
def test_llm_without_retriever_warns_once_per_run(chat):
    # documents from a RunnableLambda: once, citations stayed [] without a word
    core = RecordingCore()
    h = TokenShapleyCallbackHandler(core)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # count every call, not Python's once-per-place display
        llm_only_run(h, uuid4(), chat=chat, calls=2)  # two LLM calls, one run: one warning
        llm_only_run(h, uuid4(), chat=chat)
        rag_run(h, uuid4(), "q", [doc("a")], "An answer.", chat=chat)  # a retriever ran: no warning
        rag_run(h, uuid4(), "q", [], "An answer.", chat=chat)  # it found nothing: still no warning
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert len(messages) == 2
    assert all("no retriever run" in m and "BaseRetriever" in m and "TokenShapleyCitations" in m for m in messages)
    assert len(core.calls) == 1 and len(h.citations_by_run) == 2
    assert_clean(h)


def test_empty_retrieval_flags_the_answer_without_model_call():
    # nothing retrieved supports an answer written from memory: every keyword is unsupported
    core = RecordingCore()
    h = TokenShapleyCallbackHandler(core)
    root = uuid4()
    rag_run(h, root, "q", [], "Paris had 2,102,650 people.", chat=True)
    assert core.calls == []
    assert [(c["text"], c["status"], c["doc_id"]) for c in h.citations_by_run[root]] == [
        ("Paris", "unsupported", None), ("2,102,650", "unsupported", None), ("people", "unsupported", None)]
    assert [v.verdict for v in h.results_by_run[root].sentences] == ["unsupported"]


def test_handler_attached_below_the_root_keys_by_topmost_run_seen():
    core = RecordingCore()
    h = TokenShapleyCallbackHandler(core)
    outer, sub = uuid4(), uuid4()  # the handler never sees `outer`
    h.on_chain_start(None, {}, run_id=sub, parent_run_id=outer)
    rag_part = [uuid4(), uuid4()]
    h.on_retriever_start(None, "q", run_id=rag_part[0], parent_run_id=sub)
    h.on_retriever_end([doc("a")], run_id=rag_part[0], parent_run_id=sub)
    h.on_llm_start(None, ["p"], run_id=rag_part[1], parent_run_id=sub)
    h.on_llm_end(LLMResult(generations=[[Generation(text="text")]]), run_id=rag_part[1], parent_run_id=sub)
    h.on_chain_end({}, run_id=sub, parent_run_id=outer)
    assert list(h.citations_by_run) == [sub]
    assert_clean(h)


def test_max_runs_and_clear():
    h = TokenShapleyCallbackHandler(RecordingCore(), max_runs=2)
    roots = [uuid4() for _ in range(3)]
    for r in roots:
        rag_run(h, r, "q", [doc("a")], "An answer.", chat=False)
    assert list(h.citations_by_run) == roots[1:]
    h.clear()
    assert h.citations_by_run == {} and h.citations == [] and h.last_run_id is None
    with pytest.raises(ValueError, match="max_runs"):
        TokenShapleyCallbackHandler(RecordingCore(), max_runs=0)


def test_concurrent_runs_from_threads():
    core = RecordingCore()
    h = TokenShapleyCallbackHandler(core)
    roots = [uuid4() for _ in range(32)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: rag_run(h, roots[i], f"q{i}", [doc(f"d{i}")], f"answer {i}", chat=i % 2 == 0),
                      range(32)))
    assert set(h.citations_by_run) == set(roots)
    assert sorted(core.calls) == sorted((f"q{i}", [(f"d{i}", f"Sentence of d{i}.")], f"answer {i}") for i in range(32))
    assert_clean(h)
