"""Read a report directory written by the harness.

Layout (docs/architecture.md and docs/reports.md)::

    <report-dir>/records/<worker>.jsonl   one JSON record per line, per xdist worker
    <report-dir>/run.json                 run metadata
    <report-dir>/coverage.json            optional aten coverage
    <report-dir>/aten_audit.json          optional aten audit (neuron_conformance.reports.audit)
    <report-dir>/repro/                   optional repro files

The worker files are read and merged by the harness's one record reader,
:func:`neuron_conformance.conformance.results.records.merge_record_files` (its docstring has the merge rules: oldest
file first, a later ``time`` wins a duplicated ``nodeid``, only a file's last line may be
truncated), so the report, ``--conformance-update-manifest``, the model-zoo matrix and the benchmarks
agree on which record of a test counts. Its :class:`~neuron_conformance.conformance.results.records.RecordsError` is
raised here as :class:`~neuron_conformance.reports.errors.ReportInputError`, with the same file and problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuron_conformance.conformance.results.records import RecordsError, merge_record_files

from ._io import load_json_object
from .audit import read_audit
from .errors import ReportInputError


@dataclass
class Collected:
    """Everything read from one report directory.

    Attributes:
        report_dir: the directory read.
        run: run.json as read (missing keys are not added here).
        records: merged records, one per nodeid, in the order their kept records were read.
        coverage: coverage.json or None when absent.
        aten_audit: aten_audit.json (:mod:`neuron_conformance.reports.audit`) or None when absent.
        repro_files: files under ``repro/``, as POSIX paths relative to ``report_dir``.
        warnings: human-readable notes (truncated lines, duplicates, unknown outcomes).
        sources: one ``{"file", "records", "truncated_lines"}`` entry per worker file.
    """

    report_dir: Path
    run: dict[str, Any]
    records: list[dict[str, Any]]
    coverage: dict[str, Any] | None = None
    repro_files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
    aten_audit: dict[str, Any] | None = None


def read_records(records_dir: Path) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]]]:
    """Merge the worker files of ``records_dir`` (:func:`neuron_conformance.conformance.results.records.merge_record_files`).

    Returns:
        (records, warnings, sources): merged records, warnings, per-file statistics.
        A missing ``records_dir`` gives no records and one warning (a run killed before
        its first test).

    Raises:
        ReportInputError: a line other than the last of its file is malformed, a record
            is not an object, lacks ``nodeid``/``outcome``, or has an unsupported schema.
    """
    try:
        merged = merge_record_files(records_dir)
    except RecordsError as exc:
        raise ReportInputError(exc.path, exc.problem) from None
    return merged.records, merged.warnings, merged.sources


def read_run(path: Path) -> dict[str, Any]:
    """Read and check run.json (fields: docs/reports.md, "Inputs").

    Raises:
        ReportInputError: missing, malformed, not an object, or a field of the wrong type
            (``device`` / ``shard`` not an object, ``dtypes`` / ``argv`` not a list,
            ``complete`` not a boolean).
    """
    run = load_json_object(path, "run metadata (run.json)")
    checks = {"device": dict, "shard": dict, "dtypes": list, "argv": list, "complete": bool}
    for key, typ in checks.items():
        value = run.get(key)
        if value is not None and not isinstance(value, typ):
            raise ReportInputError(
                path, f"field {key!r} must be {typ.__name__} or null, got {type(value).__name__} {value!r}"
            )
    api = (run.get("device") or {}).get("api_support")
    if api is not None and not isinstance(api, dict):
        raise ReportInputError(path, f"field 'device.api_support' must be an object, got {type(api).__name__}")
    return run


def read_coverage(path: Path) -> dict[str, Any] | None:
    """Read coverage.json when present (None when absent).

    Raises:
        ReportInputError: malformed, or ``executed`` not an object of op name -> call count.
    """
    if not path.exists():
        return None
    cov = load_json_object(path, "aten coverage (coverage.json)")
    executed = cov.get("executed", {})
    if not isinstance(executed, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in executed.items()
    ):
        raise ReportInputError(path, "field 'executed' must map aten op names to integer call counts")
    for key in ("core_executed", "core_via_out", "core_composite", "core_missing"):
        value = cov.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ReportInputError(path, f"field {key!r} must be a list of aten op names")
    for key in ("registered_total", "core_total"):
        value = cov.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise ReportInputError(path, f"field {key!r} must be an integer, got {value!r}")
    return cov


def collect(report_dir: Path) -> Collected:
    """Read a whole report directory.

    Raises:
        ReportInputError: ``report_dir`` is not a directory, run.json is missing or bad,
            a worker file or coverage.json is bad (see the readers above).
    """
    report_dir = Path(report_dir)
    if not report_dir.is_dir():
        raise ReportInputError(report_dir, "report directory not found (expected run.json and records/ inside)")
    run = read_run(report_dir / "run.json")
    records, warnings, sources = read_records(report_dir / "records")
    if "complete" not in run:
        warnings.append(f"{report_dir / 'run.json'}: no 'complete' field; the run is treated as incomplete")
    coverage = read_coverage(report_dir / "coverage.json")
    repro_dir = report_dir / "repro"
    repro_files = (
        sorted(p.relative_to(report_dir).as_posix() for p in repro_dir.rglob("*") if p.is_file())
        if repro_dir.is_dir()
        else []
    )
    return Collected(
        report_dir,
        run,
        records,
        coverage,
        repro_files,
        warnings,
        sources,
        aten_audit=read_audit(report_dir / "aten_audit.json"),
    )
