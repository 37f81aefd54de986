"""TokenShapley end to end on the real default model (small inputs)."""

import json
import os

import numpy as np
import pytest

from tokenshapley_rag import (
    DuplicateSourceIdError,
    EmptyTextError,
    InvalidInputTypeError,
    ModelLoadError,
    ModelNotFoundError,
    Source,
    TextTooLongError,
    TokenShapley,
    context_weights,
)

pytestmark = pytest.mark.slow

EIFFEL = (
    "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. "
    "It was completed on 31 March 1889. The tower is 330 metres tall."
)
BIGBEN = (
    "Big Ben is the nickname for the Great Bell of the clock in London. "
    "The tower was completed in 1859. It stands 96 metres tall."
)
STATUE = "The Statue of Liberty stands on Liberty Island in New York Harbor. It was dedicated in 1886."
SOURCES = [Source("eiffel", EIFFEL, {"title": "Eiffel Tower"}), Source("bigben", BIGBEN), Source("statue", STATUE)]
QUERY = "How tall is the Eiffel Tower and when was Big Ben completed?"
ANSWER = "The Eiffel Tower is 330 metres tall, and Big Ben was completed in 1859."


@pytest.fixture(scope="module")
def result(ts):
    return ts.attribute(query=QUERY, sources=SOURCES, response=ANSWER)


def _cite(result, text):
    return next(c for c in result.citations if c.text == text)


def test_keywords_cite_the_right_source_and_sentence(result):
    assert [c.text for c in result.citations] == ["Eiffel Tower", "330 metres", "tall", "Big Ben", "completed", "1859"]
    assert _cite(result, "330 metres").best.source_id == "eiffel"
    assert _cite(result, "330 metres").best.sentence == "The tower is 330 metres tall."
    assert _cite(result, "1859").best.source_id == "bigben"
    assert _cite(result, "1859").best.sentence == "The tower was completed in 1859."
    assert _cite(result, "Eiffel Tower").best.source_id == "eiffel"
    for text in ("330 metres", "1859", "Eiffel Tower", "Big Ben"):
        assert _cite(result, text).supported
    # "Big Ben" opens its source sentence, so its key is the BOS state shared by every
    # sentence; the default "mixed" candidates still put its evidence among the players,
    # and the context rule cannot pull it to the Eiffel sentences of the same answer
    # sentence, which hold no evidence for it.
    assert _cite(result, "Big Ben").best.source_id == "bigben"
    assert {a.source_id for a in _cite(result, "Big Ben").sources} == {"bigben"}


def test_answer_support_is_the_mean_keyword_support(result, ts):
    assert result.support == pytest.approx(np.mean([c.support for c in result.citations]))
    assert 0 < result.support <= 1.5
    # An answer made of keywords no source holds has (almost) no support.
    invented = ts.attribute(query=QUERY, sources=SOURCES, response="Zanzibar exports cloves.")
    assert invented.support < result.support / 4
    assert not any(c.supported for c in invented.citations)


def test_paper_recipe_misses_sentence_initial_keywords(cache_root):
    # The paper's candidate set (the m nearest entries) and token-level matching, without
    # context: "Big Ben" has no matching nearest neighbour (docs/method.md).
    paper = TokenShapley(cache_dir=cache_root, candidates="nearest", match="normalized", context_weight=0.0)
    res = paper.attribute(query=QUERY, sources=SOURCES, response=ANSWER)
    # The source holds the name, so it is supported and cited, but its own token games
    # give it no evidence: no source scores positively, and the citation is the holding
    # sentence with its (non-positive) own score.
    big_ben = _cite(res, "Big Ben")
    assert big_ben.supported and big_ben.support <= 0
    assert len(big_ben.sources) == 1 and big_ben.best.score <= 0 and big_ben.best.source_id == "bigben"
    assert _cite(res, "1859").best.source_id == "bigben"
    assert _cite(res, "330 metres").best.source_id == "eiffel"


