"""The paper's benchmark harness: keyword attribution measured on six evaluation sets.

Behind ``tokenshapley eval``; the library itself never imports it. The sets are not part of
the package: :func:`load_dataset` reads ``data_dir`` (``--data``) or ``$TOKENSHAPLEY_DATA``.
Loaders (:func:`load_dataset`), metrics (span accuracy with order control, span classes,
ranking P/R/F1 @ k, AUROC, log-prob drop), the span-accuracy runner
(:func:`run_span_eval`), the sentence-level protocols (:func:`run_ranking_eval` for NQ and
WiCE, :func:`run_ablation_eval` for CNN/DM, over :func:`sentence_units` and the
:class:`SentenceAttributor` protocol) and CLI glue (:func:`add_eval_arguments`,
:func:`run_eval`). The protocols are documented in ``docs/evaluation.md``.
"""

from tokenshapley_rag.benchmark._cli import add_eval_arguments, run_eval
from tokenshapley_rag.benchmark._runner import partial_path
from tokenshapley_rag.benchmark._data import (
    ATTRIBUTION_DATASETS,
    DATA_ENV_VAR,
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
from tokenshapley_rag.benchmark._metrics import (
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
from tokenshapley_rag.benchmark._protocols import (
    ABLATION_KS,
    CNNDM_QUERY,
    RANKING_KS,
    label_separation,
    run_ablation_eval,
    run_ranking_eval,
)
from tokenshapley_rag.benchmark._runner import EvalReport, run_span_eval
from tokenshapley_rag.benchmark._sentences import (
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
    "DATA_ENV_VAR",
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
