"""Evaluate a retrieval chain with keyword attribution, on one machine or a Ray cluster.

:func:`evaluate_chain` runs a LlamaIndex query engine, a LangChain runnable (both
duck-typed: no framework is imported here) or pre-computed records over a question set,
attributes every answer with :class:`~tokenshapley_rag.TokenShapley`, and returns a
:class:`ChainReport`: supported share of answer keywords, unsupported keywords, source
utilization by retrieval rank, citation concentration and time per question, written as
JSON, markdown, HTML and PNG plots by ``report.write(out_dir)``. ``engine="ray"`` runs the
same evaluation as ``ray.data`` ``map_batches`` over an actor pool. The command line is
``tokenshapley evaluate-chain``; docs/guide/chain-evaluation.md has the details.
"""

from tokenshapley_rag.chain_eval._chains import (
    ChainOutput,
    build_chain,
    chain_kind,
    resolve_factory,
    run_chain,
)
from tokenshapley_rag.chain_eval._engine import AttributorConfig
from tokenshapley_rag.chain_eval._evaluate import evaluate_chain
from tokenshapley_rag.chain_eval._metrics import (
    Concentration,
    RankUtilization,
    citation_concentration,
    entropy_bits,
    gini,
    mean_or_none,
    share,
    utilization_by_rank,
)
from tokenshapley_rag.chain_eval._records import (
    QuestionFileError,
    QuestionRecord,
    load_questions,
)
from tokenshapley_rag.chain_eval._report import (
    ChainReport,
    ChainSummary,
    ChainTiming,
    summarize,
    summarize_timing,
)
from tokenshapley_rag.chain_eval._rows import (
    TIMING_FIELDS,
    KeywordRow,
    QuestionRow,
    RowsFile,
    SourceUse,
    evaluate_question,
)

__all__ = [
    "TIMING_FIELDS",
    "AttributorConfig",
    "ChainOutput",
    "ChainReport",
    "ChainSummary",
    "ChainTiming",
    "Concentration",
    "KeywordRow",
    "QuestionFileError",
    "QuestionRecord",
    "QuestionRow",
    "RankUtilization",
    "RowsFile",
    "SourceUse",
    "build_chain",
    "chain_kind",
    "citation_concentration",
    "entropy_bits",
    "evaluate_chain",
    "evaluate_question",
    "gini",
    "load_questions",
    "mean_or_none",
    "resolve_factory",
    "run_chain",
    "share",
    "summarize",
    "summarize_timing",
    "utilization_by_rank",
]
