"""``--conformance-update-manifest``: propose a manifest from a run's result records.

:func:`propose_groups` starts from the entries of the manifests the run used. An entry some of whose tests
were reported stale (the expected failure passed) is removed when none of its tests still fails, and
otherwise narrowed to the tests that still fail (strict xfail: every matched test that passes fails as
stale, so a broad entry must not keep covering passing tests). Then the new failures (failed or errored
tests that no entry covered) are grouped by cause (:func:`neuron_conformance.conformance.results.causes.cause_key`), and each cause
becomes as few entries as cover exactly its failing tests: per (suite, variant), the ops that fail with the
same dtypes share one entry with an op list; the dtype list is left out when an op failed in every dtype
the run tested it in; and a list that holds every op of a dotted family the run tested (at least
:data:`GLOB_MIN` of them, e.g. every ``nn.functional.*`` op) becomes that glob. :func:`write_proposed` writes
``<report-dir>/manifest.proposed.toml``: the kept entries, then one block per cause (largest first) under a
comment naming the cause and its count, entries sorted by suite, op and dtype, notes cut at a word
boundary. It never touches the manifest files themselves.

Numeric entries always get bounds (:mod:`neuron_conformance.conformance.verdict.expectations`): for each dtype, the largest
``max_abs``, ``max_rel`` and ``max_ulp`` of the entry's failing records (xfailed, failed as ``unexpected``,
or, for a new entry, the failures it covers), with the entry's margin or
:data:`neuron_conformance.conformance.results.manifest.DEFAULT_MARGIN`; a dtype the run did not test keeps the bound it had.

Reasons must be manifest reasons (:data:`neuron_conformance.conformance.results.manifest.REASONS`); a failure class that is not one
is proposed as ``crash`` with a note naming the original class, for a human to review.

The records are read by the one reader of the project (:func:`neuron_conformance.conformance.results.records.read_records`), with the
report's merge rules, so the proposal and the report agree on which record of a test counts. Record files
the report refuses (a malformed line other than the last, a record without ``nodeid``/``outcome``) make
:func:`write_proposed` raise :class:`neuron_conformance.conformance.results.records.RecordsError` naming the file and line, and no
proposal is written.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from neuron_conformance.conformance.results.atomic import write_text_atomic
from neuron_conformance.conformance.results.causes import cause_key, reason_line, shorten
from neuron_conformance.conformance.results.manifest import (
    BOUND_METRICS,
    DEFAULT_MARGIN,
    REASONS,
    Entry,
    Manifest,
    dump_manifest,
)
from neuron_conformance.conformance.results.outcomes import FAILING, UNEXPECTED
from neuron_conformance.conformance.results.records import read_records

PROPOSED_FILE = "manifest.proposed.toml"

NOTE_WIDTH = 160
"""Longest proposed note (cut at a word boundary with ``...``)."""

GLOB_MIN = 3
"""Fewest ops of a family an entry must cover before they are written as the family's glob."""

NO_SUITE = ""


def _reason(rec: dict) -> tuple[str, str]:
    """The manifest reason of a failing record and a note prefix when its class is not a reason."""
    reason = rec.get("failure_class") or "crash"
    if reason not in REASONS:
        return "crash", f"(proposed from failure class {reason!r}) "
    return reason, ""


def _sort_key(e: Entry) -> tuple:
    return (e.suite or NO_SUITE, e.ops[0], e.dtypes or (), e.variant or "")


def _tested_dtypes(records: list[dict]) -> dict[tuple, set]:
    tested: dict[tuple, set] = defaultdict(set)
    for r in records:
        tested[(r.get("suite"), r.get("variant"), r.get("op"))].add(r.get("dtype"))
    return tested


def _family_glob(ops: list[str], tested_ops: set[str]) -> str | None:
    """``"<prefix>.*"`` when ``ops`` are every tested op under one dotted prefix (at least GLOB_MIN)."""
    prefixes = {op.rsplit(".", 1)[0] for op in ops if "." in op}
    if len(ops) < GLOB_MIN or len(prefixes) != 1 or not all("." in op for op in ops):
        return None
    prefix = prefixes.pop()
    family = {op for op in tested_ops if op.startswith(prefix + ".")}
    return f"{prefix}.*" if family == set(ops) else None


