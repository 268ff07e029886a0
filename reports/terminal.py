"""End-of-run summary for the terminal: a rich table, plain text when not a terminal.

Shows the headline verdict, the incomplete-run banner, counts by outcome per suite,
the top failure kinds (failure classes), the largest causes (:mod:`neuron_conformance.conformance.results.causes`: with hundreds of
failures of a few causes, one line a cause, not one a test) and the most failing ops (ranked by failing
tests then causes; one line when all are tied).
"""

from __future__ import annotations

from typing import IO, Any, Mapping

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from neuron_conformance.conformance.results.causes import most_failing, shorten

from .summary import causes_of, sorted_outcomes
from .to_markdown import headline

STYLE = {
    "passed": "green",
    "failed": "red",
    "error": "bold red",
    "xfailed": "yellow",
    "xpassed": "blue",
    "no-reference": "magenta",
    "reference-suspect": "magenta",
    "expected-unreached": "cyan",
    "not-claimed": "blue",
    "skipped": "dim",
}


def _as_summary(summary: Any) -> Mapping[str, Any]:
    return getattr(summary, "summary", summary)


#: Widest cause message in the table (characters, cut at a word boundary).
CAUSE_WIDTH = 100


def _top_causes(summary: Mapping[str, Any], n: int) -> tuple[list[dict[str, Any]], int]:
    """The ``n`` largest failing causes and how many failing causes there are."""
    failing = [c for c in causes_of(summary) if not c.get("expected")]
    return failing[:n], len(failing)


def _cause_text(c: Mapping[str, Any]) -> str:
    ops = c.get("ops") or []
    where = f"{len(ops)} op(s)" if len(ops) != 1 else ops[0]
    return f"{shorten(c['message'], CAUSE_WIDTH)} [{where}]"


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
        causes, n_causes = _top_causes(summary, top)
        lines.append(f"causes ({n_causes}; largest {len(causes)}):")
        lines += [f"  {c['count']:>6}  {c['failure_class']:<12} {_cause_text(c)}" for c in causes]
        rows, tie = most_failing(summary["counts"]["by_op"], causes_of(summary), top)
        lines.append(
            "most failing: "
            + (tie or ", ".join(f"{r['name']} ({r['failing']}/{r['total']}, {r['causes']} cause(s))" for r in rows))
        )
    return "\n".join(lines) + "\n"


def print_summary(
    summary: Any, console: Console | None = None, *, top: int = 5, quiet: bool = False, file: IO[str] | None = None
) -> None:
    """Print the end-of-run summary.

    Args:
        summary: a summary dict (summary.json) or a :class:`neuron_conformance.reports.build.BuildResult`.
        console: where to print; when None, a ``rich.console.Console(file=file)``. When
            ``console.is_terminal`` is false the output is plain text (:func:`plain_summary`).
        top: how many failure kinds, causes and failing ops to list.
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
    console.print(
        headline(summary),
        style="bold " + {"failed": "red", "passed": "green"}.get(verdict, ""),
        markup=False,
        highlight=False,
    )
    if not summary["complete"]:
        console.print(
            "INCOMPLETE RUN: interrupted before it finished; only the tests that ran are counted",
            style="bold yellow",
            markup=False,
        )
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
        causes, n_causes = _top_causes(summary, top)
        by_cause = Table(title=f"Top causes ({len(causes)} of {n_causes})", title_justify="left")
        by_cause.add_column("tests", justify="right", style="red")
        by_cause.add_column("class")
        by_cause.add_column("cause [ops]")
        for c in causes:
            by_cause.add_row(str(c["count"]), escape(c["failure_class"]), escape(_cause_text(c)))
        console.print(kinds)
        console.print(by_cause)
        rows, tie = most_failing(summary["counts"]["by_op"], causes_of(summary), top)
        if tie:
            console.print(f"Most failing: {tie}", markup=False, highlight=False)
            return
        ops = Table(title="Most failing", title_justify="left")
        ops.add_column("op / model / scenario")
        ops.add_column("failing", justify="right", style="red")
        ops.add_column("causes", justify="right")
        ops.add_column("total", justify="right")
        for r in rows:
            ops.add_row(escape(r["name"]), str(r["failing"]), str(r["causes"]), str(r["total"]))
        console.print(ops)
