"""The bug classes have teeth: a wrong kernel of each class's kind is flagged in both emulator modes.

Classes duplicate-indices, masked-rows, ties, integer-edges, nonblocking-copies and aliasing-inplace
(:mod:`neuron_conformance.opsuites.bugclasses`). Each case runs ``opsuites/test_bug_classes.py`` on one op in a pytest
subprocess with one fault of :mod:`bug_kernels_a` installed (through ``fault_backend``), in mirror and in
device mode, and asserts that a case of that class failed with an expected failure class. The control
runs the same ops on the clean emulator in both modes: every case passes or is skipped with a reason.
"""

from __future__ import annotations

import pytest

from tests.faults.test_suites_catch_faults import _run

pytest_plugins = ["pytester"]

MODES = ("mirror", "device")

CASES = [
    # fault, bug class, op, dtypes, expected failure classes
    ("dup-last-writer-index_put", "duplicate-indices", "index_put", "float32,int64", {"numeric"}),
    ("softmax-masked-row-zero", "masked-rows", "softmax", "float32", {"numeric", "nonfinite"}),
    ("argmax-last-tie", "ties", "argmax", "float32,int32", {"numeric"}),
    ("remainder-c-sign", "integer-edges", "remainder", "int8,int64", {"numeric"}),
    ("nonblocking-read-early", "nonblocking-copies", "to", "bfloat16,int64", {"numeric"}),  # small sizes
    ("inplace-view-not-written", "aliasing-inplace", "mul", "float32,int64", {"numeric"}),
    ("overlap-unchecked-add", "aliasing-inplace", "add", "float32", {"wrong-error"}),
]
OPS = ",".join(sorted({c[2] for c in CASES}))
DTYPES = ",".join(sorted({d for c in CASES for d in c[3].split(",")}))


def _failed(records, bug_class):
    return {
        r.get("failure_class")
        for r in records
        if r.get("bug_class") == bug_class and r.get("outcome") in ("failed", "error")
    }


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("fault", "bug_class", "op", "dtypes", "classes"), CASES, ids=[c[0] for c in CASES])
def test_bug_class_flags_fault(pytester, monkeypatch, fault, bug_class, op, dtypes, classes, mode):
    result, records = _run(pytester, monkeypatch, fault, "test_bug_classes.py", op, dtypes, mode=mode)
    mine = [r for r in records if r.get("bug_class") == bug_class and r.get("op") == op]
    assert mine, f"no {bug_class} records for {op} in {mode} mode:\n{result.stdout.str()[-3000:]}"
    failed = _failed(mine, bug_class)
    assert failed & classes, (
        f"fault {fault!r} was not flagged as {classes} by the {bug_class} cases in {mode} "
        f"mode; failure classes seen: {failed}\n{result.stdout.str()[-3000:]}"
    )


@pytest.mark.parametrize("mode", MODES)
def test_clean_emulator_passes_same_cases(pytester, monkeypatch, mode):
    """Control: without a fault the same ops and dtypes pass (skips only with a named reason)."""
    result, records = _run(pytester, monkeypatch, "", "test_bug_classes.py", OPS, DTYPES, mode=mode)
    mine = [r for r in records if r.get("suite") == "bug_classes"]
    assert {r.get("bug_class") for r in mine} >= {c[1] for c in CASES}, result.stdout.str()[-3000:]
    bad = [
        (r.get("nodeid"), r.get("outcome"))
        for r in mine
        if r.get("outcome") != "passed" and not (r.get("outcome") == "skipped" and r.get("message"))
    ]
    assert not bad, f"clean emulator, {mode} mode: {bad}\n{result.stdout.str()[-3000:]}"
