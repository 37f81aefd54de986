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

from __future__ import annotations

from tokenshapley_rag._lazy import lazy_attributes

# Every name is imported on first use (PEP 562): the CLI declares `tokenshapley eval`
# from :mod:`._cli` without loading the protocols, numpy or the metrics.
_LAZY = {
    "add_eval_arguments": "tokenshapley_rag.benchmark._cli",
    "run_eval": "tokenshapley_rag.benchmark._cli",
    "partial_path": "tokenshapley_rag.benchmark._runner",
    "ATTRIBUTION_DATASETS": "tokenshapley_rag.benchmark._data",
    "DATA_ENV_VAR": "tokenshapley_rag.benchmark._data",
    "DATASETS": "tokenshapley_rag.benchmark._data",
    "SPAN_CHECKS": "tokenshapley_rag.benchmark._data",
    "SPAN_DATASETS": "tokenshapley_rag.benchmark._data",
    "AttributionExample": "tokenshapley_rag.benchmark._data",
    "DatasetFormatError": "tokenshapley_rag.benchmark._data",
    "DatasetNotFoundError": "tokenshapley_rag.benchmark._data",
    "GoldEvidence": "tokenshapley_rag.benchmark._data",
    "GoldSpan": "tokenshapley_rag.benchmark._data",
    "SummaryExample": "tokenshapley_rag.benchmark._data",
    "default_data_dir": "tokenshapley_rag.benchmark._data",
    "load_dataset": "tokenshapley_rag.benchmark._data",
    "SOURCE_PERMUTATION_SEEDS": "tokenshapley_rag.benchmark._metrics",
    "SPAN_CLASSES": "tokenshapley_rag.benchmark._metrics",
    "accuracy_order_controlled": "tokenshapley_rag.benchmark._metrics",
    "answer_accuracy": "tokenshapley_rag.benchmark._metrics",
    "auroc": "tokenshapley_rag.benchmark._metrics",
    "best_source": "tokenshapley_rag.benchmark._metrics",
    "evidence_overlaps": "tokenshapley_rag.benchmark._metrics",
    "mean_logprob_drop": "tokenshapley_rag.benchmark._metrics",
    "permute_example": "tokenshapley_rag.benchmark._metrics",
    "precision_recall_f1_at_k": "tokenshapley_rag.benchmark._metrics",
    "ranking_metrics": "tokenshapley_rag.benchmark._metrics",
    "source_permutation": "tokenshapley_rag.benchmark._metrics",
    "span_accuracy": "tokenshapley_rag.benchmark._metrics",
    "span_class": "tokenshapley_rag.benchmark._metrics",
    "span_correct": "tokenshapley_rag.benchmark._metrics",
    "ABLATION_KS": "tokenshapley_rag.benchmark._protocols",
    "CNNDM_QUERY": "tokenshapley_rag.benchmark._protocols",
    "RANKING_KS": "tokenshapley_rag.benchmark._protocols",
    "label_separation": "tokenshapley_rag.benchmark._protocols",
    "run_ablation_eval": "tokenshapley_rag.benchmark._protocols",
    "run_ranking_eval": "tokenshapley_rag.benchmark._protocols",
    "EvalReport": "tokenshapley_rag.benchmark._runner",
    "run_span_eval": "tokenshapley_rag.benchmark._runner",
    "SentenceAttributor": "tokenshapley_rag.benchmark._sentences",
    "SentenceScores": "tokenshapley_rag.benchmark._sentences",
    "SentenceUnit": "tokenshapley_rag.benchmark._sentences",
    "ablate_sentences": "tokenshapley_rag.benchmark._sentences",
    "rank_sentences": "tokenshapley_rag.benchmark._sentences",
    "sentence_units": "tokenshapley_rag.benchmark._sentences",
}


__getattr__, __dir__ = lazy_attributes(globals(), _LAZY)


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
    "SPAN_CHECKS",
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
