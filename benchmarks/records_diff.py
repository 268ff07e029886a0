"""Compare two runs' result records test by test: the same tests, with the same verdicts?

    python -m benchmarks.records_diff BEFORE_DIR AFTER_DIR [--fields outcome,failure_class,rule]

Both arguments are report directories (``<dir>/records/*.jsonl``), read with the project's one records
reader (:func:`neuron_conformance.conformance.results.records.read_records`). For every node id in either run, the compared fields
are ``outcome``, ``failure_class``, ``rule`` and the errors seen (``max_abs``, ``max_rel``, ``max_ulp``)
unless ``--fields`` names others. Prints the counts per outcome of each run, the node ids only one run
has, and every differing test with its fields; exits 1 when anything differs, 0 when the runs agree.
Used to show that a refactoring changed no verdict (the architecture issue: before/after, mirror and
device mode, and the model zoo).
"""

from __future__ import annotations

import argparse
import collections
import math
import sys

from neuron_conformance.conformance.results.records import read_records

DEFAULT_FIELDS = ("outcome", "failure_class", "rule", "max_abs", "max_rel", "max_ulp")


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def diff(before: list[dict], after: list[dict], fields=DEFAULT_FIELDS) -> dict:
    """``{"only_before": [ids], "only_after": [ids], "changed": [(id, {field: (before, after)})],
    "counts_before": {outcome: n}, "counts_after": {outcome: n}}``."""
    b = {r["nodeid"]: r for r in before if r.get("nodeid")}
    a = {r["nodeid"]: r for r in after if r.get("nodeid")}
    changed = []
    for nodeid in sorted(b.keys() & a.keys()):
        delta = {
            f: (b[nodeid].get(f), a[nodeid].get(f)) for f in fields if not _same(b[nodeid].get(f), a[nodeid].get(f))
        }
        if delta:
            changed.append((nodeid, delta))
    return {
        "only_before": sorted(b.keys() - a.keys()),
        "only_after": sorted(a.keys() - b.keys()),
        "changed": changed,
        "counts_before": dict(collections.Counter(r.get("outcome") for r in b.values())),
        "counts_after": dict(collections.Counter(r.get("outcome") for r in a.values())),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="report directory of the first run")
    ap.add_argument("after", help="report directory of the second run")
    ap.add_argument("--fields", default=",".join(DEFAULT_FIELDS), help="comma-separated record fields")
    args = ap.parse_args(argv)
    fields = tuple(f for f in args.fields.split(",") if f)
    d = diff(read_records(args.before), read_records(args.after), fields)
    print(f"before: {sum(d['counts_before'].values())} tests {dict(sorted(d['counts_before'].items()))}")
    print(f"after:  {sum(d['counts_after'].values())} tests {dict(sorted(d['counts_after'].items()))}")
    for nodeid in d["only_before"]:
        print(f"only before: {nodeid}")
    for nodeid in d["only_after"]:
        print(f"only after:  {nodeid}")
    for nodeid, delta in d["changed"]:
        print(f"changed: {nodeid}: " + ", ".join(f"{k} {v[0]!r} -> {v[1]!r}" for k, v in delta.items()))
    n = len(d["only_before"]) + len(d["only_after"]) + len(d["changed"])
    print(f"{n} difference(s) in {', '.join(fields)}")
    return 1 if n else 0


if __name__ == "__main__":
    sys.exit(main())
