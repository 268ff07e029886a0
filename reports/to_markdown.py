"""Render a summary as Markdown for a CI step summary (``$GITHUB_STEP_SUMMARY``).

GitHub renders GitHub Flavored Markdown there and caps one step's summary at 1 MiB
(docs.github.com, "Adding a job summary"); the page stays small by listing at most
``top`` failures. Every string from a test goes into a code span or is HTML-escaped,
so a message such as ``<script>`` shows as text.
"""

from __future__ import annotations

import html
import re
from typing import Any, Mapping

from neuron_conformance.conformance.results.causes import most_failing
from neuron_conformance.conformance.results.outcomes import FAILING

from . import audit, fallback
from .bug_classes import pass_rate_text
from .model import failure_rank
from .summary import causes_of, sorted_outcomes

VERDICT_ICON = {"passed": "✅", "failed": "❌", "empty": "⚪"}


def code_span(text: Any) -> str:
    """Return ``text`` as one inline code span: newlines folded, fenced by enough backticks."""
    s = " ".join(str(text).split())
    if not s:
        return "` `"
    fence = "`" * (max((len(m) for m in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def cell(text: Any) -> str:
    """Escape a table cell: HTML special characters and ``|``; newlines folded."""
    return html.escape(" ".join(str(text).split()), quote=False).replace("|", "\\|")


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.3g}"
    return "" if x is None else str(x)


def error_size(rec: Mapping[str, Any]) -> str:
    """Short text of a record's error sizes and tolerance, e.g. ``max_abs 0.002 (atol 1e-05)``."""
    parts = []
    for err, tol in (("max_abs", "atol"), ("max_rel", "rtol"), ("max_ulp", None)):
        if rec.get(err) is not None:
            part = f"{err} {_fmt(rec[err])}"
            if tol and rec.get(tol) is not None:
                part += f" ({tol} {_fmt(rec[tol])})"
            parts.append(part)
    if rec.get("headroom") is not None:
        parts.append(f"headroom {_fmt(rec['headroom'])}")
    return ", ".join(parts)


def headline(summary: Mapping[str, Any], *, icon: bool = True) -> str:
    """One line: verdict (with an emoji when ``icon``), failing and total counts, device under test."""
    totals = summary["totals"]
    dev = summary["run"].get("device") or {}
    verdict = summary["verdict"]
    unreached = (
        f", {totals['expected-unreached']} expected failures not reached within the sample budget (not stale)"
        if totals.get("expected-unreached")
        else ""
    )
    unreached += (
        f", {totals['not-claimed']} of capabilities the backend does not claim (not-claimed, not run)"
        if totals.get("not-claimed")
        else ""
    )
    unreached += (
        f", {totals['reference-suspect']} where the CPU reference is suspect (reference-suspect: the device agrees "
        "with float64, the CPU does not)"
        if totals.get("reference-suspect")
        else ""
    )
    what = {
        "failed": f"{totals['failing']} failing of {totals['total']} tests{unreached}",
        "passed": f"all {totals['total']} tests passed or expected"
        + (f", {totals['no-reference']} without a CPU reference (not judged)" if totals.get("no-reference") else "")
        + unreached,
        "empty": "no tests recorded",
    }.get(verdict, verdict)
    where = dev.get("type") or "unknown device"
    backend = " ".join(str(x) for x in (dev.get("backend"), dev.get("backend_version")) if x)
    mode = {True: "emulated", False: "real device"}.get(dev.get("emulated"), "")
    detail = ", ".join(x for x in (backend, mode) if x)
    tail = "" if summary["complete"] else " (incomplete run)"
    text = f"Conformance: {what} on {where}{f' ({detail})' if detail else ''}{tail}"
    return f"{VERDICT_ICON.get(verdict, '')} {text}".strip() if icon else text


def causes_markdown(summary: Mapping[str, Any], *, top: int = 20) -> list[str]:
    """Lines of the "Failures by cause" section: the ``top`` largest failing causes, each with its count,
    class, normalised message, aten op, ops and dtypes, and one example with its repro command; then one
    line counting the expected-failure (xfailed) causes."""
    causes = causes_of(summary)
    failing = [c for c in causes if not c.get("expected")]
    expected = [c for c in causes if c.get("expected")]
    if not failing and not expected:
        return []
    out: list[str] = []
    if failing:
        shown = failing[:top]
        more = f" (largest {len(shown)} of {len(failing)})" if len(failing) > len(shown) else ""
        n = sum(c["count"] for c in failing)
        out += [
            f"### Failures by cause{more}",
            "",
            f"{n} failing tests come down to {len(failing)} cause(s).",
            "",
            "| tests | class | cause | aten op | ops | dtypes |",
            "|---|---|---|---|---|---|",
        ]
        for c in shown:
            ops = c["ops"]
            ops_text = ", ".join(ops[:5]) + (f" +{len(ops) - 5} more" if len(ops) > 5 else "")
            atens = [c["aten_op"]] if c["aten_op"] else list(c.get("aten_ops") or ())  # a refusal names several
            aten_text = ", ".join(code_span(a) for a in atens[:3]) + (
                f" +{len(atens) - 3} more" if len(atens) > 3 else ""
            )
            out.append(
                f"| {c['count']} | {cell(c['failure_class'])} | {code_span(c['message'])} | "
                f"{aten_text} | {cell(ops_text)} | "
                f"{cell(', '.join(c['dtypes']))} |"
            )
        out.append("")
        for i, c in enumerate(shown[:5], 1):
            if c["examples"]:
                ex = c["examples"][0]
                out.append(
                    f"{i}. {code_span(c['message'])} ({c['count']}), e.g. {code_span(ex['nodeid'])}: "
                    f"{code_span(ex['repro'])}"
                )
        out.append("")
    if expected:
        out += [
            f"Expected failures (xfailed): {sum(c['count'] for c in expected)} tests, {len(expected)} cause(s).",
            "",
        ]
    return out


def bug_classes_markdown(summary: Mapping[str, Any]) -> list[str]:
    """The "Bug classes" table (class, cases, passed, failing, skipped, pass rate, description) of
    ``summary["bug_classes"]`` (:func:`neuron_conformance.reports.bug_classes.bug_class_table`); no lines when it is empty
    or absent (a summary of a run without the bug-class suite, or written before the field existed)."""
    table = summary.get("bug_classes") or {}
    if not table:
        return []
    out = [
        "### Bug classes",
        "",
        "| bug class | cases | passed | failing | skipped | pass rate | what it aims at |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in table.items():
        out.append(
            f"| {cell(name)} | {row.get('cases', 0)} | {row.get('passed', 0)} | {row.get('failing', 0)} | "
            f"{row.get('skipped', 0)} | {pass_rate_text(row)} | {cell(row.get('description') or '')} |"
        )
    return out + [""]


def left_out_text(left_out: Mapping[str, int]) -> str:
    """``"12 time budget, 3 0-dim input"`` (in the given order), or ``"none"``."""
    return ", ".join(f"{n} {reason}" for reason, n in left_out.items()) or "none"


def samples_markdown(summary: Mapping[str, Any]) -> list[str]:
    """Lines of the "Samples compared" table: per suite that selects samples, its tests, the samples
    compared of the OpInfo samples it had, and the left-out counts by reason (none when no record
    carries ``samples_total``)."""
    rows = summary["counts"].get("samples_by_suite") or {}
    if not rows:
        return []
    out = [
        "### Samples compared",
        "",
        "| suite | tests | samples compared | of | left out, by reason |",
        "|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        out.append(
            f"| {cell(name)} | {row['tests']} | {row['samples']} | {row['samples_total']} | "
            f"{cell(left_out_text(row['left_out']))} |"
        )
    return out + [""]


def suspects_markdown(summary: Mapping[str, Any], *, top: int = 20) -> list[str]:
    """The ``reference-suspect`` tests, each with the CPU op and how far its result is from float64 (or [])."""
    suspects = [r for r in summary["records"] if r["outcome"] == "reference-suspect"]
    if not suspects:
        return []
    shown = suspects[:top]
    more = f" (first {len(shown)} of {len(suspects)})" if len(suspects) > len(shown) else ""
    out = [
        f"### CPU reference suspect{more}",
        "",
        "The device agreed with an independent float64 computation where the CPU reference did not: neither a "
        "pass nor a failure of the device; the CPU op is named.",
        "",
    ]
    for r in shown:
        first = str(r.get("message") or "").strip().splitlines()
        out.append(
            f"- {code_span(r.get('op') or r['nodeid'])} ({cell(r.get('suite') or '')}, {cell(r.get('dtype') or '')}): "
            f"{cell(first[0][:300] if first else '')}"
        )
    return [*out, ""]


def to_markdown(summary: Mapping[str, Any], *, top: int = 20) -> str:
    """Render ``summary`` (a summary.json dict) as Markdown.

    Sections: headline verdict, incomplete-run banner (when ``complete`` is false), run
    line, counts per suite, samples compared per suite (:func:`samples_markdown`), aten coverage (when
    recorded), the CPU-fallback section (:func:`neuron_conformance.reports.fallback.markdown`), bug classes (when run), failures per class, most failing ops (ranked by
    failing tests then causes; one sentence when all are tied), the failures by cause, the ``top`` first
    failures (ranked by :func:`neuron_conformance.reports.model.failure_rank`) each with its repro command,
    and the warnings.
    """
    run = summary["run"]
    totals = summary["totals"]
    out: list[str] = [f"## {cell(headline(summary))}", ""]
    if not summary["complete"]:
        out += [
            "> [!WARNING]",
            f"> **Incomplete run**: the run was interrupted before it finished; only the "
            f"{totals['total']} tests that ran are counted.",
            "",
        ]
    meta = [f"torch {run.get('torch_version')}", f"harness {run.get('harness_version')}"]
    if run.get("dtypes"):
        meta.append("dtypes " + ", ".join(map(str, run["dtypes"])))
    meta.append(f"seed {run.get('seed')}")
    if run.get("shard"):
        meta.append(f"shard {run['shard'].get('id')} of {run['shard'].get('count')}")
    if run.get("started"):
        meta.append(f"{run.get('started')} → {run.get('finished') or '?'}")
    out += [cell(" · ".join(meta)), ""]

    suites = summary["counts"]["by_suite"]
    cols = sorted_outcomes(summary["counts"]["by_outcome"])
    out += ["| suite | " + " | ".join(cols) + " | total |", "|---" * (len(cols) + 2) + "|"]
    for name, table in suites.items():
        out.append(f"| {cell(name)} | " + " | ".join(str(table.get(c, 0)) for c in cols) + f" | {table['total']} |")
    allrow = summary["counts"]["by_outcome"]
    out.append("| **all** | " + " | ".join(f"**{allrow.get(c, 0)}**" for c in cols) + f" | **{allrow['total']}** |")
    out.append("")
    out += samples_markdown(summary)
    cov = summary.get("coverage")
    if cov and cov.get("executed"):
        core = cov.get("core_executed") or []
        line = (
            f"aten coverage: {len(cov['executed'])} of {cov.get('registered_total') or '?'} registered overloads "
            f"and {len(core)} of {cov.get('core_total') or '?'} core ops executed on the device"
        )
        missing = cov.get("core_missing") or []
        if cov.get("core_composite"):
            line += (
                f" ({len(cov['core_composite'])} more are PyTorch composites above this backend, which its "
                f"counter cannot see by name)"
            )
        if missing:
            shown = ", ".join(code_span(n) for n in missing[:15])
            line += f"; never executed: {shown}{' …' if len(missing) > 15 else ''}"
        out += [line, ""]
    elif isinstance(summary["run"].get("aten_coverage"), Mapping) and summary["run"]["aten_coverage"].get("reason"):
        out += [f"aten coverage: not traced ({summary['run']['aten_coverage']['reason']})", ""]
    out += audit.markdown(summary.get("aten_audit"), cell, code_span)
    out += fallback.markdown(summary.get("fallback"), cell, code_span)

    out += bug_classes_markdown(summary)
    classes = summary["counts"]["by_failure_class"]
    if classes:
        out += ["### Failures by class", "", "| failure class | count |", "|---|---|"]
        out += [f"| {cell(k)} | {v} |" for k, v in classes.items()]
        out.append("")
        rows, tie = most_failing(summary["counts"]["by_op"], causes_of(summary), top=10)
        out += ["### Most failing ops, models and scenarios", ""]
        if tie:
            out += [cell(tie), ""]
        else:
            out += ["| name | kind | failing | causes | total |", "|---|---|---|---|---|"]
            out += [
                f"| {cell(r['name'])} | {cell(r['kind'] or '')} | {r['failing']} | {r['causes']} | {r['total']} |"
                for r in rows
            ]
            out.append("")
    out += causes_markdown(summary, top=top)
    out += suspects_markdown(summary, top=top)

    failures = sorted((r for r in summary["records"] if r["outcome"] in FAILING), key=failure_rank)
    if failures:
        shown = failures[:top]
        more = f" (first {len(shown)} of {len(failures)})" if len(failures) > len(shown) else ""
        out += [f"### Top failures{more}", ""]
        for i, r in enumerate(shown, 1):
            where = ", ".join(
                str(x)
                for x in (
                    r.get("dtype"),
                    r.get("variant"),
                    None if r.get("sample") is None else f"sample {r['sample']}",
                )
                if x
            )
            line = (
                f"{i}. **{cell(r['outcome'])}** {cell(r.get('failure_class') or 'unclassified')} · "
                f"{code_span(r.get('op') or r['nodeid'])} ({cell(r.get('suite') or '')}{'; ' + cell(where) if where else ''})"
            )
            size = error_size(r)
            if size:
                line += f" · {cell(size)}"
            out.append(line)
            if r.get("message"):
                msg = str(r["message"]).strip().splitlines()[0] if str(r["message"]).strip() else ""
                out.append(f"   {code_span(msg[:300])}")
            repro = r.get("repro") or f"pytest {r['nodeid']!r}"
            fence = "`" * max(3, max((len(m) for m in re.findall(r"`+", str(repro))), default=0) + 1)
            out += ["", f"   {fence}sh", f"   {' '.join(str(repro).split())}", f"   {fence}", ""]
    warnings = summary.get("warnings") or []
    if warnings:
        out += [f"<details><summary>{len(warnings)} warning(s) while building the report</summary>", ""]
        out += [f"- {cell(w)}" for w in warnings[:50]]
        if len(warnings) > 50:
            out.append(f"- … and {len(warnings) - 50} more (see summary.json)")
        out += ["", "</details>", ""]
    return "\n".join(out).rstrip() + "\n"
