"""Bounded expectations: a manifest entry expects a failure of its class and, when bounded, of its size.

Every test a manifest entry covers is a strict xfail (:mod:`neuron_conformance.conformance.pytest_plugin.selection`). A failure is the
*expected* one when its failure class (:func:`neuron_conformance.conformance.verdict.failures.classify_exception`) is the entry's
``reason`` and, for a numeric entry with a ``bound`` for the test's dtype, each error size the failed
check measured (``max_abs``, ``max_rel``, ``max_ulp``: :func:`neuron_conformance.conformance.verdict.failures.verdict_fields`) is
at most ``margin x max(bound, floor)``. The floor keeps a bound of zero usable: ``atol`` of the failed
check for ``max_abs``, its ``rtol`` for ``max_rel``, 1 for ``max_ulp``. ``margin`` is the entry's, else
:data:`neuron_conformance.conformance.results.manifest.DEFAULT_MARGIN` (its docstring says why 4).

Any other failure is *unexpected*: :func:`enforce` (from ``pytest_runtest_makereport``) turns the xfailed
report into a failure, and the result record gets failure class ``unexpected``
(:data:`neuron_conformance.conformance.results.outcomes.UNEXPECTED`), with a message saying what the entry expected and what was
seen, followed by the failure itself. Distinct from ``stale`` (the expected failure passed).

An expected failure that did not fail while ``--conformance-sample-budget`` left samples out (:data:`TIME_BUDGET`
in the record's ``samples_left_out``) is not ``stale`` either: the failing sample may be among those
not compared, and a slower machine would then tell the user to delete a good entry. :func:`unreached`
turns its ``XPASS(strict)`` report into a skip and the record's outcome is ``expected-unreached``
(:data:`neuron_conformance.conformance.results.outcomes.EXPECTED_UNREACHED`), naming how many samples were left out. A test that
compared every sample and passed stays ``stale``.
"""

from __future__ import annotations

import pytest

from neuron_conformance.conformance.results.manifest import BOUND_METRICS, DEFAULT_MARGIN, Entry
from neuron_conformance.conformance.results.outcomes import EXPECTED_UNREACHED, UNEXPECTED
from neuron_conformance.conformance.verdict.failures import classify_exception, describe_group, verdict_fields

UNEXPECTED_KEY = pytest.StashKey[str]()
"""On a test item whose expected failure was not the expected one: what was expected and what was seen."""

UNREACHED_KEY = pytest.StashKey[str]()
"""On a test item whose expected failure was not reached within its sample budget: the record's message."""

TIME_BUDGET = "time budget"
"""Reason, in a record's ``samples_left_out``, of the samples ``--conformance-sample-budget`` left out
(:mod:`neuron_conformance.opsuites.sample_selection` counts them under it)."""

ENTRY_KEY = pytest.StashKey[Entry]()
"""The manifest entry that covers a test item (set by :func:`neuron_conformance.conformance.pytest_plugin.selection.select_items`)."""


def _floor(metric: str, seen: dict) -> float:
    if metric == "max_abs":
        return float(seen.get("atol") or 0.0)
    if metric == "max_rel":
        return float(seen.get("rtol") or 0.0)
    return 1.0


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def describe_seen(failure_class: str, seen: dict) -> str:
    """``numeric (rule fp64; max_abs 3.1e-3, max_rel 0.02, max_ulp 4.1e+04)``: a failure for a message."""
    sizes = ", ".join(f"{m} {_fmt(seen[m])}" for m in BOUND_METRICS if seen.get(m) is not None)
    inner = "; ".join(p for p in (f"rule {seen['rule']}" if seen.get("rule") else "", sizes) if p)
    return f"{failure_class} ({inner})" if inner else failure_class


