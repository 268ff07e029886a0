"""Wall time of the main job and of the CI subset, side by side (``python -m benchmarks.main_job``).

The speed targets: the main job (``pytest -n auto`` over ``opsuites``, default dtypes) under 20
minutes on a 2-core machine, the CI subset of ``.ci/run`` under 10 minutes. This benchmark times

* **main**: ``pytest opsuites -n WORKERS`` with the default dtypes, bounded to ``--conformance-ops`` (a comma list
  or ``@FILE``; default :data:`QUICK_MAIN_OPS`) or the whole job with ``--full``;
* **ci**: the two main-job steps of ``.ci/run`` (``test_compare_cpu`` on ``.ci/core_ops.txt`` in mirror
  and in device mode), bounded to ``--ci-ops`` when given (a smoke run), whole by default;

and prints, for each, the wall seconds, the tests run and seconds per test, then the ratio main / ci and,
when a slice was timed, the main job's projected time: seconds per test times the number of tests
``pytest --collect-only`` finds for the whole job (``--project``), also by CPU seconds over
:data:`TARGET_CORES` cores (wall time on a shared machine counts the other processes' load). A slice's
ops are not a uniform sample of the database: the projection is a bound of the right order, not a
measurement. ``.ci/run``'s ``pytest tests`` and
model zoo steps are not timed here (see ``benchmarks/overhead.py`` and ``benchmarks/zoo.py``). A result
line goes to ``benchmarks/results/main_job.jsonl``.
"""

from __future__ import annotations

import argparse
import re
import sys

from . import _common as c

QUICK_MAIN_OPS = "add,sum,softmax,index_put,sort,nn.functional.layer_norm"
"""The default main-job slice: elementwise, reduction, normalisation, indexing and sort ops."""

MAIN_TARGET_S = 20 * 60
"""the main job on a 2-core machine stays under 20 minutes."""
CI_TARGET_S = 10 * 60
"""the CI subset of ``.ci/run`` stays under 10 minutes."""

TARGET_CORES = 2
"""Cores of the issue's reference machine, for the CPU-time projection."""

CI_OPS_FILE = "@.ci/core_ops.txt"
"""The op list of ``.ci/run``'s bounded main-job steps."""

_COUNTS = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|error|errors)\b")


def tests_run(stdout: str) -> int:
    """Tests pytest reports in its last summary line (``3 passed, 1 failed, 2 skipped in 4.0s`` -> 6)."""
    lines = [ln for ln in stdout.splitlines() if " in " in ln and _COUNTS.search(ln)]
    return sum(int(n) for n, _ in _COUNTS.findall(lines[-1])) if lines else 0


def _ops_arg(ops: str | None) -> list[str]:
    if not ops:
        return []
    return [f"--conformance-ops={ops}"]


def time_main(ops: str | None, workers: str, report_dir: str, timeout: float) -> dict:
    """Time ``pytest opsuites`` (default dtypes) bounded to ``ops`` (None: the whole main job)."""
    cmd = c.pytest_cmd(
        "opsuites",
        "-n",
        workers,
        "-q",
        "-p",
        "no:cacheprovider",
        "--conformance-no-report",
        f"--conformance-report-dir={report_dir}",
        *_ops_arg(ops),
    )
    secs, proc = c.timed(cmd, timeout=timeout)
    c.check_rc(proc, "main job")
    return {"seconds": round(secs, 1), "tests": tests_run(proc.stdout), "cpu_s": proc.cpu_s}


def time_ci(ops: str | None, workers: str, report_dir: str, timeout: float) -> dict:
    """Time ``.ci/run``'s two main-job steps (``test_compare_cpu`` in mirror and device mode)."""
    total = {"seconds": 0.0, "tests": 0, "cpu_s": 0.0, "steps": []}
    for mode in ("mirror", "device"):
        cmd = c.pytest_cmd(
            "opsuites/test_compare_cpu.py",
            "-n",
            workers,
            "-q",
            "-p",
            "no:cacheprovider",
            "--conformance-no-report",
            f"--conformance-ops={ops or CI_OPS_FILE}",
            "--conformance-emulator-mode",
            mode,
            f"--conformance-report-dir={report_dir}-{mode}",
        )
        secs, proc = c.timed(cmd, timeout=timeout)
        c.check_rc(proc, f"CI main-job step ({mode} mode)")
        step = {"mode": mode, "seconds": round(secs, 1), "tests": tests_run(proc.stdout)}
        total["steps"].append(step)
        total["seconds"] = round(total["seconds"] + secs, 1)
        total["tests"] += step["tests"]
        total["cpu_s"] = round(total["cpu_s"] + proc.cpu_s, 1)
    return total