def test_context_decides_between_sources_holding_the_same_span(ts):
    # "The tower" is in both sources; the rest of each answer sentence says which.
    sources = ["The tower is 330 metres tall and stands in Paris.", "The tower was completed in 1859 in London."]
    answer = "The tower is 330 metres tall. The tower was completed in 1859."
    res = ts.attribute(query="Tell me about the towers.", sources=sources, response=answer)
    second = answer.index("The tower", 5)
    with_context = res.span_scores(second, second + len("The tower"))
    assert with_context["1"] > with_context["0"]
    first = res.span_scores(0, len("The tower"))
    assert first["0"] > first["1"]
    # Without context, the plain token sums: both sources hold "The tower" equally.
    own = res.span_scores(second, second + len("The tower"), context=False)
    assert own["0"] == pytest.approx(own["1"], abs=0.05)
    # A source without the span is no candidate while others hold it word for word
    # ("Tell me more." holds none of it); without the verbatim rule context still leaves
    # it its own (non-positive) score.
    extra = [*sources, "Tell me more."]
    res2 = ts.attribute(query="Q", sources=extra, response=answer)
    assert res2.span_scores(second, second + len("The tower"))["2"] == -np.inf
    plain = TokenShapley(verbatim=False, use_disk_cache=False)
    res3 = plain.attribute(query="Q", sources=extra, response=answer)
    own3 = res3.span_scores(second, second + len("The tower"), context=False)["2"]
    assert res3.span_scores(second, second + len("The tower"))["2"] == own3 <= 0


def test_verbatim_rule_finds_phrases_by_text_and_cut_words(ts):
    # "(voiced by" holds "voiced" word for word although the tokenizer splits it apart;
    # a span cut inside a word ("evapor" of "evaporates") is found inside words too.
    sources = ["Mavis (voiced by Selena Gomez) is a vampire.", "Water evaporates from the sea.", "Vapour rises."]
    answer = "Selena Gomez voiced Mavis. Sea water evaporates."
    res = ts.attribute(query="Q", sources=sources, response=answer)
    voiced = answer.index("voiced")
    scores = res.span_scores(voiced, voiced + len("voiced"))
    assert scores["0"] > 0 and scores["1"] == scores["2"] == -np.inf
    cut = answer.index("evapor")
    scores = res.span_scores(cut, cut + len("evapor"))
    assert np.isfinite(scores["1"]) and scores["0"] == scores["2"] == -np.inf  # the only candidate
    assert max(scores, key=scores.get) == "1"


def test_each_cited_source_scores_its_span_score_and_quotes_the_keyword(result):
    for c in result.citations:
        in_sources = result.span_scores(c.start, c.end)
        assert [a.score for a in c.sources] == sorted((a.score for a in c.sources), reverse=True)
        assert len({a.source_id for a in c.sources}) == len(c.sources)  # one entry per source
        for a in c.sources:
            assert a.score > 0 and a.score == pytest.approx(in_sources[a.source_id])
            source = next(s for s in SOURCES if s.id == a.source_id)
            if c.text.lower() in source.text.lower():
                assert c.text.lower() in a.sentence.lower(), (c.text, a.sentence)


def test_word_matching_keeps_numbers_whole(ts):
    # Digits are single tokens; "word" matching requires the whole number, so 2010's
    # digits are no evidence for 2011.
    sources = ["The bridge opened in 2010 after delays.", "The tunnel opened in 2011 after delays."]
    res = ts.attribute(query="When?", sources=sources, response="It opened in 2011.")
    cite = _cite(res, "2011")
    assert cite.best.source_id == "1"
    assert {a.source_id for a in cite.sources} == {"1"}


def test_offsets_are_exact(result):
    for c in result.citations:
        assert ANSWER[c.start : c.end] == c.text
        src = {s.id: s for s in SOURCES}
        for a in c.sources:
            assert src[a.source_id].text[a.sentence_start : a.sentence_end] == a.sentence
    for t, (a, b) in enumerate(result.tokens.offsets.tolist()):
        assert result.tokens.texts[t] == ANSWER[a:b]


