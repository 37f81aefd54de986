"""What citation assembly reads of the context's sentences that depends on one source alone
(its sentences' facts with implied subjects, its topic, its normalized text with an index of
its words, its fact keys), kept per source (:class:`SourceView`) and joined for a list of
sources (:class:`ContextView`). A new list of known sources then joins a few hundred
views instead of deriving these again over thousands of sentences on every call
(docs/reports/performance.md, "Long contexts: the `assemble` step kept per source")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenshapley_rag._support import (
    SentenceFacts,
    abbreviated_species,
    joined_fact_keys,
    sentence_facts,
    source_topics,
    with_implied_subjects,
)
from tokenshapley_rag._text_search import SentenceTexts, normalize_text

__all__ = ["ContextView", "SourceView"]


@dataclass(frozen=True)
class SourceView:
    """One source's sentences as citation assembly reads them. The sentences are taken in
    their source's order with their positions in it, as the datastore lists them.

    >>> texts = ["The Eiffel Tower is in Paris.", "It is 330 metres tall."]
    >>> view = SourceView.of([sentence_facts(t) for t in texts], texts, [normalize_text(t) for t in texts], [0, 1])
    >>> view.topic, [f.implied for f in view.facts], view.texts.text
    ('eiffel tower', [(), ('eiffel tower',)], 'the eiffel tower is in paris.\\nit is 330 metres tall.')
    """

    facts: tuple[SentenceFacts, ...]  # with_implied_subjects of its sentences' facts
    topic: str  # source_topics' entry for it ("" where it has none)
    texts: SentenceTexts  # its sentences normalized, joined, with their word index
    fact_keys: np.ndarray  # (keys,) uint32: its sentences' fact keys joined
    key_ends: np.ndarray  # (sentences,) int64: where each sentence's keys end in fact_keys
    counted: np.ndarray  # (sentences,) bool: whether each sentence has a count (f.cardinals)
    species: frozenset[str]  # abbreviated_species of its sentences ("e coli")

    @classmethod
    def of(
        cls, facts: Sequence[SentenceFacts], texts: Sequence[str], normalized: Sequence[str], positions: Sequence[int]
    ) -> SourceView:
        """From the source's sentences' ``facts`` (:func:`sentence_facts`), ``texts``, their
        :func:`normalize_text` and their ``positions`` in the source (at least one sentence)."""
        sources = [0] * len(facts)
        topics = source_topics(facts, sources, positions)
        keys, ends, counted = joined_fact_keys(facts)
        return cls(
            facts=tuple(with_implied_subjects(facts, texts, sources, positions, topics)),
            topic=topics.get(0, ""),
            texts=SentenceTexts.indexed(normalized),
            fact_keys=keys,
            key_ends=ends,
            counted=counted,
            species=abbreviated_species(facts),
        )


@dataclass(frozen=True)
class ContextView:
    """A list of sources' views joined, in the datastore's sentence order: what
    :func:`~tokenshapley_rag._citations.assemble_citations` reads of the context (each
    field equal to what it derives from the sentences one by one).

    >>> a = ["Inception is a film.", "It grossed $837 million."]
    >>> b = ["Paris is a city."]
    >>> views = [(i, SourceView.of([sentence_facts(t) for t in s], s, [normalize_text(t) for t in s], range(len(s))))
    ...          for i, s in enumerate([a, b])]
    >>> context = ContextView.of(views)
    >>> context.topics, context.texts.starts.tolist(), context.fact_keys[1].tolist(), context.fact_keys[2].tolist()
    ({0: 'inception', 1: 'paris'}, [0, 21, 46], [8, 18, 26], [False, True, False])
    """

    facts: list[SentenceFacts]
    topics: dict[int, str]  # source index -> topic, as source_topics gives them
    texts: SentenceTexts
    fact_keys: tuple[np.ndarray, np.ndarray, np.ndarray]  # for holding_masks: keys, their ends, counted
    species: frozenset[str]  # abbreviated_species of every sentence, for species_names

    @classmethod
    def of(cls, views: Sequence[tuple[int, SourceView]]) -> ContextView:
        """From each source's index and view, in order (each source once)."""
        # One pass over the views (a long context has hundreds), then one join per field.
        facts: list[SentenceFacts] = []
        topics: dict[int, str] = {}
        keys, ends, counted, key_counts, sentence_counts = [], [], [], [], []
        for si, view in views:
            facts.extend(view.facts)
            if view.topic:
                topics[si] = view.topic
            keys.append(view.fact_keys)
            ends.append(view.key_ends)
            counted.append(view.counted)
            key_counts.append(len(view.fact_keys))
            sentence_counts.append(len(view.key_ends))
        if views:
            # Each source's ends, moved by the keys of the sources before it.
            lengths = np.array(key_counts, dtype=np.int64)
            fact_keys = (
                np.concatenate(keys),
                np.concatenate(ends) + np.repeat(np.cumsum(lengths) - lengths, sentence_counts),
                np.concatenate(counted),
            )
        else:
            fact_keys = (np.zeros(0, np.uint32), np.zeros(0, np.int64), np.zeros(0, bool))
        species = frozenset().union(*(view.species for _, view in views if view.species))
        return cls(facts, topics, SentenceTexts.of_blocks([view.texts for _, view in views]), fact_keys, species)
