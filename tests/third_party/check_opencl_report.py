"""Check the report of the CI conformance run against torch-opencl (run by .ci/third_party_backend.sh).

Not a pytest test: it needs the report of a run in the torch-opencl venv. Usage::

    python tests/third_party/check_opencl_report.py REPORT_DIR [--conformance-backend-module NAME]

Asserts that the run completed, that the report is complete (files, one record per test pytest reported in
``junit.xml``), and that the real defects of torch-opencl 0.1.0.dev23 (built from its sdist against torch
2.13, pocl CPU driver) are found with the right failure class. Prints counts per outcome and failure
class, the distinct causes and the wall time. Exit status 1 on a failed expectation.

The expectations below are what the harness observes on that build; each comment names the defect in
torch-opencl's source (csrc/aten/native/Minimal.cpp, RegisterOpenCL.cpp, Fill.cpp).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from neuron_conformance.conformance.results.records import read_records

REPORT_FILES = ("run.json", "summary.json", "summary.md", "index.html", "junit.xml")


def cause(rec: dict) -> str:
    """One line naming why a record failed, with op/dtype/sample/numbers taken out."""
    msg = (rec.get("message") or "").strip()
    m = re.search(r"(\w+(?:Error|Exception)) on the device: (.*)", msg)
    if m:
        msg = f"{m.group(1)}: {m.group(2)}"
    elif "differ" in msg or "non-finite" in msg:
        msg = "wrong values: " + (
            "non-finite where the reference is finite" if "non-finite" in msg else "elements differ from CPU"
        )
    msg = msg.splitlines()[0] if msg else "(no message)"
    msg = re.sub(r"^(RuntimeError|NotImplementedError): ", "", msg)
    msg = re.sub(r"Could not run '([^']+)' with arguments from the '\w+' backend.*", r"no kernel for \1", msg)
    msg = re.sub(r"for '\w+'", "for <dtype>", msg)
    msg = re.sub(r"\d+", "N", msg)
    return f"{rec.get('failure_class')}: {msg[:110]}"


def junit_nodeids(path: Path) -> set[str]:
    ids = set()
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.find("skipped") is not None and not list(case):
            continue
        mod = case.get("classname", "").replace(".", "/") + ".py"
        name = re.sub(r"@[\w.]+$", "", case.get("name", ""))  # loadgroup's "@group" suffix
        ids.add(f"{mod}::{name}")
    return ids


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("report_dir", type=Path)
    ap.add_argument(
        "--backend-module",
        "--conformance-backend-module",
        default="torch_opencl",
        help="module the run was given (opencl_startup_shim while the pin_memory probe crashes)",
    )
    args = ap.parse_args(argv)
    rd = args.report_dir
    problems: list[str] = []

    missing = [f for f in REPORT_FILES if not (rd / f).is_file()]
    if missing or not (rd / "records").is_dir():
        print(f"FAIL: report files missing in {rd}: {missing or ['records/']}")
        return 1
    run = json.loads((rd / "run.json").read_text())
    summary = json.loads((rd / "summary.json").read_text())
    recs = read_records(rd)
    by_id = {r["nodeid"]: r for r in recs}

    # -- the run and the report are complete
    if run.get("complete") is not True:
        problems.append(f"run.json: complete={run.get('complete')!r}, stop_reason={run.get('stop_reason')!r}")
    if summary.get("complete") is not True:
        problems.append("summary.json: complete is not true")
    dev = run.get("device", {})
    if (dev.get("type"), dev.get("backend"), dev.get("backend_version")) != ("opencl", "torch_opencl", "0.1.0.dev23"):
        problems.append(f"run.json device is {dev.get('type')}/{dev.get('backend')} {dev.get('backend_version')}")
    reported = junit_nodeids(rd / "junit.xml")
    no_record = sorted(reported - by_id.keys())
    if no_record:
        problems.append(f"{len(no_record)} test(s) reported by pytest have no record, e.g. {no_record[:3]}")
    if summary.get("totals", {}).get("total") != len(recs):
        problems.append(f"summary.json total {summary.get('totals', {}).get('total')} != {len(recs)} records")
    if len(recs) < 500:
        problems.append(f"only {len(recs)} records: the op list or the dtypes did not select the bounded run")

    def sel(pred):
        return [r for r in recs if pred(r)]

    def msg(r):
        return r.get("message") or ""

    # -- the real defects, each with the failure class the harness must give it
    expectations = [
        # _copy_from copies numel*element_size raw bytes whatever the two dtypes are: every dtype
        # conversion through .to()/.float()/.half()/.bfloat16() reinterprets bits (float bits read as int
        # give NaN, hence nonfinite). Wrong values, no error: numeric / nonfinite.
        (
            "dtype conversion copies raw bytes",
            {"numeric", "nonfinite"},
            sel(
                lambda r: (
                    r["op"] in {"to", "float", "half", "bfloat16"}
                    and r.get("failure_class") in {"numeric", "nonfinite"}
                )
            ),
            8,
        ),
        # as_strided TORCH_CHECKs storage_offset.has_value(): views that reach as_strided without an
        # offset (t, transpose, permute, expand, squeeze, unsqueeze) raise RuntimeError where CPU succeeds:
        # error (a device failure on a valid input), not unsupported (the op has a kernel).
        (
            "as_strided rejects a missing storage_offset",
            {"error"},
            sel(lambda r: r.get("failure_class") == "error" and "storage_offset is required" in msg(r)),
            6,
        ),
        # _copy_from TORCH_CHECKs that src and dst are contiguous: any device<->host copy of a strided
        # tensor (as_strided, narrow, select results; .int()/.long() into strided outputs) raises: error.
        (
            "_copy_from rejects non-contiguous tensors",
            {"error"},
            sel(
                lambda r: (
                    r.get("failure_class") == "error" and re.search(r"_copy_from: (src|dst) must be contiguous", msg(r))
                )
            ),
            6,
        ),
        # out= with a non-contiguous out tensor: the CPU fallback's copy back into out goes through the
        # same _copy_from and raises: error, found by test_out's "[noncontig out]" sample.
        (
            "non-contiguous out= not written",
            {"error"},
            sel(
                lambda r: r.get("variant") == "out" and r.get("failure_class") == "error" and "noncontig out" in msg(r)
            ),
            1,
        ),
        # conj() only sets the conj bit; _copy_from ignores it, so the host copy has the unconjugated
        # imaginary parts: numeric. (A 1-D conj().cpu() segfaults outside the harness; should a sample
        # here ever hit that, crash is the right class too.)
        (
            "conj bit ignored on copy",
            {"numeric", "crash"},
            sel(
                lambda r: (
                    r["op"] == "conj" and r["dtype"] == "complex64" and r.get("failure_class") in {"numeric", "crash"}
                )
            ),
            1,
        ),
        # No bmm/mm/baddbmm kernel and no CPU fallback for them: NotImplementedError -> unsupported. (The
        # issue's SIGFPE on an empty batch is out of reach while bmm.out is not registered.)
        (
            "no bmm/mm kernels",
            {"unsupported"},
            sel(lambda r: r["op"] in {"bmm", "mm", "baddbmm"} and r.get("failure_class") == "unsupported"),
            6,
        ),
        # fill_ dispatches on float and integer types only: Half/Bool/complex fills raise "not implemented
        # for 'Half'" -> unsupported (a dtype gap, not a wrong result).
        (
            "fill_ misses Half/Bool/complex",
            {"unsupported"},
            sel(lambda r: r.get("failure_class") == "unsupported" and "fill_opencl_standard" in msg(r)),
            3,
        ),
    ]
    # what works must pass, or the harness is misclassifying (or the backend is not really running)
    must_pass = [
        ("view", "float32"),
        ("reshape", "float32"),
        ("clone", "float32"),
        ("zero_", "float32"),
        ("resize_", "float32"),
        ("add", "int32"),
        ("add", "int64"),
    ]
    for op, dt in must_pass:
        hits = sel(
            lambda r, op=op, dt=dt: (
                r["op"] == op and r["dtype"] == dt and r.get("suite") == "variants" and r.get("variant") == "variants"
            )
        )
        if not hits or any(r["outcome"] != "passed" for r in hits):
            problems.append(f"{op} {dt} (test_variants) did not pass: {[r['outcome'] for r in hits]}")
    # The backend lacks aten::set_.source_Storage_storage_offset, which the harness's exact sample transfer
    # uses: the harness must fall back to empty_strided + copy_ (the repro's path), say so in run.json, and
    # never blame its own need on an op (before that fallback, add/sub/mul in compare_cpu were recorded
    # `unsupported` with that kernel's name although their own kernels are fine).
    if dev.get("transfer") != "empty_strided+copy_":
        problems.append(
            f"run.json device.transfer is {dev.get('transfer')!r}, expected the empty_strided+copy_ fallback"
        )
    blamed = sel(lambda r: "set_.source_Storage_storage_offset" in msg(r))
    if blamed:
        problems.append(f"{len(blamed)} record(s) blame the harness's own set_ kernel, e.g. {blamed[0]['nodeid']}")
    for op in ("add", "sub", "mul"):
        hits = sel(lambda r, op=op: r["op"] == op and r["dtype"] == "float32" and r.get("suite") == "compare_cpu")
        if not hits or any(r["outcome"] != "passed" for r in hits):
            problems.append(f"{op} float32 (test_compare_cpu) did not pass: {[r['outcome'] for r in hits]}")
    api = dev.get("api_support", {})
    if api.get("torch.Tensor.pin_memory") not in {"missing"}:  # segfaults (probe in a child) or shimmed
        problems.append(f"api_support pin_memory is {api.get('torch.Tensor.pin_memory')!r}, expected missing")

    # -- the table
    wall = (run.get("finished") or 0) - (run.get("started") or 0)
    print(
        f"torch-opencl {dev.get('backend_version')} on device {dev.get('type')} "
        f"(--conformance-backend-module {args.backend_module}): {len(recs)} records, "
        f"complete={run.get('complete')}, wall {wall:.0f} s"
    )
    counts = collections.Counter((r["outcome"], r.get("failure_class") or "-") for r in recs)
    print(f"{'outcome':<10} {'failure class':<14} count")
    for (o, c), n in sorted(counts.items()):
        print(f"{o:<10} {c:<14} {n}")
    causes = collections.Counter(cause(r) for r in recs if r["outcome"] != "passed")
    print(f"distinct causes ({len(causes)}):")
    for c, n in causes.most_common():
        print(f"  {n:4d}  {c}")
    print("known defects:")
    for name, classes, hits, need in expectations:
        ops = sorted({r["op"] for r in hits})
        ok = len(hits) >= need
        print(
            f"  [{'ok' if ok else 'MISSING'}] {name}: {len(hits)} record(s) "
            f"({'/'.join(sorted(classes))}; need {need}) ops {','.join(ops)}"
        )
        if not ok:
            problems.append(f"defect not found as {'/'.join(sorted(classes))}: {name} ({len(hits)} < {need})")
    if problems:
        print("FAIL:")
        for p in problems:
            print("  -", p)
        return 1
    print("OK: run complete, report complete, known defects found with the right classes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
