"""The success model that steers speculation learns by strategy, chunk size and the
verdict before, each level falling back on the one above it."""

from __future__ import annotations

from reducer.core.predictor import START, SuccessModel, size_class


def test_size_classes_are_powers_of_two():
    assert [size_class(c) for c in (1, 2, 3, 4, 7, 8)] == [1, 2, 2, 3, 3, 4]


def test_big_chunks_that_failed_are_expected_to_fail_where_single_edits_pass():
    model = SuccessModel()
    for _ in range(4):
        model.record("drop", 12, False, False)
        model.record("drop", 1, False, True)
    assert model.p("drop", 12, False) < 0.2 < 0.8 < model.p("drop", 1, False)
    assert model.p("drop", 9, False) == model.p("drop", 12, False)  # same size class


def test_the_verdict_before_is_learnt():
    model = SuccessModel()
    for _ in range(4):  # a sweep that alternates: a cut, then a failure at the same place
        model.record("drop", 1, False, True)
        model.record("drop", 1, True, False)
    assert model.p("drop", 1, True) < 0.3 < 0.7 < model.p("drop", 1, False)


def test_strategies_are_apart_and_an_unseen_one_starts_from_the_run():
    model = SuccessModel()
    assert model.p("any", 1, False) == START
    for _ in range(6):
        model.record("good", 4, False, True)
        model.record("bad", 4, False, False)
    assert model.p("good", 4, False) > 0.7 and model.p("bad", 4, False) < 0.3
    assert 0.3 < model.p("new", 4, False) < 0.7  # the run's rate: half of its verdicts passed


def test_a_repeated_failure_is_counted_apart_and_expected_to_fail_again():
    model = SuccessModel()
    for _ in range(4):  # fresh single edits of this strategy mostly pass...
        model.record("drop", 1, False, True)
    fresh = model.p("drop", 1, False)
    assert fresh > 0.7
    assert model.p("drop", 1, False, again=True) < 0.2  # ...one that failed before, from its own start
    for _ in range(6):  # repeats that fail are learnt apart: the fresh rate does not move
        model.record("drop", 1, False, False, again=True)
    assert model.p("drop", 1, False) == fresh
    assert model.p("drop", 1, False, again=True) < 0.1
