"""Read a report directory written by the harness.

Layout (docs/architecture.md and docs/reports.md)::

    <report-dir>/records/<worker>.jsonl   one JSON record per line, per xdist worker
    <report-dir>/run.json                 run metadata
    <report-dir>/coverage.json            optional aten coverage
    <report-dir>/repro/                   optional repro files

Merge rules for the worker files:

* files are read oldest first (modification time, then file name), each in line order;
* a record whose ``nodeid`` was already seen replaces the earlier one (a rerun after
  a worker crash keeps the last), and the replacement is counted in the warnings; when
  both records carry a numeric ``time`` (epoch seconds at write, as conformance.plugin
  writes it) the later ``time`` wins whatever the file order;
* the last line of a file may be truncated by a killed run: if it is not valid JSON
  it is skipped and counted as a warning; a malformed line anywhere else is an error
  (each file has one writer that flushes whole lines, the controller clears records/ at
  start, and a restarted xdist worker gets a new id, see ``DSession._clone_node`` in
  pytest-xdist's dsession.py, so no later line can follow a cut one).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._io import load_json_object
from .errors import ReportInputError
from .model import OUTCOMES, RECORD_SCHEMAS


@dataclass
class Collected:
    """Everything read from one report directory.

    Attributes:
        report_dir: the directory read.
        run: run.json as read (missing keys are not added here).
        records: merged records, one per nodeid, in first-seen order of their nodeid.
        coverage: coverage.json or None when absent.
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


def _worker_files(records_dir: Path) -> list[Path]:
    files = [p for p in records_dir.glob("*.jsonl") if p.is_file()]
    return sorted(files, key=lambda p: (p.stat().st_mtime_ns, p.name))


def _check_record(path: Path, lineno: int, rec: Any) -> dict[str, Any]:
    where = f"line {lineno}"
    if not isinstance(rec, dict):
        raise ReportInputError(path, f"{where}: expected a JSON object (one result record), got {type(rec).__name__}")
    schema = rec.get("schema", 1)
    if schema not in RECORD_SCHEMAS:
        raise ReportInputError(
            path,
            f"{where}: record schema {schema!r} is not supported (this reports package reads schema "
            f"{sorted(RECORD_SCHEMAS)}); upgrade the reports package or rerun with a matching harness",
        )
    for key in ("nodeid", "outcome"):
        if not isinstance(rec.get(key), str) or not rec.get(key):
            raise ReportInputError(path, f"{where}: record has no {key!r} string (got {rec.get(key)!r})")
    return rec


def _written_before(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """True when both records carry a numeric ``time`` and ``new`` was written strictly earlier."""
    a, b = new.get("time"), old.get("time")
    numeric = all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in (a, b))
    return numeric and a < b


def read_records(records_dir: Path) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]]]:
    """Merge the worker files of ``records_dir`` (see the module docstring for the rules).

    Returns:
        (records, warnings, sources): merged records, warnings, per-file statistics.
        A missing ``records_dir`` gives no records and one warning (a run killed before
        its first test).

    Raises:
        ReportInputError: a line other than the last of its file is malformed, a record
            is not an object, lacks ``nodeid``/``outcome``, or has an unsupported schema.
    """
    warnings: list[str] = []
    sources: list[dict[str, Any]] = []
    if not records_dir.is_dir():
        warnings.append(f"{records_dir}: no records directory; the run recorded no tests")
        return [], warnings, sources
    by_id: dict[str, dict[str, Any]] = {}
    origin: dict[str, str] = {}
    for path in _worker_files(records_dir):
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
        except OSError as exc:
            raise ReportInputError(path, f"cannot read worker records: {exc}") from None
        numbered = [(i + 1, line) for i, line in enumerate(lines) if line.strip()]
        count = truncated = 0
        for pos, (lineno, line) in enumerate(numbered):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                if pos == len(numbered) - 1:
                    truncated += 1
                    warnings.append(
                        f"{path}: line {lineno} is truncated or malformed (a killed run?); skipped"
                    )
                    continue
                raise ReportInputError(
                    path,
                    f"line {lineno}: malformed JSON ({exc.msg} at column {exc.colno}); only the last line "
                    "of a worker file may be truncated",
                ) from None
            rec = _check_record(path, lineno, rec)
            nodeid = rec["nodeid"]
            if nodeid in by_id:
                warnings.append(
                    f"{nodeid}: recorded twice ({origin[nodeid]} and {path.name}:{lineno}); kept the last"
                )
                if _written_before(rec, by_id[nodeid]):
                    continue
                del by_id[nodeid]  # re-insert so the order follows the kept record
            if rec["outcome"] not in OUTCOMES:
                warnings.append(f"{path}: line {lineno}: unknown outcome {rec['outcome']!r} for {nodeid}")
            by_id[nodeid] = rec
            origin[nodeid] = f"{path.name}:{lineno}"
            count += 1
        sources.append({"file": path.relative_to(records_dir.parent).as_posix(), "records": count,
                        "truncated_lines": truncated})
    return list(by_id.values()), warnings, sources


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
    repro_files = sorted(
        p.relative_to(report_dir).as_posix() for p in repro_dir.rglob("*") if p.is_file()
    ) if repro_dir.is_dir() else []
    return Collected(report_dir, run, records, coverage, repro_files, warnings, sources)
