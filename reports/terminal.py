"""End-of-run summary for the terminal: a rich table, plain text when not a terminal.

Shows the headline verdict, the incomplete-run banner, counts by outcome per suite,
the top failure kinds (failure classes) and the most failing ops.
"""

from __future__ import annotations

from typing import IO, Any, Mapping

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .to_markdown import headline
from .summary import sorted_outcomes

STYLE = {"passed": "green", "failed": "red", "error": "bold red", "xfailed": "yellow", "xpassed": "blue",
         "no-reference": "magenta", "skipped": "dim"}


def _as_summary(summary: Any) -> Mapping[str, Any]:
    return getattr(summary, "summary", summary)


def _top_ops(summary: Mapping[str, Any], n: int) -> list[tuple[str, int, int]]:
    ops = [(name, t.get("failed", 0) + t.get("error", 0), t["total"]) for name, t in summary["counts"]["by_op"].items()]
    ops = [o for o in ops if o[1]]
    ops.sort(key=lambda o: (-o[1], o[0]))
    return ops[:n]


def plain_summary(summary: Mapping[str, Any], *, top: int = 5) -> str:
    """The summary as plain text lines (no colour, no box drawing)."""
    summary = _as_summary(summary)
    lines = [headline(summary, icon=False)]
    if not summary["complete"]:
        lines.append("INCOMPLETE RUN: interrupted before it finished; only the tests that ran are counted")
    cols = sorted_outcomes(summary["counts"]["by_outcome"])
    suites = summary["counts"]["by_suite"]
    width = max([len("suite"), len("all")] + [len(s) for s in suites])
    header = "suite".ljust(width) + "".join(c.rjust(max(len(c), 6) + 2) for c in cols + ["total"])
    lines.append(header)
    for name, t in list(suites.items()) + [("all", summary["counts"]["by_outcome"])]:
        lines.append(name.ljust(width) + "".join(str(t.get(c, 0)).rjust(max(len(c), 6) + 2) for c in cols + ["total"]))
    classes = summary["counts"]["by_failure_class"]
    if classes:
        lines.append("failure kinds: " + ", ".join(f"{k} {v}" for k, v in list(classes.items())[:top]))
        lines.append("most failing: " + ", ".join(f"{n} ({f}/{t})" for n, f, t in _top_ops(summary, top)))
    return "\n".join(lines) + "\n"


def print_summary(summary: Any, console: Console | None = None, *, top: int = 5, quiet: bool = False,
                  file: IO[str] | None = None) -> None:
    """Print the end-of-run summary.

    Args:
        summary: a summary dict (summary.json) or a :class:`reports.build.BuildResult`.
        console: where to print; when None, a ``rich.console.Console(file=file)``. When
            ``console.is_terminal`` is false the output is plain text (:func:`plain_summary`).
        top: how many failure kinds and failing ops to list.
        quiet: print only the headline (and the incomplete-run line).
        file: the stream for a new console (default ``sys.stdout``); ignored with ``console``.
    """
    summary = _as_summary(summary)
    console = console or Console(file=file)
    if quiet:
        lines = [headline(summary, icon=False)]
        if not summary["complete"]:
            lines.append("INCOMPLETE RUN: interrupted before it finished; only the tests that ran are counted")
        console.file.write("\n".join(lines) + "\n")
        console.file.flush()
        return
    if not console.is_terminal:
        console.file.write(plain_summary(summary, top=top))
        console.file.flush()
        return
    verdict = summary["verdict"]
    console.print(headline(summary), style="bold " + {"failed": "red", "passed": "green"}.get(verdict, ""),
                  markup=False, highlight=False)
    if not summary["complete"]:
        console.print("INCOMPLETE RUN: interrupted before it finished; only the tests that ran are counted",
                      style="bold yellow", markup=False)
    cols = sorted_outcomes(summary["counts"]["by_outcome"])
    table = Table(title="Results by suite", title_justify="left")
    table.add_column("suite")
    for c in cols:
        table.add_column(c, justify="right", style=STYLE.get(c, ""))
    table.add_column("total", justify="right", style="bold")
    for name, t in summary["counts"]["by_suite"].items():
        table.add_row(escape(name), *(str(t.get(c, 0)) for c in cols), str(t["total"]))
    allrow = summary["counts"]["by_outcome"]
    table.add_row("all", *(str(allrow.get(c, 0)) for c in cols), str(allrow["total"]), style="bold", end_section=True)
    console.print(table)
    classes = summary["counts"]["by_failure_class"]
    if classes:
        kinds = Table(title="Top failure kinds", title_justify="left")
        kinds.add_column("failure class")
        kinds.add_column("count", justify="right")
        for k, v in list(classes.items())[:top]:
            kinds.add_row(escape(k), str(v))
        ops = Table(title="Most failing", title_justify="left")
        ops.add_column("op / model / scenario")
        ops.add_column("failing", justify="right", style="red")
        ops.add_column("total", justify="right")
        for n, f, t in _top_ops(summary, top):
            ops.add_row(escape(n), str(f), str(t))
        console.print(kinds)
        console.print(ops)
