"""Which OpInfo samples a deeper suite compares, and which it leaves out and why.

The variants, layouts and autograd suites take every sample of an OpInfo (``op.sample_inputs``) that
exercises what they check, not the first few: a suite gives a predicate naming why a sample cannot serve
it (``"0-dim input"``, ``"no tensor requiring grad"``), and a per-test time budget (``--conformance-sample-budget``)
bounds the few slow ops. Nothing is dropped silently: every sample of the OpInfo is either compared or
counted under a reason, and the three numbers go into the test's result record (``samples``,
``samples_total``, ``samples_left_out``; docs/architecture.md, "Result records").
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Callable, Iterable, Iterator

import pytest

from neuron_conformance.conformance.survival.crash_files import note_sample
from neuron_conformance.conformance.verdict.expectations import TIME_BUDGET

__all__ = ["AFTER_FAILURE", "NOT_REPLAYED", "PAST_LIMIT", "TIME_BUDGET", "SampleSelection", "require_compared"]

AFTER_FAILURE = "after the failing sample"
"""Reason of the samples not reached because an earlier sample failed (the test stops at its first failure)."""

PAST_LIMIT = "past the per-test limit"
"""Reason of the samples after the first ``limit`` a selection hands out (a count cap, e.g. error inputs)."""

NOT_REPLAYED = "not the replayed sample"
"""Reason of the other samples under ``--conformance-sample N``."""


class SampleSelection:
    """The ``(index, sample)`` pairs a test compares, handed out lazily; the rest counted by reason.

    Args:
        samples: the OpInfo's samples in order (an iterable of ``SampleInput``); indices are positions in
            it, the ones ``--conformance-sample N`` replays.
        reject: ``sample -> reason`` (a short phrase) when the sample cannot serve the suite, else None.
        budget: seconds (wall clock, from the first sample handed out) after which the remaining eligible
            samples are left out with :data:`TIME_BUDGET`; None or 0: no budget. The first eligible
            sample is always compared, so a test judges something whatever the budget.
        only: the ``--conformance-sample`` index to replay (budget and limit ignored; the sample is still checked by
            ``reject``), or None.
        limit: most samples handed out (the rest counted under :data:`PAST_LIMIT`), or None.
        clock: seconds as a float (``time.monotonic``; a fake in the tests).

    Iterating notes each handed-out index in the crash file (:func:`neuron_conformance.conformance.survival.crash_files.note_sample`).
    A sample found unusable while being compared (no differentiable output) is moved to a reason with
    :meth:`leave_out`.
    """

    def __init__(
        self,
        samples: Iterable,
        *,
        reject: Callable[[object], str | None] | None = None,
        budget: float | None = None,
        only: int | None = None,
        limit: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = iter(enumerate(samples))
        self._reject = reject
        self._budget = budget or None
        self.only = only
        """The replayed index, or None."""
        self._limit = None if only is not None else limit
        self._clock = clock
        self._started: float | None = None
        self._stopped_by: str | None = None
        self.handed_out = 0
        """Samples handed out so far (int)."""
        self.total = 0
        """Samples of the OpInfo seen so far (int; all of them once iteration ended or :meth:`drain` ran)."""
        self.left_out: Counter = Counter()
        """Reason -> number of samples left out for it."""

    def __iter__(self) -> Iterator[tuple[int, object]]:
        for index, sample in self._source:
            self.total += 1
            if self.only is not None and index != self.only:
                self.left_out[NOT_REPLAYED] += 1
                continue
            reason = self._reject(sample) if self._reject is not None else None
            if reason is not None:
                self.left_out[reason] += 1
                continue
            if self._limit is not None and self.handed_out >= self._limit:
                self.left_out[PAST_LIMIT] += 1
                continue
            if self._over_budget():
                self.left_out[TIME_BUDGET] += 1
                continue
            if self._started is None:
                self._started = self._clock()
            self.handed_out += 1
            note_sample(index)
            yield index, sample

    def _over_budget(self) -> bool:
        if self._budget is None or self.only is not None or self._started is None:
            return False
        return self._clock() - self._started >= self._budget

    def leave_out(self, reason: str) -> None:
        """Move the sample just handed out from compared to left out under ``reason``."""
        self.handed_out -= 1
        self.left_out[reason] += 1

    def drain(self, reason: str = AFTER_FAILURE) -> None:
        """Count the samples not yet seen under ``reason`` (called when a failure ends the test early)."""
        for _ in self._source:
            self.total += 1
            self.left_out[reason] += 1

    @property
    def compared(self) -> int:
        """Samples handed out and not moved to a reason afterwards (int)."""
        return self.handed_out

    def record_fields(self) -> dict:
        """``{"samples": compared, "samples_total": total, "samples_left_out": {reason: count}}``."""
        return {
            "samples": self.compared,
            "samples_total": self.total,
            "samples_left_out": dict(sorted(self.left_out.items())),
        }

    def describe_left_out(self) -> str:
        """``"3 0-dim input, 2 time budget"`` (reasons sorted), or ``"none"``."""
        return ", ".join(f"{n} {r}" for r, n in sorted(self.left_out.items())) or "none"


def require_compared(selection: SampleSelection, what: str) -> None:
    """Skip the test (``pytest.skip``) when ``selection`` compared no sample, naming why each was left out.

    Raises:
        pytest.skip.Exception: ``selection.compared == 0``.
    """
    if selection.compared:
        return
    if selection.only is not None:
        reasons = {r: n for r, n in selection.left_out.items() if r != NOT_REPLAYED}
        pytest.skip(
            f"{what}: the replayed sample {selection.only} is not compared (left out: "
            f"{', '.join(reasons) or f'no such sample: the OpInfo has {selection.total}'})"
        )
    pytest.skip(
        f"{what}: no sample of the {selection.total} exercises this suite (left out: {selection.describe_left_out()})"
    )
