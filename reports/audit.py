"""The aten audit in the report: read ``aten_audit.json``, the summary's ``aten_audit`` section, its lines.

``aten_audit.json`` is written at the end of a traced run by :mod:`neuron_conformance.conformance.results.aten_audit` (which imports
torch; this module does not). The summary keeps a compact section (:func:`section`)::

    {"rule": str, "total": int, "counts": {"covered", "generated", "excluded", "unknown": int},
     "percent_reached": float, "percent_of_relevant": float, "covered_by_suite": {suite: int}, "excluded": [{"reason", "source",
     "count", "overloads": [names]}], "unknown": [names], "unknown_reasons": {name: reason},
     "core": {"total": int, "reached": int, "missing": [names]}}

``covered_by_suite`` counts, per suite, the covered overloads it executed (an overload run by two suites
counts in both).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ._io import load_json_object
from .errors import ReportInputError

DISPOSITIONS = ("covered", "generated", "excluded", "unknown")


def read_audit(path: Path) -> dict[str, Any] | None:
    """Read ``aten_audit.json`` when present (None when absent).

    Raises:
        ReportInputError: malformed, ``counts`` not an object of the four dispositions to integers, or
            ``unknown`` / ``generated`` not lists of names, ``excluded`` / ``covered`` not objects.
    """
    if not path.exists():
        return None
    data = load_json_object(path, "aten audit (aten_audit.json)")
    counts = data.get("counts")
    if not isinstance(counts, dict) or any(
        not isinstance(counts.get(k), int) or isinstance(counts.get(k), bool) for k in DISPOSITIONS
    ):
        raise ReportInputError(path, f"field 'counts' must map each of {list(DISPOSITIONS)} to an integer")
    for key in ("unknown", "generated"):
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ReportInputError(path, f"field {key!r} must be a list of aten overload names")
    for key in ("excluded", "covered", "core"):
        if not isinstance(data.get(key, {}), dict):
            raise ReportInputError(path, f"field {key!r} must be an object")
    return data


def section(audit: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The summary's ``aten_audit`` section (see the module) of an ``aten_audit.json``, or None."""
    if not audit:
        return None
    by_suite: dict[str, int] = {}
    for suites in (audit.get("covered") or {}).values():
        for s in suites:
            by_suite[s] = by_suite.get(s, 0) + 1
    excluded = [
        {
            "reason": reason,
            "source": e.get("source", ""),
            "count": len(e.get("overloads") or []),
            "overloads": list(e.get("overloads") or []),
        }
        for reason, e in (audit.get("excluded") or {}).items()
    ]
    excluded.sort(key=lambda e: -e["count"])
    return {
        "rule": audit.get("rule", ""),
        "total": audit.get("total", 0),
        "counts": dict(audit["counts"]),
        "percent_reached": audit.get("percent_reached", 0.0),
        "percent_of_relevant": audit.get("percent_of_relevant", 0.0),
        "covered_by_suite": dict(sorted(by_suite.items(), key=lambda kv: -kv[1])),
        "excluded": excluded,
        "unknown": list(audit.get("unknown") or []),
        "unknown_reasons": dict(audit.get("unknown_reasons") or {}),
        "core": dict(audit.get("core") or {}),
    }


def markdown(sec: Mapping[str, Any] | None, cell, code_span, shown: int = 1000) -> list[str]:
    """``summary.md`` lines of the audit section: the disposition table, the exclusions by reason, the
    core line and the unknown list in a collapsed ``<details>`` block (``cell`` / ``code_span`` escape)."""
    if not sec:
        return []
    counts, total = sec["counts"], sec["total"] or 1
    reached = counts["covered"] + counts["generated"]
    core = sec.get("core") or {}
    out = [
        "### aten audit",
        "",
        f"{reached} of {sec['total']} aten overloads with a CPU kernel covered or generated "
        f"({sec['percent_reached']}%; {sec.get('percent_of_relevant', 0.0)}% of the overloads not excluded); core ops: {core.get('reached', '?')} of {core.get('total', '?')}. "
        f"Counted: overloads that {cell(sec['rule'])}.",
        "",
        "| disposition | overloads | share |",
        "|---|---|---|",
    ]
    out += [f"| {d} | {counts[d]} | {100.0 * counts[d] / total:.1f}% |" for d in DISPOSITIONS]
    out.append("")
    if sec.get("covered_by_suite"):
        out += ["covered by suite: " + ", ".join(f"{cell(s)} {n}" for s, n in sec["covered_by_suite"].items()), ""]
    if sec["excluded"]:
        out += ["| excluded because | overloads | source |", "|---|---|---|"]
        out += [f"| {cell(e['reason'])} | {e['count']} | {cell(e['source'])} |" for e in sec["excluded"]]
        out.append("")
    if core.get("missing"):
        out += ["core ops not reached: " + ", ".join(code_span(n) for n in core["missing"]), ""]
    if sec["unknown"]:
        names = sec["unknown"]
        out += [
            f"<details><summary>{len(names)} unknown overloads</summary>",
            "",
            ", ".join(code_span(n) for n in names[:shown])
            + (f" … ({len(names) - shown} more)" if len(names) > shown else ""),
            "",
            "</details>",
            "",
        ]
    return out


__all__ = ["DISPOSITIONS", "markdown", "read_audit", "section"]