def test_scores_add_up(result, ts):
    # Shapley efficiency: each token's values over its candidates sum to U(all) in {0, 1}.
    rows = result.tokens.scores.sum(axis=1)
    assert np.all(np.isclose(rows, 0.0) | np.isclose(rows, 1.0))
    assert sum(result.source_scores.values()) == pytest.approx(rows.sum())
    assert sum(s.score for s in result.sentence_scores) == pytest.approx(rows.sum())
    # A keyword's score for a sentence is the sum over its tokens; per source, over sentences.
    c = _cite(result, "1859")
    offs = result.tokens.offsets
    rows = (offs[:, 0] < c.end) & (offs[:, 1] > c.start)
    sentence_ids = [(s.source_id, s.sentence_index) for s in result.sentence_scores]
    best_col = sentence_ids.index((c.best.source_id, c.best.sentence_index))
    own = result.tokens.scores[rows].sum(axis=0)
    assert own[best_col] > 0
    # In context, the sentences with positive own score gain the context game's values.
    weights = context_weights(result.tokens.answer_sentence, np.flatnonzero(rows), ts.context_weight, ts.context_scale)
    # ... for the sentences of the sources that hold the keyword word for word (brute
    # force: "1859" is in one source's text only); the others are not candidates.
    holds = {s.id for s in SOURCES if "1859" in s.text}
    assert holds == {"bigben"}
    eligible = np.array([s.source_id in holds for s in result.sentence_scores])
    in_context = np.where(eligible, weights @ result.tokens.scores, -np.inf)
    # A source's score sums its sentences' context values; it is cited by its best
    # sentence that holds the keyword, and it equals span_scores for that source.
    bigben_total = in_context[eligible].sum()
    assert [(a.source_id, a.score) for a in c.sources] == [("bigben", pytest.approx(bigben_total))]
    holding = [j for j, s in enumerate(result.sentence_scores) if "1859" in s.sentence]
    assert best_col == max(holding, key=lambda j: in_context[j])
    in_sources = result.span_scores(c.start, c.end)
    assert in_sources["eiffel"] == in_sources["statue"] == -np.inf
    assert in_sources["bigben"] == pytest.approx(in_context[eligible].sum())
    per_source = result.span_scores(c.start, c.end, context=False)
    assert sum(per_source.values()) == pytest.approx(result.tokens.scores[rows].sum())
    bigben_cols = [j for j, (sid, _) in enumerate(sentence_ids) if sid == "bigben"]
    assert per_source["bigben"] == pytest.approx(result.tokens.scores[np.ix_(rows, bigben_cols)].sum())
    assert result.source_scores["bigben"] > result.source_scores["statue"]


def test_serialization_and_rendering(result):
    d = json.loads(json.dumps(result.to_dict()))
    assert d["response"] == ANSWER
    flat = next(c for c in d["citations"] if c["text"] == "1859")
    assert flat["source_id"] == "bigben" and flat["sentence"] == "The tower was completed in 1859."
    assert d["sources"][0]["metadata"] == {"title": "Eiffel Tower"}
    md = result.to_markdown()
    assert md.startswith("The Eiffel Tower")
    assert '"The tower is 330 metres tall."' in md
    assert "1859[^" in md
    page = result.to_html()
    assert page.startswith("<!DOCTYPE html>") and "http://" not in page and "https://" not in page
    assert 'data-source="bigben"' in page and "<mark>1859</mark>" in page


def test_plain_string_sources_get_positional_ids(ts):
    res = ts.attribute(QUERY, [EIFFEL, BIGBEN], ANSWER)
    assert set(res.source_scores) == {"0", "1"}
    assert _cite(res, "1859").best.source_id == "1"


def test_unsupported_keyword_is_flagged(ts):
    res = ts.attribute(
        query="Where is the Eiffel Tower?",
        sources=[EIFFEL],
        response="The Eiffel Tower is in Paris and was painted by Picasso.",
    )
    assert _cite(res, "Paris").supported
    assert not _cite(res, "Picasso").supported
    assert "[^?]" in res.to_markdown()