def collapse(failing: list[dict], records: list[dict], *, reason: str, note: str) -> list[Entry]:
    """As few entries as cover exactly the (suite, variant, op, dtype) of ``failing`` (module docstring).

    Args:
        failing: the records to cover (one cause's, or an entry's still-failing tests).
        records: every record of the run (which dtypes and ops it tested).
    """
    tested = _tested_dtypes(records)
    by_place: dict[tuple, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for r in failing:
        if r.get("op"):
            by_place[(r.get("suite"), r.get("variant"))][str(r["op"])].add(r.get("dtype"))
    entries = []
    for (suite, variant), ops in by_place.items():
        groups: dict[tuple | None, list[str]] = defaultdict(list)
        for op, dtypes in ops.items():
            seen = tested.get((suite, variant, op), set())
            every = None in dtypes or (len(seen) > 1 and dtypes >= seen)
            groups[None if every else tuple(sorted(dtypes))].append(op)
        tested_ops = {str(r.get("op")) for r in records if r.get("suite") == suite and r.get("op")}
        for dtypes, names in groups.items():
            names.sort()
            op = _family_glob(names, tested_ops) or (names[0] if len(names) == 1 else tuple(names))
            entries.append(Entry(op=op, reason=reason, dtypes=dtypes, variant=variant, suite=suite, note=note))
    return sorted(entries, key=_sort_key)


def observed_bounds(records: list[dict]) -> dict[str, dict[str, float]]:
    """``{dtype: {metric: largest value}}`` over ``records`` (the metrics of
    :data:`neuron_conformance.conformance.results.manifest.BOUND_METRICS` they carry; records without a dtype are left out)."""
    bounds: dict[str, dict[str, float]] = {}
    for r in records:
        dt = r.get("dtype")
        if not dt:
            continue
        for m in BOUND_METRICS:
            v = r.get(m)
            if isinstance(v, (int, float)) and v == v and v != float("inf"):
                slot = bounds.setdefault(str(dt), {})
                slot[m] = max(slot.get(m, 0.0), float(v))
    return bounds


def bounded(entry: Entry, records: list[dict]) -> Entry:
    """``entry`` with its bounds from ``records`` (its failing tests) over the ones it had, and a margin;
    unchanged when its reason is not ``numeric``."""
    if entry.reason != "numeric":
        return entry
    bounds = {dt: b for dt, b in (entry.bounds or {}).items() if entry.dtypes is None or dt in entry.dtypes}
    bounds.update({dt: b for dt, b in observed_bounds(records).items() if entry.dtypes is None or dt in entry.dtypes})
    margin = DEFAULT_MARGIN if entry.margin is None else entry.margin
    return replace(entry, bounds=bounds or None, margin=margin)


def _failing_of(entry: Entry, records: list[dict]) -> list[dict]:
    return [
        r
        for r in records
        if r.get("op")
        and (r.get("outcome") in FAILING or r.get("outcome") == "xfailed")
        and entry.matches(op=r["op"], dtype=r.get("dtype"), variant=r.get("variant"), suite=r.get("suite"))
    ]


def propose_groups(
    manifest: Manifest, records: list[dict]
) -> tuple[list[Entry], list[tuple[str, list[Entry]]], list[Entry], list[Entry]]:
    """Return ``(kept, groups, added, removed)``: the kept (or narrowed) entries of ``manifest``, the new
    entries as ``(comment, entries)`` per cause, largest first, and what was added and removed.

    Args:
        manifest: the manifest(s) the run used.
        records: the run's merged result records (:func:`neuron_conformance.conformance.results.records.read_records`).
    """
    stale = {r.get("manifest_entry") for r in records if r.get("failure_class") == "stale"}
    still: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        if (
            r.get("manifest_entry")
            and r.get("failure_class") != "stale"
            and (r.get("outcome") == "xfailed" or r.get("outcome") in FAILING)
        ):
            still[r["manifest_entry"]].append(r)
    sized = {
        src: [r for r in recs if r.get("outcome") == "xfailed" or r.get("failure_class") == UNEXPECTED]
        for src, recs in still.items()
    }
    kept: list[Entry] = []
    removed: list[Entry] = []
    added: list[Entry] = []
    for e in manifest.entries:
        if e.source not in stale:
            kept.append(bounded(e, sized.get(e.source, [])))
            continue
        removed.append(e)
        if still.get(e.source):  # some of its tests pass now: keep it for the others only
            narrowed = [
                bounded(
                    replace(n, margin=e.margin, bounds=e.bounds, torch=e.torch), _failing_of(n, sized.get(e.source, []))
                )
                for n in collapse(
                    still[e.source],
                    records,
                    reason=e.reason,
                    note=shorten(f"(narrowed from {e.source}) {e.note}", NOTE_WIDTH),
                )
            ]
            kept += narrowed
            added += narrowed
    causes: dict[tuple, list[dict]] = defaultdict(list)
    for rec in records:
        if rec.get("outcome") not in FAILING or rec.get("failure_class") == "stale":
            continue
        if rec.get("expected_failure") or not rec.get("op"):
            continue
        if any(
            e.matches(op=rec["op"], dtype=rec.get("dtype"), variant=rec.get("variant"), suite=rec.get("suite"))
            for e in kept
        ):
            continue
        causes[cause_key(rec)].append(rec)
    groups = []
    for key, recs in sorted(causes.items(), key=lambda kv: (-len(kv[1]), kv[0][0], kv[0][1])):
        cls, message, aten = key
        reason, prefix = _reason(recs[0])
        note = shorten(
            f"proposed by --conformance-update-manifest: {prefix}{reason_line(recs[0].get('message')) or message}",
            NOTE_WIDTH,
        )
        entries = [bounded(e, _failing_of(e, recs)) for e in collapse(recs, records, reason=reason, note=note)]
        comment = shorten(
            f"cause: {cls} · {message}{f' ({aten})' if aten and aten not in message else ''} · "
            f"{len(recs)} test(s), {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}",
            240,
        )
        groups.append((comment, entries))
        added += entries
    return sorted(kept, key=_sort_key), groups, added, removed


def propose(manifest: Manifest, records: list[dict]) -> tuple[list[Entry], list[Entry], list[Entry]]:
    """Return ``(entries, added, removed)``: the proposed manifest entries (kept first, then per cause) and
    what changed (:func:`propose_groups`)."""
    kept, groups, added, removed = propose_groups(manifest, records)
    return kept + [e for _c, entries in groups for e in entries], added, removed


def write_proposed(report_dir: str | os.PathLike, manifest: Manifest) -> tuple[Path, list[Entry], list[Entry]]:
    """Write the proposed manifest to ``<report_dir>/manifest.proposed.toml``.

    Returns ``(path, added, removed)``. The manifests in use are only read.

    Raises:
        RecordsError: a record file is unusable (see the module docstring); nothing is written.
    """
    kept, groups, added, removed = propose_groups(manifest, read_records(report_dir))
    parts = [
        f"# Proposed by --conformance-update-manifest from the records in {report_dir}: {len(added)} added, "
        f"{len(removed)} removed or narrowed (stale). Review, then copy over your manifest.\n"
    ]
    if kept:
        parts.append(f"# kept from the manifests in use ({len(kept)})\n" + dump_manifest(kept))
    for comment, entries in groups:
        parts.append(f"# {comment}\n" + dump_manifest(entries))
    path = Path(report_dir) / PROPOSED_FILE
    write_text_atomic(path, "\n".join(parts))
    return path, added, removed


__all__ = ["PROPOSED_FILE", "bounded", "collapse", "observed_bounds", "propose", "propose_groups", "write_proposed"]
