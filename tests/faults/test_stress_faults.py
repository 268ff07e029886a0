"""The stress suite has teeth: each defect of ``stress_fault_backend`` is flagged in both emulator modes.

Every case runs ``opsuites/test_stress.py`` on a few tests in a pytest subprocess against the emulated
device (``$CONFORMANCE_EMULATOR_MODE`` mirror or device) with one defect installed by
``stress_fault_backend`` (``--conformance-backend-module``), then reads the result records: the test the defect targets
must fail with one of the expected failure classes. The control runs the same selection without a defect
and must pass (no false alarm), with the large-tensor cases inside the emulator's declared budget.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_conformance.conformance.results.records import read_records

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
MODES = ("mirror", "device")

CASES = [
    # defect, --conformance-ops, -k, the test that must fail (node id part), expected failure classes
    ("sum-int32-bytes", "sum", "test_large_tensor", "test_large_tensor[sum-uint8]", {"numeric"}),
    ("index-select-int32", "index_select", "test_large_tensor", "test_large_tensor[index-uint8]", {"numeric"}),
    ("bmm-empty-batch", "bmm", "test_zero_size", "test_zero_size[bmm-float32]", {"error"}),
    ("never-frees", "allocator.churn", "churn", "test_allocation_churn", {"metadata"}),
    ("oom-poisons", "allocator.oom-recovery", "oom", "test_oom_recovery", {"error"}),
]


def _run(pytester, monkeypatch, fault: str, mode: str, ops: str, keyword: str):
    monkeypatch.setenv("PYTHONPATH", f"{HERE}:{ROOT}")
    monkeypatch.setenv("CONFORMANCE_STRESS_FAULT", fault)
    monkeypatch.setenv("CONFORMANCE_EMULATOR_MODE", mode)
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(
        str(ROOT / "opsuites" / "test_stress.py"),
        "--rootdir",
        str(ROOT),
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        "--conformance-backend-module",
        "stress_fault_backend",
        "--conformance-device",
        "neuron",
        "--conformance-ops",
        ops,
        "--conformance-dtypes",
        "float32",
        "-k",
        keyword,
        "--conformance-report-dir",
        str(report),
        "--conformance-no-report",
        "-q",
        timeout=900,
    )
    return result, read_records(report)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("fault", "ops", "keyword", "target", "classes"), CASES, ids=[c[0] for c in CASES])
def test_stress_suite_flags_fault(pytester, monkeypatch, mode, fault, ops, keyword, target, classes):
    result, records = _run(pytester, monkeypatch, fault, mode, ops, keyword)
    mine = [r for r in records if r["nodeid"].endswith(target)]
    assert mine, f"no record of {target}:\n{result.stdout.str()[-3000:]}"
    failed = {r.get("failure_class") for r in mine if r.get("outcome") in ("failed", "error")}
    assert failed & classes, (
        f"defect {fault!r} ({mode} mode) was not flagged as {classes} by {target}; "
        f"records: {[(r['outcome'], r.get('failure_class'), r.get('message')) for r in mine]}"
        f"\n{result.stdout.str()[-3000:]}"
    )


@pytest.mark.parametrize("mode", MODES)
def test_clean_emulator_passes_the_same_tests(pytester, monkeypatch, mode):
    """Control: without a defect every targeted test passes in this mode (so the failures above are the
    defects'), the large-tensor cases included (they fit the emulator's declared budget)."""
    ops = ",".join(sorted({c[1] for c in CASES}))
    result, records = _run(pytester, monkeypatch, "", mode, ops, " or ".join(sorted({c[2] for c in CASES})))
    by_id = {r["nodeid"].split("::")[-1]: r for r in records}
    for target in (c[3] for c in CASES):
        assert by_id.get(target, {}).get("outcome") == "passed", (
            target,
            by_id.get(target),
            result.stdout.str()[-3000:],
        )
    bad = [(k, r["outcome"], r.get("message")) for k, r in by_id.items() if r["outcome"] in ("failed", "error")]
    assert not bad, bad
