"""The report's CPU-fallback section: native passes apart from fallback passes, per op and dtype.

A backend with op tracking (``CONFORMANCE_OP_TRACKING``, :mod:`neuron_conformance.conformance.backend.fallbacks`) writes the aten
ops that fell back to the CPU into each record's ``fallback_ops``; ``run.json``'s ``op_tracking`` says
whether it could (``{"by": spec or null, "reason": ...}``). A *fallback pass* is a passed test with
fallback ops: the CPU comparison passed, but the device did not run those ops. Under
``--conformance-require-native`` such a test is failed with class ``fallback`` instead (a *fallback failure*).
Without tracking nothing is counted and the section says why: fallback was not observable.

Torch-free (reads records and run metadata only), like every module of :mod:`reports`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping

from neuron_conformance.conformance.results.outcomes import FALLBACK

NO_TRACKING = "run.json has no op_tracking entry and no record carries fallback_ops: fallback was not observable"
"""The reason given for a report whose run says nothing about op tracking (a run from before it existed)."""


def observability(run: Mapping[str, Any], records: Iterable[Mapping[str, Any]]) -> tuple[bool, str | None, str | None]:
    """``(observable, by, reason)``: whether the run could tell native from fallback execution, the
    tracking's ``"module:attribute"`` and, when not observable, why (``run.json``'s ``op_tracking``)."""
    info = run.get("op_tracking")
    if isinstance(info, Mapping):
        by = info.get("by")
        return bool(by), by or None, None if by else str(info.get("reason") or NO_TRACKING)
    if any(isinstance(r.get("fallback_ops"), list) for r in records):
        return True, None, None
    return False, None, NO_TRACKING


def section(run: Mapping[str, Any], records: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The summary's ``fallback`` section.

    Returns ``{"observable": bool, "by": str | None, "reason": str | None, "native_passes": int | None,
    "fallback_passes": int | None, "fallback_failures": int | None, "fallback_ops": {aten op: tests},
    "rows": [{"op", "dtype", "native", "fallback", "failed", "fallback_ops": [names]}]}``; ``rows`` holds
    one row per (op, dtype) with a passed or fallback-failed test, sorted by op then dtype; counts are
    None (and ``rows`` empty) when fallback was not observable.
    """
    observable, by, reason = observability(run, records)
    out: dict[str, Any] = {
        "observable": observable,
        "by": by,
        "reason": reason,
        "native_passes": None,
        "fallback_passes": None,
        "fallback_failures": None,
        "fallback_ops": {},
        "rows": [],
    }
    if not observable:
        return out
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    ops: Counter = Counter()
    for r in records:
        fell = r.get("fallback_ops") or []
        passed = r.get("outcome") == "passed"
        failed = r.get("outcome") == "failed" and r.get("failure_class") == FALLBACK
        if not (passed or failed):
            continue
        key = (str(r.get("op")), str(r.get("dtype")))
        row = rows.setdefault(
            key, {"op": key[0], "dtype": key[1], "native": 0, "fallback": 0, "failed": 0, "fallback_ops": set()}
        )
        row["failed" if failed else "fallback" if fell else "native"] += 1
        row["fallback_ops"].update(fell)
        ops.update(set(fell))
    out["rows"] = [dict(row, fallback_ops=sorted(row["fallback_ops"])) for _, row in sorted(rows.items())]
    out["native_passes"] = sum(row["native"] for row in out["rows"])
    out["fallback_passes"] = sum(row["fallback"] for row in out["rows"])
    out["fallback_failures"] = sum(row["failed"] for row in out["rows"])
    out["fallback_ops"] = dict(sorted(ops.items()))
    return out


def headline(sec: Mapping[str, Any] | None) -> str:
    """One sentence about the section, e.g. ``CPU fallback: 120 native passes, 3 fallback passes (...)``."""
    if not sec:
        return f"CPU fallback: not observable ({NO_TRACKING})"
    if not sec.get("observable"):
        return f"CPU fallback: not observable ({sec.get('reason') or NO_TRACKING})"
    text = (
        f"CPU fallback: {sec['native_passes']} native passes, {sec['fallback_passes']} fallback passes "
        f"(passed with aten ops run on the CPU)"
    )
    if sec.get("fallback_failures"):
        text += f", {sec['fallback_failures']} failed as fallback (--conformance-require-native)"
    ops = sec.get("fallback_ops") or {}
    if ops:
        text += f"; {len(ops)} aten op(s) fell back: {', '.join(ops)}"
    return text


def markdown(sec: Mapping[str, Any] | None, cell, code_span) -> list[str]:
    """Markdown lines of the section: the headline, then the (op, dtype) rows with fallback (at most 50)."""
    out = [cell(headline(sec)), ""]
    rows = [r for r in (sec or {}).get("rows") or [] if r["fallback"] or r["failed"]]
    if rows:
        out += [
            "| op | dtype | native passes | fallback passes | failed as fallback | aten ops on the CPU |",
            "|---|---|---|---|---|---|",
        ]
        out += [
            f"| {code_span(r['op'])} | {cell(r['dtype'])} | {r['native']} | {r['fallback']} | {r['failed']} | "
            f"{' '.join(code_span(n) for n in r['fallback_ops'])} |"
            for r in rows[:50]
        ]
        if len(rows) > 50:
            out.append(f"| … {len(rows) - 50} more (summary.json, `fallback`) | | | | | |")
        out.append("")
    return out


__all__ = ["NO_TRACKING", "headline", "markdown", "observability", "section"]
