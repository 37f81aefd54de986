"""The warm path's shortcuts give the values of the plain rules they replace: the match rule
looked up through fact keys (``holding_masks``) against ``holding_mask`` on every sentence,
the rival found best first against the loop over every sentence, the memo's batch lookup,
and the sentences' texts joined from remembered normalizations."""

import json
from pathlib import Path

import numpy as np
import pytest

from tokenshapley_rag import _support
from tokenshapley_rag._memo import LRUMemo
from tokenshapley_rag._support import (
    FactTable,
    fact_keys,
    holding_mask,
    holding_masks,
    keyword_facts,
    keyword_status,
    sentence_facts,
    states_other_value,
)
from tokenshapley_rag._text_search import SentenceTexts, normalize_text

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def corpus(competing_facts_corpus) -> tuple[list[str], np.ndarray, list[tuple[str, str]]]:
    """Real sentences (the keyword table's, then the competing-facts pages'), each table row
    or page a document, and their keywords, each also retyped as a name, a number and a date,
    so that every branch of the match rule is met."""
    rows = [json.loads(line) for line in (DATA / "keyword_table.jsonl").read_text(encoding="utf-8").splitlines()]
    page_sentences, pages, page_keywords = competing_facts_corpus
    sentences = [row["sentence"] for row in rows] + page_sentences
    documents = list(range(len(rows))) + [len(rows) + d for d in pages]
    keywords = [tuple(k) for row in rows for k in row["keywords"]]
    keywords += [(t, kind) for t, _ in list(keywords) for kind in ("name", "number", "date")] + page_keywords
    keywords += [("IPL", "name"), ("Indian Premier League", "name"), ("Curie", "name"), ("Marie Curie", "name")]
    sentences += ["The IPL began in 2008.", "Marie Curie was born in Warsaw.", "Curie won the Nobel Prize in 1903."]
    documents += [documents[-1] + 1, documents[-1] + 2, documents[-1] + 2]
    return sentences, np.array(documents), sorted(set(keywords))


def _plain(kfacts, facts, documents):
    return np.array([holding_mask(k, facts, documents) for k in kfacts], dtype=bool).reshape(len(kfacts), len(facts))


def test_holding_masks_are_the_match_rule_on_every_sentence(corpus):
    sentences, documents, keywords = corpus
    facts = [sentence_facts(s) for s in sentences]
    kfacts = [keyword_facts(t, kind) for t, kind in keywords]
    got = holding_masks(kfacts, facts, documents)
    np.testing.assert_array_equal(got, _plain(kfacts, facts, documents))
    assert got.shape == (len(keywords), len(sentences)) and 3000 < got.sum() < got.size // 4
    row = {kw: got[i] for i, kw in enumerate(keywords)}
    ipl, curie = len(sentences) - 3, len(sentences) - 1
    assert row[("Indian Premier League", "name")][ipl] and row[("IPL", "name")][ipl]  # acronym <-> its words
    assert row[("Marie Curie", "name")][curie]  # the last word, where the document names her in full
    assert holding_masks([], facts, documents).shape == (0, len(sentences))
    assert holding_masks(kfacts[:2], [], np.zeros(0, int)).shape == (2, 0)


@pytest.mark.parametrize(
    "key",
    [
        lambda tag, value: 7,  # every fact one key: every sentence is tested
        lambda tag, value: (_support.zlib.crc32(f"{tag}:{value}".encode()) << 16) & 0xFFFFFFFF,  # one low-bit bucket
    ],
    ids=["one key", "one bucket"],
)
def test_keys_only_narrow_the_sentences_down(monkeypatch, key, corpus):
    sentences, documents, keywords = corpus
    monkeypatch.setattr(_support, "_key", key)
    facts = [sentence_facts(s) for s in sentences[:40]]
    kfacts = [keyword_facts(t, kind) for t, kind in keywords[::7]]
    np.testing.assert_array_equal(holding_masks(kfacts, facts, documents[:40]), _plain(kfacts, facts, documents[:40]))


def test_fact_keys_and_the_table():
    f = sentence_facts("The IPL began on 18 April 2008 in Bangalore.")
    keys = fact_keys(f)
    assert keys.dtype == np.uint32 and np.array_equal(keys, f.keys)
    assert len(keys) == len(f.numbers) + len(f.months) + len(f.words) + len(f.stems) + len(f.spelled) + len(f.acronyms)
    assert _support._key("n", "2008") in keys and _support._key("m", "4") in keys and _support._key("a", "ipl") in keys
    table = FactTable.of([f, sentence_facts("Delhi, 2009.")], [_support._key("n", "2008"), _support._key("n", "2009")])
    assert table.with_any([_support._key("n", "2008")]).tolist() == [True, False]
    assert table.with_any([_support._key("n", "2009")]).tolist() == [False, True]
    assert table.with_any([_support._key("w", "delhi")]).tolist() == [False, False]  # not asked for
    assert f == sentence_facts("The IPL began on 18 April 2008 in Bangalore.")  # the keys take no part in equality


def _rival_by_loop(k, pool, predicate, facts, answer):
    """The rival as the status rule defined it: every sentence of the pool in order."""
    rival, best = -1, 0.0
    for j in np.flatnonzero(pool).tolist():
        if predicate[j] > best and states_other_value(k, facts[j], answer):
            rival, best = j, float(predicate[j])
    return rival, best


