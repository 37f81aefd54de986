"""Step timings: every step the pipeline marks is recorded when asked for, and only then."""

import uuid

import pytest

from tokenshapley_rag._timing import STEPS, StepTimes, record_steps, step


def test_steps_record_only_inside_a_recording():
    with step("games"):  # no recording: nothing to add to, nothing raised
        pass
    with record_steps() as outer:
        with step("games"):
            with record_steps() as inner:
                with step("assemble"):
                    pass
    assert (outer.calls, inner.calls) == ({"games": 1}, {"assemble": 1})
    times = StepTimes()
    times.add("index", 0.25)
    times.add("index", 0.5)
    assert (times.seconds, times.calls) == ({"index": 0.75}, {"index": 2})


@pytest.mark.slow
def test_attribute_and_stream_mark_every_step(ts):
    # Sentences no cache holds yet (a fresh word), so the sources are encoded and stored.
    fresh = uuid.uuid4().hex[:8]
    sources = [f"The Eiffel Tower is 330 metres tall, says report {fresh}.", "Big Ben was completed in 1859."]
    answer = "The Eiffel Tower is 330 metres tall. Big Ben was completed in 1859."
    with record_steps() as cold:
        ts.attribute("How tall?", sources, answer)
    # Every answer sentence says something, so the question's game is not played.
    assert set(cold.calls) == set(STEPS) - {"question_game"}
    assert all(cold.seconds[s] >= 0.0 for s in cold.calls)
    with record_steps() as warm:  # the same sources: their datastore is remembered
        ts.attribute("How tall?", sources, answer)
    assert set(warm.calls) == set(STEPS[5:]) - {"question_game"}
    stream = ts.stream("How tall?", sources)
    with record_steps() as streamed:
        stream.feed(answer[:40])
        stream.finish()
    # The streamed answer ends "... tall. Big": a bare sentence, whose predicate is the
    # question's game, played once.
    assert set(streamed.calls) == set(STEPS[5:]) and streamed.calls["question_game"] == 1
    assert streamed.calls["assemble"] >= 2  # the first sentence as it completed, then the whole answer


@pytest.mark.slow
def test_the_question_game_marks_only_itself(ts):
    sources = ["Marie Curie was born in Warsaw in 1867.", "Lise Meitner was born in Vienna in 1878."]
    with record_steps() as warm:
        ts.attribute("Where was Marie Curie born?", sources, "Vienna")
    with record_steps() as again:
        ts.attribute("Where was Marie Curie born?", sources, "Vienna")
    # The answer's token games once each; the question's inside "question_game" only.
    assert again.calls["question_game"] == 1
    assert again.calls["games"] == again.calls["candidates"] == again.calls["answer_classes"] == 1
    assert warm.calls["question_game"] == 1
