"""Backend module for the custom-op fault tests: the emulated device with its own clean custom ops and
four wrong ones, all declared in ``CONFORMANCE_CUSTOM_OPS``.

The wrong ops are the emulator's RMSNorm (:mod:`neuron_conformance.emulator.custom_ops`) defined again in the
namespace ``neuron_faults`` with exactly one piece swapped:

* ``rms_norm_fake_shape``: the fake kernel drops the last dimension (a reduction's shape, not a norm's);
* ``rms_norm_fake_dtype``: the fake kernel takes the output dtype from the weight, the kernel from the
  input (declared with a bfloat16 weight on float32 activations, where the two differ);
* ``rms_norm_backward``: the backward leaves out the ``mean(g*w*x)`` term of ``dx`` (the gradient of
  ``rsqrt``): right for the weight, wrong for the input;
* ``rms_norm_forward``: the PrivateUse1 kernel leaves out the weight.

``CONFORMANCE_MIRRORS_CPU`` follows the emulator's mode, as the emulator's backend module does.
"""

from __future__ import annotations

import torch

import neuron_conformance.emulator.backend as emulator_backend
from neuron_conformance.conformance.backend.custom_ops import CustomOpSpec, TensorArg, parse_declaration
from neuron_conformance.emulator import custom_ops as ops

CONFORMANCE_MIRRORS_CPU = emulator_backend.CONFORMANCE_MIRRORS_CPU
"""As the emulator's backend module: bitwise aten comparisons in mirror mode."""

NAMESPACE = "neuron_faults"


def _fake_drops_last_dim(x, weight, eps):
    return x.new_empty(x.shape[:-1])


def _fake_weight_dtype(x, weight, eps):
    return torch.empty_like(x, dtype=weight.dtype)


def _backward_without_mean_term(ctx, grad):
    x, weight = ctx.saved_tensors
    rstd = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + ctx.eps)
    dx = rstd * grad.float() * weight.float()
    dw = (grad.float() * x.float() * rstd).reshape(-1, x.shape[-1]).sum(0)
    return dx.to(x.dtype), dw.to(weight.dtype), None


def _forward_without_weight(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


FAULTS = {
    # op name in neuron_faults -> (kernel, fake, backward)
    "rms_norm_fake_shape": (ops.rms_norm_kernel, _fake_drops_last_dim, ops.rms_norm_backward),
    "rms_norm_fake_dtype": (ops.rms_norm_kernel, _fake_weight_dtype, ops.rms_norm_backward),
    "rms_norm_backward": (ops.rms_norm_kernel, ops.rms_norm_fake, _backward_without_mean_term),
    "rms_norm_forward": (_forward_without_weight, ops.rms_norm_fake, ops.rms_norm_backward),
}
"""The wrong ops: name -> (PrivateUse1 kernel, fake kernel, autograd backward)."""


def _wrapper(kernel):
    """A new function calling ``kernel`` with the schema's type hints: ``torch.library.custom_op`` wraps
    the function it is given, so each definition gets its own."""

    def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        return kernel(x, weight, eps)

    return rms_norm


_MIXED_PRECISION = ((TensorArg((2, 5, 64), grad=True), TensorArg((64,), grad=True, dtype="bfloat16"), 1e-6),)
"""RMSNorm of float32 activations with a bfloat16 weight: the output is float32 (the input's dtype)."""


def _define_faults() -> list[CustomOpSpec]:
    clean = parse_declaration(ops.CUSTOM_OPS, "emulator")[0]
    specs = []
    for name, (kernel, fake, backward) in FAULTS.items():
        qualname = f"{NAMESPACE}::{name}"
        ns, _, op = qualname.partition("::")
        if not hasattr(getattr(torch.ops, ns), op):
            ops.define(qualname, _wrapper(kernel), fake, ops.rms_norm_setup, backward)
        samples = _MIXED_PRECISION if name == "rms_norm_fake_dtype" else clean.samples
        specs.append(CustomOpSpec(qualname, clean.reference, ("float32",), samples))
    return specs


CONFORMANCE_CUSTOM_OPS = [*ops.CUSTOM_OPS, *_define_faults()]
"""The emulator's clean ops (the control) and the wrong ones."""
