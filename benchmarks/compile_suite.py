"""Cost and findings of the compile suite on a slice of the OpInfo database (``python -m benchmarks.compile_suite``).

Runs ``pytest opsuites/test_compile.py`` (both passes: ``test_compile`` per OpInfo x dtype, and
``test_compile_dynamic`` in float32) on the emulated device for an op slice (``--ops-count N`` ops spread
over the fp32 OpInfos, ``--conformance-ops NAMES``, or ``--full``) and ``--dtypes``, then prints from the
result records:

* the wall time, the tests run, and seconds per (op, dtype) test (the records' ``duration``: setup, call
  and teardown), per pass;
* the projection of the whole database: seconds per test times the number of (OpInfo, dtype) pairs in
  float32, bfloat16 and float16 (:func:`database_pairs`), plus the dynamic pass (float32 OpInfos), over
  ``--cores`` cores, against the main job's 20-minute budget; with ``--eager`` also the same
  slice of ``compare_cpu``, for the ratio of the compile suite's cost to the eager suite's;
* counts per outcome and failure class, per pass, and the ops whose samples do not compile as one graph
  (with the CPU's break count beside the device's: equal counts are the op's breaks, not the device's).

A slice's ops are not a uniform sample of the database (a few linalg and nn ops cost most): the projection
is a bound of the right order, not a measurement. A result line goes to ``benchmarks/results/compile_suite.jsonl``.
"""

from __future__ import annotations

import argparse
from collections import Counter

from . import _common as c

MAIN_TARGET_S = 20 * 60
"""the main job on a 2-core machine stays under 20 minutes."""
PROJECTED_DTYPES = ("float32", "bfloat16", "float16")


def database_pairs(dtypes=PROJECTED_DTYPES) -> dict:
    """``{dtype: number of OpInfos supporting it on the CPU}`` for ``dtypes``: the static pass's tests of
    the whole database in each (the dynamic pass has the float32 count)."""
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    return {d: sum(1 for op in op_db if getattr(torch, d) in op.supported_dtypes("cpu")) for d in dtypes}


def run_suite(
    module: str, ops_file, dtypes: str, workers: str, mode: str, report_dir: str, timeout: float, extra=()
) -> tuple[float, list]:
    """``(wall seconds, records)`` of one pytest run of ``opsuites/<module>``."""
    from neuron_conformance.conformance.results.records import (
        read_records,
    )  # deferred: the harness is imported only when a run is read

    cmd = c.pytest_cmd(
        f"opsuites/{module}",
        "-n",
        workers,
        "-q",
        "-p",
        "no:cacheprovider",
        "--conformance-no-report",
        f"--conformance-ops=@{ops_file}",
        f"--conformance-dtypes={dtypes}",
        "--conformance-emulator-mode",
        mode,
        f"--conformance-report-dir={report_dir}",
        *extra,
    )
    secs, proc = c.timed(cmd, timeout=timeout)
    c.check_rc(proc, f"pytest {module}")
    return secs, read_records(report_dir)


def summarize(records: list) -> dict:
    """Per pass (``compiled``, ``dynamic``): tests, summed test seconds, outcome counts, failure-class
    counts, and the ``(op, dtype, graphs, device breaks, CPU breaks)`` of tests not compiled as one graph."""
    out: dict = {}
    for rec in records:
        p = out.setdefault(
            rec.get("variant") or "?",
            {"tests": 0, "seconds": 0.0, "outcomes": Counter(), "classes": Counter(), "not_one_graph": []},
        )
        p["tests"] += 1
        p["seconds"] += float(rec.get("duration") or 0.0)
        p["outcomes"][rec["outcome"]] += 1
        if rec.get("failure_class"):
            p["classes"][rec["failure_class"]] += 1
        if rec.get("one_graph") is False:
            p["not_one_graph"].append(
                (rec["op"], rec.get("dtype"), rec.get("graphs"), rec.get("graph_breaks"), rec.get("cpu_graph_breaks"))
            )
    return out


