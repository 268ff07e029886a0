"""Backend module for the fault-injection tests: the emulated device with one wrong kernel.

``--conformance-backend-module fault_backend`` (with this folder on ``PYTHONPATH``) installs the emulator in the mode
``$CONFORMANCE_EMULATOR_MODE`` names (mirror by default), then the fault named by ``$CONFORMANCE_TEST_FAULT``
(a key of :data:`FAULTS`) through :mod:`neuron_conformance.emulator.faults` (``torch.library`` kernels on the
PrivateUse1 key).
"""

from __future__ import annotations

import os

import torch

import neuron_conformance.emulator.backend  # noqa: F401 - installs the emulated device
from neuron_conformance.emulator import fallback, faults, get_mode, storage
from neuron_conformance.emulator.backend import (  # noqa: F401 - as the emulator's
    CONFORMANCE_COUNT_OPS,  # noqa: F401 - the emulator's op counter
    CONFORMANCE_MODES,
    CONFORMANCE_NUMERIC_MODE,  # noqa: F401 - its mode, checked by the harness
    CONFORMANCE_OP_TRACKING,
)
from tests.faults import (
    bug_kernels_a,  # wrong kernels of the bug-class faults A
    fallback_kernels,  # the fallback and execution-mode faults
    index_kernels,  # wrong index kernels of the verdict-gap faults
)
from tests.faults.contract_kernels import CONTRACT_FAULTS
from tests.faults.fault_kernels_b import FAULTS_B
from tests.faults.flex_kernels import FLEX_FAULTS
from tests.faults.float8_kernels import FLOAT8_FAULTS
from tests.faults.random_kernels import RANDOM_FAULTS
from tests.faults.true_positive_kernels import TRUE_POSITIVE_FAULTS
from tests.faults.verdict_kernels import VERDICT_FAULTS

CONFORMANCE_MODES = {**CONFORMANCE_MODES, fallback_kernels.MODE_ENV: ["0", "1"]}
"""The emulator's execution modes and this backend's own (``mode-dependent-mul`` is wrong in one of them)."""

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


def _group_norm_rstd_off(result, *args, **kwargs):
    """native_group_norm whose saved rstd (output 2) is 1 % off; the normalized output stays right."""
    faults._scale_inplace(result[2], 1 + 1e-2)
    return result


def _adam_without_weight_decay(*args, **kwargs):
    """A fused Adam step that ignores weight_decay (the L2 term of torch.optim.Adam)."""
    return faults.correct("aten::_fused_adam_", *args, **{**kwargs, "weight_decay": 0.0})


def _sgd_without_dampening(name):
    """A fused SGD step (overload ``name``) that ignores dampening: the momentum buffer takes the whole
    gradient, ``buf = momentum * buf + grad``, instead of ``(1 - dampening) * grad`` (torch.optim.SGD)."""

    def kernel(*args, **kwargs):
        return faults.correct(name, *args, **{**kwargs, "dampening": 0.0})

    return kernel


