"""Build, write and load ``summary.json`` (schema: docs/reports.md, "summary.json").

``summary.json`` is the one machine-readable result of a run; summary.md, index.html,
the terminal table, the baseline diff and the shard merge all read it.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterable, Mapping

from neuron_conformance.conformance.results.causes import group_causes
from neuron_conformance.conformance.results.outcomes import (
    EXPECTED_UNREACHED,
    FAILING,
    NO_REFERENCE,
    NOT_CLAIMED,
    OUTCOMES,
    REFERENCE_SUSPECT,
)

from . import audit, fallback
from ._io import load_json_object, write_text_atomic
from .bug_classes import bug_class_table
from .collect import Collected
from .errors import ReportInputError
from .model import RECORD_FIELDS, headroom, op_family, outcome_sort_key

#: Version of the summary.json layout; bump on any incompatible change (docs/reports.md).
SCHEMA_VERSION = 1

#: Run fields always present in ``summary["run"]`` (null when run.json lacks them).
RUN_FIELDS = (
    "device",
    "torch_version",
    "harness_version",
    "dtypes",
    "seed",
    "started",
    "finished",
    "complete",
    "argv",
    "shard",
)

#: Device fields always present in ``summary["run"]["device"]``.
DEVICE_FIELDS = ("type", "backend", "backend_version", "emulated", "mirrors_cpu", "dist_backend", "api_support")

NO_VALUE = "(none)"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def iso_time(value: Any) -> Any:
    """Epoch seconds (int/float) -> ISO 8601 UTC text such as ``2026-11-29T20:00:00Z``; other values unchanged."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        try:
            stamp = _dt.datetime.fromtimestamp(float(value), _dt.timezone.utc)
        except (OverflowError, OSError, ValueError):
            return value
        return stamp.replace(microsecond=0).isoformat().replace("+00:00", "Z")
    return value


