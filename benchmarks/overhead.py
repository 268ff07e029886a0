"""Benchmark 1, harness overhead: the same OpInfo samples through a bare loop and through pytest.

(a) :mod:`benchmarks.bare_loop` (move inputs, call the op on the device and on the CPU,
``torch.testing.assert_close``), and (b) ``pytest -n 0 opsuites/test_compare_cpu.py --conformance-dtypes float32``
over the same ops, both as fresh processes on the emulated ``neuron`` device. Prints both wall times
and the ratio pytest / bare loop (target <= 1.2). A second ratio compares with a bare loop that also
runs each OpInfo's in-place variant, as ``test_compare_cpu`` does (like-for-like work), and a third
with a bare loop that also draws its samples the harness's way (``--fast-samples``: without
``OpInfo.sample_inputs``' per-call ``inspect.stack()``), so that only the harness's own cost is left.

Wall times and CPU times (user + system, of the process and its children) are both given: on a shared
machine the CPU-time ratio is the steadier figure. The pytest figure includes everything a user waits for: interpreter start, imports, collection of the
whole suite (``--conformance-ops`` deselects after collecting), records and the report. The peak RSS of the pytest
process is reported too (:mod:`benchmarks.rss_plugin`).

Usage: ``python -m benchmarks.overhead [--ops-count N | --full]``
"""

from __future__ import annotations

import argparse
import json
import sys

from . import _common as c


