"""What is kept per source for citation assembly (``_context_view``) gives the values that
assembly derived over the whole context: the phrases found through each source's word index
against a scan of the whole joined text and a brute-force oracle, the facts with implied
subjects and the topics against ``with_implied_subjects`` / ``source_topics`` over every
sentence, and the match rule from the joined fact keys against ``holding_masks`` from the
facts."""

import re

import numpy as np
import pytest

from tokenshapley_rag._context_view import ContextView, SourceView
from tokenshapley_rag._datastore import SentenceRecord
from tokenshapley_rag._memo import LRUMemo
from tokenshapley_rag._pipeline import Pipeline
from tokenshapley_rag._support import (
    FactTable,
    abbreviated_species,
    holding_masks,
    keyword_facts,
    sentence_facts,
    source_topics,
    with_implied_subjects,
)
from tokenshapley_rag._text_search import SentenceTexts, WordIndex, normalize_text, sentence_words

# Word characters of several scripts and forms (NFKC and case folding change some), and
# the punctuation and spaces that bound words.
ALPHABET = list("abAB_1²éÉßẞｆＦ") + list(" .,-'\u00a0\t")


def _oracle(sentences: list[str], phrase: str) -> list[bool]:
    """Whether each sentence holds ``phrase`` word for word: the normalized phrase at some
    place of the normalized sentence, with no word character right before or after it."""
    needle = normalize_text(phrase)
    out = []
    for sent in sentences:
        hay, hit = normalize_text(sent), False
        for i in range(len(hay) - len(needle) + 1) if needle else ():
            if hay[i : i + len(needle)] != needle:
                continue
            j = i + len(needle)
            before_ok = not re.match(r"\w", needle[0]) or i == 0 or not re.match(r"\w", hay[i - 1])
            after_ok = not re.match(r"\w", needle[-1]) or j == len(hay) or not re.match(r"\w", hay[j])
            hit = hit or (before_ok and after_ok)
        out.append(hit)
    return out


def _random_blocks(rng: np.random.Generator) -> list[list[str]]:
    """Sources of 1-5 random sentences of 0-20 characters."""
    return [
        ["".join(rng.choice(ALPHABET, size=rng.integers(0, 21))) for _ in range(rng.integers(1, 6))]
        for _ in range(rng.integers(1, 6))
    ]


def _phrases(rng: np.random.Generator, sentences: list[str]) -> list[str]:
    """Pieces of the sentences (cut anywhere) and random strings."""
    out = []
    for _ in range(12):
        s = sentences[rng.integers(len(sentences))]
        a = int(rng.integers(0, len(s) + 1))
        out.append(s[a : a + int(rng.integers(0, 8))])
        out.append("".join(rng.choice(ALPHABET, size=rng.integers(0, 5))))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_word_index_finds_what_the_whole_scan_finds(seed):
    rng = np.random.default_rng(seed)
    blocks = _random_blocks(rng)
    sentences = [s for block in blocks for s in block]
    indexed = SentenceTexts.of_blocks([SentenceTexts.indexed([normalize_text(s) for s in b]) for b in blocks])
    whole = SentenceTexts.of(sentences)
    assert indexed.words is not None and whole.words is None
    assert indexed.text == whole.text and indexed.starts.tolist() == whole.starts.tolist()
    phrases = _phrases(rng, sentences)
    within = [None if rng.random() < 0.5 else rng.random(len(sentences)) < 0.5 for _ in phrases]
    got, scanned = indexed.holding_many(phrases, within), whole.holding_many(phrases, within)
    np.testing.assert_array_equal(got, scanned)
    # The blocks' signatures only skip blocks that cannot hold a phrase.
    unsigned = WordIndex(indexed.words.blocks, indexed.words.n_sentences)
    assert indexed.words.signatures is not None and indexed.words.signatures.shape[0] == len(blocks)
    for phrase in phrases:
        want = unsigned.candidates(normalize_text(phrase))
        got_candidates = indexed.words.candidates(normalize_text(phrase))
        assert (want is None and got_candidates is None) or want.tolist() == got_candidates.tolist()
    for r, phrase in enumerate(phrases):
        want = np.array(_oracle(sentences, phrase))
        np.testing.assert_array_equal(got[r], want if within[r] is None else want & within[r])


def test_word_index_candidates_hold_every_match():
    """A candidate set is a superset of the holders: the word of the phrase held by the
    fewest sentences, whole."""
    sentences = [normalize_text(s) for s in ["Voiced by Selena Gomez.", "An unvoiced consonant.", "Selena's voice"]]
    index = WordIndex(((0, sentence_words(sentences)),), 3)
    assert index.candidates("selena gomez").tolist() == [True, False, False]
    assert index.candidates("voiced").tolist() == [True, False, False]  # not "unvoiced"
    assert index.candidates("selena").tolist() == [True, False, True]
    assert index.candidates("selena x").tolist() == [False, False, False]  # no sentence has "x"
    assert index.candidates("...") is None and index.candidates("") is None


def test_blocks_without_an_index_leave_the_context_without_one():
    a, b = SentenceTexts.indexed(["a b."]), SentenceTexts.joined(["b"])
    both = SentenceTexts.of_blocks([a, b])
    assert both.words is None and both.holding_many(["b"]).tolist() == [[True, True]]
    assert SentenceTexts.of_blocks([]).holding_many(["b"]).shape == (1, 0)


