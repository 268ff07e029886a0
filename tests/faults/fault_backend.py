"""Backend module for the fault-injection tests: the emulated device with one wrong kernel.

``--backend-module fault_backend`` (with this folder on ``PYTHONPATH``) installs the emulator in mirror
mode, then the fault named by ``$CONFORMANCE_TEST_FAULT`` (a key of :data:`FAULTS`) through
:mod:`conformance.emulator.faults` (``torch.library`` kernels on the PrivateUse1 key).
"""

from __future__ import annotations

import os

import torch

import conformance.emulator.backend  # noqa: F401 - installs the emulated device
from conformance.emulator import fallback, faults

CONFORMANCE_MIRRORS_CPU = True
"""The faulty kernels are wrong against bitwise-CPU expectations: judge as the mirror emulator."""


def _noncontig_only(result, *args, **kwargs):
    if any(isinstance(a, torch.Tensor) and not a.is_contiguous() for a in args):
        return faults._scale_inplace(result, 1 + 1e-2)
    return result


def _copying_view(result, *args, **kwargs):
    return fallback.run(torch.ops.aten.clone.default, (result,), {"memory_format": torch.contiguous_format})


def _no_raise(*args, **kwargs):
    return torch.zeros(1, device="neuron")


def _resize_zero_fills(self, *args, **kwargs):
    """A growing ``resize_`` that reallocates without copying (torch-opencl's bug): every element is 0."""
    grown = self.numel() < torch.Size(args[0]).numel() if args else False
    result = faults.correct("aten::resize_", self, *args, **kwargs)
    if grown:
        fallback.run(torch.ops.aten.zero_.default, (result,), {})
    return result


def _drop_nan(result, *args, **kwargs):
    return fallback.run(torch.ops.aten.nan_to_num.default, (result,), {})


FAULTS = {
    "relative-1e-3": lambda: faults.scale_output("aten::mul.Tensor", rel=1e-3),
    "noncontiguous-only": lambda: faults.override("aten::add.Tensor", _noncontig_only),
    "inplace-copy": lambda: faults.make_copy_instead_of_inplace("aten::add_.Tensor"),
    "view-copies": lambda: faults.override("aten::transpose.int", _copying_view),
    "gradient": lambda: faults.scale_output("aten::tanh_backward", rel=1e-3),
    "error-no-raise": lambda: faults.override("aten::trace", _no_raise, receives="args"),
    "nan-dropped": lambda: faults.override("aten::sqrt", _drop_nan),
    "resize-zero-fills": lambda: faults.override("aten::resize_", _resize_zero_fills, receives="args"),
}
"""Fault name -> factory of the :class:`conformance.emulator.faults.Fault` it installs."""

_name = os.environ.get("CONFORMANCE_TEST_FAULT", "")
if _name:
    if _name not in FAULTS:
        raise ValueError(f"CONFORMANCE_TEST_FAULT={_name!r} is not one of {sorted(FAULTS)}")
    FAULTS[_name]().install()
