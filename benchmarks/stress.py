"""Benchmark: wall time of the stress suite (``opsuites/test_stress.py``) per part, per emulator mode.

Runs ``pytest opsuites/test_stress.py -n 0`` on the emulated device once per mode (``mirror``, ``device``)
with the default memory budget (the emulator declares 5 GiB) and reads the result records to split the
time into the suite's parts: the large-tensor cases (each one's seconds), the zero-size and 0-dim tests
(over every OpInfo), the allocator tests. Prints the parts side by side for the two modes, with the ratio
device / mirror, and appends a JSON line to ``benchmarks/results/stress.jsonl``.

Usage: ``python -m benchmarks.stress [--modes mirror,device] [--budget SIZE] [-k EXPR]``
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict

from neuron_conformance.conformance.results.records import read_records

from . import _common as c

PARTS = {
    "test_large_tensor": "large tensors",
    "test_zero_size": "zero-size",
    "test_zero_dim": "zero-dim",
    "test_allocation_churn": "allocator",
    "test_oom_recovery": "allocator",
}


def _split(records: list) -> tuple[dict, dict]:
    parts: dict = defaultdict(float)
    large: dict = {}
    for r in records:
        name = r["nodeid"].split("::")[-1]
        func = name.split("[")[0]
        parts[PARTS.get(func, func)] += float(r.get("duration") or 0.0)
        if func == "test_large_tensor":
            large[name[len(func) + 1 : -1]] = (round(float(r.get("duration") or 0.0), 2), r["outcome"])
    return {k: round(v, 1) for k, v in parts.items()}, large


def run(
    modes=("mirror", "device"), budget: str | None = None, keyword: str | None = None, timeout: float = 3600
) -> dict:
    """Measure every mode; return the result record (also appended to ``results/stress.jsonl``)."""
    out: dict = {"modes": {}, "budget": budget or "auto"}
    for mode in modes:
        args = [
            "opsuites/test_stress.py",
            "-n",
            "0",
            "-q",
            "-p",
            "no:cacheprovider",
            "--conformance-emulator-mode",
            mode,
        ]
        if budget:
            args += ["--conformance-memory-budget", budget]
        if keyword:
            args += ["-k", keyword]
        with c.tmpdir("stress") as tmp:
            secs, proc = c.timed(
                c.pytest_cmd(*args, f"--conformance-report-dir={tmp}/report", "--conformance-no-report"),
                timeout=timeout,
            )
            c.check_rc(proc, f"pytest test_stress.py ({mode})")
            records = read_records(f"{tmp}/report")
        parts, large = _split(records)
        failed = [r["nodeid"].split("::")[-1] for r in records if r["outcome"] in ("failed", "error")]
        out["modes"][mode] = {
            "wall_s": round(secs, 1),
            "cpu_s": proc.cpu_s,
            "tests": len(records),
            "failed": len(failed),
            "failed_tests": failed[:20],
            "parts_s": parts,
            "large_s": large,
            "load_average": round(os.getloadavg()[0], 1),
        }
    c.write_result("stress", out)
    return out


def _print(r: dict) -> None:
    modes = list(r["modes"])
    print("part".ljust(28) + "".join(m.rjust(12) for m in modes) + ("   device/mirror" if len(modes) == 2 else ""))
    names = sorted({p for m in modes for p in r["modes"][m]["parts_s"]} | {"wall"})
    for name in names:
        vals = [r["modes"][m]["wall_s"] if name == "wall" else r["modes"][m]["parts_s"].get(name, 0.0) for m in modes]
        ratio = f"   {vals[1] / vals[0]:.2f}x" if len(vals) == 2 and vals[0] else ""
        print(name.ljust(28) + "".join(f"{v:10.1f} s" for v in vals) + ratio)
    for case in sorted(r["modes"][modes[0]]["large_s"]):
        vals = [r["modes"][m]["large_s"].get(case, (0.0, "-")) for m in modes]
        print(
            f"  large {case}".ljust(28)
            + "".join(f"{v[0]:10.1f} s" for v in vals)
            + "   "
            + "/".join(v[1] for v in vals)
        )
    for m in modes:
        d = r["modes"][m]
        print(
            f"{m}: {d['tests']} tests, {d['failed']} failed {d.get('failed_tests', [])}, CPU {d['cpu_s']} s, "
            f"load average {d.get('load_average')} at the end"
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stress", description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="mirror,device", help="emulator modes, comma-separated")
    parser.add_argument("--budget", default=None, help="--conformance-memory-budget for the runs (default: auto)")
    parser.add_argument("-k", dest="keyword", default=None, help="pytest -k expression (a part of the suite)")
    ns = parser.parse_args(argv)
    _print(run(tuple(m for m in ns.modes.split(",") if m), ns.budget, ns.keyword))
    return 0


if __name__ == "__main__":
    sys.exit(main())