def _sources(sentences: list[str], documents: np.ndarray) -> list[tuple[int, list[str]]]:
    """The corpus's documents as sources, with a pronoun sentence added to each (so that
    implied subjects are met), as (source index, its sentences)."""
    out = []
    for d in np.unique(documents).tolist():
        chosen = [s for s, doc in zip(sentences, documents.tolist()) if doc == d]
        out.append((len(out), [*chosen, "It was opened in 1889.", "They say so."]))
    return out


def test_context_view_equals_the_whole_context_derivation(competing_facts_corpus):
    sentences, pages, keywords = competing_facts_corpus
    sources = _sources(sentences, np.array(pages))
    texts = [t for _, block in sources for t in block]
    of_source = [si for si, block in sources for _ in block]
    positions = [p for _, block in sources for p in range(len(block))]
    facts = [sentence_facts(t) for t in texts]
    views, at = [], 0
    for si, block in sources:
        n = len(block)
        views.append((si, SourceView.of(facts[at : at + n], block, [normalize_text(t) for t in block], positions[at : at + n])))
        at += n
    context = ContextView.of(views)
    topics = source_topics(facts, of_source, positions)
    implied = with_implied_subjects(facts, texts, of_source, positions, topics)
    assert context.topics == topics and len(topics) > 10
    assert [f.implied for f in context.facts] == [f.implied for f in implied]
    assert sum(bool(f.implied) for f in implied) > 10
    assert all(a is b for a, b in zip(context.facts, implied) if not b.implied)
    for a, b in zip(context.facts, implied):
        assert all(np.array_equal(getattr(a, s), getattr(b, s)) if isinstance(getattr(a, s), np.ndarray)
                   else getattr(a, s) == getattr(b, s) for s in type(a).__slots__)
    whole = SentenceTexts.of(texts)
    assert context.texts.text == whole.text and context.texts.starts.tolist() == whole.starts.tolist()
    # The match rule from the joined keys: the same table, the same masks.
    documents = np.array(of_source)
    kfacts = [keyword_facts(t, kind) for t, kind in keywords]
    np.testing.assert_array_equal(
        holding_masks(kfacts, implied, documents, context.fact_keys), holding_masks(kfacts, implied, documents)
    )
    wanted = [int(k) for f in facts[:50] for k in f.keys[:3]]
    keys, ends, counted = context.fact_keys
    joined, plain = FactTable.of_keys(keys, ends, wanted), FactTable.of(implied, wanted)
    assert joined.n_sentences == plain.n_sentences and len(plain.keys) > 50
    np.testing.assert_array_equal(joined.keys, plain.keys)
    np.testing.assert_array_equal(joined.owners, plain.owners)
    assert counted.tolist() == [bool(f.cardinals) for f in facts]
    empty = ContextView.of([])
    assert empty.facts == [] and empty.topics == {} and empty.texts.text == "" and len(empty.fact_keys[1]) == 0
    assert empty.species == frozenset()


def test_context_view_joins_the_abbreviated_species_of_its_sources():
    blocks = [["E. coli is a bacterium.", "H. pylori lives in the stomach."], ["Paris hosts it."], ["S. aureus too."]]
    views = [(i, SourceView.of([sentence_facts(t) for t in b], b, [normalize_text(t) for t in b], range(len(b))))
             for i, b in enumerate(blocks)]
    context = ContextView.of(views)
    assert context.species == abbreviated_species(sentence_facts(t) for b in blocks for t in b)
    assert sorted(context.species) == ["e coli", "h pylori", "s aureus"]


class _Store:
    def __init__(self, records):
        self.sentences = records


def _pipeline() -> Pipeline:
    """A pipeline with only what :meth:`Pipeline.context_view` reads (no encoder)."""
    pipeline = object.__new__(Pipeline)
    pipeline._facts_of_sentence = LRUMemo(64)
    pipeline._source_views = LRUMemo(64, max_weight=64)
    return pipeline


def test_pipeline_context_view_is_kept_per_source_and_joined():
    pipeline = _pipeline()
    a = ["Inception is a film.", "It grossed $837 million."]
    b = ["Paris is a city.", "It is old."]
    records = [SentenceRecord(si, i, 0, len(t), t) for si, block in enumerate([a, b]) for i, t in enumerate(block)]
    first = pipeline.context_view(_Store(records))
    assert first.topics == {0: "inception", 1: "paris"} and [f.implied for f in first.facts] == [
        (), ("inception",), (), ("paris",)
    ]
    assert len(pipeline._source_views) == 2
    # A new list of the same sources, in another order: the views are taken as kept.
    swapped = [SentenceRecord(1 - r.source_index, r.sentence_index, r.start, r.end, r.text) for r in records[2:] + records[:2]]
    second = pipeline.context_view(_Store(swapped))
    assert second.topics == {0: "paris", 1: "inception"} and second.facts[0] is first.facts[2]
    assert second.texts.text == SentenceTexts.of(b + a).text and len(pipeline._source_views) == 2


def test_pipeline_context_view_refuses_a_source_listed_apart():
    records = [SentenceRecord(0, 0, 0, 5, "Paris is a city."), SentenceRecord(1, 0, 0, 5, "Lyon is old."),
               SentenceRecord(0, 1, 6, 9, "It is big.")]
    assert _pipeline().context_view(_Store(records)) is None
