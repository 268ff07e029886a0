"""neuron_conformance.opsuites.sample_selection: every sample is compared or counted under a reason, the budget bounds time."""

from __future__ import annotations

import pytest

from neuron_conformance.opsuites.sample_selection import (
    AFTER_FAILURE,
    NOT_REPLAYED,
    PAST_LIMIT,
    TIME_BUDGET,
    SampleSelection,
    require_compared,
)


class Clock:
    """A fake monotonic clock: each read returns ``now``; tests move it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _odd(sample):
    return "odd" if sample % 2 else None


def _fields(sel):
    f = sel.record_fields()
    assert f["samples"] + sum(f["samples_left_out"].values()) == f["samples_total"]
    return f


def test_every_sample_is_compared_or_left_out_with_its_reason():
    sel = SampleSelection(range(7), reject=_odd)
    assert [i for i, _ in sel] == [0, 2, 4, 6]
    assert _fields(sel) == {"samples": 4, "samples_total": 7, "samples_left_out": {"odd": 3}}


def test_the_budget_leaves_out_the_rest_but_the_first_sample_is_always_compared():
    clock = Clock()
    sel = SampleSelection(range(6), budget=1.0, clock=clock)
    taken = []
    for index, _ in sel:
        taken.append(index)
        clock.now += 0.6  # each sample takes 0.6 s: after two the 1 s budget is spent
    assert taken == [0, 1]
    assert _fields(sel)["samples_left_out"] == {TIME_BUDGET: 4}

    sel = SampleSelection(range(3), budget=0.001, clock=clock)
    for _ in sel:
        clock.now += 5.0
    assert _fields(sel) == {"samples": 1, "samples_total": 3, "samples_left_out": {TIME_BUDGET: 2}}


def test_rejected_samples_keep_their_reason_after_the_budget_is_spent():
    clock = Clock()
    sel = SampleSelection(range(5), reject=_odd, budget=1.0, clock=clock)
    for _ in sel:
        clock.now += 2.0
    assert _fields(sel)["samples_left_out"] == {"odd": 2, TIME_BUDGET: 2}


def test_replay_takes_only_its_index_and_ignores_the_budget():
    clock = Clock()
    clock.now = 100.0
    sel = SampleSelection(range(5), budget=0.001, only=3, clock=clock)
    assert [i for i, _ in sel] == [3]
    assert _fields(sel)["samples_left_out"] == {NOT_REPLAYED: 4}
    sel = SampleSelection(range(5), reject=_odd, only=3)
    assert list(sel) == [] and _fields(sel)["samples_left_out"] == {NOT_REPLAYED: 4, "odd": 1}
    with pytest.raises(pytest.skip.Exception, match="replayed sample 3 is not compared .left out: odd"):
        require_compared(sel, "op float32")
    sel = SampleSelection(range(2), only=7)
    list(sel)
    with pytest.raises(pytest.skip.Exception, match="no such sample: the OpInfo has 2"):
        require_compared(sel, "op float32")


def test_leave_out_and_drain_keep_the_counts_whole():
    sel = SampleSelection(range(6))
    for index, _ in sel:
        if index == 1:
            sel.leave_out("no differentiable output")
        if index == 2:
            sel.drain()  # a failure at sample 2 ends the test
            break
    assert _fields(sel) == {
        "samples": 2,
        "samples_total": 6,
        "samples_left_out": {AFTER_FAILURE: 3, "no differentiable output": 1},
    }


def test_a_test_with_nothing_compared_is_skipped_naming_the_reasons():
    sel = SampleSelection([1, 3], reject=_odd)
    list(sel)
    with pytest.raises(pytest.skip.Exception, match=r"no sample of the 2 .*left out: 2 odd"):
        require_compared(sel, "op float32")
    sel = SampleSelection([0])
    list(sel)
    require_compared(sel, "op float32")  # one compared: no skip


def test_limit_caps_the_samples_handed_out_and_counts_the_rest():
    sel = SampleSelection(range(5), limit=2)
    assert [i for i, _ in sel] == [0, 1]
    assert _fields(sel) == {"samples": 2, "samples_total": 5, "samples_left_out": {PAST_LIMIT: 3}}
    replay = SampleSelection(range(5), limit=2, only=4)  # a replayed index past the limit is still run
    assert [i for i, _ in replay] == [4]
