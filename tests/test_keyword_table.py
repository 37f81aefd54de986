"""Keywords are units of fact, checked on a table of real sentences (no model).

``tests/data/keyword_table.jsonl`` holds sentences taken verbatim from the evaluation sets
(QuoteSum and VeriGran answers, support claims, NQ answers and passages, the competing-facts
corpus), each with the citable keywords a careful reader expects under the rule of
docs/method.md §8, checked by hand: ``[[text, kind], ...]`` in order. ``from`` is
``<set>:<example id>`` (``competing-facts:<file>`` for the corpus); ``part`` says where in the
example the sentence is when it is not the answer or claim ("gold passage", "source 6").
"""

import json
import re
from pathlib import Path

import pytest

from tokenshapley_rag._segment import find_keywords, split_sentences

TABLE = Path(__file__).parent / "data" / "keyword_table.jsonl"
ROWS = [json.loads(line) for line in TABLE.read_text(encoding="utf-8").splitlines() if line.strip()]
KINDS = {"date", "number", "name", "word"}


def test_the_table_is_large_and_well_formed():
    assert len(ROWS) >= 60
    for row in ROWS:
        assert set(row) <= {"sentence", "from", "part", "keywords"}
        assert re.fullmatch(r"[\w-]+:[\w.-]+", row["from"]), row["from"]
        assert all(kind in KINDS for _, kind in row["keywords"]), row


@pytest.mark.parametrize("row", ROWS, ids=[f"{i}-{r['from']}" for i, r in enumerate(ROWS)])
def test_citable_keywords_match_the_table(row):
    got = [[k.text, k.kind] for k in find_keywords(row["sentence"]) if k.citable]
    assert got == row["keywords"]


@pytest.mark.parametrize("row", ROWS, ids=[f"{i}-{r['from']}" for i, r in enumerate(ROWS)])
def test_units_are_exact_ordered_and_inside_one_sentence(row):
    text = row["sentence"]
    units = find_keywords(text)
    sentences = split_sentences(text)
    end = 0
    for k in units:
        assert text[k.start:k.end] == k.text and k.text == k.text.strip() and k.text
        assert k.start >= end, "units overlap or are out of order"
        end = k.end
        assert any(a <= k.start and k.end <= b for a, b in sentences), f"{k.text!r} crosses a sentence boundary"
        assert k.citable == (k.kind != "stopword")


@pytest.mark.parametrize("row", ROWS, ids=[f"{i}-{r['from']}" for i, r in enumerate(ROWS)])
def test_every_word_belongs_to_exactly_one_unit(row):
    text = row["sentence"]
    units = find_keywords(text)
    for word in re.finditer(r"\w+", text):
        holders = [k for k in units if k.start <= word.start() and word.end() <= k.end]
        assert len(holders) == 1, f"{word.group()!r} at {word.start()} is in {[k.text for k in holders]}"
    covered = sum(k.end - k.start for k in units)
    assert covered <= len(text)