def run(ops_count: int | None, *, ops: str | None = None, inplace_too: bool = True, timeout: float = 3000) -> dict:
    """Measure ``ops_count`` ops (None: all) or the named ``ops``; return the result record (also
    appended to ``results/overhead.jsonl``). ``timeout`` is per subprocess, in seconds."""
    names = c.op_subset(ops_count, ops)
    with c.tmpdir("overhead") as tmp:
        ops_file = c.write_ops_file(names, tmp)
        bare_s, proc = c.timed(
            [sys.executable, "-m", "benchmarks.bare_loop", f"--conformance-ops=@{ops_file}"], timeout=timeout
        )
        c.check_rc(proc, "bare loop", ok=(0,))
        bare = json.loads(proc.stdout.strip().splitlines()[-1])
        bare["cpu_s"] = proc.cpu_s
        bare_ip = None
        if inplace_too:
            ip_s, proc = c.timed(
                [sys.executable, "-m", "benchmarks.bare_loop", f"--conformance-ops=@{ops_file}", "--inplace"],
                timeout=timeout,
            )
            c.check_rc(proc, "bare loop --inplace", ok=(0,))
            bare_ip = json.loads(proc.stdout.strip().splitlines()[-1])
            bare_ip["wall_s"] = round(ip_s, 3)
            bare_ip["cpu_s"] = proc.cpu_s
            fast_s, proc = c.timed(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.bare_loop",
                    f"--conformance-ops=@{ops_file}",
                    "--inplace",
                    "--fast-samples",
                ],
                timeout=timeout,
            )
            c.check_rc(proc, "bare loop --inplace --fast-samples", ok=(0,))
            bare_fast = json.loads(proc.stdout.strip().splitlines()[-1])
            bare_fast["wall_s"] = round(fast_s, 3)
            bare_fast["cpu_s"] = proc.cpu_s
        rss_dir = f"{tmp}/rss"
        py_s, proc = c.timed(
            c.pytest_cmd(
                "-n",
                "0",
                "-q",
                "opsuites/test_compare_cpu.py",
                "--conformance-dtypes",
                "float32",
                f"--conformance-ops=@{ops_file}",
                f"--conformance-report-dir={tmp}/report",
            ),
            timeout=timeout,
            extra_env={"BENCH_RSS_DIR": rss_dir},
        )
        c.check_rc(proc, "pytest -n 0")
        rss = c.read_rss(rss_dir).get("main", {})
        split = c.phases(rss.get("stamps", {}), proc.launched_at, proc.launched_at + py_s)
    record = {
        "what": f"{len(names)} ops (fp32, all samples, emulated neuron)",
        "ops": len(names),
        "samples": bare["samples"],
        "bare_s": round(bare_s, 3),
        "bare_loop_s": bare["loop_s"],
        "bare_setup_s": bare["setup_s"],
        "pytest_s": round(py_s, 3),
        "pytest_phases_s": split,
        "pytest_collect_s": split["collect"],
        "pytest_run_s": split["run"],
        "peak_rss_mib": rss.get("peak_rss_mib"),
        "ratio": round(py_s / bare_s, 3),
        "bare_cpu_s": bare["cpu_s"],
        "pytest_cpu_s": proc.cpu_s,
        "cpu_ratio": round(proc.cpu_s / bare["cpu_s"], 3),
    }
    if bare_ip is not None:
        record.update(
            bare_inplace_s=bare_ip["wall_s"],
            ratio_inplace=round(py_s / bare_ip["wall_s"], 3),
            bare_inplace_cpu_s=bare_ip["cpu_s"],
            cpu_ratio_inplace=round(proc.cpu_s / bare_ip["cpu_s"], 3),
            bare_fast_s=bare_fast["wall_s"],
            bare_fast_loop_s=bare_fast["loop_s"],
            ratio_fast=round(py_s / bare_fast["wall_s"], 3),
            cpu_ratio_fast=round(proc.cpu_s / bare_fast["cpu_s"], 3),
            run_ratio_fast=round(split["run"] / max(bare_fast["loop_s"], 1e-9), 3),
        )
    c.write_result("overhead", record)
    return record


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    c.add_op_selection(ap, "every fp32 OpInfo (677 in torch 2.13)")
    ap.add_argument(
        "--no-inplace-baseline",
        action="store_true",
        help="skip the like-for-like bare loop that also runs in-place variants",
    )
    args = ap.parse_args(argv)
    try:
        c.op_subset(None if args.full else args.ops_count, args.ops)
    except ValueError as exc:
        ap.error(str(exc))
    r = run(None if args.full else args.ops_count, ops=args.ops, inplace_too=not args.no_inplace_baseline)
    print(f"measured: {r['what']}, {r['samples']} samples")
    print(f"bare loop: {r['bare_s']:.1f} s (imports {r['bare_setup_s']:.1f} s, loop {r['bare_loop_s']:.1f} s)")
    if "bare_inplace_s" in r:
        print(
            f"bare loop with in-place variants: {r['bare_inplace_s']:.1f} s; pytest / that = "
            f"{r['ratio_inplace']:.2f}x wall, {r['cpu_ratio_inplace']:.2f}x CPU time"
        )
    if "bare_fast_s" in r:
        print(
            f"bare loop with in-place variants and the harness's sample generation: {r['bare_fast_s']:.1f} s "
            f"(loop {r['bare_fast_loop_s']:.1f} s); pytest / that = {r['ratio_fast']:.2f}x wall, "
            f"{r['cpu_ratio_fast']:.2f}x CPU time, run phase / loop = {r['run_ratio_fast']:.2f}x"
        )
    print(f"CPU time: pytest {r['pytest_cpu_s']:.1f} s / bare loop {r['bare_cpu_s']:.1f} s = {r['cpu_ratio']:.2f}x")
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in r["pytest_phases_s"].items())
    print(f"pytest -n 0: {r['pytest_s']:.1f} s ({phases}), peak RSS {r['peak_rss_mib']} MiB")
    print(
        f"steady state: pytest run phase {r['pytest_run_s']:.1f} s / bare loop {r['bare_loop_s']:.1f} s = "
        f"{r['pytest_run_s'] / max(r['bare_loop_s'], 1e-9):.2f}x"
    )
    print(f"harness overhead: pytest / bare loop = {r['ratio']:.2f}x (target <= 1.2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
