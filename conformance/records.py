"""Result records: one JSON line per test, appended to a per-worker file and flushed at once.

Layout under a report dir (schema in docs/architecture.md)::

    <report-dir>/records/<worker>.jsonl   one record per line, written by the process that ran the test
    <report-dir>/run.json                 run metadata, rewritten atomically at start and at end

Every worker (``gw0``, ``gw1``... under pytest-xdist, ``main`` without it) owns one file, so workers never
write to the same file; a killed worker loses at most the line it was writing, and
:func:`read_records` skips a truncated last line.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

SCHEMA = 1
"""Version of the record schema written in every record's ``schema`` field."""

MESSAGE_LIMIT = 2000
"""Longest ``message`` kept in a record, in characters."""


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


def iter_record_lines(path: Path) -> Iterator[tuple[int, dict | None, str]]:
    """Yield ``(line_number, record_or_None, raw_line)`` for each non-empty line of a records file.

    A line that is not a JSON object (a truncated last line of a killed run) gives ``None``.
    """
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, raw in enumerate(fh, 1):
            raw = raw.strip()
            if not raw:
                continue
            try:
                rec = json.loads(raw)
            except json.JSONDecodeError:
                yield n, None, raw
                continue
            yield n, rec if isinstance(rec, dict) else None, raw


def read_records(report_dir: str | os.PathLike, warnings: list | None = None) -> list[dict]:
    """Read and merge every worker's records under ``report_dir``.

    Records are ordered by file name then line. When the same ``nodeid`` appears more than once (a test
    re-run after its worker crashed, or a crash record written by the controller), the last one wins.
    Unreadable lines are skipped and described in ``warnings`` when a list is given.
    """
    rdir = Path(report_dir) / "records"
    merged: dict[str, dict] = {}
    anonymous: list[dict] = []
    if not rdir.is_dir():
        return []
    for path in sorted(rdir.glob("*.jsonl")):
        for n, rec, raw in iter_record_lines(path):
            if rec is None:
                if warnings is not None:
                    warnings.append(f"{path}:{n}: unreadable record skipped ({raw[:60]!r})")
                continue
            key = rec.get("nodeid")
            if key is None:
                anonymous.append(rec)
            else:
                merged.pop(key, None)
                merged[key] = rec
    return list(merged.values()) + anonymous


def write_json_atomic(path: str | os.PathLike, data) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary file and a rename: never half-written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, default=repr)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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
