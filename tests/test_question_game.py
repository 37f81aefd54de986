"""The question's game: the predicate of an answer that says nothing but values
(docs/method.md §8, "Bare answers")."""

import numpy as np

SOURCES = [
    {"id": "curie", "text": "Marie Curie was born in Warsaw in 1867. She studied physics in Paris."},
    {"id": "meitner", "text": "Lise Meitner was born in Vienna in 1878. She died in 1968 in Cambridge."},
]
QUESTION = "Where was Marie Curie born?"


def _counting_game(ts, store, query):
    calls = []
    game = ts.pipeline.question_game_for(store, query)

    def counted():
        calls.append(1)
        return game()

    return counted, calls


def test_the_question_game_is_the_sum_of_the_questions_token_games(ts):
    store = ts.pipeline.datastore_for(ts.check_context(SOURCES))
    _, prompt_states = ts.encoder.encode_response_and_prompt(QUESTION, ts.encoder.tokenize("Vienna"))
    from_answer_pass = ts.encoder.question_states(QUESTION, prompt_states)
    on_its_own = (tokens := ts.encoder.tokenize(QUESTION)), ts.encoder.encode_before([tokens.ids])[0]
    for question in (from_answer_pass, None):
        values, weight = ts.pipeline.question_game(store, QUESTION, question)
        # Oracle: each question token's game played over the datastore (its states from the
        # answer's pass, or, without them, the question encoded on its own), summed.
        q_tokens, q_states = on_its_own if question is None else question
        per_token = ts.pipeline.score_tokens(store, QUESTION, q_tokens, q_states).scores
        assert weight == len(q_tokens.ids) and values.shape == (len(store.sentences),)
        np.testing.assert_allclose(values, per_token.sum(axis=0), rtol=1e-12, atol=1e-12)
        # Curie's birth sentence states the question best.
        assert store.sentences[int(np.argmax(values))].text.startswith("Marie Curie was born")


def test_the_question_game_is_played_only_for_a_bare_answer_and_once(ts):
    from tokenshapley_rag._token_game import TokenValues

    srcs = ts.check_context(SOURCES)
    store = ts.pipeline.datastore_for(srcs)
    for answer, played in (("Marie Curie was born in Vienna.", 0), ("Vienna. Warsaw.", 1)):
        game, calls = _counting_game(ts, store, QUESTION)
        tokens = ts.encoder.tokenize(answer)
        values: TokenValues = ts.pipeline.score_tokens(store, answer, tokens, ts.encoder.encode_response(QUESTION, tokens))
        result = ts.pipeline.assemble_citations(QUESTION, answer, srcs, store, tokens, values, ts.config, game)
        assert len(calls) == played, answer
    # The second bare answer's values: Vienna is Lise Meitner's birthplace, Warsaw Curie's.
    assert [(c.text, c.status) for c in result.citations] == [("Vienna", "contradicted"), ("Warsaw", "supported")]
    assert result.citations[0].conflict.source_id == "curie"
    assert ts.pipeline.question_game_for(store, "  ") is None


def test_without_a_question_a_bare_answer_is_supported_where_held(ts):
    res = ts.attribute(query="", sources=SOURCES, response="Vienna")
    assert [(c.text, c.status, c.best.source_id) for c in res.citations] == [("Vienna", "supported", "meitner")]


def test_the_question_states_come_from_the_answers_own_pass(ts):
    enc = ts.encoder
    answer = enc.tokenize("Vienna")
    states, prompt_states = enc.encode_response_and_prompt(QUESTION, answer)
    np.testing.assert_array_equal(states, enc.encode_response(QUESTION, answer))
    prompt = enc.prompt_ids(QUESTION)
    assert prompt_states.shape == (len(prompt), states.shape[1])
    tokens, positions = enc.question_tokens(QUESTION)
    # The question's tokens as the prompt holds them, with offsets into the question.
    np.testing.assert_array_equal(prompt[positions], tokens.ids)
    assert "".join(QUESTION[a:b] for a, b in tokens.offsets) == QUESTION
    got_tokens, got_states = enc.question_states(QUESTION, prompt_states)
    np.testing.assert_array_equal(got_states, prompt_states[positions - 1])
    # A stream's encoding keeps the same prompt states (the same pass, up to rounding).
    streamed = enc.response_encoding(QUESTION)
    streamed.states(answer.ids)
    np.testing.assert_allclose(streamed.prompt_states, prompt_states, rtol=1e-4, atol=1e-4)
    assert enc.question_states(QUESTION, None) is None


def test_the_question_is_found_in_the_user_turn_not_the_system_message(ts):
    # SmolLM2's template opens with a system message ("You are a helpful AI assistant ..."):
    # a question made of its words is still read in the user turn.
    enc = ts.encoder
    for question in ("You", "a helpful AI assistant"):
        tokens, positions = enc.question_tokens(question)
        prompt = enc.prompt_ids(question)
        user_turn = enc.loaded.tokenizer.decode(prompt[: positions[0]])
        assert user_turn.endswith("user\n"), user_turn[-40:]
        np.testing.assert_array_equal(prompt[positions], tokens.ids)
