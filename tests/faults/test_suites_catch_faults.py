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


PAST_THE_OLD_CAP = [
    # fault, suite module, op, the old cap (first samples taken before every sample was), failure classes:
    # faults only samples past that cap show (sum's first samples are 0-dim; softmax's 3-D one is index 4);
    # a stride-blind read of noncontiguous_like's buffer meets its NaN padding: nonfinite, else numeric
    ("sum-ignores-strides", "test_layouts.py", "sum", 3, {"numeric", "nonfinite"}),
    ("softmax-backward-3d", "test_autograd.py", "softmax", 3, {"numeric"}),
]


def _run(pytester, monkeypatch, fault, module, op, dtypes, mode="mirror"):
    monkeypatch.setenv("PYTHONPATH", f"{HERE}:{ROOT}")
    monkeypatch.setenv("CONFORMANCE_TEST_FAULT", fault)
    monkeypatch.setenv("CONFORMANCE_EMULATOR_MODE", mode)
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
@pytest.mark.parametrize(("fault", "module", "op", "old_cap", "classes"), PAST_THE_OLD_CAP,
                         ids=[c[0] for c in PAST_THE_OLD_CAP])
def test_fault_past_the_old_cap_is_flagged(pytester, monkeypatch, fault, module, op, old_cap, classes, mode):
    """A wrong kernel that only a sample past the old first-N cap exercises fails the suite, in both
    emulator modes, and the record names that sample; without the fault the same test passes."""
    suite = module[len("test_"):-len(".py")]
    result, records = _run(pytester, monkeypatch, fault, module, op, "float32", mode)
    mine = [r for r in records if r.get("suite") == suite and r.get("op") == op]
    failed = [r for r in mine if r.get("outcome") == "failed"]
    assert failed and all(r.get("failure_class") in classes for r in failed), \
        f"{fault!r} not flagged in {mode} mode: {mine}\n{result.stdout.str()[-3000:]}"
    assert all(r["sample"] >= old_cap for r in failed), [r["sample"] for r in failed]
    assert all(r["samples"] + sum(r["samples_left_out"].values()) == r["samples_total"] for r in failed)

    result, clean = _run(pytester, monkeypatch, "", module, op, "float32", mode)
    mine = [r for r in clean if r.get("suite") == suite and r.get("op") == op]
    assert mine and all(r.get("outcome") == "passed" for r in mine), result.stdout.str()[-3000:]
    assert all(r["samples"] > old_cap for r in mine), [r["samples"] for r in mine]
