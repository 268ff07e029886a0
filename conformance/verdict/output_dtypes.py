"""Outputs whose dtype (or shape) PyTorch leaves to the device: where a device's may differ from the CPU's.

:func:`compare_outputs <neuron_conformance.conformance.verdict.compare.compare_outputs>` requires every output's dtype
to equal the CPU reference's, with the exceptions below. Each is a place where PyTorch's own device-generic
contract (the reference implementations in ``torch/_refs`` and the decompositions in ``torch/_decomp``, which
fake tensors, meta kernels and ``torch.compile`` follow on every device) gives a device other than the CPU a
different dtype than the CPU kernel returns. A backend that follows that contract, as CUDA's kernels do, must
not fail on it.

Rules:

1. **Normalization statistics in the accumulate dtype.** The saved mean and reciprocal standard deviation of
   ``native_layer_norm`` (outputs 1, 2) and of ``native_batch_norm`` / ``_native_batch_norm_legit*``
   (outputs 1, 2) may be in the computation dtype of a reduced-precision input (float32 for bfloat16 and
   float16, ``torch._prims_common.get_computation_dtype``) where the CPU returns the input dtype. Sources:
   ``torch/_refs/__init__.py`` ``native_layer_norm`` casts ``mean``/``rstd`` to the input dtype only under
   ``input.device.type in ["cpu", "mtia"]``; ``torch/_decomp/decompositions.py`` ``native_batch_norm_helper``
   casts ``save_mean``/``save_rstd`` only under ``input.device.type == "cpu"``; CUDA allocates them in
   ``acc_type`` (``aten/src/ATen/native/cuda/layer_norm_kernel.cu``, ``Normalization.cuh``).
   Values are then compared in the CPU's dtype (the device's statistics rounded to it).
2. **Eval-mode batch-norm statistics of one element per channel.** Where the CPU returns 0-element
   ``save_mean`` / ``save_invstd`` (outputs 1, 2 of ``native_batch_norm``, ``_native_batch_norm_legit*``,
   ``_batch_norm_no_update`` in evaluation mode: ``batch_norm_cpu`` in aten/src/ATen/native/Normalization.cpp),
   a device may return one element per channel (a 1-D tensor): CUDA's ``batch_norm_cuda_out`` copies the
   running mean and writes ``rsqrt(running_var + eps)`` (aten/src/ATen/native/cuda/Normalization.cu), the
   meta kernels and ``native_batch_norm_helper`` give ``(C,)`` off the CPU, and fake-tensor shape
   propagation (DTensor, torch.compile) follows them; PyTorch's own ``test_compare_cpu`` is an expected
   failure for these ops for that reason (pytorch/pytorch#85960). The CPU has no values to compare them
   with, so such an output is accepted by its shape alone (:func:`device_shape_allowed`).
"""

from __future__ import annotations

import torch

ACCUMULATE_DTYPE_OUTPUTS: dict[str, tuple[int, ...]] = {
    "native_layer_norm": (1, 2),
    "native_batch_norm": (1, 2),
    "_native_batch_norm_legit": (1, 2),
    "_native_batch_norm_legit_no_training": (1, 2),
    "_native_batch_norm_legit_functional": (1, 2),
}
"""Rule 1: op base name -> indices of outputs that may be in the accumulate dtype."""

_ACCUMULATE = {torch.bfloat16: torch.float32, torch.float16: torch.float32}
"""Reduced-precision dtype -> computation dtype (``torch._prims_common._computation_dtype_map``)."""


def base_name(op: str | None) -> str | None:
    """``"aten::native_layer_norm.default"``, ``"aten.native_layer_norm"`` or an OpInfo name -> the aten base
    name (``"native_layer_norm"``); None stays None."""
    if op is None:
        return None
    name = op.removeprefix("aten::").removeprefix("aten.")
    return name.split(".", 1)[0]


def device_dtype_allowed(op: str | None, index: int, device_dtype: torch.dtype, cpu_dtype: torch.dtype) -> bool:
    """True when output ``index`` of ``op`` may be ``device_dtype`` on a device where the CPU gives
    ``cpu_dtype`` (a dtype different from the CPU's that PyTorch's device-generic contract gives; module rules).

    Args:
        op: the op's name (OpInfo name or aten op/overload name); None: no exception applies.
        index: position of the output among the op's flattened outputs.
    """
    outputs = ACCUMULATE_DTYPE_OUTPUTS.get(base_name(op) or "", ())
    return index in outputs and _ACCUMULATE.get(cpu_dtype) == device_dtype


EMPTY_ON_CPU_OUTPUTS: dict[str, tuple[int, ...]] = {
    "native_batch_norm": (1, 2),
    "_native_batch_norm_legit": (1, 2),
    "_native_batch_norm_legit_no_training": (1, 2),
    "_native_batch_norm_legit_functional": (1, 2),
    "_batch_norm_no_update": (1, 2),
}
"""Rule 2: op base name -> indices of outputs a device may fill (one element per channel) where the CPU
returns 0 elements."""


def device_shape_allowed(op: str | None, index: int, device_shape, cpu_shape) -> bool:
    """True when output ``index`` of ``op`` may have ``device_shape`` on a device where the CPU gives
    ``cpu_shape`` (module rule 2: the CPU's 0-element eval-mode batch-norm statistics, a 1-D tensor on the
    device). Such an output has no CPU values to be judged against."""
    outputs = EMPTY_ON_CPU_OUTPUTS.get(base_name(op) or "", ())
    return index in outputs and tuple(cpu_shape) == (0,) and len(device_shape) == 1
