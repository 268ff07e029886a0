"""Run every benchmark and print one summary (``python -m benchmarks [--full] [--only NAME,...]``).

Quick by default (about 4 minutes on 2 idle cores): an op subset of ``QUICK_OPS`` ops for the overhead
benchmark, the whole op suite in float32/bfloat16/float16 for the scaling benchmark (it needs minutes
of work per worker to show the speed-up), the model zoo's CI subset, the migrate benchmark without
TorchFix. ``--full`` measures every fp32 OpInfo, every zoo entry and the other distribution modes
(about 20 minutes on 2 cores). Each benchmark runs in
its own process, prints its own lines and appends a JSON line to ``benchmarks/results/``; a failing
benchmark is reported in the summary and does not stop the others (exit code 1 at the end).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from . import _common as c

BENCHMARKS = ("collect", "overhead", "scaling", "emulator", "breadcrumb", "zoo", "migrate", "main_job")


def _last(name: str) -> dict | None:
    path = c.results_dir() / f"{name}.jsonl"
    if name == "migrate" and not path.is_file():  # migrate_bench always writes benchmarks/results/
        path = c.RESULTS / "migrate.jsonl"
    if not path.is_file():
        return None
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    return json.loads(lines[-1]) if lines else None


def _figure(name: str, r: dict) -> str:
    if name == "collect":
        return f"{r['tests']} ids: cold {r['cold_s']:.1f} s, warm {r['warm_s']:.1f} s (target < 10 s)"
    if name == "overhead":
        extra = f", vs bare+in-place {r['ratio_inplace']:.2f}x" if "ratio_inplace" in r else ""
        return (
            f"{r['ops']} ops: pytest {r['pytest_s']:.1f} s / bare {r['bare_s']:.1f} s = {r['ratio']:.2f}x"
            f"{extra} (target <= 1.2x); CPU time {r['cpu_ratio']:.2f}x; peak RSS {r['peak_rss_mib']} MiB"
        )
    if name == "scaling":
        runs = ", ".join(f"-n {x['workers']} {x['dist']} {x['seconds']:.1f} s" for x in r["runs"])
        return (
            f"{runs}; speed-up {r['speedup_2']:.2f}x (target >= 1.7x); worker peak RSS "
            f"{r['max_worker_peak_rss_mib']} MiB"
        )
    if name == "emulator":
        return "; ".join(
            f"{x['case'].split(' ')[0]} {x['neuron_us']:.0f}/{x['cpu_us']:.0f} µs = {x['ratio']:.0f}x"
            for x in r["cases"]
        )
    if name == "breadcrumb":
        return f"ops/s plain vs breadcrumb: worst {r['max_ratio']:.3f}x; one enter {r['enter_ns']:.0f} ns"
    if name == "zoo":
        split = ", ".join(f"{k} {v:.0f} s" for k, v in r["per_dtype_s"].items())
        return f"{r['what']}: {r['seconds']:.1f} s wall ({split})"
    if name == "migrate":
        return (
            f"{r['files']} files in {r['seconds']:.1f} s: {r['files_per_s']:.0f} files/s, {r['lines_per_s']:,} lines/s"
        )
    if name == "main_job":
        m, ci = r["main"], r["ci"]
        return (
            f"main ({r['main_ops'] if r['main_ops'] == 'all' else 'slice'}) {m['seconds']:.1f} s / "
            f"{m['tests']} tests vs CI steps {ci['seconds']:.1f} s / {ci['tests']} tests = "
            f"{m['seconds'] / ci['seconds']:.2f}x (targets: 20 min, 10 min)"
        )
    return json.dumps(r)


def _argv(name: str, full: bool, ops_count: int) -> list[str]:
    if name == "migrate":
        return ["-m", "benchmarks.migrate_bench"] + ([] if full else ["--no-torchfix"])
    module = {"emulator": "emulator_overhead"}.get(name, name)
    args = ["-m", f"benchmarks.{module}"]
    if name == "overhead":
        args += ["--full"] if full else ["--ops-count", str(ops_count)]
    if name == "scaling":
        # a workload of minutes: each worker's fixed start (~5 s of CPU) hides the speed-up of a small one
        args += ["--full", "--paths", "opsuites", "--conformance-dtypes", "float32,bfloat16,float16"]
        if full:
            args.append("--compare-dist")
    if name == "zoo" and full:
        args.append("--full")
    if name == "main_job":
        # quick: the default slice against the CI steps on a few core ops; full: both whole
        args += ["--full"] if full else ["--ci-ops", "add,mul,sum,softmax"]
    return args


def main(argv=None) -> int:
    import subprocess

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="every fp32 OpInfo and zoo entry (hours)")
    ap.add_argument(
        "--ops-count",
        type=c.positive_int,
        default=c.QUICK_OPS,
        help=f"op subset of the quick overhead and scaling runs (default {c.QUICK_OPS})",
    )
    ap.add_argument("--only", default=",".join(BENCHMARKS), help=f"comma-separated subset of {BENCHMARKS}")
    args = ap.parse_args(argv)
    chosen = [n.strip() for n in args.only.split(",") if n.strip()]
    bad = [n for n in chosen if n not in BENCHMARKS]
    if bad:
        ap.error(f"--only: unknown benchmark(s) {bad}; choose from {', '.join(BENCHMARKS)}")
    summary, failed, start = [], [], time.perf_counter()
    for name in chosen:
        print(f"=== {name} ===", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, *_argv(name, args.full, args.ops_count)], cwd=c.ROOT, env=c.env())
        secs = time.perf_counter() - t0
        if proc.returncode != 0:
            failed.append(name)
            summary.append((name, secs, f"FAILED (exit code {proc.returncode})"))
            continue
        r = _last(name)
        summary.append((name, secs, _figure(name, r) if r else "no result line"))
    print(f"\n=== summary ({'full' if args.full else 'quick'}; {time.perf_counter() - start:.0f} s) ===")
    for name, secs, text in summary:
        print(f"{name:<9} [{secs:5.0f} s] {text}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
