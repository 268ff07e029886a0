"""Render a summary as one self-contained ``index.html`` (jinja2, autoescape on).

The page needs no network: CSS and JS are inlined from ``reports/templates``. Small
tables (run header, failures by cause with the most failing ops, model zoo, scenarios, device API support, bug classes, coverage, counts) are
rendered server side by jinja2 with autoescaping. The op x dtype matrix and the
failures table are drawn by a small script from the records embedded as JSON in a
``<script type="application/json">`` block, in a compact form (strings interned, one
array per record) so that ~20,000 records stay in the low megabytes. The script only
writes test strings with ``textContent`` / ``title``, never as HTML.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping

import jinja2
from markupsafe import Markup

from neuron_conformance.conformance.results.causes import most_failing
from neuron_conformance.conformance.results.outcomes import FAILING, OUTCOME_SEVERITY, OUTCOMES

from .bug_classes import pass_rate_text
from .fallback import headline as fallback_headline
from .model import dtype_sort_key, worst_outcome
from .summary import causes_of
from .to_markdown import error_size, headline

TEMPLATES = Path(__file__).with_name("templates")

#: Model checks in display order (docs/architecture.md: ``variant`` of model records).
MODEL_CHECKS = ("forward", "backward", "train", "generate", "router", "compile")

#: Columns of one embedded record, in order (see :func:`page_data`).
ROW_COLUMNS = (
    "op",
    "dtype",
    "suite",
    "variant",
    "outcome",
    "failure_class",
    "kind",
    "family",
    "max_abs",
    "max_rel",
    "max_ulp",
    "atol",
    "rtol",
    "headroom",
    "sample",
    "detail",
)
#: Short cell text per outcome (the page script uses the same symbols).
SYMBOLS = {
    "passed": "\u2713",
    "failed": "\u2717",
    "error": "!",
    "xfailed": "x",
    "xpassed": "X",
    "no-reference": "?",
    "reference-suspect": "r",
    "expected-unreached": "~",
    "not-claimed": "n",
    "skipped": "\u2013",
}
_INTERNED = {"op", "dtype", "suite", "variant", "outcome", "failure_class", "kind", "family"}


def json_for_script(data: Any) -> Markup:
    """Serialize ``data`` for a ``<script type="application/json">`` block.

    ``<``, ``>`` and ``&`` are written as ``\\u003c`` etc., and U+2028/U+2029 escaped, so
    no test string can close the block (``</script>``) or open a comment; ``JSON.parse``
    restores them. Non-finite floats must be removed before (they are not JSON).
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return Markup(text)


def _num(x: Any) -> float | int | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return x if math.isfinite(x) else None


