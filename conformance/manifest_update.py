"""``--update-manifest``: propose a manifest from a run's result records.

:func:`propose` starts from the entries of the manifests the run used, removes every entry that a test
reported as stale (its expected failure passed), and adds one entry per new failure (a failed or errored
test that no entry covered) with its failure class as the reason. :func:`write_proposed` writes the result
to ``<report-dir>/manifest.proposed.toml`` and never touches the manifest files themselves.

Reasons must be manifest reasons (:data:`conformance.manifest.REASONS`); a failure class that is not one
is proposed as ``crash`` with a note naming the original class, for a human to review.

The records are read by the one reader of the project (:func:`conformance.records.read_records`), with the
report's merge rules, so the proposal and the report agree on which record of a test counts. Record files
the report refuses (a malformed line other than the last, a record without ``nodeid``/``outcome``) make
:func:`write_proposed` raise :class:`conformance.records.RecordsError` naming the file and line, and no
proposal is written.
"""

from __future__ import annotations

import os
from pathlib import Path

from .atomic import write_text_atomic
from .manifest import REASONS, Entry, Manifest, dump_manifest
from .outcomes import FAILING
from .records import read_records

PROPOSED_FILE = "manifest.proposed.toml"


def _new_entry(rec: dict) -> Entry | None:
    op = rec.get("op")
    if not op:
        return None
    reason = rec.get("failure_class") or "crash"
    note = (rec.get("message") or "").splitlines()[0][:160] if rec.get("message") else ""
    if reason not in REASONS:
        note = f"(proposed from failure class {reason!r}) " + note
        reason = "crash"
    dtype = rec.get("dtype")
    return Entry(op=op, reason=reason, dtypes=(dtype,) if dtype else None, variant=rec.get("variant"),
                 suite=rec.get("suite"), note=f"proposed by --update-manifest: {note}".strip())


def propose(manifest: Manifest, records: list[dict]) -> tuple[list[Entry], list[Entry], list[Entry]]:
    """Return ``(entries, added, removed)``: the proposed manifest entries and what changed.

    Args:
        manifest: the manifest(s) the run used.
        records: the run's merged result records (:func:`conformance.records.read_records`).
    """
    stale_sources = {r.get("manifest_entry") for r in records if r.get("failure_class") == "stale"}
    removed = [e for e in manifest.entries if e.source in stale_sources]
    kept = [e for e in manifest.entries if e.source not in stale_sources]
    added: list[Entry] = []
    seen = set()
    for rec in records:
        if rec.get("outcome") not in FAILING or rec.get("failure_class") == "stale":
            continue
        if rec.get("expected_failure"):
            continue
        entry = _new_entry(rec)
        if entry is None:
            continue
        key = (entry.op, entry.dtypes, entry.variant, entry.suite)
        if key in seen or any(e.matches(op=entry.op, dtype=rec.get("dtype"), variant=entry.variant,
                                        suite=entry.suite) for e in kept):
            continue
        seen.add(key)
        added.append(entry)
    return kept + added, added, removed


def write_proposed(report_dir: str | os.PathLike, manifest: Manifest) -> tuple[Path, list[Entry], list[Entry]]:
    """Write the proposed manifest to ``<report_dir>/manifest.proposed.toml``.

    Returns ``(path, added, removed)``. The manifests in use are only read.

    Raises:
        RecordsError: a record file is unusable (see the module docstring); nothing is written.
    """
    entries, added, removed = propose(manifest, read_records(report_dir))
    header = (f"# Proposed by --update-manifest from the records in {report_dir}: {len(added)} added, "
              f"{len(removed)} removed (stale). Review, then copy over your manifest.\n\n")
    path = Path(report_dir) / PROPOSED_FILE
    write_text_atomic(path, header + dump_manifest(entries))
    return path, added, removed


__all__ = ["PROPOSED_FILE", "propose", "write_proposed"]
