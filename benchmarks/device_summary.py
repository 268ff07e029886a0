"""Outcome counts of a run on a real device, and the status of each known true positive.

    python -m benchmarks.device_summary REPORT_DIR

Reads ``REPORT_DIR/records`` with the project's records reader and prints: the outcome counts per suite, the
failing tests per failure class, and for each deviation of :data:`TRUE_POSITIVES` (real CUDA deviations the
harness must keep catching) whether a failing test of the run shows it: ``caught`` with the failing tests'
suites and dtypes, or ``not caught``. Run by ``benchmarks/device_check.sh`` after the main job.
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import sys

from neuron_conformance.conformance.results.outcomes import FAILING
from neuron_conformance.conformance.results.records import read_records

TRUE_POSITIVES = (
    # name, op-name globs, dtype globs (None: any), failure classes (None: any)
    ("embedding_renorm_ (max_norm) on a non-contiguous weight", ("nn.functional.embedding*", "*embedding_renorm*"), None, ("numeric",)),
    ("clamp_ on uint8 with an int32 bound", ("clamp",), ("uint8",), ("numeric",)),
    ("channel_shuffle on a transposed input", ("nn.functional.channel_shuffle",), None, None),
    ("aten::range.out with an empty out (crash)", ("aten::range.out*",), None, ("crash",)),
    ("batch norm with zero channels (crash)", ("*batch_norm*",), None, ("crash", "error")),
    ("integer linspace", ("linspace*",), ("int*", "uint8"), ("numeric",)),
    ("avg_pool2d into a non-contiguous out=", ("nn.functional.avg_pool2d",), ("float*", "bfloat16"), ("nonfinite", "numeric")),
    ("cumsum in bfloat16/float16 accumulating in the storage dtype", ("cumsum",), ("bfloat16", "float16"), ("numeric",)),
    ("logspace in bfloat16 (5 ULP)", ("logspace*",), ("bfloat16",), ("numeric",)),
)  # fmt: skip
"""The real deviations of CUDA (torch 2.11, H200) the harness reported: each must stay a failure."""


def matches(record: dict, ops: tuple, dtypes: tuple | None, classes: tuple | None) -> bool:
    op = str(record.get("op") or "")
    dtype = str(record.get("dtype") or "")
    return (
        any(fnmatch.fnmatchcase(op, g) for g in ops)
        and (dtypes is None or any(fnmatch.fnmatchcase(dtype, g) for g in dtypes))
        and (classes is None or record.get("failure_class") in classes)
    )


def summarize(records: list[dict]) -> list[str]:
    """The printed lines (tested without a device)."""
    lines = ["outcomes per suite:"]
    by_suite: dict = collections.defaultdict(collections.Counter)
    for r in records:
        by_suite[r.get("suite") or "?"][r["outcome"]] += 1
    for suite in sorted(by_suite):
        counts = by_suite[suite]
        lines.append(f"  {suite:16} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    failing = [r for r in records if r["outcome"] in FAILING]
    lines.append(f"failing: {len(failing)} of {len(records)}; per failure class:")
    for cls, n in collections.Counter(r.get("failure_class") or "?" for r in failing).most_common():
        lines.append(f"  {cls:16} {n}")
    lines.append("true positives:")
    for name, ops, dtypes, classes in TRUE_POSITIVES:
        hits = [r for r in failing if matches(r, ops, dtypes, classes)]
        where = sorted({f"{r.get('suite')}/{r.get('dtype') or '-'}" for r in hits})
        status = (
            f"caught ({len(hits)}: {', '.join(where[:6])}{' ...' if len(where) > 6 else ''})" if hits else "NOT CAUGHT"
        )
        lines.append(f"  {name}: {status}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report_dir")
    args = parser.parse_args(argv)
    records = read_records(args.report_dir)
    if not records:
        sys.stderr.write(f"device_summary: no records in {args.report_dir}/records\n")
        return 2
    print("\n".join(summarize(records)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
