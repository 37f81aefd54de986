"""CJK answers without spaces (issue: hardening, failure 9): a copied Chinese or Japanese
phrase is supported; a character no source holds is flagged."""

from __future__ import annotations

import numpy as np
import pytest

from tokenshapley_rag._segment import find_keywords, token_words, word_pieces
from tokenshapley_rag._support import holding_mask, keyword_facts, locate_keyword, sentence_facts


def units(text: str) -> list[tuple[str, str]]:
    return [(k.text, k.kind) for k in find_keywords(text)]


def test_a_chinese_run_is_split_into_characters_with_function_characters_as_stopwords():
    # The probe: this was one keyword, '埃菲尔铁塔位于巴黎', and unsupported.
    assert units("埃菲尔铁塔位于巴黎。") == [
        ("埃", "word"), ("菲", "word"), ("尔", "word"), ("铁", "word"), ("塔", "word"), ("位", "word"),
        ("于", "stopword"), ("巴", "word"), ("黎", "word"),
    ]
    # Numbers between CJK characters are numbers and dates again; traditional characters too.
    assert units("它高330米，建於1889年。") == [
        ("它", "stopword"), ("高", "word"), ("330", "number"), ("米", "word"), ("建", "word"), ("於", "stopword"),
        ("1889", "date"), ("年", "word"),
    ]


def test_japanese_splits_by_script_katakana_words_and_hiragana_endings():
    assert units("東京タワーは1958年に完成した。") == [
        ("東", "word"), ("京", "word"), ("タワー", "word"), ("は", "stopword"), ("1958", "date"), ("年", "word"),
        ("に", "stopword"), ("完", "word"), ("成", "word"), ("した", "stopword"),
    ]
    # Half-width katakana and the prolonged sound mark stay in their word.
    assert units("ﾀﾜｰ") == [("ﾀﾜｰ", "word")]


def test_offsets_stay_exact_in_mixed_text():
    text = "The Eiffel Tower (埃菲尔铁塔) is in Paris, 巴黎。Big Ben is in London."
    ks = find_keywords(text)
    assert all(text[k.start:k.end] == k.text for k in ks)
    assert [k.text for k in ks if k.citable] == [
        "Eiffel Tower", "埃", "菲", "尔", "铁", "塔", "Paris", "巴", "黎", "Big Ben", "London",
    ]


def test_hangul_and_latin_are_unchanged():
    assert units("서울은 한국의 수도이다.") == [("서울은", "word"), ("한국의", "word"), ("수도이다", "word")]
    assert units("It flows into the North Sea.") == [
        ("It", "stopword"), ("flows", "word"), ("into", "stopword"), ("the", "stopword"), ("North Sea", "name"),
    ]


def test_word_pieces_and_token_words():
    assert word_pieces("位于巴黎 ok") == ["位", "位于", "于", "于巴", "巴", "巴黎", "黎", "ok"]
    assert word_pieces("It is tall.") == ["It", "is", "tall"]
    # A token's word is its first CJK character, in the answer as in the source.
    assert token_words("它在巴黎。", [(0, 1), (1, 2), (2, 4), (4, 5)]) == ["它", "在", "巴", "。"]
    assert token_words("埃菲尔铁塔位于巴黎。", [(7, 9)]) == ["巴"]


@pytest.mark.parametrize(
    ("keyword", "sentence", "held"),
    [
        ("巴", "埃菲尔铁塔位于巴黎。", True),
        ("伦", "埃菲尔铁塔位于巴黎。", False),
        ("タワー", "東京タワーは高い。", True),
        ("タワー", "東京タは高いワー。", False),  # its characters, but not next to each other
        ("巴", "埃菲尔铁塔 位于 巴黎。", True),  # a source written with spaces between words
    ],
)
def test_the_match_rule_holds_cjk_units(keyword, sentence, held):
    facts = keyword_facts(keyword, "word")
    assert holding_mask(facts, [sentence_facts(sentence)], np.array([0])).tolist() == [held]


def test_locate_keyword_finds_a_character_inside_a_cjk_run():
    assert locate_keyword("巴", "word", "埃菲尔铁塔位于巴黎。") == (7, 8)
    assert locate_keyword("タワー", "word", "東京タワーは高い。") == (2, 5)
    assert locate_keyword("tall", "word", "It is tallish.") is None  # Latin still needs whole words


@pytest.mark.slow
@pytest.mark.parametrize(
    "source",
    ["埃菲尔铁塔位于巴黎，高330米。", "埃菲尔铁塔 位于 巴黎 ， 高 330 米 。"],
    ids=["unspaced", "spaced"],
)
def test_a_copied_chinese_phrase_is_supported(ts, source):
    sources = [source, "大本钟位于伦敦。"]
    res = ts.attribute(query="埃菲尔铁塔在哪里？", sources=sources, response="埃菲尔铁塔位于巴黎。")
    cited = [(c.text, c.status, c.best.source_id if c.best else None) for c in res.citations]
    assert cited == [(ch, "supported", "0") for ch in "埃菲尔铁塔位巴黎"]
    assert [v.verdict for v in res.sentences] == ["supported"]


@pytest.mark.slow
def test_a_changed_chinese_fact_is_flagged(ts):
    sources = ["埃菲尔铁塔位于巴黎，高330米。", "大本钟位于伦敦。"]
    res = ts.attribute(query="埃菲尔铁塔在哪里？", sources=sources, response="埃菲尔铁塔位于东京，高330米。")
    status = {c.text: c.status for c in res.citations}
    assert status["东"] == status["京"] == "unsupported"
    assert status["埃"] == status["塔"] == status["330"] == "supported"
    assert [v.verdict for v in res.sentences] == ["partly"]


@pytest.mark.slow
def test_a_copied_japanese_phrase_is_supported(ts):
    sources = ["東京タワーは1958年に完成した。高さは333メートルである。", "エッフェル塔はパリにある。"]
    res = ts.attribute(query="東京タワーはいつ完成した？", sources=sources, response="東京タワーは1958年に完成した。")
    cited = [(c.text, c.status, c.best.source_id if c.best else None) for c in res.citations]
    assert cited == [(t, "supported", "0") for t in ("東", "京", "タワー", "1958", "年", "完", "成")]


@pytest.mark.parametrize("module", ["tokenshapley_rag._segment", "tokenshapley_rag._support"])
def test_doctests(module):
    import doctest
    import importlib

    res = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0
