"""Merge the summaries of shards of one run (``pytest --conformance-shard-id/--conformance-num-shards``) into one.

Shards must come from the same run: :data:`MUST_MATCH` fields of ``run.json`` must be equal (torch, harness,
backend and device identity, and the emulated device's numeric mode: mirror and device mode are different
runs), else :class:`neuron_conformance.reports.errors.ShardMismatchError` names the two files, their folders, the field and
both values, before anything is written. Records
are concatenated in input order; a nodeid present in several shards keeps the last
(with a warning). The merged run is complete only when every shard is complete and
every shard id ``0 .. count-1`` is present.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from .collect import collect
from .errors import ReportInputError, ShardMismatchError
from .summary import load_summary, make_summary, summary_from_collected

#: Run fields (dotted for ``device``) that every shard must share.
MUST_MATCH = (
    "torch_version",
    "harness_version",
    "device.type",
    "device.backend",
    "device.backend_version",
    "device.emulated",
    "device.emulator_mode",
)


def _field(run: Mapping[str, Any], dotted: str) -> Any:
    value: Any = run
    for part in dotted.split("."):
        value = (value or {}).get(part) if isinstance(value, Mapping) else None
    return value


def load_shard(path: Path | str) -> tuple[Path, dict[str, Any]]:
    """Load one shard: a summary.json, a directory with summary.json, or a raw report directory.

    Returns ``(file, summary)`` where ``file`` is the summary.json read (or the directory's
    run.json when the summary was built from raw records).

    Raises:
        ReportInputError: nothing usable at ``path`` (see :func:`load_summary`, :func:`collect`).
    """
    path = Path(path)
    if path.is_dir() and not (path / "summary.json").exists():
        if not (path / "run.json").exists():
            raise ReportInputError(path, "not a shard: expected summary.json, or run.json and records/, inside")
        return path / "run.json", summary_from_collected(collect(path))
    file = path / "summary.json" if path.is_dir() else path
    return file, load_summary(file)


def merge_coverage(covs: list[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Merge coverage.json dicts: call counts summed, core ops executed anywhere count as executed."""
    if not covs:
        return None
    executed: dict[str, int] = {}
    core: set[str] = set()
    core_exec: set[str] = set()
    via_out: set[str] = set()
    composite: set[str] = set()
    for c in covs:
        for name, calls in (c.get("executed") or {}).items():
            executed[name] = executed.get(name, 0) + calls
        core_exec.update(c.get("core_executed") or [])
        via_out.update(c.get("core_via_out") or [])
        composite.update(c.get("core_composite") or [])
        core.update(c.get("core_composite") or [])
        core.update(c.get("core_executed") or [])
        core.update(c.get("core_missing") or [])
    totals = [c.get("registered_total") for c in covs if c.get("registered_total") is not None]
    core_totals = [c.get("core_total") for c in covs if c.get("core_total") is not None]
    return {
        "executed": dict(sorted(executed.items())),
        "registered_total": max(totals) if totals else None,
        "core_total": max(core_totals) if core_totals else (len(core) or None),
        "core_executed": sorted(core_exec),
        "core_via_out": sorted(via_out & core_exec),
        "core_composite": sorted(composite - core_exec),
        "core_missing": sorted(core - core_exec - composite),
    }


def merge_summaries(inputs: Iterable[Path | str], out_dir: Path | None = None) -> dict[str, Any]:
    """Merge shard summaries into one summary dict.

    Args:
        inputs: shard summary.json files or shard report directories (at least one).
        out_dir: where the merged report will be written; repro file paths are made
            relative to it. None keeps them relative to the current directory.

    Raises:
        ReportInputError: no input, or an input cannot be read.
        ShardMismatchError: two shards differ in a :data:`MUST_MATCH` field.
    """
    shards = [load_shard(p) for p in inputs]
    if not shards:
        raise ReportInputError(Path("."), "no shard given to merge")
    first_file, first = shards[0]
    for file, s in shards[1:]:
        for key in MUST_MATCH:
            a, b = _field(first["run"], key), _field(s["run"], key)
            if a != b:
                raise ShardMismatchError(first_file, file, key, a, b)
    warnings: list[str] = []
    records: dict[str, dict[str, Any]] = {}
    origin: dict[str, Path] = {}
    dtypes: list[str] = []
    shard_meta = []
    complete = True
    seen_ids: dict[Any, Path] = {}
    counts = set()
    repro: list[str] = []
    for file, s in shards:
        run = s["run"]
        warnings += [f"{file}: {w}" for w in s.get("warnings") or []]
        if run.get("seed") != first["run"].get("seed"):
            warnings.append(
                f"{file}: seed {run.get('seed')!r} differs from {first_file}'s {first['run'].get('seed')!r}"
            )
        complete = complete and bool(run.get("complete"))
        shard = run.get("shard") or None
        if shard:
            counts.add(shard.get("count"))
            if shard.get("id") in seen_ids:
                warnings.append(f"{file}: shard id {shard.get('id')} also in {seen_ids[shard.get('id')]}")
            seen_ids[shard.get("id")] = file
        shard_meta.append(
            {
                "file": str(file),
                "shard": shard,
                "complete": bool(run.get("complete")),
                "tests": len(s["records"]),
                "started": run.get("started"),
                "finished": run.get("finished"),
            }
        )
        for d in run.get("dtypes") or []:
            if d not in dtypes:
                dtypes.append(d)
        for r in s["records"]:
            if r["nodeid"] in records:
                warnings.append(f"{r['nodeid']}: in {origin[r['nodeid']]} and {file}; kept the last")
                del records[r["nodeid"]]
            records[r["nodeid"]] = r
            origin[r["nodeid"]] = file
        base = file.parent
        for f in s.get("repro_files") or []:
            full = base / f
            repro.append(Path(os.path.relpath(full, out_dir)).as_posix() if out_dir else full.as_posix())
    if len(counts) > 1:
        warnings.append(f"shards disagree on the shard count: {sorted(map(str, counts))}")
    if len(counts) == 1 and None not in counts:
        count = counts.pop()
        missing = [i for i in range(count) if i not in seen_ids] if isinstance(count, int) else []
        if missing:
            complete = False
            warnings.append(f"shard id(s) {missing} of {count} missing: the merged run is incomplete")
    starts = [s["run"]["started"] for _, s in shards if s["run"].get("started")]
    ends = [s["run"]["finished"] for _, s in shards if s["run"].get("finished")]
    run = dict(first["run"])
    run.update(
        started=min(starts) if starts else None,
        finished=max(ends) if ends else None,
        complete=complete,
        shard=None,
        shards=shard_meta,
        dtypes=dtypes,
    )
    return make_summary(
        run,
        records.values(),
        coverage=merge_coverage([s["coverage"] for _, s in shards if s.get("coverage")]),
        repro_files=repro,
        warnings=warnings,
        sources=[{"file": str(f), "records": len(s["records"]), "truncated_lines": 0} for f, s in shards],
    )
