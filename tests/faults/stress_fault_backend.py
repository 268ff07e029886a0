"""Backend module for the stress suite's fault tests: the emulated device, in either mode, with one defect.

``--conformance-backend-module stress_fault_backend`` (with this folder on ``PYTHONPATH``) installs the emulator in the
mode of ``$CONFORMANCE_EMULATOR_MODE`` (mirror or device), then the defect named by
``$CONFORMANCE_STRESS_FAULT`` (a key of :data:`FAULTS`): wrong PrivateUse1 kernels registered through
:mod:`neuron_conformance.emulator.faults`, modelled on bugs real backends shipped:

* ``sum-int32-bytes``: ``sum`` reads only the elements whose byte offset fits in an int32 (a kernel indexing
  with 32-bit byte offsets: the elements past 2^31 bytes are dropped);
* ``index-select-int32``: ``index_select`` truncates its indices to 31 bits (``int32`` index math);
* ``bmm-empty-batch``: ``bmm`` raises on a batch of zero matrices (torch-opencl's divides by the batch size
  and dies of SIGFPE; here a ``RuntimeError`` so the test process survives);
* ``never-frees``: every tensor ``empty`` allocates is kept alive (``memory_allocated`` only grows);
* ``oom-poisons``: after a ``torch.OutOfMemoryError`` every allocation fails (a device left unusable).
"""

from __future__ import annotations

import os

import torch

import neuron_conformance.emulator.backend as _emulator_backend
from neuron_conformance.emulator import faults, get_mode

CONFORMANCE_MIRRORS_CPU = get_mode() == "mirror"
"""Judged like the emulator in the same mode (bitwise in mirror mode, tolerances in device mode)."""

CONFORMANCE_MEMORY_BUDGET = _emulator_backend.CONFORMANCE_MEMORY_BUDGET
CONFORMANCE_COUNT_OPS = _emulator_backend.CONFORMANCE_COUNT_OPS

_INT32_BYTES = 1 << 31
_kept: list = []
_poisoned = [False]


def _sum_low_bytes(result, self, *args, **kwargs):
    limit = _INT32_BYTES // self.element_size()
    if self.numel() <= limit:
        return result
    flat = self.reshape(-1)[:limit]
    return faults.correct(torch.ops.aten.sum.default, flat, dtype=kwargs.get("dtype", result.dtype))


def _sum_dim_low_bytes(result, self, dim=None, keepdim=False, *, dtype=None):
    limit = _INT32_BYTES // self.element_size()
    if self.numel() <= limit or self.ndim != 1:
        return result
    return faults.correct(torch.ops.aten.sum.dim_IntList, self[:limit], dim, keepdim, dtype=dtype)


def _index_select_int32(self, dim, index):
    wrapped = faults.correct(torch.ops.aten.bitwise_and.Scalar, index, 0x7FFFFFFF)
    return faults.correct(torch.ops.aten.index_select.default, self, dim, wrapped)


def _bmm_empty_raises(self, mat2):
    if self.shape[0] == 0:
        raise RuntimeError("injected fault: bmm divides by the batch size (an empty batch: SIGFPE on the device)")
    return faults.correct(torch.ops.aten.bmm.default, self, mat2)


def _keep(result, *args, **kwargs):
    _kept.append(result)
    return result


def _poison_after_oom(*args, **kwargs):
    if _poisoned[0]:
        raise RuntimeError("injected fault: the device is unusable since an out-of-memory error")
    try:
        return faults.correct(torch.ops.aten.empty.memory_format, *args, **kwargs)
    except torch.OutOfMemoryError:
        _poisoned[0] = True
        raise


FAULTS = {
    "sum-int32-bytes": lambda: [
        faults.override("aten::sum", _sum_low_bytes),
        faults.override("aten::sum.dim_IntList", _sum_dim_low_bytes),
    ],
    "index-select-int32": lambda: [faults.override("aten::index_select", _index_select_int32, receives="args")],
    "bmm-empty-batch": lambda: [faults.override("aten::bmm", _bmm_empty_raises, receives="args")],
    "never-frees": lambda: [faults.override("aten::empty.memory_format", _keep)],
    "oom-poisons": lambda: [faults.override("aten::empty.memory_format", _poison_after_oom, receives="args")],
}
"""Fault name -> factory of the faults it installs."""

_name = os.environ.get("CONFORMANCE_STRESS_FAULT", "")
if _name:
    if _name not in FAULTS:
        raise ValueError(f"CONFORMANCE_STRESS_FAULT={_name!r} is not one of {sorted(FAULTS)}")
    for _fault in FAULTS[_name]():
        _fault.install()
