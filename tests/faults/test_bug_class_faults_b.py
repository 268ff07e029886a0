"""The bug classes strided-reductions, tile-edges and special-values have teeth, in both emulator modes.

Each fault of :mod:`fault_kernels_b` (a wrong kernel the way real backends ship them) is installed on the
emulated device in mirror mode and in device mode, ``opsuites/test_bug_classes.py`` runs on the op it
breaks, and the class's records must hold a failure of the expected failure class on the case the
fault aims at. The controls run the same selections on the clean emulator: every case passes, so the
failures come from the faults.
"""

from __future__ import annotations

import pytest

from tests.faults.test_suites_catch_faults import _run

pytest_plugins = ["pytester"]

MODES = ("mirror", "device")

CASES = [
    # fault, op, dtypes, bug class, a case that must fail, failure classes
    ("reduction-ignores-strides", "sum", "float32", "strided-reductions", "sum-transposed-2d", {"numeric"}),
    ("scan-ignores-strides", "cumsum", "float32", "strided-reductions", "cumsum-stepped-3d", {"numeric"}),
    ("vector-tail-dropped", "add", "float32", "tile-edges", "add-vector-1-7-17-31-63-64-65", {"numeric"}),
    ("mm-k-tail-dropped", "mm", "float32", "tile-edges", "mm-7x17x31", {"numeric"}),
    ("low-precision-combine", "sum", "bfloat16", "tile-edges", "sum-uniform-1048583", {"numeric"}),
    ("maximum-drops-nan", "maximum", "float32", "special-values", "maximum-pairs", {"numeric"}),
    ("subnormals-flushed", "mul", "float32", "special-values", "mul-pairs", {"numeric"}),
    ("exp-saturates-inf", "exp", "float32", "special-values", "exp", {"numeric"}),
    ("amax-skips-nan", "amax", "float32", "special-values", "amax-specials", {"numeric"}),
]

CONTROL_OPS = ",".join(sorted({c[1] for c in CASES}))
"""The ops of :data:`CASES`, run together on the clean emulator (one subprocess a mode)."""


def _records(records, bug_class):
    return [r for r in records if r.get("suite") == "bug_classes" and r.get("bug_class") == bug_class]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("fault", "op", "dtypes", "bug_class", "case", "classes"), CASES, ids=[c[0] for c in CASES])
def test_bug_class_flags_fault(pytester, monkeypatch, mode, fault, op, dtypes, bug_class, case, classes):
    result, records = _run(pytester, monkeypatch, fault, "test_bug_classes.py", op, dtypes, mode=mode)
    mine = _records(records, bug_class)
    assert mine, f"no {bug_class} records for {op} in {mode} mode:\n{result.stdout.str()[-3000:]}"
    failed = {r.get("case"): r.get("failure_class") for r in mine if r.get("outcome") in ("failed", "error")}
    assert case in failed, (
        f"fault {fault!r} ({mode} mode) did not fail {bug_class}::{case}; failed: "
        f"{sorted(failed)}\n{result.stdout.str()[-3000:]}"
    )
    assert failed[case] in classes, f"{bug_class}::{case} failed as {failed[case]!r}, expected one of {classes}"


@pytest.mark.parametrize("mode", MODES)
def test_clean_emulator_passes_bug_classes(pytester, monkeypatch, mode):
    """Control: without a fault every case of the faults' ops passes in both modes, in each class."""
    result, records = _run(pytester, monkeypatch, "", "test_bug_classes.py", CONTROL_OPS, "float32,bfloat16", mode=mode)
    for bug_class in sorted({c[3] for c in CASES}):
        mine = _records(records, bug_class)
        assert mine, f"no {bug_class} records for {CONTROL_OPS} in {mode} mode:\n{result.stdout.str()[-3000:]}"
        bad = [(r.get("case"), r.get("outcome")) for r in mine if r.get("outcome") != "passed"]
        assert not bad, f"clean emulator ({mode} mode) did not pass {bad}\n{result.stdout.str()[-3000:]}"
