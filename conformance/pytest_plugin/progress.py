"""Live progress of a run on a terminal: one bar per suite with counts by outcome (rich).

Shown by the process that controls the run (the xdist controller, the main process under ``-n 0``, the
isolation parent) when ``--conformance-progress`` is ``rich``, or ``auto`` (the default) and stdout is a terminal and
pytest runs at its default verbosity (not ``-q``, not ``-v``). Otherwise pytest's own plain output is left
alone. While the display is live, pytest's one-letter-per-test output is dropped and everything else pytest
writes (section headers, worker restarts) is printed above the bars; the bars stay on screen when the run
ends, followed by pytest's summary and the conformance summary table.

A test is counted once, when it finishes (``pytest_runtest_logfinish``) or when its worker crashed; its
outcome is the worst of its phase reports: ``error`` (setup/teardown failed) > ``failed`` > ``xpassed`` >
``xfailed`` > ``skipped`` > ``passed``.
"""

from __future__ import annotations

import sys
from typing import Callable

import pytest
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from neuron_conformance.conformance.pytest_plugin import options as opts
from neuron_conformance.conformance.pytest_plugin.run_state import RunState
from neuron_conformance.conformance.pytest_plugin.selection import suite_of

ORDER = ("error", "failed", "xpassed", "xfailed", "skipped", "passed")
SYMBOL = {
    "passed": ("✓", "green"),
    "failed": ("✗", "red"),
    "error": ("E", "bold red"),
    "xfailed": ("x", "yellow"),
    "xpassed": ("X", "blue"),
    "skipped": ("s", "dim"),
}


def wanted(mode: str, verbosity: int, isatty: bool) -> bool:
    """Whether to show the live display for ``--conformance-progress MODE`` at this verbosity on this stream."""
    if mode == "rich":
        return True
    return mode == "auto" and verbosity == 0 and isatty


class ProgressDisplay:
    """The live per-suite progress bars.

    Args:
        suite_of: node id -> suite name.
        console: where to draw (default: a rich console on stdout).
    """

    def __init__(self, suite_of: Callable[[str], str], console: Console | None = None):
        self.suite_of = suite_of
        self.console = console or Console(file=sys.stdout)
        self.progress = Progress(
            TextColumn("{task.description:<14}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(),
            console=self.console,
            redirect_stdout=True,
            redirect_stderr=False,
        )
        self.tasks: dict[str, int] = {}
        self.counts: dict[str, dict[str, int]] = {}
        self.pending: dict[str, str] = {}
        self.done: set[str] = set()
        self.live = False

    def start(self, nodeids: list[str]) -> None:
        """Create one bar per suite sized by the collected node ids, and start drawing."""
        totals: dict[str, int] = {}
        for n in nodeids:
            s = self.suite_of(n)
            totals[s] = totals.get(s, 0) + 1
        for s, total in totals.items():
            self._task(s, total)
        if not self.live:
            self.progress.start()
            self.live = True

    def _task(self, suite: str, total: int | None = None) -> int:
        if suite not in self.tasks:
            self.tasks[suite] = self.progress.add_task(suite, total=total, counts="")
            self.counts[suite] = {}
        return self.tasks[suite]

    def report(self, report, category: str) -> None:
        """Take one phase report (``category``: pytest's test status word: passed, failed, error, ...)."""
        if category not in ORDER:
            return  # rerun, deselected, "" ...
        nid = report.nodeid
        if nid in self.done:
            return
        prev = self.pending.get(nid)
        if prev is None or ORDER.index(category) < ORDER.index(prev):
            self.pending[nid] = category
        if getattr(report, "when", None) not in ("setup", "call", "teardown"):
            self.finish(nid)  # a crash report from the xdist controller or the isolation parent

    def finish(self, nodeid: str) -> None:
        """The test ended: count it under its worst outcome."""
        if nodeid in self.done:
            return
        outcome = self.pending.pop(nodeid, "passed")
        self.done.add(nodeid)
        suite = self.suite_of(nodeid)
        task = self._task(suite)
        c = self.counts[suite]
        c[outcome] = c.get(outcome, 0) + 1
        self.progress.update(task, advance=1, counts=self.counts_text(c))

    @staticmethod
    def counts_text(c: dict[str, int]) -> str:
        """``[green]✓ 12[/] [red]✗ 3[/] ...`` in :data:`ORDER` order (rich markup)."""
        parts = []
        for k in ("passed",) + ORDER[:-1]:
            if c.get(k):
                sym, style = SYMBOL[k]
                parts.append(f"[{style}]{sym} {c[k]}[/]")
        return " ".join(parts)

    def stop(self) -> None:
        """Stop drawing (the last frame stays on screen)."""
        if self.live:
            self.progress.stop()
            self.live = False


def start_display(config: pytest.Config, session: RunState, nodeids: list[str]) -> None:
    """Start the live display of the controlling process over ``nodeids`` when :func:`wanted`.

    While it is live, pytest's terminal writer writes to ``sys.stdout`` (rich's proxy), so that pytest's
    own lines print above the bars; :func:`stop_display` gives the writer its file back.
    """
    tr = config.pluginmanager.get_plugin("terminalreporter")
    mode = opts.get_option(config, "progress")
    if tr is None or not wanted(mode, config.option.verbose, sys.stdout.isatty()) or not nodeids:
        return

    def suite(nodeid: str) -> str:
        ident = session.identities.get(nodeid)
        return (ident or {}).get("suite") or suite_of(nodeid)

    tr.ensure_newline()
    display = ProgressDisplay(suite)
    display.start(nodeids)
    session.attach_display(display, tr._tw._file)
    tr._tw._file = sys.stdout  # rich's proxy while live: pytest's lines print above the bars


def stop_display(config: pytest.Config, session: RunState) -> None:
    """Stop the live display (if any) and give pytest's terminal writer its own file back."""
    if session.display is None:
        return
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.ensure_newline()  # ends pytest's partial line (``file.py [100%]``) above the bars
    session.display.stop()
    session.detach_display()
    if tr is not None and session.terminal_file is not None:
        tr._tw._file = session.terminal_file
