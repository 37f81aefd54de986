"""Chain evaluation (issue 9): metrics, chain adapters, local vs Ray, faults and resume.

Model tests use the real default TokenShapley (session fixture ``ts``) on three tiny
passages. Ray runs in-process (one module-scoped ``ray.init(num_cpus=2)``); its actors load
their own model from an ``AttributorConfig`` that shares the session's cache folder.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tokenshapley_rag.chain_eval import (
    AttributorConfig,
    ChainReport,
    KeywordRow,
    QuestionFileError,
    QuestionRecord,
    QuestionRow,
    RowsFile,
    SourceUse,
    citation_concentration,
    entropy_bits,
    evaluate_chain,
    gini,
    load_questions,
    mean_or_none,
    run_chain,
    share,
    summarize,
    utilization_by_rank,
)
from tokenshapley_rag.errors import (
    EmptyTextError,
    InvalidInputError,
    InvalidInputTypeError,
    TextTooLongError,
)

EIFFEL = "The Eiffel Tower is in Paris. The tower is 330 metres tall."
BIGBEN = "Big Ben is in London. The tower was completed in 1859."
ROME = "The Colosseum is in Rome. It held 50,000 spectators."
CORPUS = {"eiffel": EIFFEL, "bigben": BIGBEN, "rome": ROME}

# Fake retrieval + generation shared by the LlamaIndex-like and LangChain-like chains:
# question -> (retrieved ids, best first; the "LLM" answer). "1923" is invented.
SCRIPT = {
    "How tall is the Eiffel Tower?": (["eiffel", "bigben", "rome"], "The Eiffel Tower is 330 metres tall."),
    "When was Big Ben completed?": (["bigben", "eiffel"], "Big Ben was completed in 1923."),
    "Where is the Colosseum?": (["eiffel", "rome"], "The Colosseum is in Rome."),
}
CHAIN_QUESTIONS = [{"id": f"c{i}", "question": q} for i, q in enumerate(SCRIPT)]


def _src(i: str) -> dict:
    return {"id": i, "text": CORPUS[i], "metadata": {"title": i}}


PRECOMPUTED = [
    {"id": "q1", "question": "How tall is the Eiffel Tower?", "reference": "330 m",
     "sources": [_src("eiffel"), _src("bigben"), _src("rome")], "answer": "The Eiffel Tower is 330 metres tall."},
    {"id": "q2", "question": "When was Big Ben completed?",
     "sources": [_src("bigben"), _src("eiffel")], "answer": "Big Ben was completed in 1923."},
    {"id": "q3", "question": "Where is the Colosseum?",
     "sources": [_src("eiffel"), _src("rome")], "answer": "The Colosseum is in Rome."},
    {"id": "q4", "question": "What is empty?", "sources": [_src("rome")], "answer": "  "},
]


# ---------------------------------------------------------------------- fake chains


class FakeNode:
    """Like llama_index TextNode: node_id, metadata, get_content(metadata_mode)."""

    def __init__(self, node_id: str, text: str) -> None:
        self.node_id, self.text, self.metadata = node_id, text, {"title": node_id}
        self.modes: list[str] = []

    def get_content(self, metadata_mode: str = "all") -> str:
        self.modes.append(str(metadata_mode))
        return self.text


class FakeNodeWithScore:
    def __init__(self, node: FakeNode, score: float) -> None:
        self.node, self.score = node, score


class FakeResponse:
    """Like llama_index Response: .response and .source_nodes."""

    def __init__(self, response: str | None, source_nodes: list) -> None:
        self.response, self.source_nodes, self.metadata = response, source_nodes, None


class FakeQueryEngine:
    """Duck-typed LlamaIndex query engine over CORPUS, answering from SCRIPT."""

    def __init__(self) -> None:
        self.nodes: list[FakeNode] = []

    def query(self, question: str) -> FakeResponse:
        if question not in SCRIPT:
            raise RuntimeError(f"retriever down for {question!r}")
        ids, answer = SCRIPT[question]
        nodes = [FakeNodeWithScore(FakeNode(i, CORPUS[i]), 1.0 / (r + 1)) for r, i in enumerate(ids)]
        self.nodes += [n.node for n in nodes]
        return FakeResponse(answer, nodes)


def make_llama_engine() -> FakeQueryEngine:
    return FakeQueryEngine()


def make_langchain_runnable():
    """A create_retrieval_chain-shaped runnable: {"input"} -> {"input", "context", "answer"}."""
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda

    def rag(inputs: dict) -> dict:
        ids, answer = SCRIPT[inputs["input"]]
        docs = [Document(page_content=CORPUS[i], metadata={"title": i}, id=i) for i in ids]
        return {"input": inputs["input"], "context": docs, "answer": answer}

    return RunnableLambda(rag)


class CountingAttributor:
    """Wraps a TokenShapley and records which questions it attributed."""

    def __init__(self, ts) -> None:
        self.ts, self.queries = ts, []

    @property
    def config(self):
        return self.ts.config

    def attribute(self, **kw):
        self.queries.append(kw["query"])
        return self.ts.attribute(**kw)


def _comparable(report: ChainReport) -> dict:
    return report.to_dict(timing=False, config=False)


# ---------------------------------------------------------------------- pure metrics


def test_metrics_hand_computed():
    # sorted [0, 0, 4]: (2*3 - 3 - 1) * 4 / (3 * 4) = 2/3; [1, 3]: (-1*1 + 1*3) / (2*4) = 1/4
    assert gini([0, 0, 4]) == pytest.approx(2 / 3)
    assert gini([1, 3]) == pytest.approx(0.25)
    assert gini([2, 2, 2]) == 0.0
    assert gini([]) is None and gini([0, 0]) is None
    with pytest.raises(InvalidInputError):
        gini([1, -1])
    # p = (1/2, 1/4, 1/4): H = 0.5*1 + 2*0.25*2 = 1.5 bits; / log2(3)
    assert entropy_bits([2, 1, 1]) == pytest.approx(1.5)
    assert entropy_bits([2, 1, 1], normalize=True) == pytest.approx(1.5 / 1.5849625007211562)
    assert entropy_bits([5, 0]) == 0.0 and entropy_bits([3], normalize=True) == 0.0
    assert entropy_bits([0, 0]) is None
    c = citation_concentration([1, 3, 0, 0])
    assert (c.n_citations, c.top_rank_share, c.max_share) == (4, 0.25, 0.75)
    # H(1/4, 3/4) = 0.25*2 + 0.75*log2(4/3) = 0.811278; gini of [0,0,1,3] = (1*1 + 3*3)/(4*4)
    assert c.entropy_bits == pytest.approx(0.8112781244591328)
    assert c.normalized_entropy == pytest.approx(0.8112781244591328 / 2)
    assert c.gini == pytest.approx(10 / 16)
    assert citation_concentration([0, 0]).top_rank_share is None
    u = utilization_by_rank([[(1, 2), (2, 0)], [(1, 0), (2, 1), (3, 0)], [(1, 1)]])
    assert [(r.rank, r.n_retrieved, r.n_used, r.n_citations) for r in u] == [(1, 3, 2, 3), (2, 2, 1, 1), (3, 1, 0, 0)]
    assert [r.utilization for r in u] == [pytest.approx(2 / 3), 0.5, 0.0]
    assert share(1, 4) == 0.25 and share(0, 0) is None
    assert mean_or_none([None, 1.0, 3.0]) == 2.0 and mean_or_none([]) is None


def _row(index, rid, sources, keywords, status="ok", error_type=None):
    return QuestionRow(index, rid, f"Q{index}?", None, "answer", status, error_type, None, None,
                       tuple(sources), tuple(keywords), 0.5, 1.5)


def test_summarize_hand_computed():
    def kw(t, sup, sid=None, rank=None):
        return KeywordRow(t, 0, 1, sup, 1.0 if sup else 0.0, sid, rank)

    rows = [
        # a: 2 citations of rank 1, 1 of rank 2; one unsupported keyword; rank 3 unused
        _row(0, "a", [SourceUse(1, "x", 2, 3.0), SourceUse(2, "y", 1, 1.0), SourceUse(3, "z", 0, 0.0)],
             [kw("A", True, "x", 1), kw("B", True, "x", 1), kw("C", True, "y", 2), kw("D", False)]),
        # b: its only citation goes to rank 2
        _row(1, "b", [SourceUse(1, "x", 0, 0.0), SourceUse(2, "z", 1, 1.0)], [kw("E", True, "z", 2)]),
        _row(2, "c", [], [], status="error", error_type="TextTooLongError"),
        _row(3, "d", [], [], status="error", error_type="RuntimeError"),
    ]
    s = summarize(rows)
    assert (s.n_questions, s.n_ok, s.n_errors) == (4, 2, 2)
    assert s.errors_by_type == {"RuntimeError": 1, "TextTooLongError": 1}
    assert (s.n_keywords, s.n_supported, s.supported_share) == (5, 4, 0.8)
    assert s.mean_supported_share == pytest.approx((3 / 4 + 1) / 2)
    assert (s.n_retrieved, s.n_used, s.noise_share) == (5, 3, pytest.approx(2 / 5))
    assert (s.n_citations, s.top_rank_share) == (4, 0.5)
    # a: max share 2/3, gini([2,1,0]) = (0*-2 + 1*0 + 2*2)/(3*3) = 4/9; b: max 1, gini([0,1]) = 1/2
    assert s.mean_max_share == pytest.approx((2 / 3 + 1) / 2)
    assert s.mean_gini == pytest.approx((4 / 9 + 0.5) / 2)
    assert [(u.rank, u.n_retrieved, u.n_used) for u in s.utilization] == [(1, 2, 1), (2, 2, 2), (3, 1, 0)]
    assert rows[0].unsupported == ("D",) and rows[0].supported_share == 0.75


# ---------------------------------------------------------------------- input validation


def test_load_questions_names_the_bad_line(tmp_path):
    p = tmp_path / "q.jsonl"
    p.write_text('{"question": "ok?"}\n\n{"question": "bad",\n', encoding="utf-8")
    with pytest.raises(QuestionFileError, match=r"q\.jsonl:3: not valid JSON"):
        load_questions(p)
    p.write_text('{"question": "ok?"}\n{"id": "x"}\n', encoding="utf-8")
    with pytest.raises(QuestionFileError, match=r":line 2: 'question' must be a non-empty string"):
        load_questions(p)
    p.write_text('{"id": 1, "question": "a?"}\n["not", "an", "object"]\n', encoding="utf-8")
    with pytest.raises(QuestionFileError, match="line 2: expected a JSON object, got list"):
        load_questions(p)
    p.write_text('{"id": "1", "question": "a?"}\n{"question": "b?"}\n', encoding="utf-8")
    with pytest.raises(QuestionFileError, match=r"id '1' is used twice \(line 1 and line 2\)"):
        load_questions(p)
    p.write_text('{"question": "a?", "sources": [""], "answer": "x"}\n', encoding="utf-8")
    with pytest.raises(QuestionFileError, match="line 1: sources\\[0\\]"):
        load_questions(p)
    with pytest.raises(FileNotFoundError):
        load_questions(tmp_path / "missing.jsonl")
    p.write_text('{"id": 7, "question": "a?", "reference_answer": "r"}\n{"question": "b?"}\n', encoding="utf-8")
    recs = load_questions(p)
    assert [(r.index, r.id, r.reference, r.line) for r in recs] == [(0, "7", "r", 1), (1, "1", None, 2)]
    # no chain, and a record without a pre-computed answer: fails before any model work
    with pytest.raises(InvalidInputError, match=r"line 1 \(id '7'\) has no 'sources' and 'answer'"):
        evaluate_chain(p, attributor=object())


def test_bad_arguments_fail_before_work():
    with pytest.raises(InvalidInputError, match="engine must be one of"):
        evaluate_chain(PRECOMPUTED, engine="spark")
    with pytest.raises(InvalidInputTypeError, match="query engine"):
        evaluate_chain(CHAIN_QUESTIONS, chain=object())
    with pytest.raises(InvalidInputTypeError, match="chain_factory"):
        evaluate_chain(CHAIN_QUESTIONS, chain=make_llama_engine(), engine="ray")
    with pytest.raises(InvalidInputTypeError, match="AttributorConfig"):
        evaluate_chain(PRECOMPUTED, attributor=CountingAttributor(None), engine="ray")
    with pytest.raises(InvalidInputError, match="module:function"):
        evaluate_chain(CHAIN_QUESTIONS, chain_factory="no_colon_here")



def test_old_import_path_still_works_with_a_deprecation_warning():
    import tokenshapley_rag.chain_eval as chain_eval
    import tokenshapley_rag.evaluate as old

    with pytest.warns(DeprecationWarning, match="import from tokenshapley_rag.chain_eval") as caught:
        from tokenshapley_rag.evaluate import ChainReport as OldReport, evaluate_chain as old_evaluate
    assert old_evaluate is chain_eval.evaluate_chain and OldReport is chain_eval.ChainReport
    assert caught[0].filename == __file__  # the warning points at the importing line
    assert old.__all__ == chain_eval.__all__
    with pytest.raises(AttributeError):
        old.no_such_name  # noqa: B018

# ---------------------------------------------------------------------- chain adapters


def test_run_chain_llamaindex_like():
    engine = make_llama_engine()
    out = run_chain(engine, "Where is the Colosseum?")
    assert out.answer == "The Colosseum is in Rome."
    assert [s.id for s in out.sources] == ["eiffel", "rome"] and out.ranks == (1, 2)
    assert out.sources[1].metadata == {"title": "rome", "retrieval_score": 0.5}
    assert set(engine.nodes[0].modes) == {"none"}  # content without the metadata header, as the integration reads it

    class Dupes:  # repeated node (same id and text) keeps rank 1; a blank node is skipped
        def query(self, q):
            n = FakeNodeWithScore(FakeNode("a", "Alpha."), 0.9)
            return FakeResponse("x", [n, FakeNodeWithScore(FakeNode("b", "  "), 0.5), n,
                                      FakeNodeWithScore(FakeNode("c", "Gamma."), 0.1)])

    out = run_chain(Dupes(), "q")
    assert [s.id for s in out.sources] == ["a", "c"] and out.ranks == (1, 4)

    class Clash:
        def query(self, q):
            return FakeResponse("x", [FakeNodeWithScore(FakeNode("a", "One."), 1), FakeNodeWithScore(FakeNode("a", "Two."), 1)])

    with pytest.raises(InvalidInputError, match="ranks 1 and 2 share the id 'a'"):
        run_chain(Clash(), "q")


def test_run_chain_real_llamaindex_response():
    """The duck typing matches llama-index-core's own Response / NodeWithScore / TextNode."""
    schema = pytest.importorskip("llama_index.core.schema")
    from llama_index.core.base.response.schema import Response

    class Engine:
        def query(self, q):
            node = schema.TextNode(text="Paris is in France.", id_="n1", metadata={"title": "Paris"})
            return Response(response="In France.", source_nodes=[schema.NodeWithScore(node=node, score=0.7)])

    out = run_chain(Engine(), "Where is Paris?")
    assert out.answer == "In France."
    # the content only: the "title: Paris" header the LLM also saw is metadata, not evidence
    assert (out.sources[0].id, out.sources[0].text) == ("n1", "Paris is in France.")
    assert out.sources[0].metadata == {"title": "Paris", "retrieval_score": 0.7}
    assert out.sources[0].document is None  # a node parsed from no document

    class Chunked:
        def query(self, q):
            node = schema.TextNode(
                text="Paris is in France.", id_="n2",
                relationships={schema.NodeRelationship.SOURCE: schema.RelatedNodeInfo(node_id="paris-doc")},
            )
            return Response(response="In France.", source_nodes=[schema.NodeWithScore(node=node)])

    assert run_chain(Chunked(), "Where is Paris?").sources[0].document == "paris-doc"