def test_cache_is_hit_on_second_call_and_survives_corruption(cache_root, monkeypatch):
    first = TokenShapley(cache_dir=cache_root)
    r1 = first.attribute(QUERY, SOURCES, ANSWER)
    assert first.cache.misses > 0 and first.cache.hits == 0
    files = sorted((cache_root / "datastore").rglob("*.npz"))
    assert len(files) == 8  # 3 + 3 + 2 source sentences
    # A new instance (empty memory LRU) reads every sentence from disk, encoding nothing.
    second = TokenShapley(cache_dir=cache_root)
    calls = []
    monkeypatch.setattr(second.encoder, "encode_before", lambda lists, *rest: calls.append(lists) or [])
    r2 = second.attribute(QUERY, SOURCES, ANSWER)
    assert calls == [] and second.cache.hits == 8 and second.cache.misses == 0
    np.testing.assert_allclose(r1.tokens.scores, r2.tokens.scores)
    # Corrupt two files (truncated, and flipped bytes): detected, rebuilt, same result.
    files[0].write_bytes(files[0].read_bytes()[:50])
    data = bytearray(files[1].read_bytes())
    data[len(data) // 2] ^= 0xFF
    files[1].write_bytes(bytes(data))
    third = TokenShapley(cache_dir=cache_root)
    r3 = third.attribute(QUERY, SOURCES, ANSWER)
    assert third.cache.corrupt == 2 and third.cache.misses == 2
    np.testing.assert_allclose(r1.tokens.scores, r3.tokens.scores)
    # The rebuilt files are valid again.
    fourth = TokenShapley(cache_dir=cache_root)
    fourth.attribute(QUERY, SOURCES, ANSWER)
    assert fourth.cache.corrupt == 0 and fourth.cache.hits == 8


def test_datastore_of_the_same_sources_is_remembered(cache_root, monkeypatch):
    from tokenshapley_rag import _indexing

    ts = TokenShapley(cache_dir=cache_root)
    builds = []
    real = ts.pipeline.builder.build
    monkeypatch.setattr(ts.pipeline.builder, "build", lambda srcs, **kw: builds.append(len(srcs)) or real(srcs, **kw))
    first = ts.attribute(QUERY, SOURCES, ANSWER)
    again = ts.attribute("Another question?", SOURCES, "Big Ben was completed in 1859.")
    assert builds == [3]  # the second call reused the first call's datastore
    np.testing.assert_allclose(first.tokens.scores, ts.attribute(QUERY, SOURCES, ANSWER).tokens.scores)
    assert again.citations and builds == [3]
    ts.attribute(QUERY, SOURCES[:2], ANSWER)  # other sources: built
    assert builds == [3, 2]
    # Only the last few source lists, and only datastores up to the size limit, are kept.
    for i in range(_indexing.DATASTORE_MEMO_ITEMS):
        ts.attribute(QUERY, [f"Source number {i} holds 1859."], ANSWER)
    ts.attribute(QUERY, SOURCES, ANSWER)
    assert builds[-1] == 3 and len(builds) == 2 + _indexing.DATASTORE_MEMO_ITEMS + 1
    monkeypatch.setattr(_indexing, "DATASTORE_MEMO_TOKENS", 5)
    big = TokenShapley(cache_dir=cache_root)
    big.attribute(QUERY, SOURCES, ANSWER)
    assert len(big.pipeline.builder._datastores) == 0


def test_known_sources_in_a_new_list_are_not_indexed_again(cache_root, monkeypatch):
    """A new list of sources the builder has indexed before (IndexedSource: spans, cache
    entries, classes, float32 keys and norms) is stacked from them, with no sentence cache
    lookup and no widening, into the datastore a fresh build gives: the same keys bit for
    bit and the same result."""
    from tokenshapley_rag import _datastore, _indexing

    ts = TokenShapley(cache_dir=cache_root)
    ts.attribute(QUERY, SOURCES, ANSWER)
    lookups = ts.cache.hits + ts.cache.misses
    widened = []
    real = _indexing.widened_keys
    monkeypatch.setattr(_indexing, "widened_keys", lambda *a: widened.append(a[1]) or real(*a))
    new_list = [SOURCES[2], SOURCES[0]]
    store = ts.pipeline.datastore_for(new_list)
    got = ts.attribute(QUERY, new_list, ANSWER).to_dict()
    assert ts.cache.hits + ts.cache.misses == lookups and widened == []
    ts.pipeline.forget()
    fresh = ts.pipeline.datastore_for(new_list)
    assert widened and ts.cache.hits + ts.cache.misses > lookups
    np.testing.assert_array_equal(store.keys, fresh.keys)
    assert store.sentences == fresh.sentences
    np.testing.assert_array_equal(store.token_class, fresh.token_class)
    assert got == ts.attribute(QUERY, new_list, ANSWER).to_dict()
    # A source list repeated twice, and an empty source, index like any other.
    twice = ts.pipeline.datastore_for([SOURCES[1], SOURCES[1], Source("empty", " ")])
    assert twice.size == 2 * ts.pipeline.datastore_for([SOURCES[1]]).size
    assert sorted({r.source_index for r in twice.sentences}) == [0, 1]
    # Only the last INDEXED_SOURCE_MEMO_TOKENS tokens' worth of sources are kept.
    monkeypatch.setattr(_indexing, "INDEXED_SOURCE_MEMO_TOKENS", 30)
    small = TokenShapley(cache_dir=cache_root)
    small.attribute(QUERY, SOURCES, ANSWER)
    kept = small.pipeline.builder._indexed_sources.values()
    assert 0 < sum(known.tokens for known in kept) <= 30 and len(kept) < len(SOURCES)
    entry = ts.cache.get(ts.encoder.cache_key, store.sentences[0].text)
    with pytest.raises(ValueError, match="source_keys"):  # one key for several entries
        _datastore.Datastore(store.sentences[:1], [entry], [store.token_class[: len(entry.ids)]],
                             source_keys=[(store.keys[:1], store._norms[:1])])


def test_unicode_offsets(ts):
    sources = ["東京は日本の首都です。人口は1400万人です。", "Le café « Chez Zoë » ouvre à 7 h. Ünïcödé naïve test ☕🎉."]
    answer = "Tokyo (東京) has 1400万人; Zoë's café ☕ opens at 7 h, na\u0308ive 🎉."
    res = ts.attribute("Tell me about Tokyo and the café.", sources, answer)
    assert res.citations, "expected keywords"
    for c in res.citations:
        assert answer[c.start : c.end] == c.text
        for a in c.sources:
            assert sources[int(a.source_id)][a.sentence_start : a.sentence_end] == a.sentence
    assert "Zoë" in [c.text for c in res.citations] or "Zoë's" in [c.text for c in res.citations]
    for a, b in res.tokens.offsets.tolist():
        assert 0 <= a <= b <= len(answer)


def test_long_sentence_is_cut_into_pieces(cache_root):
    ts = TokenShapley(cache_dir=cache_root, max_sentence_tokens=8)
    long = "Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau."
    res = ts.attribute("Which letters?", [long, BIGBEN], "The list has omicron and sigma.")
    pieces = [s for s in res.sentence_scores if s.source_id == "0"]
    assert len(pieces) >= 3
    assert "".join(long[s.sentence_start : s.sentence_end] for s in pieces).replace(" ", "") == long.replace(" ", "")
    assert _cite(res, "omicron").best.source_id == "0"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"response": ""}, EmptyTextError, "response is empty"),
        ({"response": "  \n\t "}, EmptyTextError, "response is empty"),
        ({"sources": []}, EmptyTextError, "sources is empty"),
        ({"sources": [EIFFEL, "   "]}, EmptyTextError, r"sources\[1\]"),
        ({"sources": [EIFFEL, 42]}, InvalidInputTypeError, r"sources\[1\] must be"),
        ({"sources": EIFFEL}, InvalidInputTypeError, "not a single string"),
        ({"sources": [Source("a", EIFFEL), Source("a", BIGBEN)]}, DuplicateSourceIdError, "'a'"),
        ({"response": 3.5}, InvalidInputTypeError, "response must be a str"),
        ({"query": None}, InvalidInputTypeError, "query must be a str"),
    ],
)
def test_bad_input(ts, kwargs, error, message):
    args = {"query": QUERY, "sources": SOURCES, "response": ANSWER, **kwargs}
    with pytest.raises(error, match=message):
        ts.attribute(**args)


