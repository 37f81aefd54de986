"""Attributors for evaluation: TokenShapley itself, and the factories the CLI uses."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import numpy as np

from tokenshapley_rag._attribution import TokenShapley
from tokenshapley_rag._cli_options import question_embedder_option
from tokenshapley_rag._defaults import DEFAULT_QUESTION_EMBEDDER
from tokenshapley_rag._sentence_game import (
    EVIDENCE_PASSAGE,
    EVIDENCE_RULES,
    EVIDENCE_WEIGHT,
    QUESTION_EVIDENCE_WEIGHT,
    evidence_ranking,
    sentence_game_values,
    sentences_covered,
)
from tokenshapley_rag._params import Options, validate_params
from tokenshapley_rag._result import AttributionResult
from tokenshapley_rag._types import Source
from tokenshapley_rag.benchmark._baselines import BASELINE_NAMES, MODEL_BASELINE_NAMES, SpanAttributor, make_baseline
from tokenshapley_rag.benchmark._data import AttributionExample
from tokenshapley_rag.benchmark._sentences import SentenceScores, SentenceUnit, assign_to_units
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError

__all__ = [
    "METHOD_NAMES",
    "TokenShapleyAttributor",
    "keyword_support_mean",
    "keyword_support_min",
    "make_attributor",
    "make_response_lm",
]

METHOD_NAMES: tuple[str, ...] = ("tokenshapley", *BASELINE_NAMES, *MODEL_BASELINE_NAMES)
#: Span rules of TokenShapley (``--span-rule``): ``context`` scores a span by its context game
#: (docs/method.md §5); ``sentence-game`` adds, among the sources that hold the span word for
#: word, the sentence game of its answer sentence (docs/method.md §10).
SPAN_RULES: tuple[str, ...] = ("context", "sentence-game")
#: The span rule's weight (chosen on dev, docs/reports/paraphrase.md).
SPAN_GAME_WEIGHT = 0.5
#: How TokenShapley scores a span that states whole answer sentences (``--sentence-spans``):
#: ``sentence-sources`` by those sentences' scores in :meth:`TokenShapley.sentence_sources`
#: (docs/method.md §11), ``span-scores`` like any span.
SENTENCE_SPAN_RULES: tuple[str, ...] = ("sentence-sources", "span-scores")


def _supports(result: AttributionResult) -> list[float]:
    if not isinstance(result, AttributionResult):
        raise InvalidInputTypeError(f"result must be an AttributionResult, got {type(result).__name__}")
    return [float(c.support) for c in result.citations]


def keyword_support_min(result: AttributionResult) -> float:
    """Per-claim support of a response: the *least* supported keyword's ``support``.

    ``min(c.support for c in result.citations)`` (:attr:`KeywordCitation.support`, the best
    source sentence's summed Shapley value per keyword token); 0.0 when the response has no
    citable keyword. A claim is only as supported as its weakest keyword, so this is the
    strict variant; :func:`keyword_support_mean` is the lenient one. Both are reported on
    WiCE (``label_separation``) while the definition of ``supported`` is being redesigned.

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> r = AttributionResult(query="", response="", sources=[], citations=[NS(support=0.9), NS(support=0.1)],
    ...                        source_scores={}, sentence_scores=[], tokens=None)
    >>> keyword_support_min(r), keyword_support_mean(r)
    (0.1, 0.5)
    """
    s = _supports(result)
    return min(s) if s else 0.0


def keyword_support_mean(result: AttributionResult) -> float:
    """Per-claim support of a response: the mean ``support`` over its keyword citations.

    0.0 when the response has no citable keyword. See :func:`keyword_support_min`.
    """
    s = _supports(result)
    return float(np.mean(s)) if s else 0.0


class TokenShapleyAttributor:
    """TokenShapley behind both evaluation protocols.

    * Spans: each gold span scores the summed Shapley values of the answer tokens that
      overlap it, per source (:meth:`AttributionResult.span_scores`). The whole gold answer
      is attributed once (teacher-forced, as the paper's protocol).
    * Sentences: each ``SentenceScore.keyword_score`` (what the answer's cited keywords
      cite from the sentence: their context games summed) mapped onto the shared candidates
      (:func:`~tokenshapley_rag.benchmark._sentences.assign_to_units`); support scores
      ``keyword_support_min`` and ``keyword_support_mean``.

    The datastore of repeated sources comes from the sentence cache.

    ``evidence="sentence-game"`` ranks sentences by the evidence rule of docs/method.md §9
    instead (:func:`~tokenshapley_rag._sentence_game.evidence_ranking`, as
    ``TokenShapley.rank_evidence`` does over the result's own sentences):
    ``keyword_score + weight * sentence game``, plus ``passage`` times the best such score in
    the sentence's source. The sentence game's embeddings are all-MiniLM-L6-v2's (the EmbSim
    model; loaded on first use). Span scores are unchanged by it.
    ``evidence="question-sentence-game"`` plays each answer sentence's game as the claim the
    question and the sentence make together: queried with the embedding of the question
    followed by the sentence, over the content words of both (a bare answer, "Taylor Swift",
    says what it says only with its question); ``evidence_weight`` defaults to
    :data:`QUESTION_EVIDENCE_WEIGHT` for it. With no question it is ``sentence-game``, its
    weight included.

    ``span_rule="sentence-game"`` adds to a span's per-source scores, when two or more sources
    hold the span word for word, ``span_weight`` times the sentence game of the span's answer
    sentence played by those sources' sentences (docs/method.md §10); other spans, and
    sentence ranking, are unchanged by it.

    ``sentence_spans="sentence-sources"`` (the default) scores a span that states whole
    answer sentences (:func:`~tokenshapley_rag._sentence_game.sentences_covered`: it holds
    every content word of the sentences it overlaps) by the sum of those sentences' source
    scores in :meth:`TokenShapley.sentence_sources`: the sentence's source, not its keywords'
    (docs/method.md §11). ``"span-scores"`` scores it like any span.
    """

    name = "tokenshapley"

    def __init__(
        self, ts: TokenShapley, *, evidence: str = "keyword", evidence_weight: float | None = None,
        evidence_passage: float = EVIDENCE_PASSAGE, span_rule: str = "context", span_weight: float = SPAN_GAME_WEIGHT,
        sentence_spans: str = "sentence-sources",
    ) -> None:
        validate_params(
            {"evidence": [Options(EVIDENCE_RULES)], "span_rule": [Options(SPAN_RULES)],
             "sentence_spans": [Options(SENTENCE_SPAN_RULES)]},
            {"evidence": evidence, "span_rule": span_rule, "sentence_spans": sentence_spans},
        )
        self.ts = ts
        # None: the rule's own weight (evidence_ranking), recorded in the config as that
        self._weight_given = None if evidence_weight is None else float(evidence_weight)
        if evidence_weight is None:
            evidence_weight = QUESTION_EVIDENCE_WEIGHT if evidence == "question-sentence-game" else EVIDENCE_WEIGHT
        self.evidence, self.evidence_weight, self.evidence_passage = evidence, float(evidence_weight), float(evidence_passage)
        self.span_rule, self.span_weight = span_rule, float(span_weight)
        self.sentence_spans = sentence_spans
        self._embedder: Any = None

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._embedder is None:
            from tokenshapley_rag.benchmark._model_baselines import EmbSimAttributor

            self._embedder = EmbSimAttributor()
        return self._embedder.embed(texts)

    @property
    def loaded(self) -> Any:
        return self.ts.loaded

    @property
    def config(self) -> dict[str, Any]:
        config = dict(self.ts.config)
        if self.evidence != "keyword":
            config.update(evidence=self.evidence, evidence_weight=self.evidence_weight,
                          evidence_passage=self.evidence_passage, sentence_game_embeddings="all-MiniLM-L6-v2")
        if self.span_rule != "context":
            config.update(span_rule=self.span_rule, span_weight=self.span_weight,
                          sentence_game_embeddings="all-MiniLM-L6-v2")
        if self.sentence_spans != "sentence-sources":
            config["sentence_spans"] = self.sentence_spans
        return config

    def _span_sentence_game(self, res: AttributionResult, start: int, end: int, ids: Sequence[str]) -> np.ndarray:
        """The span rule's term per source (docs/method.md §10): 0 unless two or more sources
        hold the span word for word; then, for those sources, the sum over their sentences of
        the sentence game of the span's answer sentence, played by their sentences."""
        out = np.zeros(len(ids))
        holders = res.span_holders(start, end)
        if len(holders) < 2:
            return out
        held = set(holders)
        players = [s for s in res.sentence_scores if s.source_id in held]
        a, b = res.span_answer_sentence(start, end)
        texts = [s.sentence for s in players]
        game = sentence_game_values([res.response[a:b]], self._embed([res.response[a:b]]), texts, self._embed(texts))
        where = {sid: i for i, sid in enumerate(ids)}
        for s, v in zip(players, game):
            out[where[s.source_id]] += v
        return out

    def score_spans(self, example: AttributionExample) -> np.ndarray:
        res = self.ts.attribute(query=example.question, sources=example.sources, response=example.answer)
        ids = [s.id for s in example.sources]
        answer_sentences = [(v.start, v.end) for v in res.sentences]
        by_sentence: list[dict[str, float]] | None = None  # sentence_sources, in res.sentences' order, once if needed
        rows = []
        for span in example.spans:
            covered = sentences_covered(res.response, answer_sentences, span.start, span.end)
            if self.sentence_spans == "sentence-sources" and covered:
                if by_sentence is None:
                    by_sentence = [{s.source_id: s.score for s in a.sources} for a in self.ts.sentence_sources(res)]
                rows.append(np.array([sum(by_sentence[i].get(sid, 0.0) for i in covered) for sid in ids], dtype=np.float64))
                continue
            per_source = res.span_scores(span.start, span.end)
            row = np.array([per_source[i] for i in ids], dtype=np.float64)
            if self.span_rule == "sentence-game":
                row = row + self.span_weight * self._span_sentence_game(res, span.start, span.end, ids)
            # -inf marks a source that is not a candidate (it lacks the span word for word
            # while another source holds it): rank it below every candidate, finitely.
            out = ~np.isfinite(row)
            if out.any():
                row[out] = (row[~out].min() if (~out).any() else 0.0) - 1.0
            rows.append(row)
        return np.asarray(rows, dtype=np.float64).reshape(len(example.spans), len(ids))

    def score_sentences(
        self, query: str, sources: Sequence[Source], response: str, sentences: Sequence[SentenceUnit]
    ) -> SentenceScores:
        res = self.ts.attribute(query=query, sources=list(sources), response=response)
        scores = assign_to_units(
            sentences, ((s.source_id, s.sentence_start, s.sentence_end, s.keyword_score) for s in res.sentence_scores)
        )
        if self.evidence != "keyword" and len(sentences):
            scores, _ = evidence_ranking(
                scores, [u.text for u in sentences], [u.source_index for u in sentences], response, query, self._embed,
                rule=self.evidence, weight=self._weight_given, passage=self.evidence_passage,
            )
        return SentenceScores(
            scores,
            {"keyword_support_min": keyword_support_min(res), "keyword_support_mean": keyword_support_mean(res)},
        )


def _loaded_of(attributor: Any) -> Any:
    loaded = getattr(attributor, "loaded", None)
    return loaded if hasattr(loaded, "fingerprint") else None


def make_attributor(name: str, args: argparse.Namespace | Any) -> SpanAttributor:
    """Build the method named on the command line (``--method``).

    ``hidsim`` and ``contextcite`` load ``--model`` (default: the embedded SmolLM2) from
    ``--cache-dir``; ``contextcite`` uses ``--beta`` ablations.
    """
    if name in BASELINE_NAMES:
        return make_baseline(name)
    if name in MODEL_BASELINE_NAMES:
        loaded = None
        if name != "embsim":
            from tokenshapley_rag._models import load_causal_lm

            loaded = load_causal_lm(getattr(args, "model", None), cache_dir=getattr(args, "cache_dir", None))
        return make_baseline(name, beta=int(getattr(args, "beta", 8) or 8), loaded=loaded)
    if name == "tokenshapley":
        # Only the options given on the command line; TokenShapley's own defaults otherwise.
        options = {
            key: getattr(args, key)
            for key in (
                "model", "layer", "k", "m", "dtype", "candidates", "match", "context_weight", "context_scale", "verbatim",
                "cache_dir", "device",
            )
            if getattr(args, key, None) is not None
        }
        if question_embedder_option(args) != DEFAULT_QUESTION_EMBEDDER:  # TokenShapley's default otherwise
            options["question_embedder"] = question_embedder_option(args)
        if getattr(args, "no_disk_cache", False):
            options["use_disk_cache"] = False
        cap = getattr(args, "max_source_chars", None)
        if isinstance(cap, int) and not isinstance(cap, bool):
            # The support set's own cut (--max-source-chars; 0: uncut) also lifts the
            # engine's per-source limit, so the protocol never refuses what it asked for.
            from tokenshapley_rag._limits import DEFAULT_MAX_SOURCE_CHARS

            options["max_source_chars"] = None if cap <= 0 else max(cap, DEFAULT_MAX_SOURCE_CHARS)
        ts = TokenShapley(**options)
        rule = {
            key: getattr(args, key)
            for key in ("evidence", "evidence_weight", "evidence_passage", "span_rule", "span_weight", "sentence_spans")
            if getattr(args, key, None) is not None
        }
        return TokenShapleyAttributor(ts, **rule)
    raise InvalidInputError(f"unknown method {name!r}; choose one of {', '.join(METHOD_NAMES)}")


def make_response_lm(args: argparse.Namespace | Any, attributor: Any = None) -> Any:
    """The :class:`~tokenshapley_rag.benchmark._lm.ResponseLM` that generates and scores responses.

    ``--generator`` (default None: the embedded SmolLM2-135M-Instruct, the project's
    default model) from ``--cache-dir``. When the attributor already holds that same model
    (same name), it is shared instead of loaded twice.
    """
    from tokenshapley_rag._models import DEFAULT_MODEL, load_causal_lm
    from tokenshapley_rag.benchmark._lm import ResponseLM

    spec = getattr(args, "generator", None)
    own = _loaded_of(attributor)
    want = DEFAULT_MODEL if spec is None else str(spec)
    if own is not None and own.name == want:
        return ResponseLM(own)
    return ResponseLM(load_causal_lm(spec, cache_dir=getattr(args, "cache_dir", None)))
