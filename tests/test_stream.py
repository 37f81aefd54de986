"""Streaming attribution: sentences cited as they end, final result equal to attribute()."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tokenshapley_rag import (
    EmptyTextError,
    InvalidInputTypeError,
    SentenceCitations,
    Source,
    StreamStateError,
    TextTooLongError,
    TokenShapley,
)
from tokenshapley_rag._datastore import _share_prefix_keys

pytestmark = pytest.mark.slow

SOURCES = [
    Source("eiffel", "The Eiffel Tower is in Paris. The tower is 330 metres tall and was completed in 1889."),
    Source("bigben", "Big Ben is in London. The tower was completed in 1859. It is 96 metres tall."),
    Source("statue", "The Statue of Liberty stands in New York Harbor. It was dedicated in 1886."),
]
QUERY = "Tell me about the Eiffel Tower and Big Ben."
ANSWER = (
    "The Eiffel Tower is in Paris and is 330 metres tall. "
    "Big Ben is in London; its tower was completed in 1859. "
    "Both are famous towers"
)
SENTENCE_ENDS = [ANSWER.index("tall.") + 5, ANSWER.index("1859.") + 5, len(ANSWER)]


def _deltas(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _stream(ts: TokenShapley, deltas: list[str], query: str = QUERY, sources=SOURCES):
    """Feed ``deltas``; return the stream and [(chars received, sentence)] per sentence."""
    stream = ts.stream(query=query, sources=sources)
    seen: list[tuple[int, SentenceCitations]] = []
    received = 0
    for d in deltas:
        received += len(d)
        seen.extend((received, s) for s in stream.feed(d))
    seen.extend((received, s) for s in stream.finish())
    return stream, seen


def _same_citations(a, b, atol=1e-6):
    assert [(c.text, c.start, c.end, c.supported) for c in a] == [(c.text, c.start, c.end, c.supported) for c in b]
    for x, y in zip(a, b):
        assert [(s.source_id, s.sentence_index) for s in x.sources] == [(s.source_id, s.sentence_index) for s in y.sources]
        np.testing.assert_allclose([s.score for s in x.sources], [s.score for s in y.sources], atol=atol)
        assert x.support == pytest.approx(y.support, abs=atol)


@pytest.mark.parametrize("size", [1, 7, 40])
def test_stream_equals_attribute_and_cites_each_sentence_when_it_ends(ts, size):
    stream, seen = _stream(ts, _deltas(ANSWER, size))
    full = ts.attribute(QUERY, SOURCES, ANSWER)
    result = stream.result
    assert result.response == ANSWER
    _same_citations(result.citations, full.citations)
    np.testing.assert_allclose(result.tokens.scores, full.tokens.scores, atol=1e-6)
    assert result.source_scores == pytest.approx(full.source_scores, abs=1e-5)

    # Every sentence once, in order, with the citations the final result has for it.
    assert [s.index for _, s in seen] == [0, 1, 2]
    assert [(s.start, s.end) for _, s in seen] == [(0, SENTENCE_ENDS[0]), (SENTENCE_ENDS[0] + 1, SENTENCE_ENDS[1]), (SENTENCE_ENDS[1] + 1, len(ANSWER))]
    for _, s in seen:
        assert s.text == ANSWER[s.start : s.end]
        _same_citations(s.citations, [c for c in full.citations if s.start <= c.start < s.end])
    # A sentence is returned as soon as the next one has begun (its first letter), and
    # not before: sentences 0 and 1 arrive mid-stream, the last one at finish().
    for (received, s), end in zip(seen[:2], SENTENCE_ENDS):
        first_letter_of_next = end + 2  # ". B"
        assert first_letter_of_next <= received < first_letter_of_next + size
    assert seen[2][0] == len(ANSWER)
    # Known keywords, known sources.
    best = {c.text: c.best.source_id for _, s in seen for c in s.citations if c.best}
    assert best["Paris"] == "eiffel" and best["330 metres"] == "eiffel"
    assert best["London"] == "bigben" and best["1859"] == "bigben"


def test_stream_with_k3_and_auto_gamma_matches_attribute():
    # gamma="auto" is set per answer token, so with K > 1 (where gamma matters) a sentence's
    # values still cannot depend on the sentences after it.
    ts3 = TokenShapley(k=3, use_disk_cache=False)
    stream, seen = _stream(ts3, _deltas(ANSWER, 9))
    full = ts3.attribute(QUERY, SOURCES, ANSWER)
    _same_citations(stream.result.citations, full.citations)
    for _, s in seen:
        _same_citations(s.citations, [c for c in full.citations if s.start <= c.start < s.end])


def test_prefix_is_never_encoded_again(ts, monkeypatch):
    stream = ts.stream(query=QUERY, sources=SOURCES)  # datastore built before counting
    fed: list[int] = []
    real = ts.encoder._states

    def counting(ids, mask, cache=None):
        fed.append(int(ids.shape[1]))
        return real(ids, mask, cache)

    monkeypatch.setattr(ts.encoder, "_states", counting)
    for d in _deltas(ANSWER, 5):
        stream.feed(d)
    stream.finish()
    prompt = len(ts.encoder.prompt_ids(QUERY))
    n_answer = len(ts.encoder.tokenize(ANSWER).ids)
    # The prompt once, then each answer token once (the last one is never an input).
    assert fed[0] == prompt
    assert sum(fed) == prompt + n_answer - 1
    assert len(fed) == 4  # prompt, sentence 1, sentence 2, the rest at finish()
    assert stream._encoding.restarts == 0


def test_response_encoding_restarts_when_tokenization_changes(ts):
    enc = ts.encoder.response_encoding(QUERY)
    a = ts.encoder.tokenize("The tower is 330 metres ta.").ids
    b = ts.encoder.tokenize("The tower is 330 metres tall.").ids
    assert not np.array_equal(a[:-1], b[: len(a) - 1])  # " ta" and " tall": other tokens
    enc.states(a)
    states = enc.states(b)
    assert enc.restarts == 1
    expected = ts.encoder.encode_response(QUERY, ts.encoder.tokenize("The tower is 330 metres tall."))
    np.testing.assert_allclose(states, expected, atol=2e-4)
    # A shorter request after a longer one is served from what is known.
    np.testing.assert_array_equal(enc.states(b[:3]), states[:3])
    assert enc.restarts == 1


def test_concurrent_streams_keep_their_own_citations(ts):
    answers = {
        "eiffel": "The Eiffel Tower is 330 metres tall. It is in Paris.",
        "bigben": "Big Ben was completed in 1859. It is in London.",
        "statue": "The Statue of Liberty was dedicated in 1886. It stands in New York Harbor.",
    }

    def run(key):
        _, seen = _stream(ts, _deltas(answers[key], 3))
        return key, [(c.text, c.best.source_id) for _, s in seen for c in s.citations if c.best]

    with ThreadPoolExecutor(max_workers=3) as pool:
        out = dict(pool.map(run, list(answers) * 2))
    assert ("330 metres", "eiffel") in out["eiffel"] and ("Paris", "eiffel") in out["eiffel"]
    assert ("1859", "bigben") in out["bigben"] and ("London", "bigben") in out["bigben"]
    assert ("1886", "statue") in out["statue"]
    for key, cites in out.items():
        assert {src for _, src in cites} == {key}


def test_stream_errors(ts):
    stream = ts.stream(query=QUERY, sources=SOURCES)
    with pytest.raises(InvalidInputTypeError, match="delta must be a str"):
        stream.feed(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(StreamStateError, match="no result yet"):
        stream.result
    stream.feed("  \n")
    with pytest.raises(EmptyTextError, match="streamed answer is empty"):
        stream.finish()
    stream.feed("It is in Paris.")
    assert [s.text for s in stream.finish()] == ["It is in Paris."]
    with pytest.raises(StreamStateError, match="finished"):
        stream.feed("More.")
    with pytest.raises(StreamStateError, match="already called"):
        stream.finish()
    with pytest.raises(InvalidInputTypeError, match="query must be a str"):
        ts.stream(query=None, sources=SOURCES)  # type: ignore[arg-type]

    long_stream = ts.stream(query=QUERY, sources=SOURCES)
    long_stream.feed("Paris is big. ")  # one sentence in, fine
    with pytest.raises(TextTooLongError, match="over the model's context"):
        long_stream.feed("Paris is big. " * 3000 + "End")


def test_sentences_with_a_shared_start_share_their_keys():
    keys = np.arange(7 * 2, dtype=np.float32).reshape(7, 2)
    ids = [np.array([5, 6, 7]), np.array([5, 6, 9, 1]), np.array([], dtype=np.int64)]
    _share_prefix_keys(keys, ids)
    # Tokens 5, 6 in common: the keys before tokens 0, 1, 2 are equal; before token 3 not.
    np.testing.assert_array_equal(keys[3:6], keys[0:3])
    assert keys[6].tolist() == [12.0, 13.0]
