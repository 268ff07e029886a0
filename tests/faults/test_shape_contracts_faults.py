"""The shape_contracts suite has teeth: a wrong kernel on an overload only it reaches is flagged in both modes.

Each case runs ``opsuites/test_shape_contracts.py`` on one aten overload in a pytest subprocess against the
emulated device in mirror and in device mode, with one fault of ``fault_backend`` installed (a kernel on
the PrivateUse1 key), and asserts that the overload's record failed with the expected class: a saved
statistic 1 % off (``native_group_norm``'s rstd), an optimizer step that drops a term (``_fused_adam_``
without weight decay: its written ``self`` list differs; ``_fused_sgd_`` without dampening, list and
tensor lr), a scaled loss (``_ctc_loss``), and a metadata
query answered wrong (``sym_storage_offset`` of an offset view reported as 0). The control runs the same
overloads without a fault and asserts they pass, so the failures come from the faults and the clean
emulator raises no false alarm.
"""

from __future__ import annotations

import pytest

from tests.faults.suite_run import run_suite

pytest_plugins = ["pytester"]

CASES = [
    # fault of fault_backend.FAULTS, overload, failure class
    ("group-norm-rstd-1e-2", "aten::native_group_norm", "numeric"),
    ("fused-adam-no-weight-decay", "aten::_fused_adam_", "numeric"),
    # dampening ignored: only a step with momentum buffers (not the first) shows it
    ("fused-sgd-no-dampening", "aten::_fused_sgd_", "numeric"),
    ("fused-sgd-no-dampening", "aten::_fused_sgd_.tensor_lr", "numeric"),
    ("ctc-loss-1e-2", "aten::_ctc_loss", "numeric"),
    ("sym-storage-offset-zero", "aten::sym_storage_offset", "numeric"),
    # count_include_pad ignored when only H is padded: every avg_pool2d OpInfo sample with
    # count_include_pad=False also sets divisor_override, so only the contract's samples see it
    ("avg-pool2d-include-pad-when-h-padded", "aten::avg_pool2d", "numeric"),
    # an argument ignored on overloads the schema-derived inputs cannot build (a Storage, a scalar test
    # value with out=, an observer's running statistics)
    ("set-storage-ignores-offset", "aten::set.source_Storage_storage_offset", "numeric"),
    ("isin-scalar-out-ignores-invert", "aten::isin.Tensor_Scalar_out", "numeric"),
    ("obs-fake-quant-keeps-running-stats", "aten::_fused_moving_avg_obs_fq_helper", "numeric"),
    ("scaled-mm-v2-ignores-scale-b", "aten::_scaled_mm_v2", "numeric"),
]
MODES = ("mirror", "device")
IDS = [f if [c[0] for c in CASES].count(f) == 1 else f"{f}-{o.removeprefix('aten::')}" for f, o, _ in CASES]
"""Test ids: the fault name, with the overload where one fault is tried on several."""


def _run(pytester, monkeypatch, fault: str, overloads: str, mode: str):
    return run_suite(pytester, monkeypatch, "test_shape_contracts.py", fault, overloads, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("fault", "overload", "failure_class"), CASES, ids=IDS)
def test_shape_contracts_suite_flags_fault(pytester, monkeypatch, fault, overload, failure_class, mode):
    result, records = _run(pytester, monkeypatch, fault, overload, mode)
    mine = [r for r in records if r.get("suite") == "shape_contracts" and r.get("op") == overload]
    assert mine, f"no shape_contracts record for {overload}:\n{result.stdout.str()[-3000:]}"
    assert [r.get("failure_class") for r in mine if r.get("outcome") == "failed"] == [failure_class], (
        f"fault {fault!r} on {overload} not flagged as {failure_class} in {mode} mode: "
        f"{[(r.get('outcome'), r.get('message')) for r in mine]}\n{result.stdout.str()[-3000:]}"
    )


@pytest.mark.parametrize("mode", MODES)
def test_clean_emulator_passes_shape_contract_overloads(pytester, monkeypatch, mode):
    """Control: without a fault the same overloads pass in both modes."""
    result, records = _run(pytester, monkeypatch, "", ",".join(o for _, o, _ in CASES), mode)
    mine = [r for r in records if r.get("suite") == "shape_contracts"]
    assert sorted(r.get("op") for r in mine) == sorted(o for _, o, _ in CASES), result.stdout.str()[-3000:]
    assert all(r.get("outcome") == "passed" for r in mine), [(r.get("op"), r.get("message")) for r in mine]
