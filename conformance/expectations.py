"""Bounded expectations: a manifest entry expects a failure of its class and, when bounded, of its size.

Every test a manifest entry covers is a strict xfail (:mod:`conformance.selection`). A failure is the
*expected* one when its failure class (:func:`conformance.failures.classify_exception`) is the entry's
``reason`` and, for a numeric entry with a ``bound`` for the test's dtype, each error size the failed
check measured (``max_abs``, ``max_rel``, ``max_ulp``: :func:`conformance.failures.verdict_fields`) is
at most ``margin x max(bound, floor)``. The floor keeps a bound of zero usable: ``atol`` of the failed
check for ``max_abs``, its ``rtol`` for ``max_rel``, 1 for ``max_ulp``. ``margin`` is the entry's, else
:data:`conformance.manifest.DEFAULT_MARGIN` (its docstring says why 4).

Any other failure is *unexpected*: :func:`enforce` (from ``pytest_runtest_makereport``) turns the xfailed
report into a failure, and the result record gets failure class ``unexpected``
(:data:`conformance.outcomes.UNEXPECTED`), with a message saying what the entry expected and what was
seen, followed by the failure itself. Distinct from ``stale`` (the expected failure passed).
"""

from __future__ import annotations

import pytest

from .failures import classify_exception, describe_group, verdict_fields
from .manifest import BOUND_METRICS, DEFAULT_MARGIN, Entry
from .outcomes import UNEXPECTED

UNEXPECTED_KEY = pytest.StashKey[str]()
"""On a test item whose expected failure was not the expected one: what was expected and what was seen."""

ENTRY_KEY = pytest.StashKey[Entry]()
"""The manifest entry that covers a test item (set by :func:`conformance.selection.select_items`)."""


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
        return (f"unexpected failure: {where} expects a {entry.reason} failure; seen: "
                f"{describe_seen(failure_class, seen)}")
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
    return (f"unexpected failure: {where} expects a numeric failure of the recorded size in {dtype} "
            f"({expected}; margin {margin:g}); seen: {describe_seen(failure_class, seen)}: "
            f"{'; '.join(over)}")


def enforce(item: pytest.Item, report: pytest.TestReport, excinfo) -> None:
    """Turn an xfailed call report whose failure is not the expected one into a failed report.

    Stashes the message under :data:`UNEXPECTED_KEY` (the record's failure class becomes ``unexpected``:
    :func:`conformance.recording.build_record`) and puts it first in the report's ``longrepr``.
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


__all__ = ["ENTRY_KEY", "UNEXPECTED", "UNEXPECTED_KEY", "describe_seen", "enforce", "unexpected"]