def test_the_rival_is_the_first_of_the_best_sentences_stating_another_value():
    texts = ["The Rhine is 1,230 kilometres long.", "It rises in the Alps.", "The Danube is 2,850 kilometres long.",
             "The Elbe is 1,094 kilometres long.", "The Rhine flows north.", "The Oder is 742 kilometres long."]
    facts = [sentence_facts(t) for t in texts]
    documents = np.arange(len(texts))
    answer = sentence_facts("The Rhine is 1,300 kilometres long.")
    k = keyword_facts("1,300 kilometres", "number")
    rng = np.random.default_rng(0)
    rivals = set()
    for _ in range(300):
        predicate = rng.choice([-0.5, 0.0, 0.25, 0.5, 1.0], size=len(texts))  # ties and non-positive values
        pool = rng.random(len(texts)) < 0.7
        got = _support._rival(k, pool, predicate, facts, answer)
        assert got == _rival_by_loop(k, pool, predicate, facts, answer)
        rivals.add(got[0])
    assert rivals == {-1, 0, 2, 3, 5}  # never the sentences with no other number (1, 4)
    status, _, rival = keyword_status(k, np.zeros(len(texts), bool), None, np.array([0.1, 0.9, 0.5, 0.5, 0.9, 0.2]),
                                      documents, facts, answer)
    assert (status, rival) == ("contradicted", 2)


def test_get_many_looks_up_in_one_batch_and_keeps_recency():
    memo = LRUMemo(3)
    for key in "abc":
        memo.put(key, key.upper())
    assert memo.get_many(["c", "x", "a"]) == ["C", None, "A"]
    memo.put("d", "D")  # b is now the least recently used
    assert memo.get_many(["a", "b", "c", "d"]) == ["A", None, "C", "D"]
    assert memo.get_many([]) == []


def test_sentence_texts_joined_from_normalized_texts_equal_of():
    texts = ["Voiced by  Selena Gomez.", "Ｆｕｌｌ-width ＴＥＸＴ", "", "An unvoiced\nconsonant."]
    for chosen in (texts, texts[:1], []):
        joined, of = SentenceTexts.joined([normalize_text(t) for t in chosen]), SentenceTexts.of(chosen)
        assert joined.text == of.text and joined.starts.tolist() == of.starts.tolist()
    found = SentenceTexts.joined([normalize_text(t) for t in texts]).holding("text")
    assert found.tolist() == [False, True, False, False]


def test_sentence_score_rows_equal_the_constructors_objects():
    import dataclasses

    from tokenshapley_rag._citations import SENTENCE_SCORE_FIELDS, sentence_score_rows
    from tokenshapley_rag._datastore import SentenceRecord
    from tokenshapley_rag._types import SentenceScore

    assert SENTENCE_SCORE_FIELDS == tuple(f.name for f in dataclasses.fields(SentenceScore))
    records = [SentenceRecord(0, 0, 0, 12, "Paris is big."), SentenceRecord(1, 2, 30, 41, "It is old.")]
    rows = sentence_score_rows(["a", "b"], records, [0.25, -1.5], [0.0, 2.0])
    want = [
        SentenceScore("a", 0, "Paris is big.", 0, 12, 0.25, 0.0), SentenceScore("b", 2, "It is old.", 30, 41, -1.5, 2.0)
    ]
    assert rows == want and [r.to_dict() for r in rows] == [w.to_dict() for w in want]
    assert hash(rows[1]) == hash(want[1]) and type(rows[0]) is SentenceScore
    with pytest.raises(dataclasses.FrozenInstanceError):
        rows[0].score = 1.0
    assert sentence_score_rows([], [], [], []) == []


def test_holding_within_some_sentences_is_holding_restricted_to_them(corpus):
    sentences, _, keywords = corpus
    texts = SentenceTexts.of(sentences)
    rng = np.random.default_rng(1)
    phrases = [t for t, _ in keywords[::5]] + ["the", "1,535 miles", "Curie", "IPL", ""]
    full = texts.holding_many(phrases)
    assert full.sum() > 100
    within = [None if i % 3 == 0 else rng.random(len(sentences)) < 0.3 for i in range(len(phrases))]
    got = texts.holding_many(phrases, within)
    for r, mask in enumerate(within):
        np.testing.assert_array_equal(got[r], full[r] if mask is None else full[r] & mask)
    last = np.zeros(len(sentences), dtype=bool)
    last[-1] = True  # the last sentence has no "\n" after it
    assert texts.holding_many(["Nobel Prize in 1903"], [last]).tolist() == [last.tolist()]


def test_the_predicate_product_sums_in_index_order_whatever_the_blas():
    # The predicate game's `weights @ scores` through a BLAS rounds by its thread count;
    # ordered_product sums each cell over the weights' columns in index order, the same
    # bits as this plain loop, on any machine.
    from tokenshapley_rag._kernels import ordered_product

    rng = np.random.default_rng(4)
    weights = rng.random((7, 90)) * (rng.random((7, 90)) < 0.3)  # mostly zero, as a context game's rows
    scores = rng.normal(size=(90, 400))
    got = np.empty((7, 400))
    ordered_product(weights, scores, got)
    want = np.zeros((7, 400))
    for i in range(7):
        for t in range(90):
            if weights[i, t] != 0.0:
                want[i] = want[i] + weights[i, t] * scores[t]
    assert np.array_equal(got, want)
    np.testing.assert_allclose(got, weights @ scores, rtol=1e-12, atol=1e-12)
