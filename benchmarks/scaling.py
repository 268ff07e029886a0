"""Benchmark 2, scaling: the op suite run with ``-n 1``, ``-n 2`` (and ``-n auto`` on more cores).

Same workload as :mod:`benchmarks.overhead` (``opsuites/test_compare_cpu.py``, fp32, an op subset;
``--paths`` and ``--conformance-dtypes`` widen it, e.g. ``--paths opsuites --conformance-dtypes float32,bfloat16,float16``),
run by pytest-xdist workers with a distribution mode (default ``loadgroup``: every test of an op stays
on one worker, see docs/performance.md). Prints each wall time, the peak RSS of every worker and the
speed-up ``t(-n 1) / t(-n 2)`` (target >= 1.7 on 2 cores). ``--compare-dist`` also times ``-n 2`` with
``load`` and ``worksteal``.

Every worker pays a fixed start (torch, the emulated device, the OpInfo database: ~5 s of CPU), so the
speed-up of a small workload stays below 2x; measure with a workload of minutes.

Usage: ``python -m benchmarks.scaling [--ops-count N | --full] [--paths P,...] [--conformance-dtypes D,...]
[--dist MODE] [--compare-dist]``
"""

from __future__ import annotations

import argparse
import os
import sys

from . import _common as c


def _one(
    workers: str,
    dist: str,
    ops_file,
    tmp: str,
    dtypes: str,
    timeout: float,
    paths: tuple[str, ...] = ("opsuites/test_compare_cpu.py",),
) -> dict:
    rss_dir = f"{tmp}/rss-{workers}-{dist}"
    secs, proc = c.timed(
        c.pytest_cmd(
            "-n",
            workers,
            "--dist",
            dist,
            "-q",
            *paths,
            "--conformance-dtypes",
            dtypes,
            f"--conformance-ops=@{ops_file}",
            f"--conformance-report-dir={tmp}/report-{workers}-{dist}",
        ),
        timeout=timeout,
        extra_env={"BENCH_RSS_DIR": rss_dir},
    )
    c.check_rc(proc, f"pytest -n {workers} --dist {dist}")
    rss = c.read_rss(rss_dir)
    workers_rss = {k: v["peak_rss_mib"] for k, v in rss.items() if k != "main"}
    return {
        "workers": workers,
        "dist": dist,
        "seconds": round(secs, 3),
        "cpu_s": proc.cpu_s,
        "worker_peak_rss_mib": workers_rss,
        "worker_tests": {k: v["tests"] for k, v in rss.items() if k != "main"},
    }


def run(
    ops_count: int | None,
    *,
    ops: str | None = None,
    dist: str = "loadgroup",
    compare_dist: bool = False,
    dtypes: str = "float32",
    timeout: float = 3000,
    paths: tuple[str, ...] = ("opsuites/test_compare_cpu.py",),
) -> dict:
    """Measure ``ops_count`` ops (None: all) or the named ``ops``; return the result record (also
    appended to ``results/scaling.jsonl``). ``timeout`` is per pytest run, in seconds."""
    names = c.op_subset(ops_count, ops)
    runs = []
    with c.tmpdir("scaling") as tmp:
        ops_file = c.write_ops_file(names, tmp)
        plan = [("1", dist), ("2", dist)]
        if (os.cpu_count() or 1) > 2:
            plan.append(("auto", dist))
        if compare_dist:
            plan += [("2", d) for d in ("load", "worksteal", "loadgroup") if d != dist]
        for workers, mode in plan:
            runs.append(_one(workers, mode, ops_file, tmp, dtypes, timeout, paths))
    t1 = runs[0]["seconds"]
    record = {
        "what": f"{' '.join(paths)}: {len(names)} ops ({dtypes}, all samples, emulated neuron)",
        "ops": len(names),
        "paths": list(paths),
        "dtypes": dtypes,
        "dist": dist,
        "runs": runs,
        "speedup_2": round(t1 / runs[1]["seconds"], 3),
        "max_worker_peak_rss_mib": max(v for r in runs for v in r["worker_peak_rss_mib"].values()),
    }
    c.write_result("scaling", record)
    return record


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    c.add_op_selection(ap, "every fp32 OpInfo")
    ap.add_argument("--dist", default="loadgroup", choices=("load", "loadgroup", "worksteal", "loadscope"))
    ap.add_argument("--compare-dist", action="store_true", help="also time -n 2 with the other modes")
    ap.add_argument(
        "--paths",
        default="opsuites/test_compare_cpu.py",
        help="comma-separated test paths (default: opsuites/test_compare_cpu.py)",
    )
    ap.add_argument(
        "--dtypes",
        "--conformance-dtypes",
        default="float32",
        help="--conformance-dtypes of the runs (default: float32)",
    )
    args = ap.parse_args(argv)
    paths = tuple(p.strip() for p in args.paths.split(",") if p.strip())
    try:
        c.op_subset(None if args.full else args.ops_count, args.ops)
    except ValueError as exc:
        ap.error(str(exc))
    r = run(
        None if args.full else args.ops_count,
        ops=args.ops,
        dist=args.dist,
        compare_dist=args.compare_dist,
        dtypes=args.dtypes,
        paths=paths,
    )
    print(f"measured: {r['what']}")
    for run_ in r["runs"]:
        print(
            f"-n {run_['workers']:>4} --dist {run_['dist']:<9}: {run_['seconds']:7.1f} s ({run_['cpu_s']:.0f} s CPU); "
            f"worker peak RSS "
            f"{run_['worker_peak_rss_mib']} MiB; tests per worker {run_['worker_tests']}"
        )
    print(f"max worker peak RSS: {r['max_worker_peak_rss_mib']} MiB (target < 2048)")
    print(f"scaling: t(-n 1) / t(-n 2) = {r['speedup_2']:.2f}x with --dist {r['dist']} (target >= 1.7x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
