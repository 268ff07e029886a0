"""Backend module for the fault-injection tests: the emulated device with one wrong kernel.

``--backend-module fault_backend`` (with this folder on ``PYTHONPATH``) installs the emulator in the mode
``$CONFORMANCE_EMULATOR_MODE`` names (mirror by default), then the fault named by ``$CONFORMANCE_TEST_FAULT``
(a key of :data:`FAULTS`) through :mod:`conformance.emulator.faults` (``torch.library`` kernels on the
PrivateUse1 key).
"""

from __future__ import annotations

import os

import torch

import conformance.emulator.backend  # noqa: F401 - installs the emulated device
from conformance.emulator import fallback, faults, get_mode, storage
from conformance.emulator.backend import CONFORMANCE_COUNT_OPS  # noqa: F401 - the emulator's op counter
from tests.faults import bug_kernels_a  # wrong kernels of the bug-class faults A
from tests.faults.fault_kernels_b import FAULTS_B

CONFORMANCE_MIRRORS_CPU = get_mode() == "mirror"
"""Judge as the emulator in its mode: bitwise against the CPU in mirror mode, by tolerance in device mode."""


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


def _first_batch_only(result, *args, **kwargs):
    """A batched matmul that computes batch 0 and copies it into every other batch."""
    if result.dim() == 3 and result.shape[0] > 1:
        storage.cpu_alias(result)[1:] = storage.cpu_alias(result)[:1].clone()
    return result


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
    "bmm-first-batch": lambda: faults.override("aten::bmm", _first_batch_only),
    "layer-norm-1e-3": lambda: faults.scale_output("aten::native_layer_norm", rel=1e-3),
    # bug classes strided-reductions, tile-edges, special-values: reduction-ignores-strides, scan-ignores-strides,
    # vector-tail-dropped, mm-k-tail-dropped, low-precision-combine, maximum-drops-nan, subnormals-flushed,
    # exp-saturates-inf, amax-skips-nan (kernels in fault_kernels_b.py)
    **FAULTS_B,
    # overloads no OpInfo reaches (the generated suite's): an out= overload and a backward helper
    "out-overload-1e-2": lambda: faults.scale_output("aten::_euclidean_dist.out", rel=1e-2),
    "no-opinfo-1e-2": lambda: faults.scale_output("aten::_logcumsumexp.out", rel=1e-2),
    # bug classes duplicate-indices, masked-rows, ties, integer-edges, nonblocking-copies, aliasing-inplace
    "dup-last-writer-index_put": bug_kernels_a.last_writer_index_put,
    "softmax-masked-row-zero": bug_kernels_a.softmax_masked_row_zero,
    "argmax-last-tie": bug_kernels_a.argmax_last_tie,
    "remainder-c-sign": bug_kernels_a.remainder_c_sign,
    "nonblocking-read-early": bug_kernels_a.nonblocking_read_early,
    "inplace-view-not-written": bug_kernels_a.inplace_view_not_written,
    "overlap-unchecked-add": bug_kernels_a.overlap_unchecked_add,
    # pairs: the overload mirror mode runs, and the out= overload device mode runs (empty + op.out)
    "sum-ignores-strides": lambda: (faults.make_ignore_strides("aten::sum.dim_IntList"),
                                    faults.make_ignore_strides("aten::sum.IntList_out")),
    "softmax-backward-3d": lambda: (faults.override("aten::_softmax_backward_data", _softmax_backward_3d),
                                    faults.override("aten::_softmax_backward_data.out", _softmax_backward_3d)),
    "resize-zero-fills": lambda: faults.override("aten::resize_", _resize_zero_fills, receives="args"),
    # the asynchronous mode's misbehaviour (CONFORMANCE_EMULATOR_ASYNC=1; tests/faults/test_stream_faults.py)
    "async-skip-waits": faults.skip_waits,
    "async-events-do-not-order": faults.events_do_not_order,
    "async-early-reuse": faults.reuse_ignores_record_stream,
}
"""Fault name -> factory of the :class:`conformance.emulator.faults.Fault` (or tuple of them) it installs."""

_name = os.environ.get("CONFORMANCE_TEST_FAULT", "")
if _name:
    if _name not in FAULTS:
        raise ValueError(f"CONFORMANCE_TEST_FAULT={_name!r} is not one of {sorted(FAULTS)}")
    _made = FAULTS[_name]()
    for _fault in _made if isinstance(_made, tuple) else (_made,):
        _fault.install()