def collected_tests(timeout: float) -> int:
    """Tests of the whole main job (``pytest opsuites --collect-only -q``, default dtypes)."""
    _, proc = c.timed(c.pytest_cmd("opsuites", "--collect-only", "-q", "-p", "no:xdist"), timeout=timeout)
    m = re.search(r"(\d+) tests? collected", proc.stdout) or re.search(r"collected (\d+)", proc.stdout)
    if m:
        return int(m.group(1))
    return sum(1 for ln in proc.stdout.splitlines() if "::" in ln)


def report(main: dict, ci: dict, projected_tests: int | None, whole_main: bool) -> list[str]:
    """The printed lines: each timing, seconds per test, ratios and targets."""

    def per_test(r):
        return r["seconds"] / r["tests"] if r["tests"] else float("nan")

    lines = [
        f"{'':<28}{'wall s':>9}{'tests':>8}{'s/test':>9}{'CPU s':>9}",
        f"{'main job' + ('' if whole_main else ' (slice)'):<28}{main['seconds']:>9.1f}{main['tests']:>8}"
        f"{per_test(main):>9.3f}{main['cpu_s']:>9.1f}",
        f"{'CI subset (main-job steps)':<28}{ci['seconds']:>9.1f}{ci['tests']:>8}{per_test(ci):>9.3f}"
        f"{ci['cpu_s']:>9.1f}",
    ]
    ratio = main["seconds"] / ci["seconds"] if ci["seconds"] else float("nan")
    lines.append(
        f"ratio main / CI: wall {ratio:.2f}x, per test {per_test(main) / per_test(ci):.2f}x"
        if ci["tests"] and main["tests"]
        else f"ratio main / CI: wall {ratio:.2f}x"
    )
    if whole_main:
        lines.append(
            f"main job {main['seconds'] / 60:.1f} min vs target {MAIN_TARGET_S / 60:.0f} min: "
            f"{main['seconds'] / MAIN_TARGET_S:.2f}x of the budget"
        )
    elif projected_tests:
        est = per_test(main) * projected_tests
        lines.append(
            f"main job projected from the slice: {projected_tests} tests x {per_test(main):.3f} s = "
            f"{est / 60:.1f} min vs target {MAIN_TARGET_S / 60:.0f} min ({est / MAIN_TARGET_S:.2f}x)"
        )
        if main["tests"] and main["cpu_s"]:
            cpu = main["cpu_s"] / main["tests"] * projected_tests / TARGET_CORES
            lines.append(
                f"  by CPU time (steadier on a shared machine): {projected_tests} tests x "
                f"{main['cpu_s'] / main['tests']:.3f} CPU s / {TARGET_CORES} cores = {cpu / 60:.1f} min "
                f"({cpu / MAIN_TARGET_S:.2f}x)"
            )
    lines.append(
        f"CI subset steps {ci['seconds'] / 60:.1f} min vs target {CI_TARGET_S / 60:.0f} min "
        f"({ci['seconds'] / CI_TARGET_S:.2f}x; pytest tests and the zoo steps not included)"
    )
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument(
        "--ops", "--conformance-ops", default=QUICK_MAIN_OPS, help=f"main-job slice (default {QUICK_MAIN_OPS})"
    )
    g.add_argument("--full", action="store_true", help="the whole main job (about 20 minutes on 2 cores)")
    ap.add_argument("--ci-ops", default=None, help=f"bound the CI steps to these ops (default {CI_OPS_FILE})")
    ap.add_argument("--workers", default="auto", help="pytest -n value for both (default auto)")
    ap.add_argument("--project", action="store_true", help="collect the whole main job to project its time")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds each pytest run may take")
    args = ap.parse_args(argv)
    with c.tmpdir("main-job") as tmp:
        main_r = time_main(None if args.full else args.ops, args.workers, f"{tmp}/main", args.timeout)
        ci_r = time_ci(args.ci_ops, args.workers, f"{tmp}/ci", args.timeout)
        projected = collected_tests(args.timeout) if args.project and not args.full else None
    for line in report(main_r, ci_r, projected, args.full):
        print(line)
    c.write_result(
        "main_job",
        {
            "main": main_r,
            "ci": ci_r,
            "main_ops": "all" if args.full else args.ops,
            "ci_ops": args.ci_ops or CI_OPS_FILE,
            "workers": args.workers,
            "projected_tests": projected,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