def test_run_chain_langchain_like():
    from langchain_core.documents import Document
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableLambda

    out = run_chain(make_langchain_runnable(), "When was Big Ben completed?")
    assert out.answer == "Big Ben was completed in 1923."
    assert [s.id for s in out.sources] == ["bigben", "eiffel"] and out.sources[0].metadata == {"title": "bigben"}
    assert [s.document for s in out.sources] == [None, None]  # no metadata["source"]: each its own document
    chunked = RunnableLambda(lambda x: {
        "context": [Document(page_content="A b.", metadata={"source": "a.txt"})], "answer": "b"})
    assert run_chain(chunked, "Q?").sources[0].document == "a.txt"
    # a chain reading "question", answering with a chat message, documents without ids
    seen = []
    r = RunnableLambda(lambda x: seen.append(x) or {"context": [Document(page_content="A b.")], "answer": AIMessage(content="b")})
    out = run_chain(r, "Q?")
    assert seen == [{"input": "Q?", "question": "Q?"}]
    assert (out.answer, out.sources[0].id) == ("b", "0")
    run_chain(r, "Q?", input_key="query")
    assert seen[-1] == {"query": "Q?"}
    with pytest.raises(InvalidInputTypeError, match=r"no \['context'\] key"):
        run_chain(RunnableLambda(lambda x: {"answer": "a"}), "Q?")
    with pytest.raises(InvalidInputTypeError, match="expected a dict"):
        run_chain(RunnableLambda(lambda x: "just text"), "Q?")