def page_data(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The compact data the page script reads.

    Returns a dict with ``strings`` (interned strings), ``columns`` (:data:`ROW_COLUMNS`),
    ``rows`` (one list per record; interned fields are indices into ``strings`` or -1 for
    null; ``detail`` indexes ``details`` or is -1), ``details`` (nodeid, message, repro,
    rule, duration, worker of every record that did not pass), ``dtypes`` (matrix
    columns), ``outcomes`` and ``severity``.
    """
    strings: list[str] = []
    index: dict[str, int] = {}

    def intern(s: Any) -> int:
        if s is None:
            return -1
        s = str(s)
        if s not in index:
            index[s] = len(strings)
            strings.append(s)
        return index[s]

    rows, details = [], []
    for r in summary["records"]:
        row = []
        for col in ROW_COLUMNS:
            if col in _INTERNED:
                row.append(intern(r.get(col)))
            elif col == "detail":
                if r["outcome"] != "passed":
                    details.append(
                        {
                            k: (r.get(k) if k != "duration" else _num(r.get(k)))
                            for k in ("nodeid", "message", "repro", "rule", "duration", "worker")
                        }
                    )
                    row.append(len(details) - 1)
                else:
                    row.append(-1)
            else:
                row.append(_num(r.get(col)))
        rows.append(row)
    dtypes = sorted({r.get("dtype") for r in summary["records"] if r.get("kind") in ("op", None)}, key=dtype_sort_key)
    return {
        "strings": strings,
        "columns": list(ROW_COLUMNS),
        "rows": rows,
        "details": details,
        "dtypes": [d if d is not None else "(none)" for d in dtypes],
        "outcomes": list(OUTCOMES),
        "severity": OUTCOME_SEVERITY,
        "failing": sorted(FAILING),
    }


def _cell(records: list[Mapping[str, Any]]) -> dict[str, Any]:
    worst = worst_outcome(r["outcome"] for r in records)
    counts = defaultdict(int)
    for r in records:
        counts[r["outcome"]] += 1
    bad = [r for r in records if r["outcome"] == worst]
    tip = [", ".join(f"{n} {o}" for o, n in counts.items())]
    for r in bad[:3]:
        parts = [str(r.get("failure_class") or ""), error_size(r), str(r.get("message") or "")[:300]]
        tip.append(" · ".join(p for p in parts if p))
    return {"outcome": worst, "title": "\n".join(t for t in tip if t), "n": len(records)}


def model_matrix(records: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Model zoo matrix (model x dtype x check) from the records of kind ``model``."""
    models = [r for r in records if r.get("kind") == "model"]
    checks = sorted(
        {str(r.get("variant")) for r in models},
        key=lambda c: (MODEL_CHECKS.index(c) if c in MODEL_CHECKS else len(MODEL_CHECKS), c),
    )
    dtypes = sorted({r.get("dtype") for r in models}, key=dtype_sort_key)
    grid: dict[tuple, list] = defaultdict(list)
    for r in models:
        grid[(str(r.get("op")), r.get("dtype"), str(r.get("variant")))].append(r)
    rows = []
    for name in sorted({str(r.get("op")) for r in models}):
        cells = []
        for d in dtypes:
            for c in checks:
                recs = grid.get((name, d, c))
                cells.append(_cell(recs) if recs else None)
        rows.append({"model": name, "cells": cells})
    return {"checks": checks, "dtypes": [d or "(none)" for d in dtypes], "rows": rows}


def api_table(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Device API support rows: name, support (native/shim/missing) and the api tests' outcomes."""
    support = (summary["run"].get("device") or {}).get("api_support") or {}
    by_name: dict[str, list] = defaultdict(list)
    for r in summary["records"]:
        if r.get("kind") == "api":
            by_name[str(r.get("op"))].append(r)
    rows = []
    for name in sorted(set(support) | set(by_name)):
        recs = by_name.get(name, [])
        rows.append(
            {"name": name, "support": support.get(name, "not declared"), "tests": _cell(recs) if recs else None}
        )
    return rows


def coverage_not_traced(summary: Mapping[str, Any]) -> str | None:
    """Why aten coverage was not traced (run.json ``aten_coverage.reason``), or None."""
    info = (summary.get("run") or {}).get("aten_coverage") or {}
    return info.get("reason") if isinstance(info, Mapping) else None


def coverage_view(coverage: Mapping[str, Any] | None, top: int = 50) -> dict[str, Any] | None:
    """Numbers and lists of the coverage section, or None without coverage.json."""
    if not coverage:
        return None
    executed = coverage.get("executed") or {}
    core_exec = coverage.get("core_executed") or []
    core_total = coverage.get("core_total")
    registered = coverage.get("registered_total")

    def pct(a: int, b: int | None) -> str:
        return f"{100.0 * a / b:.1f}%" if b else "n/a"

    return {
        "executed": len(executed),
        "registered_total": registered,
        "executed_pct": pct(len(executed), registered),
        "core_total": core_total,
        "core_executed": len(core_exec),
        "core_pct": pct(len(core_exec), core_total),
        "core_missing": sorted(coverage.get("core_missing") or []),
        "core_via_out": len(coverage.get("core_via_out") or []),
        "core_composite": sorted(coverage.get("core_composite") or []),
        "counted_by": coverage.get("counted_by") or "",
        "top": sorted(executed.items(), key=lambda kv: (-kv[1], kv[0]))[:top],
    }


def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _static(name: str) -> Markup:
    text = (TEMPLATES / name).read_text(encoding="utf-8")
    if "</script" in text.lower() or "</style" in text.lower():
        raise ValueError(f"{TEMPLATES / name}: static asset must not contain a closing script/style tag")
    return Markup(text)


def bug_class_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows of the "Bug classes" table: name, cases, passed, failing, skipped, pass rate text and
    description, from ``summary["bug_classes"]`` (empty when absent: a run without the bug-class suite)."""
    return [
        {
            "name": name,
            "cases": row.get("cases", 0),
            "passed": row.get("passed", 0),
            "failing": row.get("failing", 0),
            "skipped": row.get("skipped", 0),
            "rate": pass_rate_text(row),
            "description": row.get("description") or "",
        }
        for name, row in (summary.get("bug_classes") or {}).items()
    ]


def render_html(summary: Mapping[str, Any]) -> str:
    """Render the whole page for ``summary`` (a summary.json dict) and return it as text."""
    records = summary["records"]
    run = summary["run"]
    device = run.get("device") or {}
    failing = [r for r in records if r["outcome"] in FAILING]
    causes = causes_of(summary)
    most_rows, most_tie = most_failing(summary["counts"]["by_op"], causes, top=10)
    scenarios = sorted(
        (r for r in records if r.get("kind") == "scenario"),
        key=lambda r: (str(r.get("op")), str(r.get("variant")), dtype_sort_key(r.get("dtype"))),
    )
    return (
        _env()
        .get_template("index.html.j2")
        .render(
            summary=summary,
            run=run,
            device=device,
            headline=headline(summary, icon=False),
            totals=summary["totals"],
            counts=summary["counts"],
            outcomes=OUTCOMES,
            n_failing=len(failing),
            failing_causes=[c for c in causes if not c.get("expected")],
            expected_causes=[c for c in causes if c.get("expected")],
            most_rows=most_rows,
            most_tie=most_tie,
            models=model_matrix(records),
            scenarios=scenarios,
            api_rows=api_table(summary),
            coverage=coverage_view(summary.get("coverage")),
            coverage_not_traced=coverage_not_traced(summary),
            audit=summary.get("aten_audit"),
            fallback=summary.get("fallback"),
            fallback_headline=fallback_headline(summary.get("fallback")),
            warnings=summary.get("warnings") or [],
            bug_classes=bug_class_rows(summary),
            classes=sorted({str(r["failure_class"]) for r in records if r.get("failure_class")}),
            data=json_for_script(page_data(summary)),
            symbols=SYMBOLS,
            css=_static("report.css"),
            js=_static("report.js"),
        )
    )