def _epoch(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return _dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def normalize_run(run: Mapping[str, Any]) -> dict[str, Any]:
    """Return run metadata with every field of :data:`RUN_FIELDS` present; unknown keys are kept.

    ``started`` / ``finished`` given as epoch seconds (as the plugin writes them) become ISO
    8601 UTC strings; ``duration`` (seconds, or None) is added from the two.
    """
    out = dict(run)
    for key in RUN_FIELDS:
        out.setdefault(key, None)
    start, end = _epoch(out["started"]), _epoch(out["finished"])
    out["duration"] = round(end - start, 3) if start is not None and end is not None else None
    out["started"], out["finished"] = iso_time(out["started"]), iso_time(out["finished"])
    device = dict(out["device"] or {})
    for key in DEVICE_FIELDS:
        device.setdefault(key, None)
    device["api_support"] = dict(device["api_support"] or {})
    out["device"] = device
    out["complete"] = bool(out["complete"])
    return out


def normalize_record(rec: Mapping[str, Any]) -> dict[str, Any]:
    """Copy a record, add missing schema-1 fields as None and the derived ``family`` and ``headroom``.

    Unknown fields are kept as they are.
    """
    out = dict(rec)
    for key in RECORD_FIELDS:
        out.setdefault(key, None)
    out["family"] = op_family(out.get("op"), out.get("kind"))
    out["headroom"] = headroom(out)
    return out


def _outcome_table(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    c = Counter(r["outcome"] for r in records)
    table = {o: c.get(o, 0) for o in OUTCOMES}
    for extra in sorted(set(c) - set(OUTCOMES)):
        table[extra] = c[extra]
    table["total"] = sum(c.values())
    return table


def _group(records: list[dict[str, Any]], key: str) -> dict[str, dict[str, int]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        value = r.get(key)
        groups[NO_VALUE if value is None else str(value)].append(r)
    return {k: _outcome_table(groups[k]) for k in sorted(groups)}


def compute_counts(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts of outcomes overall and per suite, kind, op, dtype, family and failure class, and the
    samples compared and left out per suite (:func:`compute_sample_counts`).

    ``by_failure_class`` counts only failing records (outcome ``failed`` or ``error``);
    a failing record without a class counts as ``unclassified``.
    """
    by_op = _group(records, "op")
    first: dict[str, dict[str, Any]] = {}
    for r in records:
        first.setdefault(NO_VALUE if r.get("op") is None else str(r["op"]), r)
    for name, table in by_op.items():
        table["kind"] = first[name].get("kind")
        table["family"] = first[name].get("family")
    classes = Counter(r.get("failure_class") or "unclassified" for r in records if r["outcome"] in FAILING)
    return {
        "by_outcome": _outcome_table(records),
        "by_suite": _group(records, "suite"),
        "by_kind": _group(records, "kind"),
        "by_op": by_op,
        "by_dtype": _group(records, "dtype"),
        "by_family": _group(records, "family"),
        "by_failure_class": dict(sorted(classes.items(), key=lambda kv: (-kv[1], kv[0]))),
        "samples_by_suite": compute_sample_counts(records),
    }


def compute_sample_counts(records: list[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per suite, how many OpInfo samples its tests compared and why the others were left out.

    Reads the records that carry ``samples_total`` (the suites that select samples: variants, layouts,
    autograd; docs/architecture.md, "Result records"). Returns ``{suite: {"tests": int, "samples": int
    (compared), "samples_total": int, "left_out": {reason: int} (largest first)}}``, suites sorted; a
    record whose ``samples`` or ``samples_left_out`` is missing counts as 0 / none.
    """
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        total = r.get("samples_total")
        if not isinstance(total, int) or isinstance(total, bool):
            continue
        row = out.setdefault(
            NO_VALUE if r.get("suite") is None else str(r["suite"]),
            {"tests": 0, "samples": 0, "samples_total": 0, "left_out": Counter()},
        )
        row["tests"] += 1
        row["samples"] += r.get("samples") or 0
        row["samples_total"] += total
        for reason, n in (r.get("samples_left_out") or {}).items():
            row["left_out"][str(reason)] += int(n)
    for row in out.values():
        row["left_out"] = dict(sorted(row["left_out"].items(), key=lambda kv: (-kv[1], kv[0])))
    return dict(sorted(out.items()))


def verdict(records: list[Mapping[str, Any]]) -> str:
    """``failed`` when any record failed or errored, ``passed`` when there are records, else ``empty``."""
    if any(r["outcome"] in FAILING for r in records):
        return "failed"
    return "passed" if records else "empty"


def make_summary(
    run: Mapping[str, Any],
    records: Iterable[Mapping[str, Any]],
    *,
    coverage: Mapping[str, Any] | None = None,
    aten_audit: Mapping[str, Any] | None = None,
    repro_files: Iterable[str] = (),
    warnings: Iterable[str] = (),
    sources: Iterable[Mapping[str, Any]] = (),
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble a summary dict (schema :data:`SCHEMA_VERSION`) from run metadata and merged records."""
    recs = [normalize_record(r) for r in records]
    run_n = normalize_run(run)
    counts = compute_counts(recs)
    totals = dict(counts["by_outcome"])
    totals["failing"] = sum(totals.get(o, 0) for o in FAILING)
    summary: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "generator": "reports",
        "generated": _now(),
        "verdict": verdict(recs),
        "complete": run_n["complete"],
        "run": run_n,
        "totals": totals,
        "counts": counts,
        "causes": group_causes(recs),
        "bug_classes": bug_class_table(recs),
        "coverage": dict(coverage) if coverage is not None else None,
        "aten_audit": audit.section(aten_audit),
        "fallback": fallback.section(run_n, recs),
        "repro_files": list(repro_files),
        "sources": [dict(s) for s in sources],
        "warnings": list(dict.fromkeys(warnings)),
    }
    if extra:
        summary.update(extra)
    summary["records"] = recs
    return summary


def summary_from_collected(collected: Collected) -> dict[str, Any]:
    """Build the summary of one report directory read by :func:`neuron_conformance.reports.collect.collect`."""
    return make_summary(
        collected.run,
        collected.records,
        coverage=collected.coverage,
        aten_audit=collected.aten_audit,
        repro_files=collected.repro_files,
        warnings=collected.warnings,
        sources=collected.sources,
    )


def dumps_summary(summary: Mapping[str, Any]) -> str:
    """Serialize a summary to JSON text (non-finite floats become null, unknown objects ``repr``)."""

    def clean(value: Any) -> Any:
        if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
            return None
        if isinstance(value, dict):
            return {str(k): clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        if value is None or isinstance(value, (str, int, float, bool)):
            return value
        return repr(value)

    data = clean(summary)
    records = data.pop("records", [])
    head = json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False)
    # one record per line keeps the file greppable without the cost of indenting every field
    lines = [json.dumps(r, ensure_ascii=False, allow_nan=False, separators=(",", ":")) for r in records]
    body = "[\n" + ",\n".join(lines) + "\n]" if lines else "[]"
    return head[:-2] + ',\n "records": ' + body + "\n}\n" if data else '{"records": ' + body + "}\n"


def write_summary(summary: Mapping[str, Any], path: Path) -> None:
    """Write ``summary`` to ``path`` atomically."""
    write_text_atomic(path, dumps_summary(summary))


def load_summary(path: Path | str) -> dict[str, Any]:
    """Load and check a summary.json.

    Args:
        path: a summary.json, or a report directory holding one.

    Raises:
        ReportInputError: missing or malformed file, no ``schema_version`` (not a summary),
            a different ``schema_version``, or ``run``/``records`` of the wrong type.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "summary.json"
    data = load_json_object(path, "report summary (summary.json)")
    if "schema_version" not in data:
        raise ReportInputError(
            path,
            "no 'schema_version' field: not a summary.json written by `python -m neuron_conformance.reports build`",
        )
    if data["schema_version"] != SCHEMA_VERSION:
        raise ReportInputError(
            path,
            f"summary schema_version {data['schema_version']!r} is not supported (this reports package reads "
            f"{SCHEMA_VERSION}); rebuild it with `python -m neuron_conformance.reports build <report-dir>`",
        )
    if not isinstance(data.get("run"), dict):
        raise ReportInputError(path, "field 'run' must be an object")
    records = data.get("records")
    if not isinstance(records, list) or not all(
        isinstance(r, dict) and isinstance(r.get("nodeid"), str) and isinstance(r.get("outcome"), str) for r in records
    ):
        raise ReportInputError(path, "field 'records' must be a list of records, each with 'nodeid' and 'outcome'")
    return data


def causes_of(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``causes`` of a summary; computed from its records for a summary written before they existed."""
    causes = summary.get("causes")
    return list(causes) if isinstance(causes, list) else group_causes(summary.get("records") or [])


def sorted_outcomes(table: Mapping[str, int]) -> list[str]:
    """Outcome keys of a count table (without ``total``), in display order; ``no-reference``,
    ``reference-suspect``, ``expected-unreached`` and ``not-claimed`` only when the table counts some (columns most runs never fill)."""
    return sorted(
        (
            k
            for k in table
            if k not in ("total", "kind", "family")
            and not (k in (NO_REFERENCE, REFERENCE_SUSPECT, EXPECTED_UNREACHED, NOT_CLAIMED) and not table.get(k))
        ),
        key=outcome_sort_key,
    )
