"""Result records: the schema, the writer, and the one reader that merges a run's record files.

Layout under a report dir (schema in docs/architecture.md, "Result records")::

    <report-dir>/records/<worker>.jsonl   one record per line, written by the process that ran the test
    <report-dir>/run.json                 run metadata, rewritten atomically at start and at end

Every worker (``gw0``, ``gw1``... under pytest-xdist, ``main`` without it) owns one file, so workers never
write to the same file; a killed worker loses at most the line it was writing.

:func:`merge_record_files` is the only code that reads record files: the report
(:mod:`neuron_conformance.reports.collect`), the proposed manifest (:mod:`neuron_conformance.conformance.results.manifest_update`), the model-zoo
matrix and the benchmarks all go through it (:func:`read_records` for callers that want a list), so
they cannot disagree about which record of a test counts. Merge rules:

* files are read oldest first (modification time, then file name), each in line order;
* a record whose ``nodeid`` was already seen replaces the earlier one (a rerun after a worker crash keeps
  the last), and the replacement is counted in the warnings; when both records carry a numeric ``time``
  (epoch seconds at write, as the plugin and the crash records write it) the later ``time`` wins whatever
  the file order; the merged list follows the order in which the kept records were read;
* the last line of a file may be truncated by a killed run: if it is not valid JSON it is skipped with a
  warning; a malformed line anywhere else is an error (each file has one writer that flushes whole lines,
  the controller clears records/ at start, and a restarted xdist worker gets a new id, see
  ``DSession._clone_node`` in pytest-xdist's dsession.py, so no later line can follow a cut one);
* a record must be a JSON object with non-empty ``nodeid`` and ``outcome`` strings and a ``schema`` of
  :data:`RECORD_SCHEMAS` (missing means 1); anything else is an error. An outcome not in
  :data:`neuron_conformance.conformance.results.outcomes.OUTCOMES` is kept, with a warning.

Errors are :class:`RecordsError`, naming the file and line (the reports turn them into
``neuron_conformance.reports.errors.ReportInputError``).

This module imports only the standard library and :mod:`neuron_conformance.conformance.results.outcomes` / :mod:`neuron_conformance.conformance.results.atomic`
(no torch), so :mod:`reports` can import it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, TypedDict

from neuron_conformance.conformance.results.atomic import write_json_atomic
from neuron_conformance.conformance.results.outcomes import OUTCOMES

SCHEMA = 1
"""Version of the record schema written in every record's ``schema`` field."""

RECORD_SCHEMAS = frozenset({SCHEMA})
"""Record schema versions :func:`merge_record_files` reads."""

MESSAGE_LIMIT = 2000
"""Longest ``message`` kept in a record, in characters."""

NON_NULL_FIELDS = frozenset({"schema", "nodeid", "outcome"})
"""Fields that are never null (``nodeid`` and ``outcome`` are required; a missing ``schema`` means 1).
Every other field of :class:`ResultRecord` is null, or absent, when it does not apply."""


class ResultRecord(TypedDict, total=False):
    """One result record (schema 1): the table of docs/architecture.md, "Result records (schema 1)".

    ``tests/conformance/test_record_schema.py`` checks that table against these fields and types. Suites
    may add fields of their own; readers keep unknown fields.
    """

    schema: int
    suite: str | None
    nodeid: str
    kind: str | None
    op: str | None
    variant: str | None
    dtype: str | None
    sample: int | None
    samples: int | None
    samples_total: int | None
    samples_left_out: dict[str, int] | None
    outcome: str
    failure_class: str | None
    rule: str | None
    max_abs: float | None
    max_rel: float | None
    max_ulp: float | None
    atol: float | None
    rtol: float | None
    message: str | None
    repro: str | None
    duration: float | None
    worker: str | None
    time: float | None
    expected_failure: str | None
    manifest_entry: str | None
    device_poisoned: bool | None
    repro_files: list[str] | None
    signal: str | None
    exit_code: int | None
    aten_op: str | None
    fallback_ops: list[str] | None
    not_claimed: list[str] | None


class RecordsError(ValueError):
    """A record file is unusable: a malformed line other than the last, a bad record, unreadable.

    Attributes:
        path: the record file (or directory) at fault.
        problem: what is wrong with it, starting with ``line N:`` when a line is at fault.
    """

    def __init__(self, path: str | os.PathLike, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


@dataclass
class MergedRecords:
    """What :func:`merge_record_files` read.

    Attributes:
        records: the merged records, one per nodeid (the rules are in the module docstring).
        warnings: human-readable notes (no records dir, truncated lines, duplicates, unknown outcomes).
        sources: one ``{"file", "records", "truncated_lines"}`` entry per file, ``file`` relative to the
            report dir (the parent of the records dir).
    """

    records: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)


def worker_id() -> str:
    """Name of this process's record file: the pytest-xdist worker id, or ``main``."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


class RecordWriter:
    """Appends records to ``<report_dir>/records/<worker>.jsonl``, one flushed line each.

    Args:
        report_dir: the report directory (created if missing).
        worker: file stem; default :func:`worker_id`.
    """

    def __init__(self, report_dir: str | os.PathLike, worker: str | None = None):
        self.dir = Path(report_dir) / "records"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.worker = worker or worker_id()
        self.path = self.dir / f"{self.worker}.jsonl"
        self._fh = None

    def write(self, record: dict) -> None:
        """Append one record (a JSON-serialisable dict; other values are written with ``repr``)."""
        rec = dict(record)
        rec.setdefault("schema", SCHEMA)
        rec.setdefault("worker", self.worker)
        msg = rec.get("message")
        if isinstance(msg, str) and len(msg) > MESSAGE_LIMIT:
            rec["message"] = msg[:MESSAGE_LIMIT] + " [...]"
        line = json.dumps(rec, default=repr, allow_nan=True)
        if self._fh is None:
            self._fh = open(self.path, "a", encoding="utf-8")
        self._fh.write(line + "\n")
        self._fh.flush()
        try:
            os.fsync(self._fh.fileno())
        except OSError:  # pragma: no cover - filesystems without fsync
            pass

    def close(self) -> None:
        """Close the file (records already written stay on disk)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _record_files(records_dir: Path) -> list[Path]:
    files = [p for p in records_dir.glob("*.jsonl") if p.is_file()]
    return sorted(files, key=lambda p: (p.stat().st_mtime_ns, p.name))


