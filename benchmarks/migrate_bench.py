"""Benchmark ``neuron-migrate check`` over the installed transformers package source.

Prints files/s and lines/s for the whole package, side by side with its floor: the wall time of
only reading and LibCST-parsing, with the same number of worker processes, the files the
pre-filter keeps (``neuron_conformance.migrate.prefilter``), and of parsing every file; how many
files each pre-filter stage keeps. When TorchFix is installed, times both tools on the same subset
of files (default 100, spread evenly over the package) and prints the ratio. Appends one JSON line
to ``benchmarks/results/migrate.jsonl``.

Usage::

    python -m benchmarks.migrate_bench [--jobs N] [--subset 100] [--torchfix PATH] [--no-torchfix]
                                       [--root DIR]

The package is located with ``importlib.util.find_spec`` (it is not imported). TorchFix is looked
up as ``--torchfix``, then ``$TORCHFIX``, then ``torchfix`` on ``PATH``. Reference: the issue says
TorchFix took about 1,250 s on the whole package on a 2-core machine; target for neuron-migrate: at
most 10 s wall on 2 cores. The results file names the tree and the TorchFix executable without a
machine's paths (:func:`tree_name`).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "migrate.jsonl"


def package_dir(name: str = "transformers") -> Path:
    """Directory of an installed package, found without importing it.

    Raises:
        SystemExit: the package is not installed.
    """
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"package {name!r} is not installed; pass --root DIR")
    return Path(list(spec.submodule_search_locations)[0])


def tree_name(root: Path) -> str:
    """``root`` as the results file names it, without a machine's paths: relative to this repository when
    inside it, else from the ``site-packages``/``dist-packages`` folder down (``transformers``), else its
    folder name."""
    root = Path(root).resolve()
    try:
        return root.relative_to(ROOT).as_posix()
    except ValueError:
        pass
    parts = root.parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            return "/".join(parts[parts.index(marker) + 1 :]) or root.name
    return root.name


def python_files(root: Path) -> list:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def count_lines(files) -> int:
    total = 0
    for p in files:
        with open(p, "rb") as fh:
            total += sum(1 for _ in fh)
    return total


def run_timed(cmd, cwd=None, env=None):
    """(wall seconds, CompletedProcess, CPU seconds of the child processes: user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, proc, cpu


def migrate_cmd(paths, jobs):
    return [
        sys.executable,
        "-m",
        "neuron_conformance.migrate",
        "check",
        *map(str, paths),
        "--output-format",
        "json",
        "--no-config",
        "-j",
        str(jobs),
        "--exclude",
        "__pycache__",
    ]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _parse_batch(paths) -> int:
    """Read and LibCST-parse ``paths`` (the floor of a check); returns how many parsed."""
    import libcst as cst  # deferred: only the worker processes of the parse floor need it

    from neuron_conformance.migrate import files as mfiles  # deferred: imported with the tool under test

    n = 0
    for p in paths:
        try:
            cst.parse_module(mfiles.read_source(Path(p))[0])
            n += 1
        except Exception:  # noqa: BLE001 - a file LibCST cannot parse costs its attempt, as in the tool
            pass
    return n


def parse_floor(paths, jobs: int) -> float:
    """Wall seconds to read and parse ``paths`` with ``jobs`` worker processes (chunks as the tool's)."""
    import concurrent.futures as cf  # deferred: only this measurement uses a pool here

    start = time.perf_counter()
    if jobs == 1 or len(paths) < 16:
        _parse_batch(paths)
    else:
        chunk = max(4, min(64, len(paths) // (jobs * 8) or 1))
        with cf.ProcessPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(_parse_batch, [paths[i : i + chunk] for i in range(0, len(paths), chunk)]))
    return time.perf_counter() - start


def prefilter_counts(files) -> dict:
    """How many of ``files`` each pre-filter stage keeps: any trigger word in the text (stage 1, what
    the tool parsed before the second stage existed), and a trigger outside comments and docstrings."""
    from neuron_conformance.migrate import files as mfiles  # deferred: the tool under test
    from neuron_conformance.migrate import prefilter  # deferred: as above

    stage1, kept = [], []
    for p in files:
        try:
            text = mfiles.read_source(p)[0]
        except mfiles.SkipFile:
            continue
        if (
            any(t in text for t in prefilter.TOKENS) or prefilter._INT_TO.search(text) or prefilter._INT_KW.search(text)
        ) and prefilter.PREFILTER.search(text):
            stage1.append(p)
            if prefilter.may_have_findings(text):
                kept.append(p)
    return {"stage1": stage1, "kept": kept}


def find_torchfix(explicit):
    for cand in (explicit, os.environ.get("TORCHFIX"), shutil.which("torchfix")):
        if cand and Path(cand).exists():
            return cand
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=None, help="Source tree to check (default: transformers package)")
    ap.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1, help="Worker processes")
    ap.add_argument("--subset", type=int, default=100, help="Files in the TorchFix comparison subset")
    ap.add_argument("--torchfix", default=None, help="Path to the torchfix executable")
    ap.add_argument("--no-torchfix", action="store_true", help="Skip the TorchFix comparison")
    ap.add_argument("--parse-all", action="store_true", help="Also time parsing every file (slow: about a minute)")
    args = ap.parse_args(argv)

    root = args.root or package_dir()
    files = python_files(root)
    lines = count_lines(files)
    print(f"tree: {root} ({len(files)} files, {lines:,} lines); {args.jobs} job(s) on {os.cpu_count()} CPU(s)")

    load = os.getloadavg()[0]
    seconds, proc, cpu = run_timed(migrate_cmd([root], args.jobs), env=_env())
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"neuron-migrate failed with exit code {proc.returncode}")
    items = json.loads(proc.stdout)
    findings = sum(1 for i in items if i["code"])
    skipped = sum(1 for i in items if not i["code"])
    record = {
        "benchmark": "migrate",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "tree": tree_name(root),
        "files": len(files),
        "lines": lines,
        "jobs": args.jobs,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "seconds": round(seconds, 3),
        "files_per_s": round(len(files) / seconds, 1),
        "lines_per_s": round(lines / seconds),
        "findings": findings,
        "skipped_files": skipped,
        "cpu_s": round(cpu, 3),
        "load_avg_1m": round(load, 2),
        # On an otherwise idle machine the run is CPU-bound: wall time ~ CPU time / jobs.
        "idle_estimate_s": round(cpu / max(1, min(args.jobs, os.cpu_count() or 1)), 1),
    }
    print(
        f"neuron-migrate: {seconds:.2f} s, {record['files_per_s']:.0f} files/s, "
        f"{record['lines_per_s']:,} lines/s, {findings} findings, {skipped} skipped files"
    )
    print(
        f"  CPU time {cpu:.1f} s (1-minute load average {load:.1f} on {os.cpu_count()} CPUs when it started; "
        f"estimated wall time on idle cores: {record['idle_estimate_s']} s)"
    )
    counts = prefilter_counts(files)
    floor_kept = parse_floor([str(p) for p in counts["kept"]], args.jobs)
    floor_stage1 = parse_floor([str(p) for p in counts["stage1"]], args.jobs)
    floor_all = parse_floor([str(p) for p in files], args.jobs) if args.parse_all else None
    record.update(
        {
            "prefilter_stage1_files": len(counts["stage1"]),
            "prefilter_kept_files": len(counts["kept"]),
            "parse_floor_kept_s": round(floor_kept, 3),
            "parse_floor_stage1_s": round(floor_stage1, 3),
            "parse_floor_all_s": None if floor_all is None else round(floor_all, 3),
        }
    )
    print(
        f"pre-filter: {len(counts['stage1'])} of {len(files)} files have a trigger word, "
        f"{len(counts['kept'])} outside comments and docstrings (parsed)"
    )
    print(
        f"side by side, {args.jobs} job(s): neuron-migrate {seconds:.2f} s | parse-only floor of the parsed files "
        f"{floor_kept:.2f} s ({seconds / max(floor_kept, 1e-9):.1f}x) | parse of the {len(counts['stage1'])} "
        f"files with a trigger word {floor_stage1:.2f} s"
        + ("" if floor_all is None else f" | parse of every file {floor_all:.2f} s")
    )

    tf = None if args.no_torchfix else find_torchfix(args.torchfix)
    if tf is None:
        print("TorchFix: not installed (pip install torchfix); no ratio")
    else:
        step = max(1, len(files) // args.subset)
        subset = files[::step][: args.subset]
        sub_lines = count_lines(subset)
        with tempfile.TemporaryDirectory() as tmp:
            # Copy the subset so both tools see exactly the same files and nothing else.
            for i, p in enumerate(subset):
                shutil.copy(p, Path(tmp) / f"f{i:04d}_{p.name}")
            nm_s, nm_proc, nm_cpu = run_timed(migrate_cmd([tmp], args.jobs), env=_env())
            tf_s, tf_proc, tf_cpu = run_timed([tf, "-j", str(args.jobs), tmp])
        record.update(
            {
                "subset_files": len(subset),
                "subset_lines": sub_lines,
                "subset_neuron_migrate_s": round(nm_s, 3),
                "subset_torchfix_s": round(tf_s, 3),
                "subset_ratio": round(tf_s / nm_s, 2),
                "torchfix": Path(tf).name,
                "subset_neuron_migrate_cpu_s": round(nm_cpu, 3),
                "subset_torchfix_cpu_s": round(tf_cpu, 3),
                "subset_cpu_ratio": round(tf_cpu / max(nm_cpu, 1e-9), 2),
                "torchfix_exit": tf_proc.returncode,
            }
        )
        print(
            f"subset of {len(subset)} files ({sub_lines:,} lines): neuron-migrate {nm_s:.2f} s "
            f"({len(subset) / nm_s:.0f} files/s), TorchFix {tf_s:.2f} s ({len(subset) / tf_s:.1f} files/s); "
            f"TorchFix/neuron-migrate = {tf_s / nm_s:.1f}x wall, {tf_cpu / max(nm_cpu, 1e-9):.1f}x CPU time"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
