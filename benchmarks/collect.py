"""Collection time: ``pytest --collect-only -q`` of the whole op suite (target < 10 s on 2 cores).

Wall and CPU seconds (user + system; steadier on a shared machine). Runs it twice in fresh processes with a private pytest cache directory: ``cold`` (empty cache) and
``warm`` (the cache the first run left; the op suites keep their OpInfo parametrization there, see
``opsuites/samples.py``). Both use every default dtype. Prints the number of test ids and, last, the
warm time.

Usage: ``python -m benchmarks.collect [--conformance-dtypes LIST]``
"""

from __future__ import annotations

import argparse
import re
import sys

from . import _common as c


def _collect(tmp: str, dtypes: str | None, timeout: float, path: str = "opsuites") -> tuple[float, int, float]:
    args = [
        "--collect-only",
        "-q",
        "-o",
        f"cache_dir={tmp}/cache",
        path,
        f"--conformance-report-dir={tmp}/report",
        "--conformance-no-report",
    ]
    if dtypes:
        args += ["--conformance-dtypes", dtypes]
    secs, proc = c.timed(c.pytest_cmd(*args), timeout=timeout)
    c.check_rc(proc, "pytest --collect-only", ok=(0,))
    m = re.search(r"(\d+) tests? collected", proc.stdout)
    return secs, int(m.group(1)) if m else -1, proc.cpu_s


def run(dtypes: str | None = None, path: str = "opsuites", timeout: float = 600) -> dict:
    """Measure; return the result record (also appended to ``results/collect.jsonl``). ``path``: what
    to collect; ``timeout``: seconds per run."""
    with c.tmpdir("collect") as tmp:
        cold, n, cold_cpu = _collect(tmp, dtypes, timeout, path)
        warm, n2, warm_cpu = _collect(tmp, dtypes, timeout, path)
    record = {
        "what": f"pytest --collect-only -q {path} (dtypes: {dtypes or 'default'})",
        "tests": n,
        "cold_s": round(cold, 3),
        "warm_s": round(warm, 3),
        "cold_cpu_s": cold_cpu,
        "warm_cpu_s": warm_cpu,
        "same_ids": n == n2,
    }
    c.write_result("collect", record)
    return record


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--dtypes",
        "--conformance-dtypes",
        default=None,
        help="--conformance-dtypes of the collected suite (default: plugin default)",
    )
    ap.add_argument("--path", default="opsuites", help="what to collect (default: the whole op suite)")
    args = ap.parse_args(argv)
    r = run(args.dtypes, args.path)
    print(f"measured: {r['what']}: {r['tests']} test ids (same on both runs: {r['same_ids']})")
    print(f"cold cache: {r['cold_s']:.1f} s wall, {r['cold_cpu_s']:.1f} s CPU")
    print(f"collection: {r['warm_s']:.1f} s wall ({r['warm_cpu_s']:.1f} s CPU) with a warm cache (target < 10 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
