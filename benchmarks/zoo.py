"""Benchmark 4, model zoo: wall time of the zoo per dtype and its ten slowest tests.

Runs ``pytest model_zoo -n 0`` once (quick: the CI subset, ``-m model_zoo_ci``; ``--full``: every
entry) over float32, bfloat16 and float16 on the emulated device, then reads the result records
(``<report dir>/records/*.jsonl``: ``dtype`` and ``duration`` of every test) to split the time per
dtype. Prints the ten slowest tests and, last, the total wall time with the per-dtype split.

Usage: ``python -m benchmarks.zoo [--full] [--workers N]``
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

from neuron_conformance.conformance.results.records import read_records

from . import _common as c


def run(
    full: bool = False,
    workers: str = "0",
    models: str | None = None,
    dtypes: str = "float32,bfloat16,float16",
    timeout: float = 3000,
) -> dict:
    """Measure; return the result record (also appended to ``results/zoo.jsonl``).

    ``models``: comma-separated model ids (the plugin's ``--conformance-ops``) instead of the CI subset or
    ``full``; ``timeout``: seconds for the pytest run.
    """
    args = ["model_zoo", "-n", workers, "-q", "--conformance-dtypes", dtypes]
    if workers != "0":
        args += ["--dist", "loadgroup"]
    if models:
        args.append(f"--conformance-ops={models}")
    elif not full:
        args += ["-m", "model_zoo_ci"]
    with c.tmpdir("zoo") as tmp:
        rss_dir = f"{tmp}/rss"
        secs, proc = c.timed(
            c.pytest_cmd(*args, f"--conformance-report-dir={tmp}/report"),
            timeout=timeout,
            extra_env={"BENCH_RSS_DIR": rss_dir},
        )
        c.check_rc(proc, "pytest model_zoo")
        records = read_records(f"{tmp}/report")
        rss = c.read_rss(rss_dir)
    per_dtype: dict = defaultdict(float)
    counts: dict = defaultdict(int)
    for r in records:
        key = r.get("dtype") or "none"
        per_dtype[key] += float(r.get("duration") or 0.0)
        counts[key] += 1
    slowest = sorted(records, key=lambda r: -(r.get("duration") or 0.0))[:10]
    outcomes: dict = defaultdict(int)
    for r in records:
        outcomes[r.get("outcome")] += 1
    what = f"models {models}" if models else "every zoo entry" if full else "CI subset (-m model_zoo_ci)"
    record = {
        "what": what,
        "workers": workers,
        "dtypes": dtypes,
        "seconds": round(secs, 3),
        "tests": len(records),
        "outcomes": dict(outcomes),
        "per_dtype_s": {k: round(v, 3) for k, v in sorted(per_dtype.items())},
        "per_dtype_tests": dict(counts),
        "slowest": [{"nodeid": r["nodeid"], "duration": round(r.get("duration") or 0.0, 3)} for r in slowest],
        "peak_rss_mib": max((v["peak_rss_mib"] for v in rss.values()), default=None),
        "peak_rss_mib_per_process": {w: v["peak_rss_mib"] for w, v in sorted(rss.items())},
    }
    c.write_result("zoo", record)
    return record


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="every zoo entry, not only the CI subset")
    ap.add_argument("--workers", "-n", default="0", help="pytest-xdist workers (default 0: in process)")
    ap.add_argument("--models", default=None, help="comma-separated model ids to run instead")
    ap.add_argument(
        "--dtypes", "--conformance-dtypes", default="float32,bfloat16,float16", help="zoo dtypes (default all three)"
    )
    args = ap.parse_args(argv)
    r = run(args.full, args.workers, args.models, args.dtypes)
    print(
        f"measured: model zoo, {r['what']}, {r['tests']} tests {r['outcomes']}, -n {r['workers']}, "
        f"peak RSS {r['peak_rss_mib']} MiB"
    )
    for w, v in r["peak_rss_mib_per_process"].items():
        print(f"  peak RSS of {w}: {v} MiB")
    print("slowest ten tests:")
    for s in r["slowest"]:
        print(f"  {s['duration']:8.2f} s  {s['nodeid']}")
    split = ", ".join(f"{k} {v:.1f} s ({r['per_dtype_tests'][k]} tests)" for k, v in r["per_dtype_s"].items())
    print(f"model zoo: {r['seconds']:.1f} s wall; test time per dtype: {split}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
