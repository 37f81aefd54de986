"""The attribution pipeline: the steps that :meth:`TokenShapley.attribute` and
:class:`AttributionStream` both run, over one encoder and the method's parameters."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tokenshapley_rag._citations import assemble_citations
from tokenshapley_rag._context_view import ContextView, SourceView
from tokenshapley_rag._datastore import Datastore
from tokenshapley_rag._sentence_cache import SentenceCache
from tokenshapley_rag._encoder import CausalLMEncoder, TokenizedText
from tokenshapley_rag._indexing import DatastoreBuilder
from tokenshapley_rag._kernels import ordered_product
from tokenshapley_rag._memo import LRUMemo
from tokenshapley_rag._quantiser import load_quantiser
from tokenshapley_rag._question_documents import SentenceEmbedder, question_similarity
from tokenshapley_rag._result import AttributionResult
from tokenshapley_rag._timing import record_steps, step
from tokenshapley_rag._support import SentenceFacts, sentence_facts
from tokenshapley_rag._text_search import normalize_text
from tokenshapley_rag._token_game import TokenClasses, TokenValues, score_tokens
from tokenshapley_rag._types import Source

__all__ = ["Pipeline"]

# Sentences whose sources' views are remembered (Pipeline.context_view): each view holds
# references to its sentences' facts (kept per sentence anyway), its normalized text and an
# index of its words, about 2 KB a sentence, so at most ~35 MB. A 64k-token context has
# about 2,400 sentences.
SOURCE_VIEW_MEMO_SENTENCES = 16_384


class Pipeline:
    """The steps of an attribution, in order:

    1. :meth:`datastore_for` (or :meth:`build_datastore`): the sources' sentences, encoded
       or loaded from the sentence cache, as a :class:`Datastore`;
    2. :meth:`score_tokens`: each answer token's game over the datastore (its exact Shapley
       values summed per source sentence);
    3. :meth:`assemble_citations`: keyword statuses, cited sources and sentence verdicts,
       as an :class:`AttributionResult`.

    The answer's encoder states come from the caller: the whole answer at once
    (:meth:`TokenShapley.attribute`) or sentence by sentence (:class:`AttributionStream`).
    The parameters are those of :class:`TokenShapley`, which builds its pipeline once.
    """

    def __init__(
        self,
        encoder: CausalLMEncoder,
        cache: SentenceCache,
        *,
        k: int,
        m: int,
        gamma: float | str,
        match: str,
        candidates: str,
        context_weight: float,
        context_scale: float,
        verbatim: bool,
        support_threshold: float | None,
        max_sentence_tokens: int,
        approximate_above: int | None = None,
        question_embedder: SentenceEmbedder | None = None,
    ) -> None:
        self.encoder = encoder
        self.question_embedder = question_embedder
        self.k, self.m, self.gamma, self.match, self.candidates = k, m, gamma, match, candidates
        self.context_weight, self.context_scale, self.verbatim = context_weight, context_scale, verbatim
        self.support_threshold = support_threshold
        self.classes = TokenClasses(encoder.loaded.tokenizer, match)
        self.builder = DatastoreBuilder(
            encoder, cache, self.classes, max_sentence_tokens=max_sentence_tokens, piece_classes=match == "word_or_token",
            quantiser=None if approximate_above is None else load_quantiser(encoder.cache_key),
            approximate_above=approximate_above,
        )
        # text -> (SentenceFacts, normalize_text(text)): what citation assembly reads of each
        # source sentence, derived once per text (a new source list is mostly sentences seen
        # before, and normalizing every sentence again grew with the context at each call).
        self._facts_of_sentence = LRUMemo(cache.memory_items)
        # a source's sentences (texts, positions) -> SourceView, weighed by sentences
        self._source_views = LRUMemo(cache.memory_items, max_weight=SOURCE_VIEW_MEMO_SENTENCES)

    def build_datastore(self, sources: list[Source], *, progress: bool = False, cancel: Any = None) -> Datastore:
        """Step 1, always built (from the sentence cache where it has the sentences)."""
        return self.builder.build(sources, progress=progress, cancel=cancel)

    def datastore_for(self, sources: list[Source], *, cancel: Any = None) -> Datastore:
        """Step 1, remembered for the last few source lists (:meth:`DatastoreBuilder.datastore_for`)."""
        return self.builder.datastore_for(sources, cancel=cancel)

    def score_tokens(self, store: Datastore, response: str, tokens: TokenizedText, states: np.ndarray) -> TokenValues:
        """Step 2: the token game of the answer tokens ``tokens`` of ``response`` (their
        encoder ``states``) over ``store``."""
        with step("answer_classes"):
            classes, piece_classes = self.classes.of(tokens.ids, response, tokens.offsets)
        return score_tokens(
            store, states, classes, piece_classes, k=self.k, m=self.m, gamma=self.gamma, match=self.match,
            candidates=self.candidates,
        )

    def assemble_citations(
        self, query: str, response: str, sources: list[Source], store: Datastore, tokens: TokenizedText,
        values: TokenValues, config: Mapping[str, Any],
        question_game: Callable[[], tuple[np.ndarray, float]] | None = None,
    ) -> AttributionResult:
        """Step 3: the result of ``response`` from its token game ``values`` (``config`` is
        recorded in it). ``question_game``: :meth:`question_game_for` of ``store`` and
        ``query`` (made here when not given; a stream passes its own, played once)."""
        with step("assemble"):
            with step("sentence_facts"):
                context = self.context_view(store)
                known = None if context is not None else self.sentence_views([r.text for r in store.sentences])
            return assemble_citations(
                query, response, sources, store, tokens, values,
                context.facts if context is not None else [f for f, _ in known],
                verbatim=self.verbatim, context_weight=self.context_weight, context_scale=self.context_scale,
                support_threshold=self.support_threshold, config=config,
                normalized=None if known is None else [t for _, t in known],
                question_predicate=question_game or self.question_game_for(store, query), context=context,
                question_similarity=self.question_similarity_for(store, query),
            )

    def question_similarity_for(self, store: Datastore, query: str) -> Callable[[], np.ndarray] | None:
        """With a ``question_embedder``, the cosine between ``query`` and each sentence of
        ``store`` (:func:`question_similarity`), computed on the first call and remembered
        (only a bare answer to a question that names nothing needs it); else None."""
        if self.question_embedder is None or not query.strip():
            return None
        embedder = self.question_embedder
        return functools.cache(lambda: question_similarity(embedder, query, [r.text for r in store.sentences]))

    def question_game_for(
        self, store: Datastore, query: str,
        question_states: Callable[[], tuple[TokenizedText, np.ndarray] | None] | None = None,
    ) -> Callable[[], tuple[np.ndarray, float]] | None:
        """:meth:`question_game` of ``store`` and ``query``, played on the first call and
        remembered (most answers never need it); None for an empty question.
        ``question_states`` gives the question's tokens and states from the answer's own
        pass (:meth:`CausalLMEncoder.question_states`)."""
        if not query.strip():
            return None
        return functools.cache(
            lambda: self.question_game(store, query, None if question_states is None else question_states())
        )

    def question_game(
        self, store: Datastore, query: str, question: tuple[TokenizedText, np.ndarray] | None = None
    ) -> tuple[np.ndarray, float]:
        """The question's game over ``store``: each source sentence's exact Shapley values
        summed over the question's tokens (summed in token order), and the number of tokens
        (the most that sum can be: a token's values sum to at most 1). The states before
        the question's tokens are those of the answer's own pass (``question``: its tokens
        and states, the question read after the chat template's opening, as the answer is
        read after the question); without them, the question is encoded on its own, as a
        source sentence is. It is the predicate of a sentence that says nothing but values
        (docs/method.md §8)."""
        # Its own token games are not marked as the answer's steps (a recording sees only
        # "question_game"): record_steps() here takes them.
        with step("question_game"), record_steps():
            if question is None:
                tokens = self.encoder.tokenize(query)
                states = self.encoder.encode_before([tokens.ids])[0]
            else:
                tokens, states = question
            scores = self.score_tokens(store, query, tokens, states).scores
            total = np.empty((1, scores.shape[1]), dtype=np.float64)
            ordered_product(np.ones((1, len(scores))), np.ascontiguousarray(scores, dtype=np.float64), total)
        return total[0], float(len(scores))

    def attribute(
        self, query: str, response: str, sources: list[Source], store: Datastore, tokens: TokenizedText,
        states: np.ndarray, config: Mapping[str, Any],
        question_game: Callable[[], tuple[np.ndarray, float]] | None = None,
    ) -> AttributionResult:
        """Steps 2 and 3 for a whole answer."""
        values = self.score_tokens(store, response, tokens, states)
        return self.assemble_citations(query, response, sources, store, tokens, values, config, question_game)

    def sentence_facts(self, text: str) -> SentenceFacts:
        """:func:`sentence_facts` of a source sentence, remembered per text."""
        return self.sentence_views([text])[0][0]

    def sentence_views(self, texts: list[str]) -> list[tuple[SentenceFacts, str]]:
        """Each source sentence's :func:`sentence_facts` and :func:`normalize_text`,
        remembered per text (looked up together: one lock for the whole list)."""
        known = self._facts_of_sentence.get_many(texts)
        for i, view in enumerate(known):
            if view is None:
                view = known[i] = (sentence_facts(texts[i]), normalize_text(texts[i]))
                self._facts_of_sentence.put(texts[i], view)
        return known

    def context_view(self, store: Datastore) -> ContextView | None:
        """What citation assembly reads of ``store``'s sentences (:class:`ContextView`),
        joined from each source's :class:`SourceView`, remembered per source's sentences:
        deriving it over every sentence of the context on every call grew with the context
        (docs/reports/performance.md). None where a source's sentences are not listed
        together (a source's topic is its first sentence's wherever its others are)."""
        records = store.sentences
        of_source = [r.source_index for r in records]
        texts = [r.text for r in records]
        positions = [r.sentence_index for r in records]
        # Each source's run of sentences: (source, its texts, their positions), the key of its view.
        cuts = [0, *(i for i in range(1, len(of_source)) if of_source[i] != of_source[i - 1]), len(of_source)]
        runs = [of_source[a] for a in cuts[:-1]]
        if len(set(runs)) < len(runs):
            return None
        keys = [(tuple(texts[a:b]), tuple(positions[a:b])) for a, b in zip(cuts, cuts[1:])]
        views = self._source_views.get_many(keys)
        for i, view in enumerate(views):
            if view is None:
                run_texts, run_positions = keys[i]
                known = self.sentence_views(list(run_texts))
                views[i] = view = SourceView.of([f for f, _ in known], run_texts, [t for _, t in known], run_positions)
                self._source_views.put(keys[i], view, weight=max(len(run_texts), 1))
        return ContextView.of(list(zip(runs, views)))

    def forget(self) -> None:
        """Empty what the pipeline remembers in memory (the sentence cache is kept)."""
        self.builder.forget()
        self._facts_of_sentence.clear()
        self._source_views.clear()