# ---------------------------------------------------------------------- with the model


@pytest.fixture(scope="module")
def cache_dir(ts) -> str:
    return str(Path(ts.cache.root).parent)  # the session's cache: converted model + datastore


@pytest.fixture(scope="module")
def local_report(ts) -> ChainReport:
    return evaluate_chain(PRECOMPUTED, attributor=ts)


@pytest.mark.slow
def test_precomputed_report_values(local_report):
    rows = {r.id: r for r in local_report.rows}
    assert [r.id for r in local_report.rows] == ["q1", "q2", "q3", "q4"]
    q1, q2, q3, q4 = rows["q1"], rows["q2"], rows["q3"], rows["q4"]
    assert q1.reference == "330 m"
    kw1 = {k.text: k for k in q1.keywords}
    assert (kw1["330 metres"].source_id, kw1["330 metres"].rank, kw1["330 metres"].supported) == ("eiffel", 1, True)
    assert [(s.rank, s.id, s.used) for s in q1.sources] == [(1, "eiffel", True), (2, "bigben", False), (3, "rome", False)]
    # the invented year is the one unsupported keyword; "Big Ben" is cited to its own source
    assert q2.unsupported == ("1923",)
    kw2 = {k.text: k for k in q2.keywords}
    assert (kw2["Big Ben"].source_id, kw2["Big Ben"].rank) == ("bigben", 1)
    assert (kw2["1923"].source_id, kw2["1923"].rank, kw2["1923"].support) == (None, None, 0.0)
    # the right passage came second: rank 1 retrieved for nothing
    assert [(s.rank, s.id, s.n_citations) for s in q3.sources] == [(1, "eiffel", 0), (2, "rome", 2)]
    assert q3.concentration.top_rank_share == 0.0 and q3.concentration.max_share == 1.0
    # an empty answer is an error row, and the run went on past it
    assert (q4.status, q4.error_type, q4.error_stage) == ("error", "EmptyTextError", "attribution")
    assert [s.id for s in q4.sources] == ["rome"]
    s = local_report.summary
    assert (s.n_ok, s.n_errors, s.n_keywords, s.n_supported) == (3, 1, 8, 7)
    assert (s.n_retrieved, s.n_used) == (7, 3)
    assert [(u.rank, u.n_used, u.n_retrieved) for u in s.utilization] == [(1, 2, 3), (2, 1, 3), (3, 0, 1)]
    # ... contradicted, with the sentence stating the right year (the rows kept only supported: false)
    assert local_report.unsupported() == [
        {"id": "q2", "keyword": "1923", "start": 25, "end": 29, "answer": "Big Ben was completed in 1923.",
         "status": "contradicted", "conflict": "The tower was completed in 1859.", "conflict_source_id": "bigben"}
    ]
    assert "| q2 | 1923 | contradicted |" in local_report.to_markdown()
    assert QuestionRow.from_dict(local_report.rows[1].to_dict()) == local_report.rows[1]
    assert local_report.timing.n == 4 and local_report.timing.seconds_mean > 0


