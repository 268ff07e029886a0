"""Backend module for the fault-injection tests: the emulated device with one wrong kernel.

``--backend-module fault_backend`` (with this folder on ``PYTHONPATH``) installs the emulator in mirror
mode, then the fault named by ``$CONFORMANCE_TEST_FAULT`` (a key of :data:`FAULTS`) through
:mod:`conformance.emulator.faults` (``torch.library`` kernels on the PrivateUse1 key).
"""

from __future__ import annotations

import os

import torch

import conformance.emulator.backend  # noqa: F401 - installs the emulated device
from conformance.emulator import fallback, faults, get_mode

CONFORMANCE_MIRRORS_CPU = get_mode() == "mirror"
"""As the emulator's own backend module: bitwise-CPU expectations in mirror mode (the default), the
tolerance policy in device mode (``CONFORMANCE_EMULATOR_MODE=device``)."""


def _noncontig_only(result, *args, **kwargs):
    if any(isinstance(a, torch.Tensor) and not a.is_contiguous() for a in args):
        return faults._scale_inplace(result, 1 + 1e-2)
    return result


def _copying_view(result, *args, **kwargs):
    return fallback.run(torch.ops.aten.clone.default, (result,), {"memory_format": torch.contiguous_format})


def _no_raise(*args, **kwargs):
    return torch.zeros(1, device="neuron")


def _drop_nan(result, *args, **kwargs):
    return fallback.run(torch.ops.aten.nan_to_num.default, (result,), {})


def _softmax_backward_3d(result, grad_output, *args, **kwargs):
    """Softmax's backward 1e-3 off for inputs of three or more dims (a kernel right only for 1-D/2-D rows)."""
    return faults._scale_inplace(result, 1 + 1e-3) if grad_output.dim() >= 3 else result


FAULTS = {
    "relative-1e-3": lambda: faults.scale_output("aten::mul.Tensor", rel=1e-3),
    "noncontiguous-only": lambda: faults.override("aten::add.Tensor", _noncontig_only),
    "inplace-copy": lambda: faults.make_copy_instead_of_inplace("aten::add_.Tensor"),
    "view-copies": lambda: faults.override("aten::transpose.int", _copying_view),
    "gradient": lambda: faults.scale_output("aten::tanh_backward", rel=1e-3),
    "error-no-raise": lambda: faults.override("aten::trace", _no_raise, receives="args"),
    "nan-dropped": lambda: faults.override("aten::sqrt", _drop_nan),
    # pairs: the overload mirror mode runs, and the out= overload device mode runs (empty + op.out)
    "sum-ignores-strides": lambda: (faults.make_ignore_strides("aten::sum.dim_IntList"),
                                    faults.make_ignore_strides("aten::sum.IntList_out")),
    "softmax-backward-3d": lambda: (faults.override("aten::_softmax_backward_data", _softmax_backward_3d),
                                    faults.override("aten::_softmax_backward_data.out", _softmax_backward_3d)),
}
"""Fault name -> factory of the :class:`conformance.emulator.faults.Fault` (or tuple of them) it installs."""

_name = os.environ.get("CONFORMANCE_TEST_FAULT", "")
if _name:
    if _name not in FAULTS:
        raise ValueError(f"CONFORMANCE_TEST_FAULT={_name!r} is not one of {sorted(FAULTS)}")
    _made = FAULTS[_name]()
    for _fault in _made if isinstance(_made, tuple) else (_made,):
        _fault.install()
