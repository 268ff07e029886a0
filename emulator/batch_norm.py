"""Eval-mode batch norm returning the statistics a device returns: one element per channel, not the CPU's none.

In evaluation mode (``training=False`` with running statistics) the CPU kernel (``batch_norm_cpu``,
aten/src/ATen/native/Normalization.cpp) returns 0-element ``save_mean`` / ``save_invstd``. Every other
device returns one element per channel, and PyTorch's device-generic contract says so:

* CUDA's ``batch_norm_cuda_out`` (aten/src/ATen/native/cuda/Normalization.cu) resizes ``save_mean`` to the
  running mean's size and copies it, and writes ``save_invstd = rsqrt(running_var + eps)`` in the
  accumulate type (float32 for float16/bfloat16);
* the meta kernels, and the decomposition that fake tensors follow (``native_batch_norm_helper`` in
  torch/_decomp/decompositions.py: "Very annoying inconsistency where CPU and CUDA give different shapes"),
  give ``(C,)`` unless ``input.device.type == "cpu"``.

A device whose kernel returns the CPU's ``(0,)`` disagrees with its own meta kernel, which is what
shape propagation sees: DTensor's sharding propagation (fake tensors on the device) planned a ``(C,)``
output sharded on dimension 0, and gathering the ``(0,)`` local shards failed in
``Shard._maybe_unpad_tensor`` ("Expected cond to be True, but got False"; the DTensor op sweep's
``native_batch_norm`` and ``_native_batch_norm_legit`` on ``neuron``, passing on ``cpu``, where the
contract is ``(0,)``). torch.compile's fake tensors see the same ``(C,)``.

So the emulated device runs the CPU kernel (the normalized output is the CPU's, bitwise in mirror mode)
and, in evaluation mode, returns CUDA's statistics: ``save_mean`` a copy of ``running_mean`` and
``save_invstd = rsqrt(running_var + eps)``, both ``(C,)`` in the dtype the CPU kernel gives them (float32
for float16/bfloat16/float32 input, float64 for float64). The backward kernels do not read them in
evaluation mode (``batch_norm_backward_cpu_template`` uses the running statistics when ``train`` is
false). ``_native_batch_norm_legit_no_training`` and the ``_batch_norm_no_update.out`` composite reach these
kernels; ``_batch_norm_no_update`` (whose composite calls ``batch_norm_cpu``, CPU tensors only, so it
runs its CPU kernel through the fallback) is covered here too. The harness accepts the shape
(:mod:`neuron_conformance.conformance.verdict.output_dtypes`, rule 2).
"""

from __future__ import annotations

import torch

from . import fallback, storage

aten = torch.ops.aten


def _stats(input, running_mean, running_var, eps: float, dtype: torch.dtype):
    """CUDA's eval-mode ``(save_mean, save_invstd)`` as CPU tensors of shape ``(C,)`` and ``dtype``."""
    rm, rv = storage.cpu_alias(running_mean), storage.cpu_alias(running_var)
    mean = torch.empty((input.size(1),), dtype=dtype)
    mean.copy_(rm)
    return mean, torch.rsqrt(rv.to(dtype) + eps)


def _eval_with_stats(input, running_mean, running_var, training: bool) -> bool:
    return (
        not training
        and isinstance(running_mean, torch.Tensor)
        and isinstance(running_var, torch.Tensor)
        and input.dim() >= 2
    )


def _functional(op, n_args: int, training_at: int | None):
    """Kernel for functional overload ``op``: the CPU kernel's results, with outputs 1 and 2 replaced by the
    device statistics in evaluation mode. ``training_at``: index of the ``training`` argument (None: the op
    has none and never updates, ``_batch_norm_no_update``)."""

    def kernel(*args, **kwargs):
        result = fallback.run(op, args, kwargs)
        bound = list(args) + [kwargs[a.name] for a in op._schema.arguments[len(args) : n_args] if a.name in kwargs]
        input, running_mean, running_var = bound[0], bound[3], bound[4]
        training = bool(bound[training_at]) if training_at is not None else False
        eps = bound[n_args - 1]
        if not _eval_with_stats(input, running_mean, running_var, training) or result[1].numel() != 0:
            return result
        mean, invstd = _stats(input, running_mean, running_var, eps, result[1].dtype)
        return (result[0], storage.adopt_tensor(mean), storage.adopt_tensor(invstd), *result[3:])

    kernel.__name__ = f"neuron_emulator_{op._schema.name.split('::')[-1]}"
    return kernel


def _out(op):
    """Kernel for ``.out`` overload ``op``: as CUDA's ``batch_norm_cuda_out``, ``save_mean`` and
    ``save_invstd`` are resized to ``(C,)`` and written in evaluation mode."""

    def kernel(input, weight, bias, running_mean, running_var, training, momentum, eps, *, out, save_mean, save_invstd):
        result = fallback.run(
            op,
            (input, weight, bias, running_mean, running_var, training, momentum, eps),
            {"out": out, "save_mean": save_mean, "save_invstd": save_invstd},
        )
        if _eval_with_stats(input, running_mean, running_var, training) and save_mean.numel() == 0:
            for dst, src in zip(
                (save_mean, save_invstd), _stats(input, running_mean, running_var, eps, save_mean.dtype)
            ):
                aten._resize_output_.default(dst, src.shape, dst.device)
                dst.copy_(src)
        return result

    kernel.__name__ = f"neuron_emulator_{op._schema.name.split('::')[-1]}_out"
    return kernel


KERNELS = {
    "native_batch_norm": _functional(aten.native_batch_norm.default, 8, 5),
    "_native_batch_norm_legit": _functional(aten._native_batch_norm_legit.default, 8, 5),
    "_batch_norm_no_update": _functional(aten._batch_norm_no_update.default, 7, None),
    "native_batch_norm.out": _out(aten.native_batch_norm.out),
    "_native_batch_norm_legit.out": _out(aten._native_batch_norm_legit.out),
}
"""PrivateUse1 kernels registered by :func:`neuron_conformance.emulator.registrations.install_fallback`."""
