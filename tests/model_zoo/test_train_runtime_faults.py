"""The training-runtime checks have teeth: a wrong fused-optimizer or AMP kernel on the emulated device's
PrivateUse1 key is flagged, in both emulator modes, and the clean device passes the same checks.

Faults (``neuron_conformance.emulator.faults.override`` with the arguments, restored on leaving the ``with``):

- ``_fused_adamw_`` that ignores ``weight_decay`` (runs the correct kernel with ``weight_decay=0``):
  must fail ``adamw-fused``, ``kernel-_fused_adamw_`` and ``grad_scaler-fused`` (AdamW fused under a
  GradScaler), and leave ``adamw-loop`` (which never calls it) passing;
- ``_amp_update_scale_`` that ignores ``found_inf`` (an overflow never backs the scale off): must fail
  ``kernel-_amp_update_scale_`` and both GradScaler checks.

In-process (no pytest subprocess): the checks are called directly, about 10 s in all.
"""

from __future__ import annotations

import pytest
import torch

emulator = pytest.importorskip("neuron_conformance.emulator")
faults = pytest.importorskip("neuron_conformance.emulator.faults")

from neuron_conformance.model_zoo.runtime_checks import run_runtime_check  # noqa: E402

MODES = ("mirror", "device")


def _adamw_without_decay(*args, **kwargs):
    if "weight_decay" not in kwargs:
        raise AssertionError(f"_fused_adamw_ fault: weight_decay not passed by keyword ({sorted(kwargs)})")
    return faults.correct("aten::_fused_adamw_", *args, **{**kwargs, "weight_decay": 0.0})


def _update_scale_ignores_overflow(scale, tracker, found_inf, *rest, **kwargs):
    return faults.correct("aten::_amp_update_scale_", scale, tracker, torch.zeros_like(found_inf), *rest, **kwargs)


FAULTS = {
    "fused-adamw-ignores-weight-decay": ("aten::_fused_adamw_", _adamw_without_decay),
    "update-scale-ignores-found-inf": ("aten::_amp_update_scale_", _update_scale_ignores_overflow),
}
CASES = [
    # fault, check, dtype, whether the check must flag it
    ("fused-adamw-ignores-weight-decay", "adamw-fused", "float32", True),
    ("fused-adamw-ignores-weight-decay", "kernel-_fused_adamw_", "float32", True),
    ("fused-adamw-ignores-weight-decay", "kernel-_fused_adamw_", "bfloat16", True),
    ("fused-adamw-ignores-weight-decay", "grad_scaler-fused", "float32", True),
    ("fused-adamw-ignores-weight-decay", "adamw-loop", "float32", False),
    ("update-scale-ignores-found-inf", "kernel-_amp_update_scale_", "float32", True),
    ("update-scale-ignores-found-inf", "grad_scaler-foreach", "float32", True),
    ("update-scale-ignores-found-inf", "grad_scaler-fused", "float32", True),
]


@pytest.fixture(params=MODES)
def neuron(request):
    emulator.install()
    before = emulator.get_mode()
    emulator.set_mode(request.param)
    yield torch.device("neuron")
    emulator.set_mode(before)


@pytest.mark.parametrize(("fault", "check", "dtype", "flagged"), CASES, ids=[f"{f}-{c}-{d}" for f, c, d, _ in CASES])
def test_fault_is_flagged(neuron, fault, check, dtype, flagged):
    op, kernel = FAULTS[fault]
    with faults.override(op, kernel, receives="args") as installed:
        result = run_runtime_check(check, dtype, neuron)
    assert result is not None
    if flagged:
        assert installed.calls > 0, f"{check} never called {op}"
        assert not result.passed and result.failure_class == "numeric", result.message
    else:
        assert installed.calls == 0 and result.passed, result.message


@pytest.mark.parametrize("check", sorted({c for _, c, _, _ in CASES}))
def test_clean_device_passes(neuron, check):
    result = run_runtime_check(check, "float32", neuron)
    assert result is not None and result.passed, result.message
