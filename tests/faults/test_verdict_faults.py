"""The verdict gaps closed, proven with wrong kernels in both emulator modes.

* integer outputs of implementation-defined ops: a ``unique`` whose inverse is off by one, and a ``sort``
  whose indices are not a permutation, are flagged by ``test_compare_cpu`` in mirror mode (exact
  comparison) and in device mode (where the CPU does not fix them: :mod:`neuron_conformance.conformance.verdict.index_semantics`);
* ``out=`` under the fp64 arbiter: an ``add.out`` kernel 1e-3 off is flagged by ``test_out`` in both modes
  (the arbiter does not accept it).

The control runs the same suites on the same ops on the clean emulator in both modes: no failure.
"""

from __future__ import annotations

import pytest

from neuron_conformance.conformance.verdict.index_semantics import RULE
from tests.faults.test_suites_catch_faults import _run

pytest_plugins = ["pytester"]

MODES = ("mirror", "device")

CASES = [
    # fault, suite module, op, dtypes, variant of the failing records, expected failure classes
    ("unique-inverse-off-by-one", "test_compare_cpu.py", "unique", "int32,float32", None, {"numeric"}),
    ("sort-indices-not-a-permutation", "test_compare_cpu.py", "sort", "int32,float32", None, {"numeric"}),
    ("add-out-1e-3", "test_variants.py", "add", "float32", "out", {"numeric"}),
]


def _failing(records, variant):
    return [
        r
        for r in records
        if r.get("outcome") in ("failed", "error") and (variant is None or r.get("variant") == variant)
    ]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("fault", "module", "op", "dtypes", "variant", "classes"), CASES, ids=[c[0] for c in CASES])
def test_verdict_gap_fault_is_flagged(pytester, monkeypatch, fault, module, op, dtypes, variant, classes, mode):
    result, records = _run(pytester, monkeypatch, fault, module, op, dtypes, mode=mode)
    failing = _failing(records, variant)
    seen = {r.get("failure_class") for r in failing}
    assert seen & classes, (
        f"fault {fault!r} not flagged as {classes} by {module} in {mode} mode; seen "
        f"{seen}\n{result.stdout.str()[-3000:]}"
    )
    if mode == "device" and fault == "unique-inverse-off-by-one":  # unjudged before: the semantics flag it
        assert any(f"({RULE})" in (r.get("message") or "") for r in failing), [r.get("message") for r in failing]


@pytest.mark.parametrize("mode", MODES)
def test_clean_emulator_passes_the_same_checks(pytester, monkeypatch, mode):
    """Control: without a fault the same suites, ops and dtypes have no failure."""
    for module, ops, dtypes in (
        ("test_compare_cpu.py", "unique,sort", "int32,float32"),
        ("test_variants.py", "add", "float32"),
    ):
        result, records = _run(pytester, monkeypatch, "", module, ops, dtypes, mode=mode)
        assert records, result.stdout.str()[-3000:]
        bad = [(r.get("nodeid"), r.get("failure_class")) for r in _failing(records, None)]
        assert not bad, f"clean emulator, {mode} mode, {module}: {bad}\n{result.stdout.str()[-3000:]}"