def _avg_pool2d_include_pad_when_h_padded(*args, **kwargs):
    """avg_pool2d that counts the padding in the divisor when H is padded, whatever count_include_pad says
    (a border branch of one spatial dim that ignores the flag)."""
    names = ("self", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")
    bound = {**dict(zip(names, args)), **kwargs}
    if list(bound.get("padding") or [0])[0] > 0:
        bound["count_include_pad"] = True
    return faults.correct("aten::avg_pool2d", *[bound[n] for n in names if n in bound])


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
    # overloads only the aten replay suite reaches (schema-derived inputs rejected): an out= variant and the
    # grad_input variant of a backward kernel
    "replay-out-1e-2": lambda: faults.scale_output("aten::binary_cross_entropy.out", rel=1e-2),
    "replay-backward-1e-2": lambda: faults.scale_output("aten::glu_backward.grad_input", rel=1e-2),
    # bug classes duplicate-indices, masked-rows, ties, integer-edges, nonblocking-copies, aliasing-inplace
    "dup-last-writer-index_put": bug_kernels_a.last_writer_index_put,
    "softmax-masked-row-zero": bug_kernels_a.softmax_masked_row_zero,
    "argmax-last-tie": bug_kernels_a.argmax_last_tie,
    "remainder-c-sign": bug_kernels_a.remainder_c_sign,
    "nonblocking-read-early": bug_kernels_a.nonblocking_read_early,
    "inplace-view-not-written": bug_kernels_a.inplace_view_not_written,
    "overlap-unchecked-add": bug_kernels_a.overlap_unchecked_add,
    # pairs: the overload mirror mode runs, and the out= overload device mode runs (empty + op.out)
    "sum-ignores-strides": lambda: (
        faults.make_ignore_strides("aten::sum.dim_IntList"),
        faults.make_ignore_strides("aten::sum.IntList_out"),
    ),
    "softmax-backward-3d": lambda: (
        faults.override("aten::_softmax_backward_data", _softmax_backward_3d),
        faults.override("aten::_softmax_backward_data.out", _softmax_backward_3d),
    ),
    "resize-zero-fills": lambda: faults.override("aten::resize_", _resize_zero_fills, receives="args"),
    # fallback-aware verdicts and execution modes (fallback_kernels.py)
    "fallback-hides-unsupported": fallback_kernels.hidden_fallback,
    "mode-dependent-mul": fallback_kernels.mode_dependent_scale,
    # overloads only the shape_contracts suite reaches (hand-written inputs with size contracts)
    "group-norm-rstd-1e-2": lambda: faults.override("aten::native_group_norm", _group_norm_rstd_off),
    "fused-adam-no-weight-decay": lambda: faults.override(
        "aten::_fused_adam_", _adam_without_weight_decay, receives="args"
    ),
    "fused-sgd-no-dampening": lambda: tuple(
        faults.override(n, _sgd_without_dampening(n), receives="args")
        for n in ("aten::_fused_sgd_", "aten::_fused_sgd_.tensor_lr")
    ),
    "ctc-loss-1e-2": lambda: faults.scale_output("aten::_ctc_loss", rel=1e-2),
    "sym-storage-offset-zero": lambda: faults.override("aten::sym_storage_offset", lambda self: 0, receives="args"),
    "avg-pool2d-include-pad-when-h-padded": lambda: faults.override(
        "aten::avg_pool2d", _avg_pool2d_include_pad_when_h_padded, receives="args"
    ),
    **CONTRACT_FAULTS,  # set_(storage, offset), isin.Tensor_Scalar_out, the fused observer (contract_kernels.py)
    # random overloads (the random_ops suite's): uniform-constant, randperm-duplicate, bernoulli-ignores-p,
    # normal-ignores-std, dropout-no-rescale, generator-ignores-seed, draws-cpu-stream (random_kernels.py)
    **RANDOM_FAULTS,
    # verdict gaps: integer outputs judged by their semantics in device mode; out= under the fp64 arbiter
    "unique-inverse-off-by-one": index_kernels.unique_inverse_off_by_one,
    "sort-indices-not-a-permutation": index_kernels.sort_indices_not_a_permutation,
    "add-out-1e-3": lambda: faults.scale_output("aten::add.out", rel=1e-3),
    # the asynchronous mode's misbehaviour (CONFORMANCE_EMULATOR_ASYNC=1; tests/faults/test_stream_faults.py)
    "async-skip-waits": faults.skip_waits,
    "async-events-do-not-order": faults.events_do_not_order,
    "async-early-reuse": faults.reuse_ignores_record_stream,
    # FlexAttention kernels under the neuron compile backend, and the profiler (flex_kernels.py)
    **FLEX_FAULTS,
    # float8 casts rounding ties away from zero, or saturating where the CPU gives inf/NaN (float8_kernels.py)
    **FLOAT8_FAULTS,
    # the verdict policy both ways: a correct asinh 1 ULP from the CPU's, and a wrong one (verdict_kernels.py)
    **VERDICT_FAULTS,
    # the real deviations of a CUDA run, as wrong kernels (true_positive_kernels.py)
    **TRUE_POSITIVE_FAULTS,
}
"""Fault name -> factory of the :class:`neuron_conformance.emulator.faults.Fault` (or tuple of them) it installs."""

for _name in filter(None, os.environ.get("CONFORMANCE_TEST_FAULT", "").split(",")):  # several: on different ops
    if _name not in FAULTS:
        raise ValueError(f"CONFORMANCE_TEST_FAULT={_name!r} is not one of {sorted(FAULTS)}")
    _made = FAULTS[_name]()
    for _fault in _made if isinstance(_made, tuple) else (_made,):
        _fault.install()
