"""aten coverage in a session: which tests are traced, the trace around each, the files at the end.

* Whether and how: ``--conformance-aten-coverage`` (:func:`neuron_conformance.conformance.results.coverage.choose_method`): by default the
  backend's own counter, else nothing, since a dispatch mode is not transparent. When not traced, the
  session's ``coverage_reason`` says why; it goes to ``run.json`` (``aten_coverage``) and the report.
* At start-up the controlling process removes the last run's per-worker coverage files (not under
  ``--collect-only``, which keeps the last run's coverage).
* A test's call phase runs under :func:`neuron_conformance.conformance.results.coverage.trace` when a suite says so: the harness asks
  the ``pytest_conformance_trace_coverage`` hook (:mod:`neuron_conformance.conformance.pytest_plugin.hookspecs`), which the suites' conftest
  files implement, through the item's own hook relay (so only the conftest files of the test's folder
  answer). No answer means no tracing: a dispatch mode changes how model code runs (Dynamo compiles
  nothing under an active mode, and some transformers code paths hit a PyTorch assert).
* Counts are kept per suite (:func:`neuron_conformance.conformance.pytest_plugin.selection.record_identity`), so the merged ``coverage.json``
  names the suites that executed each overload (``suites``), which the aten audit reports.
* While a test is traced, the aten op it last entered on the device is kept in the process's breadcrumb
  (:mod:`neuron_conformance.conformance.survival.breadcrumb`), so that a crash record can name it: the counts dict is a
  :class:`~neuron_conformance.conformance.survival.breadcrumb.CountingBreadcrumb`, armed when the trace starts and cleared when it ends.
* At the end each process writes ``<report-dir>/coverage/<worker>.json``; the controlling process merges
  them into ``<report-dir>/coverage.json`` and computes the aten audit (``<report-dir>/aten_audit.json``,
  :mod:`neuron_conformance.conformance.results.aten_audit`) before the report is built, and prints a line for each.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest

from neuron_conformance.conformance.backend import fallbacks
from neuron_conformance.conformance.pytest_plugin import options as opts
from neuron_conformance.conformance.pytest_plugin import selection
from neuron_conformance.conformance.results import aten_audit, coverage
from neuron_conformance.conformance.results.records import read_records
from neuron_conformance.conformance.survival.breadcrumb import CountingBreadcrumb

if TYPE_CHECKING:  # annotations only
    from neuron_conformance.conformance.pytest_plugin.session import ConformanceSession


def start_session(config: pytest.Config, session: ConformanceSession) -> None:
    """Start counting in this process (unless ``--conformance-aten-coverage`` says not to); the controlling process
    clears the last run's worker files."""
    method, reason = (
        coverage.choose_method(session.profile, opts.get_option(config, "aten_coverage"))
        if session.profile is not None
        else (None, "no device")
    )
    session.start_coverage(method, reason)
    if session.controls_run and not config.option.collectonly:
        coverage.clear(session.report_dir, merged=method is None)


def traced(item: pytest.Item, session: ConformanceSession):
    """A context manager for ``item``'s call phase: the aten trace when a suite asks for it, else nothing."""
    counts = session.coverage_counts
    if session.profile is None or counts is None:
        return contextlib.nullcontext()
    wanted = item.ihook.pytest_conformance_trace_coverage(
        item=item, uses_dispatch_mode=coverage.uses_dispatch_mode(session.profile, session.coverage_method)
    )
    if not wanted:
        return contextlib.nullcontext()
    suite = selection.record_identity(item)["suite"]
    per_suite = session.coverage_by_suite.get(suite)
    if per_suite is None:
        per_suite = session.coverage_by_suite[suite] = CountingBreadcrumb(None)
    crumb = session.watch.crumb if session.watch is not None else None
    per_suite.crumb = crumb
    return _armed(coverage.trace(session.profile, per_suite, session.coverage_method), crumb)


@contextlib.contextmanager
def _armed(trace, crumb):
    """``trace`` with the breadcrumb armed inside it and cleared after (a crash kills the process before)."""
    if crumb is not None:
        crumb.arm()
    try:
        with trace:
            yield
    finally:
        if crumb is not None:
            crumb.clear()


def finish_session(config: pytest.Config, session: ConformanceSession) -> None:
    """Write this process's counts; in the controlling process merge every worker's and print a line."""
    counts = session.coverage_counts
    if counts is not None:
        for per_suite in session.coverage_by_suite.values():
            for name, calls in per_suite.items():
                counts[name] = counts.get(name, 0) + calls
    if counts:
        tracking = fallbacks.gathered(config) if session.profile.op_tracking else None
        coverage.write_worker(
            session.report_dir,
            session.worker,
            counts,
            coverage.backend_key(session.profile),
            suites=session.coverage_by_suite,
            tracking=tracking,
        )
    if session.controls_run and counts is None and session.coverage_reason:
        tr = config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line(f"conformance: aten coverage not traced: {session.coverage_reason}")
    if not session.controls_run or counts is None:
        return
    data = coverage.write_merged(session.report_dir)
    ran = aten_audit.generated_from_records(read_records(session.report_dir))
    audit = aten_audit.write(session.report_dir, data, ran)
    session.set_aten_audit(audit)
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None and data["executed"]:
        tr.write_line(
            f"conformance: aten coverage: {data['executed_registered']} of "
            f"{data['registered_total']} registered overloads, {len(data['core_executed'])} of "
            f"{data['core_total']} core overloads executed on {session.profile.type}"
        )
        c = audit["counts"]
        tr.write_line(
            f"conformance: aten audit: {c['covered'] + c['generated']} of {audit['total']} overloads "
            f"with a CPU kernel reached ({audit['percent_reached']}%, {audit['percent_of_relevant']}% of those "
            f"not excluded: {c['covered']} covered, "
            f"{c['generated']} generated), {c['excluded']} excluded, {c['unknown']} unknown; core "
            f"{audit['core']['reached']} of {audit['core']['total']}"
        )
