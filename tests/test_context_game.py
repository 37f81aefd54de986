"""The keyword game's aggregation rules, on hand-made arrays (no model)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenshapley_rag import context_scores, context_weights
import re

from tokenshapley_rag._context_game import context_weight_rows, span_games
from tokenshapley_rag._text_search import SentenceTexts, sentences_with_sequence

# 3 answer tokens in one answer sentence; 3 datastore sentences: source 0 has sentences
# 0 and 1, source 1 has sentence 2.
SCORES = np.array(
    [
        [0.2, 0.0, 0.5],  # token 0 (the span)
        [0.3, 0.0, 0.4],  # token 1 (the span)
        [0.9, 0.1, 0.0],  # token 2 (context)
    ]
)
CARRIES = np.array([[True, False, True], [True, False, True], [True, True, False]])
SENTENCE_SOURCE = np.array([0, 0, 1])
ANSWER_SENTENCE = np.zeros(3, dtype=np.int64)
SPAN = np.array([0, 1])


def test_context_decides_among_sources_holding_a_token():
    in_context, own = context_scores(SCORES, CARRIES, SENTENCE_SOURCE, ANSWER_SENTENCE, SPAN, 0.5, 1.0)
    w = context_weights(ANSWER_SENTENCE, SPAN, 0.5, 1.0)
    assert w.tolist() == pytest.approx([1.0, 1.0, 0.5 * np.exp(-1.0)])
    np.testing.assert_allclose(own, [0.5, 0.0, 0.9])
    np.testing.assert_allclose(in_context, w @ SCORES)  # both sources hold a span token


def test_verbatim_holders_are_the_only_candidates():
    verbatim = np.array([False, False, True])  # only source 1 holds the span word for word
    in_context, own = context_scores(SCORES, CARRIES, SENTENCE_SOURCE, ANSWER_SENTENCE, SPAN, 0.5, 1.0, verbatim)
    w = context_weights(ANSWER_SENTENCE, SPAN, 0.5, 1.0)
    assert in_context[0] == in_context[1] == -np.inf
    assert in_context[2] == pytest.approx(w @ SCORES[:, 2])
    np.testing.assert_allclose(own, [0.5, 0.0, 0.9])  # support is judged on own values, unchanged
    # No holder anywhere: back to the token rule.
    none, _ = context_scores(SCORES, CARRIES, SENTENCE_SOURCE, ANSWER_SENTENCE, SPAN, 0.5, 1.0, np.zeros(3, bool))
    np.testing.assert_allclose(none, w @ SCORES)
    # Without context the candidates' score is the plain sum.
    plain, _ = context_scores(SCORES, CARRIES, SENTENCE_SOURCE, ANSWER_SENTENCE, SPAN, 0.0, 1.0, verbatim)
    assert plain.tolist() == [-np.inf, -np.inf, pytest.approx(0.9)]


def test_most_words_rule_for_spans_held_nowhere():
    # Two words (tokens 0 and 1); source 0 holds both, source 1 only word 1 (token 1).
    carries = np.array([[True, False, False], [True, False, True], [True, True, False]])
    words = [np.array([0]), np.array([1])]
    w = context_weights(ANSWER_SENTENCE, SPAN, 0.5, 1.0)
    none = np.zeros(3, bool)
    any_token, own = context_scores(SCORES, carries, SENTENCE_SOURCE, ANSWER_SENTENCE, SPAN, 0.5, 1.0, none)
    np.testing.assert_allclose(any_token, w @ SCORES)  # both sources hold a span token
    most, _ = context_scores(SCORES, carries, SENTENCE_SOURCE, ANSWER_SENTENCE, SPAN, 0.5, 1.0, none, words)
    np.testing.assert_allclose(most, [(w @ SCORES)[0], (w @ SCORES)[1], own[2]])  # source 1 keeps its own score
    # A span some source holds word for word: the verbatim rule, words change nothing.
    verbatim = np.array([False, False, True])
    a, _ = context_scores(SCORES, carries, SENTENCE_SOURCE, ANSWER_SENTENCE, SPAN, 0.5, 1.0, verbatim, words)
    b, _ = context_scores(SCORES, carries, SENTENCE_SOURCE, ANSWER_SENTENCE, SPAN, 0.5, 1.0, verbatim)
    np.testing.assert_array_equal(a, b)


def test_span_words():
    from tokenshapley_rag._text_search import span_words

    text = "top with blistered cherry tomatoes."
    offsets = np.array([[0, 3], [3, 8], [8, 11], [11, 18], [18, 25], [25, 34], [34, 35]])
    assert [x.tolist() for x in span_words(text, offsets, 9, 35)] == [[2, 3], [4], [5]]


def _brute_force(token_class, sentence_of, n_sentences, seq):
    out = np.zeros(n_sentences, dtype=bool)
    for j in range(n_sentences):
        cls = [int(c) for c, s in zip(token_class, sentence_of) if s == j]
        out[j] = any(cls[i : i + len(seq)] == list(seq) for i in range(len(cls) - len(seq) + 1)) if len(seq) else False
    return out


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 6), min_size=1, max_size=5),
    data=st.data(),
)
def test_sentences_with_sequence_matches_brute_force(sizes, data):
    n = sum(sizes)
    token_class = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), dtype=np.int64)
    sentence_of = np.repeat(np.arange(len(sizes)), sizes).astype(np.int64)
    seq = np.array(data.draw(st.lists(st.integers(0, 3), min_size=0, max_size=4)), dtype=np.int64)
    got = sentences_with_sequence(token_class, sentence_of, len(sizes), seq)
    np.testing.assert_array_equal(got, _brute_force(token_class, sentence_of, len(sizes), seq))


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("voiced", [True, False, True, False, False]),  # "(voiced by", not "unvoiced"
        ("(voiced", [False, False, True, False, False]),  # punctuation is part of the phrase
        ("Selena  GOMEZ", [True, False, True, False, False]),  # case and whitespace folded
        ("sinoatrial node (SA node)", [False, False, False, True, False]),
        ('"Ukridge Rounds a Nasty Corner"', [False, False, False, False, True]),
        ("ＵＫＲＩＤＧＥ", [False, False, False, False, True]),  # NFKC: full-width letters
        ("Gomez. An", [False, False, False, False, False]),  # never across two sentences
        ("$3.5", [False, False, False, False, False]),  # "$" is kept: it changes the keyword
        ("...", [False, False, False, False, False]),  # nothing left to match
    ],
)
def test_sentence_texts_find_phrases_word_for_word(phrase, expected):
    texts = SentenceTexts.of(
        [
            "Voiced by Selena Gomez.",
            "An unvoiced consonant costs 3.5 dollars.",
            "Mavis Dracula (voiced by Selena Gomez) is Dracula's daughter.",
            "Norepinephrine acts on the cells of the sinoatrial node (SA node), and so on.",
            '"Ukridge Rounds a Nasty Corner" is a short story.',
        ]
    )
    assert texts.holding(phrase).tolist() == expected


@settings(max_examples=300, deadline=None)
@given(
    sentences=st.lists(st.text(alphabet="ab .,", max_size=12), min_size=1, max_size=5),
    phrase=st.text(alphabet="ab .,", max_size=5),
    open_start=st.booleans(),
    open_end=st.booleans(),
)
def test_sentence_texts_match_brute_force(sentences, phrase, open_start, open_end):
    """Oracle: the normalized phrase occurs in the normalized
    sentence with no word character right before or after it."""
    norm = lambda t: " ".join(t.split())  # noqa: E731  (ASCII alphabet: NFKC and casefold are no-ops)
    needle = norm(phrase)
    expected = []
    for sent in sentences:
        hay = norm(sent)
        hit = False
        for i in range(len(hay) - len(needle) + 1) if needle else ():
            if hay[i : i + len(needle)] != needle:
                continue
            before_ok = open_start or not needle[0].isalnum() or i == 0 or not re.match(r"\w", hay[i - 1])
            j = i + len(needle)
            after_ok = open_end or not needle[-1].isalnum() or j == len(hay) or not re.match(r"\w", hay[j])
            hit = hit or (before_ok and after_ok)
        expected.append(hit)
    got = SentenceTexts.of(sentences).holding(phrase, open_start=open_start, open_end=open_end)
    assert got.tolist() == expected


def _span_games_numpy(scores, carries, sentence_source, answer_sentence, spans, weight, scale, verbatim=None, words=None):
    """The keyword games in plain numpy, matrix by matrix (the implementation the
    compiled span_games replaced): the oracle of the property test below."""
    n_tok, n_sent = scores.shape
    member = np.zeros((len(spans), n_tok), dtype=bool)
    for r, m in enumerate(spans):
        member[r, m] = True
    own = member.astype(scores.dtype) @ scores
    if n_sent == 0:
        return own, own, np.zeros(own.shape, dtype=bool)
    nonempty = member.any(axis=1)
    holds = member @ carries  # bool matmul: some member token's class is in the sentence
    exact = np.zeros(len(spans), dtype=bool)
    if verbatim is not None:
        exact = verbatim.any(axis=1) & nonempty
        holds = np.where(exact[:, None], verbatim, holds)
    in_context = context_weight_rows(answer_sentence, spans, weight, scale) @ scores if weight > 0 else own
    # Candidates: the sentences of every source holding the span.
    in_source = sentence_source[:, None] == np.arange(int(sentence_source.max()) + 1)[None, :]
    candidate_source = holds @ in_source
    if words is not None:
        # A span no source holds word for word (a paraphrase): the sources that hold the
        # most of its words, rather than every source that shares one token with it (a
        # token of punctuation included).
        for r in np.flatnonzero(~exact & nonempty).tolist():
            if not words[r]:
                continue
            word_tokens = np.zeros((len(words[r]), n_tok), dtype=bool)
            for i, w in enumerate(words[r]):
                word_tokens[i, w] = True
            count = ((word_tokens @ carries) @ in_source).sum(axis=0)
            candidate_source[r] = (count == count.max()) & (count.max() > 0)
    candidate = candidate_source[:, sentence_source] & nonempty[:, None]
    rest = np.where(exact[:, None], -np.inf, own)
    return np.where(candidate, in_context, rest), own, holds


@settings(max_examples=300, deadline=None)
@given(
    n_tok=st.integers(1, 12),
    sentence_source=st.lists(st.integers(0, 3), min_size=0, max_size=6),
    n_spans=st.integers(0, 5),
    weight=st.sampled_from([0.0, 0.5, 1.0]),
    use_verbatim=st.booleans(),
    use_words=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_span_games_equal_the_numpy_matrices(n_tok, sentence_source, n_spans, weight, use_verbatim, use_words, seed):
    rng = np.random.default_rng(seed)
    n_sent = len(sentence_source)
    sentence_source = np.array(sentence_source, dtype=np.int64)
    scores = np.round(rng.normal(size=(n_tok, n_sent)), 2)
    carries = rng.random((n_tok, n_sent)) < 0.4
    answer_sentence = np.sort(rng.integers(0, 3, size=n_tok))
    spans = [np.sort(rng.choice(n_tok, size=rng.integers(0, min(n_tok, 4) + 1), replace=False)) for _ in range(n_spans)]
    verbatim = (rng.random((n_spans, n_sent)) < 0.2) if use_verbatim else None
    words = None
    if use_words:
        words = [None if rng.random() < 0.2 else [np.sort(rng.choice(n_tok, size=rng.integers(1, min(n_tok, 2) + 1), replace=False))
                                                  for _ in range(rng.integers(0, 3))] for _ in range(n_spans)]
    got = span_games(scores, carries, sentence_source, answer_sentence, spans, weight, 4.0, verbatim, words)
    if n_sent == 0:
        assert all(g.shape == (n_spans, 0) for g in got)
        return
    want = _span_games_numpy(scores, carries, sentence_source, answer_sentence, spans, weight, 4.0, verbatim, words)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_span_games_refuse_bad_shapes_and_indices():
    # The games run compiled, without index checks: bad input must fail loudly before.
    with pytest.raises(ValueError, match="spans hold token indices outside"):
        context_scores(SCORES, CARRIES, SENTENCE_SOURCE, ANSWER_SENTENCE, np.array([0, 3]), 0.5, 1.0)
    with pytest.raises(ValueError, match="carries must have shape"):
        context_scores(SCORES, CARRIES[:2], SENTENCE_SOURCE, ANSWER_SENTENCE, SPAN, 0.5, 1.0)
    with pytest.raises(ValueError, match="verbatim must have shape"):
        context_scores(SCORES, CARRIES, SENTENCE_SOURCE, ANSWER_SENTENCE, SPAN, 0.5, 1.0, np.array([True]))
    with pytest.raises(ValueError, match="words hold token indices outside"):
        context_scores(SCORES, CARRIES, SENTENCE_SOURCE, ANSWER_SENTENCE, SPAN, 0.5, 1.0, np.zeros(3, bool), [np.array([7])])