def test_over_long_answer_is_refused_with_the_limit(ts):
    answer = "word " * (ts.encoder.max_length + 10)
    with pytest.raises(TextTooLongError, match=str(ts.encoder.max_length)):
        ts.attribute(QUERY, SOURCES, answer)


def test_unknown_models(tmp_path, monkeypatch):
    with pytest.raises(ModelNotFoundError, match="no-such-model-dir"):
        TokenShapley(model=str(tmp_path / "no-such-model-dir"), cache_dir=tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError, match="nonexistent-org/nonexistent-model"):
        TokenShapley(model="nonexistent-org/nonexistent-model", cache_dir=tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError):
        TokenShapley(model=str(tmp_path / "empty"), cache_dir=tmp_path)


def test_invalid_settings(ts):
    for kwargs in ({"k": 0}, {"m": 0}, {"gamma": -1.0}, {"match": "fuzzy"}, {"candidates": "all"}, {"layer": 99}, {"context_weight": -1.0}, {"context_scale": 0.0}, {"context_weight": float("nan")}):
        with pytest.raises(ValueError):
            TokenShapley(cache_dir=os.path.dirname(ts.cache.root), **kwargs)


def test_concurrent_calls_match_sequential(cache_root):
    # Fresh instance: token classes are created during the concurrent calls themselves.
    from concurrent.futures import ThreadPoolExecutor

    answers = [
        ANSWER,
        "Big Ben stands 96 metres tall in London.",
        "The Statue of Liberty was dedicated in 1886 on Liberty Island.",
        "The Eiffel Tower in Paris was completed on 31 March 1889.",
    ]
    shared = TokenShapley(cache_dir=cache_root)
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(lambda a: shared.attribute(QUERY, SOURCES, a), answers))
    alone = TokenShapley(cache_dir=cache_root)
    for answer, res in zip(answers, together):
        ref = alone.attribute(QUERY, SOURCES, answer)
        np.testing.assert_allclose(res.tokens.scores, ref.tokens.scores)
        assert [(c.text, c.best.source_id if c.best else None) for c in res.citations] == [
            (c.text, c.best.source_id if c.best else None) for c in ref.citations
        ]