@pytest.mark.slow
def test_readme_example(ts):
    """The values quoted in docs/_readme_evaluate.md."""
    questions = [{"id": "q1", "question": "When was Big Ben completed?",
                  "sources": ["Big Ben is in London. The tower was completed in 1859.",
                              "The Eiffel Tower is in Paris."],
                  "answer": "Big Ben was completed in 1923."}]
    report = evaluate_chain(questions, attributor=ts)
    assert report.rows[0].unsupported == ("1923",)
    assert report.summary.noise_share == 0.5
    assert [(k.text, k.source_id) for k in report.rows[0].keywords] == [("Big Ben", "0"), ("completed", "0"), ("1923", None)]


@pytest.mark.slow
def test_report_files(local_report, tmp_path):
    paths = local_report.write(tmp_path / "rep")
    assert {p.name for p in (tmp_path / "rep").iterdir()} == {
        "report.json", "report.md", "report.html", "utilization_by_rank.png", "supported_share.png"}
    for key in ("utilization", "supported_share"):
        assert paths[key].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "| q2 | 1923 | contradicted | Big Ben was completed in **1923**. | bigben: The tower was completed in 1859. |" in md
    assert "| 3 | 1 | 0 | 0.0% | 0 |" in md  # rank 3: retrieved once, never used
    assert "![utilization by rank](utilization_by_rank.png)" in md
    page = paths["html"].read_text(encoding="utf-8")
    assert "<mark class='unsup' title='contradicted by source bigben: The tower was completed in 1859.'>1923</mark>" in page
    assert page.count("data:image/png;base64,") == 2
    data = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert data["summary"]["n_supported"] == 7 and [r["id"] for r in data["rows"]] == ["q1", "q2", "q3", "q4"]
    assert data["rows"][1]["unsupported"] == ["1923"] and data["config"]["chain"] == "precomputed"


