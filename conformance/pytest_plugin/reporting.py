"""The end of a conformance session, and the harness's only door to :mod:`reports`.

At the end of the session, in the process that controls the run (:func:`finish_session`), after the aten
coverage is merged (:func:`neuron_conformance.conformance.results.coverage.finish_session`):

1. ``--conformance-update-manifest``: the proposed manifest is written (:mod:`neuron_conformance.conformance.results.manifest_update`); the live
   progress display stops;
2. ``run.json`` is rewritten with ``complete`` (false when the run was interrupted or stopped early, with
   ``stop_reason`` saying why) and the end time;
3. unless ``--conformance-no-report``: the report (``summary.json``, ``summary.md``, ``index.html``) is built with
   :func:`neuron_conformance.reports.build` and the summary table printed; a bug in the report builder is reported on
   stderr and never hides the test results;
4. ``--conformance-baseline``: the diff against the earlier run is printed and written to ``baseline-diff.md``; with
   ``--conformance-fail-on-regression`` a regression makes the exit status 1;
5. ``--conformance-fail-on-unknown``: aten overloads left ``unknown`` by the aten audit (or no audit, when coverage
   was not traced) make the exit status 1, with the count and the first names in one line.

:func:`read_summary` reads an earlier run's ``summary.json`` for ``--conformance-baseline`` and ``--conformance-shard-durations``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from neuron_conformance import reports
from neuron_conformance.conformance.pytest_plugin import options as opts
from neuron_conformance.conformance.pytest_plugin import progress
from neuron_conformance.conformance.results import aten_audit
from neuron_conformance.conformance.results.atomic import write_text_atomic
from neuron_conformance.conformance.results.manifest_update import write_proposed
from neuron_conformance.conformance.results.records import RecordsError, write_json_atomic
from neuron_conformance.conformance.survival import interrupt
from neuron_conformance.reports import terminal
from neuron_conformance.reports.collect import collect
from neuron_conformance.reports.summary import summary_from_collected

if TYPE_CHECKING:  # annotations only
    from neuron_conformance.conformance.pytest_plugin.session import ConformanceSession


def read_summary(path: str | Path, flag: str) -> dict:
    """An earlier run's summary, from ``summary.json`` or a report directory holding one.

    Args:
        path: the file or directory given to the option.
        flag: the option (``--conformance-baseline``, ``--conformance-shard-durations``), for the error message.

    Raises:
        neuron_conformance.conformance.pytest_plugin.options.OptionError: missing file, not a summary (the message names the file).
    """
    p = Path(path)
    try:
        return reports.load_summary(p / "summary.json" if p.is_dir() else p)
    except reports.ReportInputError as exc:
        raise opts.OptionError(f"{flag} {exc}") from None


def finish_session(session: pytest.Session, conf: ConformanceSession, exitstatus) -> None:
    """Close the run in the controlling process (see the module docstring)."""
    config = session.config
    if opts.get_option(config, "update_manifest"):
        try:
            path, added, removed = write_proposed(conf.report_dir, conf.manifest)
            _write_line(config, f"conformance: proposed manifest {path} ({len(added)} added, {len(removed)} removed)")
        except RecordsError as exc:  # the records are reported below too; the run's end must go on
            sys.stderr.write(f"conformance: --conformance-update-manifest: no proposal written: {exc}\n")
    progress.stop_display(config, conf)
    interrupted = exitstatus in (pytest.ExitCode.INTERRUPTED, 2)
    if interrupted and conf.stop_reason is None:
        sig = interrupt.received()
        conf.stop(f"interrupted by {sig}" if sig else "interrupted (KeyboardInterrupt)")
    if conf.stop_reason is None and exitstatus == pytest.ExitCode.INTERNAL_ERROR:
        conf.stop("pytest internal error (INTERNALERROR above): tests may not have run")
    if conf.stop_reason is None and (session.shouldfail or session.shouldstop):
        conf.stop(f"stopped early: {session.shouldfail or session.shouldstop}")
    ds = config.pluginmanager.get_plugin("dsession")
    if conf.stop_reason is None and ds is not None:
        why = getattr(ds, "shouldstop", None) or getattr(ds, "_summary_report", None)
        if why:  # -x / --maxfail under xdist, or "maximum crashed workers reached"
            conf.stop(f"stopped early: {why}")
    write_json_atomic(
        conf.report_dir / "run.json", conf.run_metadata(complete=conf.stop_reason is None, finished=time.time())
    )
    interrupt.uninstall()
    if not opts.get_option(config, "no_report"):
        build_report(config, conf)
    if conf.baseline:
        baseline_diff(session, conf)
    if opts.get_option(config, "fail_on_unknown"):
        unknown_gate(session, conf)


def unknown_gate(session: pytest.Session, conf: ConformanceSession) -> None:
    """``--conformance-fail-on-unknown``: exit status 1, with one line, when the aten audit left overloads unknown or
    could not run (aten coverage not traced)."""
    audit = conf.aten_audit
    if audit is None:
        line = (
            f"conformance: --conformance-fail-on-unknown: no aten audit, aten coverage was not traced "
            f"({conf.coverage_reason or 'no coverage'})"
        )
    else:
        line = aten_audit.gate_line(audit)
    if line is None:
        return
    sys.stdout.write(line + "\n")
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def build_report(config: pytest.Config, conf: ConformanceSession) -> None:
    """Build summary.json / summary.md / index.html with :func:`neuron_conformance.reports.build` and print the summary table."""
    try:
        result = reports.build(conf.report_dir)
        conf.summary = result.summary
    except Exception as exc:  # noqa: BLE001 - a report bug must not hide the test results
        sys.stderr.write(f"conformance: building the report in {conf.report_dir} failed: {type(exc).__name__}: {exc}\n")
        return
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.ensure_newline()
        terminal.print_summary(result.summary, quiet=config.option.verbose < 0, file=sys.stdout)
        tr.write_line(f"conformance report: {conf.report_dir / 'index.html'}")


def baseline_diff(session: pytest.Session, conf: ConformanceSession) -> None:
    """Print the ``--conformance-baseline`` diff; exit status 1 on a regression with ``--conformance-fail-on-regression``."""
    base = Path(conf.baseline)
    base = base / "summary.json" if base.is_dir() else base
    try:
        current = conf.summary or summary_from_collected(collect(conf.report_dir))
        diff = reports.diff_summaries(base, current)
    except reports.ReportInputError as exc:
        sys.stderr.write(f"conformance: --conformance-baseline: {exc}\n")
        return
    text = diff.to_text()
    write_text_atomic(conf.report_dir / "baseline-diff.md", text)
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.ensure_newline()
        tr.write(text)
    else:
        sys.stdout.write(text)
    if diff.has_regressions and opts.get_option(session.config, "fail_on_regression"):
        sys.stdout.write(
            f"conformance: {len(diff.regressions)} regression(s) against {base}: failing the run "
            "(--conformance-fail-on-regression)\n"
        )
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _write_line(config: pytest.Config, line: str) -> None:
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.write_line(line)
