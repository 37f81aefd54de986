"""Evaluation of keyword attribution on the six shared sets.

Loaders (:func:`load_dataset`), metrics (span accuracy with order control, span classes,
ranking P/R/F1 @ k, AUROC, log-prob drop), the span-accuracy runner
(:func:`run_span_eval`), the sentence-level protocols (:func:`run_ranking_eval` for NQ and
WiCE, :func:`run_ablation_eval` for CNN/DM, over :func:`sentence_units` and the
:class:`SentenceAttributor` protocol) and CLI glue (:func:`add_eval_arguments`,
:func:`run_eval`). The protocols are documented in ``docs/evaluation.md``.
"""

from tokenshapley_rag.eval._cli import add_eval_arguments, partial_path, run_eval
from tokenshapley_rag.eval._data import (
    ATTRIBUTION_DATASETS,
    DATASETS,
    SPAN_DATASETS,
    AttributionExample,
    DatasetFormatError,
    DatasetNotFoundError,
    GoldEvidence,
    GoldSpan,
    SummaryExample,
    default_data_dir,
    load_dataset,
)
from tokenshapley_rag.eval._metrics import (
    SOURCE_PERMUTATION_SEEDS,
    SPAN_CLASSES,
    accuracy_order_controlled,
    answer_accuracy,
    auroc,
    best_source,
    evidence_overlaps,
    mean_logprob_drop,
    permute_example,
    precision_recall_f1_at_k,
    ranking_metrics,
    source_permutation,
    span_accuracy,
    span_class,
    span_correct,
)
from tokenshapley_rag.eval._protocols import (
    ABLATION_KS,
    CNNDM_QUERY,
    RANKING_KS,
    label_separation,
    run_ablation_eval,
    run_ranking_eval,
)
from tokenshapley_rag.eval._runner import EvalReport, run_span_eval
from tokenshapley_rag.eval._sentences import (
    SentenceAttributor,
    SentenceScores,
    SentenceUnit,
    ablate_sentences,
    rank_sentences,
    sentence_units,
)

__all__ = [
    "ABLATION_KS",
    "ATTRIBUTION_DATASETS",
    "CNNDM_QUERY",
    "RANKING_KS",
    "SentenceAttributor",
    "SentenceScores",
    "SentenceUnit",
    "ablate_sentences",
    "label_separation",
    "rank_sentences",
    "run_ablation_eval",
    "run_ranking_eval",
    "sentence_units",
    "DATASETS",
    "SOURCE_PERMUTATION_SEEDS",
    "SPAN_CLASSES",
    "SPAN_DATASETS",
    "AttributionExample",
    "DatasetFormatError",
    "DatasetNotFoundError",
    "EvalReport",
    "GoldEvidence",
    "GoldSpan",
    "SummaryExample",
    "accuracy_order_controlled",
    "add_eval_arguments",
    "answer_accuracy",
    "auroc",
    "best_source",
    "default_data_dir",
    "evidence_overlaps",
    "load_dataset",
    "mean_logprob_drop",
    "partial_path",
    "permute_example",
    "precision_recall_f1_at_k",
    "ranking_metrics",
    "run_eval",
    "run_span_eval",
    "source_permutation",
    "span_accuracy",
    "span_class",
    "span_correct",
]