def report(wall: float, passes: dict, pairs: dict, cores: int, eager: tuple | None) -> list[str]:
    """The printed lines (module docstring)."""
    lines = [f"wall {wall:.1f} s"]
    per_test = {}
    for name, p in sorted(passes.items()):
        per_test[name] = p["seconds"] / p["tests"] if p["tests"] else float("nan")
        lines.append(f"{name}: {p['tests']} tests, {p['seconds']:.1f} test s, {per_test[name]:.2f} s per test")
        lines.append("  outcomes: " + ", ".join(f"{k} {v}" for k, v in p["outcomes"].most_common()))
        if p["classes"]:
            lines.append("  failure classes: " + ", ".join(f"{k} {v}" for k, v in p["classes"].most_common()))
        lines.append(f"  not one graph: {len(p['not_one_graph'])} test(s)")
        for op, dtype, graphs, breaks, cpu in sorted(p["not_one_graph"], key=lambda r: (r[0], str(r[1]))):
            lines.append(f"    {op} {dtype}: graphs {graphs}, breaks {breaks}, CPU breaks {cpu}")
    static, dynamic = per_test.get("compiled"), per_test.get("dynamic")
    if static is not None:
        total = sum(pairs.values()) * static + (pairs.get("float32", 0) * dynamic if dynamic else 0.0)
        static_tests = " + ".join(f"{pairs[d]} {d}" for d in pairs)
        dynamic_tests = f" + {pairs.get('float32', 0)} dynamic" if dynamic else ""
        lines.append(
            f"projected whole database ({static_tests} static tests{dynamic_tests}): "
            f"{total / 3600:.2f} test hours, {total / cores / 60:.0f} min on {cores} cores "
            f"({total / cores / MAIN_TARGET_S:.1f}x the main job's 20-minute budget)"
        )
    if eager is not None and static:
        e_tests, e_seconds = eager
        if e_tests:
            lines.append(
                f"compare_cpu on the same slice: {e_seconds / e_tests:.2f} s per test; compile suite / "
                f"compare_cpu per (op, dtype): {static / (e_seconds / e_tests):.1f}x"
            )
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    c.add_op_selection(ap)
    ap.add_argument("--dtypes", default="float32", help="--conformance-dtypes of the run (default float32)")
    ap.add_argument("--mode", default="mirror", choices=("mirror", "device"), help="emulator mode")
    ap.add_argument("--workers", default="2", help="pytest -n value (default 2)")
    ap.add_argument("--cores", type=int, default=2, help="cores of the projection (default 2, the CI machine's)")
    ap.add_argument("--eager", action="store_true", help="also time compare_cpu on the same slice")
    ap.add_argument("--report-dir", default=None, help="keep the records here (default: a temporary folder)")
    ap.add_argument("--timeout", type=float, default=4 * 3600.0, help="seconds the pytest run may take")
    args = ap.parse_args(argv)
    names = c.op_subset(None if args.full else args.ops_count, args.ops)
    with c.tmpdir("compile-suite") as tmp:
        ops_file = c.write_ops_file(names, tmp)
        wall, records = run_suite(
            "test_compile.py",
            ops_file,
            args.dtypes,
            args.workers,
            args.mode,
            args.report_dir or f"{tmp}/report",
            args.timeout,
        )
        eager = None
        if args.eager:
            _, eager_records = run_suite(
                "test_compare_cpu.py", ops_file, args.dtypes, args.workers, args.mode, f"{tmp}/eager", args.timeout
            )
            eager = (len(eager_records), sum(float(r.get("duration") or 0.0) for r in eager_records))
    passes = summarize(records)
    pairs = database_pairs()
    for line in report(wall, passes, pairs, args.cores, eager):
        print(line)
    c.write_result(
        "compile_suite",
        {
            "ops": len(names),
            "dtypes": args.dtypes,
            "mode": args.mode,
            "workers": args.workers,
            "wall_s": round(wall, 1),
            "passes": {
                k: {
                    "tests": v["tests"],
                    "seconds": round(v["seconds"], 1),
                    "outcomes": dict(v["outcomes"]),
                    "classes": dict(v["classes"]),
                    "not_one_graph": [list(r[:2]) for r in v["not_one_graph"]],
                }
                for k, v in passes.items()
            },
            "database_pairs": pairs,
            "eager": eager,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
