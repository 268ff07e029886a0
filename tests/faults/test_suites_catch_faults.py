"""The op suites have teeth: each injected wrong kernel is flagged with the right failure class.

Every case runs one suite on one op in a pytest subprocess (``pytester.runpytest_subprocess``) against
the emulated device with one fault installed by ``fault_backend`` (``--backend-module``), then reads the
result records and asserts that a test of that suite failed with the expected failure class.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.records import read_records

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

CASES = [
    # fault, suite module, op, dtypes, expected failure classes
    ("relative-1e-3", "test_layouts.py", "mul", "float32", {"numeric"}),
    ("noncontiguous-only", "test_layouts.py", "add", "float32", {"numeric"}),
    ("inplace-copy", "test_variants.py", "add", "float32", {"metadata", "numeric"}),
    ("view-copies", "test_variants.py", "transpose", "float32", {"metadata"}),
    ("gradient", "test_autograd.py", "tanh", "float32", {"numeric"}),
    ("error-no-raise", "test_errors.py", "trace", "float32", {"wrong-error"}),
    ("nan-dropped", "test_properties.py", "sqrt", "float32", {"numeric", "nonfinite"}),
]


def _run(pytester, monkeypatch, fault, module, op, dtypes, mode="mirror"):
    monkeypatch.setenv("PYTHONPATH", f"{HERE}:{ROOT}")
    monkeypatch.setenv("CONFORMANCE_EMULATOR_MODE", mode)
    monkeypatch.setenv("CONFORMANCE_TEST_FAULT", fault)
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(
        str(ROOT / "opsuites" / module), "--rootdir", str(ROOT), "-p", "no:cacheprovider", "-n", "0",
        "--backend-module", "fault_backend", "--device", "neuron", "--ops", op, "--dtypes", dtypes,
        "--report-dir", str(report), "--no-report", "-q", timeout=600)
    return result, read_records(report)


@pytest.mark.parametrize(("fault", "module", "op", "dtypes", "classes"), CASES, ids=[c[0] for c in CASES])
def test_suite_flags_fault(pytester, monkeypatch, fault, module, op, dtypes, classes):
    result, records = _run(pytester, monkeypatch, fault, module, op, dtypes)
    suite = module[len("test_"):-len(".py")]
    mine = [r for r in records if r.get("suite") == suite and r.get("op") == op]
    assert mine, f"no records of suite {suite} for {op}:\n{result.stdout.str()[-3000:]}"
    failed = {r.get("failure_class") for r in mine if r.get("outcome") in ("failed", "error")}
    assert failed & classes, (f"fault {fault!r} was not flagged as {classes} by {module}; failure classes "
                              f"seen: {failed}\n{result.stdout.str()[-3000:]}")


def test_clean_emulator_passes_same_checks(pytester, monkeypatch):
    """Control: without a fault the same suite/op pairs pass (so the failures above come from the fault)."""
    result, records = _run(pytester, monkeypatch, "", "test_layouts.py", "mul", "float32")
    mine = [r for r in records if r.get("suite") == "layouts" and r.get("op") == "mul"]
    assert mine and all(r.get("outcome") == "passed" for r in mine), result.stdout.str()[-3000:]


@pytest.mark.parametrize("mode", ["mirror", "device"])
def test_growing_resize_that_loses_data_is_flagged(pytester, monkeypatch, mode):
    """device_api's resize_ check: a growing resize_ that zero-fills fails as numeric in both emulator
    modes; the clean emulator passes it."""
    result, records = _run(pytester, monkeypatch, "resize-zero-fills", "test_device_api.py", "tensor.resize_",
                           "float32", mode)
    (rec,) = [r for r in records if r.get("op") == "tensor.resize_"] or [None]
    assert rec is not None, result.stdout.str()[-3000:]
    assert (rec["outcome"], rec["failure_class"]) == ("failed", "numeric"), result.stdout.str()[-3000:]
    assert "lost the existing elements" in rec["message"]
    _result, clean = _run(pytester, monkeypatch, "", "test_device_api.py", "tensor.resize_", "float32", mode)
    assert [r["outcome"] for r in clean if r.get("op") == "tensor.resize_"] == ["passed"]
