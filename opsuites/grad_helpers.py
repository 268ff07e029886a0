"""Sample plumbing for gradient checks, shared by the autograd suite and the compile suite's backward.

* :func:`move_keeping_grad`: a sample copied to a device exactly, ``requires_grad`` set again on its leaves;
* :func:`grad_leaves`: the tensors of a call that require grad; :func:`differentiable_outputs`: the outputs
  that carry a gradient;
* :func:`float64_for_grad`: the same call with every tensor of the dtype under test widened to float64
  (complex128), for the fp64 rule's reference gradients.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch.utils._pytree import tree_flatten, tree_map

from neuron_conformance.conformance.backend.transfer import sample_to_device


def move_keeping_grad(sample, device, op_name: str, index: int | None = None):
    """``(input, args, kwargs)`` of ``sample`` (a ``SampleInput``, or a triple) copied to ``device`` with
    whole storages, sizes, strides and offsets (:func:`neuron_conformance.conformance.backend.transfer.sample_to_device`
    moves detached tensors), ``requires_grad`` set again on the copied leaves whose source requires grad."""
    if isinstance(sample, tuple):
        sample = SimpleNamespace(input=sample[0], args=sample[1], kwargs=sample[2])
    moved = sample_to_device(sample, device, op_name, index=index)
    src = tree_flatten((sample.input, sample.args, sample.kwargs))[0]
    for a, b in zip(src, tree_flatten(moved)[0]):
        if (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.requires_grad
            and not b.requires_grad
            and b.is_leaf
        ):
            b.requires_grad_(True)
    return moved


def grad_leaves(triple) -> list:
    """The tensors of ``triple`` (``(input, args, kwargs)``) that require grad, in order."""
    return [t for t in tree_flatten(triple)[0] if isinstance(t, torch.Tensor) and t.requires_grad]


def differentiable_outputs(result) -> list:
    """The outputs of ``result`` that carry a gradient: floating or complex tensors that require grad."""
    return [
        t
        for t in tree_flatten(result)[0]
        if isinstance(t, torch.Tensor) and t.requires_grad and (t.is_floating_point() or t.is_complex())
    ]


def float64_for_grad(triple, dtype: torch.dtype):
    """``triple`` with each floating (complex) tensor of ``dtype`` as a new float64 (complex128) leaf and
    every other tensor detached, ``requires_grad`` kept: the inputs of the CPU float64 reference gradients."""

    def up(t):
        if isinstance(t, torch.Tensor) and t.dtype == dtype and (t.is_floating_point() or t.is_complex()):
            wide = torch.complex128 if t.is_complex() else torch.float64
            return t.detach().to(wide).requires_grad_(t.requires_grad)
        return t.detach().requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor) else t

    return tree_map(up, triple)


def float64_grad_outputs(grad_outputs) -> list:
    """``grad_outputs`` widened to float64 (complex128)."""
    return [g.to(torch.complex128 if g.is_complex() else torch.float64) for g in grad_outputs]


__all__ = ["differentiable_outputs", "float64_for_grad", "float64_grad_outputs", "grad_leaves", "move_keeping_grad"]