@pytest.mark.slow
def test_chains_match_precomputed(ts, local_report):
    """A LlamaIndex-like engine and a LangChain runnable over the same retrieval give the
    rows of the pre-computed records (ids, references and the error row aside)."""
    def strip(rows):
        return [{k: v for k, v in r.to_dict(timing=False).items() if k not in ("id", "reference")} for r in rows]

    for chain in (make_llama_engine(), make_langchain_runnable()):
        rep = evaluate_chain(CHAIN_QUESTIONS, chain, attributor=ts)
        assert strip(rep.rows) == strip(local_report.rows[:3])


@pytest.mark.slow
def test_faults_become_error_rows(ts, tmp_path):
    qs = [
        {"id": "boom", "question": "Is the retriever up?"},  # not in SCRIPT: the engine raises
        {"id": "long", "question": "How tall is the Eiffel Tower?"},
        {"id": "ok", "question": "When was Big Ben completed?"},
    ]
    engine = make_llama_engine()
    long_answer = "tall " * 9000  # > the encoder's 8192-token context

    class Engine:
        def query(self, q):
            resp = engine.query(q)
            if q == "How tall is the Eiffel Tower?":
                resp.response = long_answer
            return resp

    rep = evaluate_chain(qs, Engine(), attributor=ts, output=tmp_path / "rows.jsonl")
    boom, long, ok = rep.rows
    assert (boom.status, boom.error_type, boom.error_stage, boom.answer) == ("error", "RuntimeError", "chain", None)
    assert boom.error == "retriever down for 'Is the retriever up?'"
    assert (long.status, long.error_type, long.error_stage) == ("error", TextTooLongError.__name__, "attribution")
    assert "over the model's context of 8192 tokens" in long.error
    assert ok.status == "ok" and ok.unsupported == ("1923",)
    assert rep.summary.errors_by_type == {"RuntimeError": 1, "TextTooLongError": 1}
    lines = (tmp_path / "rows.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["error_type"] for x in lines] == ["RuntimeError", "TextTooLongError", None]
    # retry_errors runs only the error rows again (here they fail again) and does not duplicate rows
    counting = CountingAttributor(ts)
    rep2 = evaluate_chain(qs, Engine(), attributor=counting, output=tmp_path / "rows.jsonl", retry_errors=True)
    assert counting.queries == ["How tall is the Eiffel Tower?"]  # "boom" fails in the chain, before attribution
    assert rep2.timing.n_resumed == 1
    assert sorted(json.loads(x)["id"] for x in (tmp_path / "rows.jsonl").read_text().splitlines()) == ["boom", "long", "ok"]
    assert EmptyTextError.__name__ in {r.error_type for r in evaluate_chain(PRECOMPUTED[3:], attributor=ts).rows}


@pytest.mark.slow
def test_resume_after_kill(ts, local_report, tmp_path):
    out = tmp_path / "rows.jsonl"
    evaluate_chain(PRECOMPUTED, attributor=ts, output=out)
    full = out.read_text(encoding="utf-8").splitlines()
    # simulate a kill: two finished rows, the third cut mid-write, the fourth never started
    out.write_text(full[0] + "\n" + full[1] + "\n" + full[2][: len(full[2]) // 2], encoding="utf-8")
    counting = CountingAttributor(ts)
    rep = evaluate_chain(PRECOMPUTED, attributor=counting, output=out)
    # q3 redone, q4 run (its empty answer fails before attribution); q1 and q2 not touched
    assert counting.queries == ["Where is the Colosseum?"]
    assert rep.timing.n_resumed == 2 and rep.config["n_run"] == 2
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["id"] for x in lines] == ["q1", "q2", "q3", "q4"]
    assert _comparable(rep) == _comparable(local_report)
    # a finished file: nothing is run again
    counting.queries.clear()
    assert _comparable(evaluate_chain(PRECOMPUTED, attributor=counting, output=out)) == _comparable(local_report)
    assert counting.queries == []
    # a corrupt line in the middle is not silently dropped
    out.write_text(full[0] + "\n{oops\n" + full[1] + "\n", encoding="utf-8")
    with pytest.raises(QuestionFileError, match=r"rows\.jsonl:2: not a result row"):
        evaluate_chain(PRECOMPUTED, attributor=counting, output=out)
    # rows of another question set under the same id
    other = [dict(PRECOMPUTED[0], question="Something else?")]
    out.write_text(full[0] + "\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match="row 'q1' is for the question"):
        evaluate_chain(other, attributor=counting, output=out)
    # resume=False starts over
    rep = evaluate_chain(PRECOMPUTED[:1], attributor=counting, output=out, resume=False)
    assert rep.timing.n_resumed == 0 and len(out.read_text().splitlines()) == 1


def test_rows_file_roundtrip(tmp_path):
    row = _row(0, "a", [SourceUse(1, "x", 1, 0.5)], [KeywordRow("K", 0, 1, True, 1.0, "x", 1)])
    f = RowsFile(tmp_path / "r.jsonl")
    f.append(row)
    f.close()
    rec = QuestionRecord(index=5, id="a", question="Q0?")
    done = f.load([rec])
    assert done["a"] == QuestionRow(**{**{s: getattr(row, s) for s in row.__slots__}, "index": 5})
    assert f.load([]) == {}  # rows of other ids are ignored (and kept)
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 1
    # a complete row that lost only its newline is kept, and the newline restored
    path = tmp_path / "r.jsonl"
    path.write_text(path.read_text().rstrip("\n"))
    assert f.load([rec])["a"].keywords == row.keywords
    assert path.read_text().endswith("}\n")


# ---------------------------------------------------------------------- Ray


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    cloudpickle = pytest.importorskip("ray.cloudpickle")

    # this test module is imported by pytest, not importable by Ray's workers: ship its
    # functions (the chain factories) by value
    module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(module)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
    cloudpickle.unregister_pickle_by_value(module)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*")  # Ray Data's own DataContext deprecations
def test_ray_matches_local(ray_local, ts, cache_dir, local_report, tmp_path):
    config = AttributorConfig(cache_dir=cache_dir)
    rep = evaluate_chain(PRECOMPUTED, attributor=config, engine="ray", concurrency=2, output=tmp_path / "rows.jsonl")
    assert rep.config["engine"] == "ray"
    assert _comparable(rep) == _comparable(local_report)
    assert len((tmp_path / "rows.jsonl").read_text().splitlines()) == 4
    # chains are rebuilt in the actor from a factory; rows equal the in-process run's
    for factory in (make_llama_engine, make_langchain_runnable):
        local = evaluate_chain(CHAIN_QUESTIONS, factory(), attributor=ts)
        remote = evaluate_chain(CHAIN_QUESTIONS, chain_factory=factory, attributor=config, engine="ray", concurrency=1)
        assert _comparable(remote) == _comparable(local)
        assert remote.rows[1].unsupported == ("1923",)


# ---------------------------------------------------------------------- CLI


@pytest.mark.slow
def test_cli_evaluate_chain(ts, cache_dir, local_report, tmp_path, monkeypatch, capsys):
    from tokenshapley_rag.cli import main

    monkeypatch.setattr(sys, "path", list(sys.path))  # the CLI puts --app-dir on sys.path
    built = []  # the CLI's model options reach the AttributorConfig; reuse the loaded model (saves a load per call)
    monkeypatch.setattr(AttributorConfig, "build", lambda self: built.append(self) or ts)
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in PRECOMPUTED), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["evaluate-chain", str(qfile), "--out", str(out), "--cache-dir", cache_dir]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["summary"] == local_report.summary.to_dict()
    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    no_timing = [{k: v for k, v in r.items() if not k.startswith("seconds")} for r in data["rows"]]
    assert no_timing == local_report.to_dict(timing=False)["rows"]
    assert (out / "rows.jsonl").is_file() and (out / "report.html").is_file()
    assert built == [AttributorConfig(layer=8, k=1, m=10, cache_dir=cache_dir)]
    # a chain factory by module:function spec, imported from --app-dir
    (tmp_path / "my_chain.py").write_text(
        "from langchain_core.documents import Document\n"
        "from langchain_core.runnables import RunnableLambda\n"
        "def build():\n"
        "    docs = [Document(page_content='Big Ben is in London. The tower was completed in 1859.', id='bb')]\n"
        "    return RunnableLambda(lambda x: {'context': docs, 'answer': 'Big Ben was completed in 1923.'})\n",
        encoding="utf-8",
    )
    cq = tmp_path / "cq.jsonl"
    cq.write_text('{"id": "x", "question": "When was Big Ben completed?"}\n', encoding="utf-8")
    assert main(["evaluate-chain", str(cq), "--chain", "my_chain:build", "--app-dir", str(tmp_path),
                 "--out", str(tmp_path / "out2"), "--cache-dir", cache_dir, "--no-plots"]) == 0
    rows = [json.loads(x) for x in (tmp_path / "out2" / "rows.jsonl").read_text().splitlines()]
    assert rows[0]["unsupported"] == ["1923"] and rows[0]["sources"][0]["id"] == "bb"
    capsys.readouterr()
    qfile.write_text('{"question": "a?"}\n{"question": \n', encoding="utf-8")
    assert main(["evaluate-chain", str(qfile), "--out", str(out)]) == 2
    assert "q.jsonl:2: not valid JSON" in capsys.readouterr().err


def test_public_names():
    import tokenshapley_rag.chain_eval as ev

    expected = [
        "TIMING_FIELDS", "AttributorConfig", "ChainOutput", "ChainReport", "ChainSummary", "ChainTiming",
        "Concentration", "KeywordRow", "QuestionFileError", "QuestionRecord", "QuestionRow", "RankUtilization",
        "RowsFile", "SourceUse", "build_chain", "chain_kind", "citation_concentration", "entropy_bits",
        "evaluate_chain", "evaluate_question", "gini", "load_questions", "mean_or_none", "resolve_factory",
        "run_chain", "share", "summarize", "summarize_timing", "utilization_by_rank",
    ]
    assert sorted(ev.__all__) == sorted(expected)
    assert all(hasattr(ev, n) for n in ev.__all__)
    assert issubclass(ev.QuestionFileError, InvalidInputError)