def test_keyword_score_sums_the_keywords_span_scores(result):
    # A sentence's keyword_score sums the context games of the answer's cited keywords
    # (0 where its source is no candidate), so per source it adds up to the keywords'
    # span_scores (their finite values).
    per_source = {s.id: 0.0 for s in SOURCES}
    for sent in result.sentence_scores:
        per_source[sent.source_id] += sent.keyword_score
    want = {s.id: 0.0 for s in SOURCES}
    for c in result.citations:
        for sid, v in result.span_scores(c.start, c.end).items():
            want[sid] += v if np.isfinite(v) else 0.0
    assert per_source == pytest.approx(want)
    # The sentences the keywords are cited from rank first.
    ranked = sorted(result.sentence_scores, key=lambda s: -s.keyword_score)
    assert {(s.source_id, s.sentence) for s in ranked[:2]} == {
        (c.best.source_id, c.best.sentence) for c in result.citations if c.text in ("330 metres", "1859")
    }
    assert all("keyword_score" in s.to_dict() for s in result.sentence_scores)


def test_from_pretrained_loads_and_takes_the_method_parameters(cache_root, ts):
    from tokenshapley_rag import InvalidInputTypeError, TokenShapley

    with pytest.raises(InvalidInputTypeError, match=r"unexpected keyword\(s\) \['neighbours'\]"):
        TokenShapley.from_pretrained(neighbours=3)  # refused before any model is loaded
    built = TokenShapley.from_pretrained(ts.loaded.model, ts.loaded.tokenizer, layer=6, cache_dir=cache_root, m=7)
    assert (built.config["layer"], built.config["m"], built.config["k"]) == (6, 7, 1)
    assert {k: v for k, v in built.config.items() if k not in ("layer", "m")} == {
        k: v for k, v in TokenShapley(ts.loaded.model, ts.loaded.tokenizer, layer=6, cache_dir=cache_root, m=7).config.items()
        if k not in ("layer", "m")
    }


def test_a_claim_joined_by_a_semicolon_keeps_its_own_predicate(ts):
    # Two clauses from two sources: "Big Ben" is copied from the second source, and the
    # first clause's words ("is ... tall") must not be its predicate (README's example).
    res = ts.attribute(
        query="How tall is the Eiffel Tower?",
        sources=["The Eiffel Tower is 330 metres tall.", "Big Ben is in London."],
        response="The Eiffel Tower is 330 metres tall; Big Ben dates from 1859.",
    )
    status = {c.text: c.status for c in res.citations}
    assert status["Big Ben"] == "supported" and status["330 metres"] == "supported"
    assert status["1859"] == "unsupported"
    assert next(c for c in res.citations if c.text == "Big Ben").best.source_id == "1"
