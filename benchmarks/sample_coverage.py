"""Samples compared by the variants, layouts and autograd suites, before (first-N cap) and now, and wall time.

``python -m benchmarks.sample_coverage [--ops-count N | --conformance-ops NAMES | --full] [-n 2] [--budget S]
[--before-root PATH]`` runs each of the three suites in float32 on the emulated device (one pytest process
per suite, ``-n`` workers, ``--conformance-report-dir`` in a temporary directory) and reads its result records:

* now: samples compared (``samples``), the OpInfo samples they had (``samples_total``), and the samples
  left out by reason (``samples_left_out``), summed over the suite's tests;
* before: what the old cap took (:data:`OLD_CAPS`: the first 6 samples for variants, 3 for layouts and
  autograd), counted from the same OpInfo samples: how many it took, and how many of those exercise the
  suite by the suite's own ``reject`` (a 0-dim sample in ``layouts`` exercised no layout); and the tests
  whose capped samples exercised nothing;
* the wall time of each suite's pytest process; with ``--before-root`` (a checkout of the tree before
  the change, e.g. ``git worktree add /tmp/before <rev>``) the same command is timed there too, side by side.

One JSON line goes to ``benchmarks/results/sample_coverage.jsonl``.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from neuron_conformance.conformance.results.records import read_records

from . import _common as c

OLD_CAPS = {"variants": 6, "layouts": 3, "autograd": 3}
"""``MAX_SAMPLES`` of opsuites/test_variants.py, test_layouts.py and test_autograd.py before every sample
was taken (commit 685980d)."""

SUITES = ("variants", "layouts", "autograd")


def _run_suite(suite: str, ops_file: Path, workers: int, budget: float | None, root: Path, report: Path):
    args = [
        f"opsuites/test_{suite}.py",
        "-p",
        "no:cacheprovider",
        "-q",
        "-n",
        str(workers),
        "--conformance-dtypes",
        "float32",
        f"--conformance-ops=@{ops_file}",
        f"--conformance-report-dir={report}",
        "--conformance-no-report",
        "--conformance-device",
        "neuron",
    ]
    if budget is not None:
        args.append(f"--conformance-sample-budget={budget}")
    secs, proc = c.timed(c.pytest_cmd(*args), cwd=root, extra_env={"PYTHONPATH": str(root)})
    c.check_rc(proc, f"{suite} in {root}")
    return secs, proc


def _now(report: Path, suite: str) -> dict:
    """Sums over the suite's records: tests, compared, total, left out by reason, outcomes."""
    row = {"tests": 0, "samples": 0, "samples_total": 0, "left_out": Counter(), "outcomes": Counter(), "pairs": []}
    for r in read_records(report):
        if r.get("suite") != suite:
            continue
        row["tests"] += 1
        row["outcomes"][r["outcome"]] += 1
        if r.get("samples_total") is not None:
            row["samples"] += r.get("samples") or 0
            row["samples_total"] += r["samples_total"]
            row["left_out"].update(r.get("samples_left_out") or {})
            row["pairs"].append((r["op"], r.get("variant"), r.get("dtype")))
    return row


def _before(suite: str, pairs: list) -> dict:
    """What the old cap took of the same samples: taken, exercising the suite, tests exercising none."""
    import torch

    # deferred: torch and the OpInfo database load after the timed suite runs, not beside them
    from neuron_conformance.opsuites import test_autograd, test_layouts
    from neuron_conformance.opsuites.samples import sample_inputs  # (deferred, as above)
    from neuron_conformance.opsuites.suite_helpers import opinfo  # deferred, as above

    reject = {"layouts": test_layouts.reject, "autograd": test_autograd.reject}.get(suite)
    taken = usable = empty = 0
    for op_name, variant, dtype in pairs:
        n_usable = 0
        grad = suite == "autograd"
        for i, sample in enumerate(sample_inputs(opinfo(op_name), "cpu", getattr(torch, dtype), requires_grad=grad)):
            if i >= OLD_CAPS[suite]:
                break
            taken += 1
            n_usable += reject is None or reject(sample) is None
        usable += n_usable
        empty += n_usable == 0
    return {"taken": taken, "usable": usable, "tests_with_none": empty}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    c.add_op_selection(ap)
    ap.add_argument("-n", dest="workers", type=c.positive_int, default=2, help="xdist workers (default 2)")
    ap.add_argument(
        "--budget", type=float, default=None, help="--conformance-sample-budget SECONDS (default: the option's)"
    )
    ap.add_argument(
        "--before-root",
        type=Path,
        default=None,
        help="a checkout of the tree before the change: time the same suites there too",
    )
    args = ap.parse_args(argv)
    ops = c.op_subset(None if args.full else args.ops_count, args.ops)
    result = {"ops": len(ops), "workers": args.workers, "budget": args.budget, "suites": {}}
    print(f"float32, {len(ops)} ops, -n {args.workers}, budget {args.budget or 'default'}")
    print(
        f"{'suite':<9} {'tests':>5} | before: {'taken':>6} {'usable':>6} {'tests w/o':>9} | now: "
        f"{'compared':>8} {'of':>6} | wall now {'(before)':>9} | left out by reason"
    )
    with c.tmpdir("samples") as tmp:
        ops_file = c.write_ops_file(ops, tmp)
        for suite in SUITES:
            report = Path(tmp) / f"report-{suite}"
            secs, _ = _run_suite(suite, ops_file, args.workers, args.budget, c.ROOT, report)
            before_secs = None
            if args.before_root is not None:
                before_secs, _ = _run_suite(
                    suite, ops_file, args.workers, None, args.before_root.resolve(), Path(tmp) / f"before-{suite}"
                )
            now = _now(report, suite)
            before = _before(suite, now.pop("pairs"))
            left = ", ".join(f"{n} {r}" for r, n in now["left_out"].most_common()) or "none"
            shown_before = f"({before_secs:.1f} s)" if before_secs is not None else ""
            print(
                f"{suite:<9} {now['tests']:>5} | before: {before['taken']:>6} {before['usable']:>6} "
                f"{before['tests_with_none']:>9} | now: {now['samples']:>8} {now['samples_total']:>6} | "
                f"{secs:>6.1f} s {shown_before:>9} | {left}"
            )
            result["suites"][suite] = {
                "tests": now["tests"],
                "outcomes": dict(now["outcomes"]),
                "before": before,
                "compared": now["samples"],
                "samples_total": now["samples_total"],
                "left_out": dict(now["left_out"]),
                "wall_s": round(secs, 1),
                "before_wall_s": None if before_secs is None else round(before_secs, 1),
            }
    print(f"result line: {c.write_result('sample_coverage', result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