def unexpected(entry: Entry, failure_class: str, seen: dict, dtype: str | None) -> str | None:
    """Why a failure is not the one ``entry`` expects, or None when it is (module docstring).

    Args:
        entry: the manifest entry covering the test.
        failure_class: the failure's class.
        seen: the failed check's record fields (``rule``, ``max_abs``, ``max_rel``, ``max_ulp``, ``atol``,
            ``rtol``; absent or None when not measured).
        dtype: the test's dtype name (None: class-only check).

    Returns:
        A one-line message naming the entry, the expectation and the failure seen.
    """
    where = f"manifest entry {entry.source}" if entry.source else "the manifest entry"
    if failure_class != entry.reason:
        return (
            f"unexpected failure: {where} expects a {entry.reason} failure; seen: {describe_seen(failure_class, seen)}"
        )
    bound = entry.bound_for(dtype) if entry.reason == "numeric" else None
    if not bound:
        return None
    margin = DEFAULT_MARGIN if entry.margin is None else entry.margin
    over = []
    for metric in BOUND_METRICS:
        value = seen.get(metric)
        if metric not in bound or value is None:
            continue
        allowed = margin * max(bound[metric], _floor(metric, seen))
        if value > allowed:
            over.append(f"{metric} {_fmt(value)} > {margin:g} x {_fmt(max(bound[metric], _floor(metric, seen)))}")
    if not over:
        return None
    expected = ", ".join(f"{m} {_fmt(bound[m])}" for m in BOUND_METRICS if m in bound)
    return (
        f"unexpected failure: {where} expects a numeric failure of the recorded size in {dtype} "
        f"({expected}; margin {margin:g}); seen: {describe_seen(failure_class, seen)}: "
        f"{'; '.join(over)}"
    )


def enforce(item: pytest.Item, report: pytest.TestReport, excinfo) -> None:
    """Turn an xfailed call report whose failure is not the expected one into a failed report.

    Stashes the message under :data:`UNEXPECTED_KEY` (the record's failure class becomes ``unexpected``:
    :func:`neuron_conformance.conformance.pytest_plugin.recording.build_record`) and puts it first in the report's ``longrepr``.
    """
    if report.when != "call" or not report.skipped or not hasattr(report, "wasxfail") or excinfo is None:
        return
    entry = item.stash.get(ENTRY_KEY, None)
    if entry is None:
        return
    exc = excinfo.value
    failure_class = classify_exception(exc, describe_group(exc))
    mark = item.get_closest_marker("conformance")
    dtype = mark.kwargs.get("dtype") if mark is not None else None
    problem = unexpected(entry, failure_class, verdict_fields(exc), dtype)
    if problem is None:
        return
    item.stash[UNEXPECTED_KEY] = problem
    original = report.longreprtext
    report.outcome = "failed"
    del report.wasxfail
    report.longrepr = f"{problem}\n{original}"


def _is_strict_xpass(report: pytest.TestReport) -> bool:
    return report.when == "call" and report.failed and "[XPASS(strict)]" in str(report.longrepr)


def unreached_message(record: dict) -> str | None:
    """Why a passing expected failure is ``expected-unreached``, or None when it is stale (module docstring).

    Args:
        record: the test's record so far: ``expected_failure``, ``manifest_entry``, ``samples``,
            ``samples_total`` and ``samples_left_out`` (``{reason: count}``, :mod:`neuron_conformance.opsuites.sample_selection`).

    Returns:
        ``"expected failure (numeric) not reached: --conformance-sample-budget left 5 of 12 samples out (...)"``
        when some samples were left out for :data:`TIME_BUDGET`, else None.
    """
    left = (record.get("samples_left_out") or {}).get(TIME_BUDGET) or 0
    if left <= 0:
        return None
    return (
        f"expected failure ({record.get('expected_failure')}) not reached: --conformance-sample-budget left {left} of "
        f"{record.get('samples_total')} samples out ({TIME_BUDGET}) and the {record.get('samples')} compared "
        f"passed; the manifest entry {record.get('manifest_entry')} is not shown stale (rerun with "
        f"--conformance-sample-budget 0 to compare every sample)"
    )


def unreached(item: pytest.Item, report: pytest.TestReport, record: dict | None) -> None:
    """Turn the ``XPASS(strict)`` call report of a test whose budget left samples out into a skip.

    ``record`` is the test's record so far (None: not a recording test; nothing changes). Stashes the
    message under :data:`UNREACHED_KEY` (the record's outcome becomes ``expected-unreached``:
    :func:`neuron_conformance.conformance.pytest_plugin.recording.build_record`); the report is skipped with that message as its reason,
    so the run is not red.
    """
    if record is None or item.stash.get(ENTRY_KEY, None) is None or not _is_strict_xpass(report):
        return
    message = unreached_message(record)
    if message is None:
        return
    item.stash[UNREACHED_KEY] = message
    path, lineno, _ = report.location
    report.outcome = "skipped"
    report.longrepr = (str(path), (lineno or 0) + 1, message)


__all__ = [
    "ENTRY_KEY",
    "EXPECTED_UNREACHED",
    "TIME_BUDGET",
    "UNEXPECTED",
    "UNEXPECTED_KEY",
    "UNREACHED_KEY",
    "describe_seen",
    "enforce",
    "unexpected",
    "unreached",
    "unreached_message",
]