def _check_record(path: Path, lineno: int, rec: Any) -> dict[str, Any]:
    where = f"line {lineno}"
    if not isinstance(rec, dict):
        raise RecordsError(path, f"{where}: expected a JSON object (one result record), got {type(rec).__name__}")
    schema = rec.get("schema", 1)
    if schema not in RECORD_SCHEMAS:
        raise RecordsError(
            path,
            f"{where}: record schema {schema!r} is not supported (this harness and its reports read schema "
            f"{sorted(RECORD_SCHEMAS)}); upgrade the harness or rerun with a matching one",
        )
    for key in ("nodeid", "outcome"):
        if not isinstance(rec.get(key), str) or not rec.get(key):
            raise RecordsError(path, f"{where}: record has no {key!r} string (got {rec.get(key)!r})")
    return rec


def _written_before(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """True when both records carry a numeric ``time`` and ``new`` was written strictly earlier."""
    a, b = new.get("time"), old.get("time")
    numeric = all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in (a, b))
    return numeric and a < b


def merge_record_files(records_dir: str | os.PathLike) -> MergedRecords:
    """Read and merge the ``*.jsonl`` files of ``records_dir`` (rules: the module docstring).

    A missing ``records_dir`` gives no records and one warning (a run killed before its first test).

    Raises:
        RecordsError: a line other than the last of its file is malformed, a record is not an object,
            lacks ``nodeid``/``outcome``, or has an unsupported schema; a file cannot be read.
    """
    records_dir = Path(records_dir)
    out = MergedRecords()
    if not records_dir.is_dir():
        out.warnings.append(f"{records_dir}: no records directory; the run recorded no tests")
        return out
    by_id: dict[str, dict[str, Any]] = {}
    origin: dict[str, str] = {}
    for path in _record_files(records_dir):
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
        except OSError as exc:
            raise RecordsError(path, f"cannot read worker records: {exc}") from None
        numbered = [(i + 1, line) for i, line in enumerate(lines) if line.strip()]
        count = truncated = 0
        for pos, (lineno, line) in enumerate(numbered):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                if pos == len(numbered) - 1:
                    truncated += 1
                    out.warnings.append(f"{path}: line {lineno} is truncated or malformed (a killed run?); skipped")
                    continue
                raise RecordsError(
                    path,
                    f"line {lineno}: malformed JSON ({exc.msg} at column {exc.colno}); only the last line "
                    "of a worker file may be truncated",
                ) from None
            rec = _check_record(path, lineno, rec)
            nodeid = rec["nodeid"]
            if nodeid in by_id:
                out.warnings.append(
                    f"{nodeid}: recorded twice ({origin[nodeid]} and {path.name}:{lineno}); kept the last"
                )
                if _written_before(rec, by_id[nodeid]):
                    continue
                del by_id[nodeid]  # re-insert so the order follows the kept record
            if rec["outcome"] not in OUTCOMES:
                out.warnings.append(f"{path}: line {lineno}: unknown outcome {rec['outcome']!r} for {nodeid}")
            by_id[nodeid] = rec
            origin[nodeid] = f"{path.name}:{lineno}"
            count += 1
        out.sources.append(
            {"file": path.relative_to(records_dir.parent).as_posix(), "records": count, "truncated_lines": truncated}
        )
    out.records = list(by_id.values())
    return out


def read_records(report_dir: str | os.PathLike, warnings: list | None = None) -> list[dict]:
    """The merged records of ``<report_dir>/records`` (:func:`merge_record_files`), as a list.

    Args:
        report_dir: the report directory.
        warnings: when a list is given, the merge's warnings are appended to it.

    Raises:
        RecordsError: as :func:`merge_record_files`.
    """
    merged = merge_record_files(Path(report_dir) / "records")
    if warnings is not None:
        warnings.extend(merged.warnings)
    return merged.records


def clear_records(report_dir: str | os.PathLike) -> None:
    """Remove the record files of a previous run (called once, by the controlling process)."""
    rdir = Path(report_dir) / "records"
    if rdir.is_dir():
        for p in rdir.glob("*.jsonl"):
            p.unlink()


def count_outcomes(records: Iterable[dict]) -> dict[str, int]:
    """Number of records per ``outcome``."""
    out: dict[str, int] = {}
    for r in records:
        out[r.get("outcome", "unknown")] = out.get(r.get("outcome", "unknown"), 0) + 1
    return out


__all__ = [
    "MESSAGE_LIMIT",
    "NON_NULL_FIELDS",
    "RECORD_SCHEMAS",
    "SCHEMA",
    "MergedRecords",
    "RecordWriter",
    "RecordsError",
    "ResultRecord",
    "clear_records",
    "count_outcomes",
    "merge_record_files",
    "read_records",
    "worker_id",
    "write_json_atomic",
]
