"""Capture the aten overload calls an OpInfo sample makes on the CPU, with their arguments.

:class:`AtenCapture` is a ``TorchDispatchMode`` (``torch/utils/_python_dispatch.py``): every aten
overload call below autograd passes through its ``__torch_dispatch__``, which notes the dispatcher name
(:func:`neuron_conformance.conformance.results.coverage.overload_name`) and, for the overloads it is asked to keep, a copy of the
call's arguments taken *before* the call runs (an in-place or ``out=`` call writes its arguments).

Copies keep what a kernel can see of a tensor: the whole storage, the storage offset, sizes, strides and
dtype (:func:`snapshot`), and tensors that shared a storage in the call share one copy, so an aliasing
call (``out`` a view of ``self``) is replayed as one. ``requires_grad`` is not kept: the copies are
plain tensors for ``torch.ops.aten.<op>.<overload>`` calls, which run below autograd.

:func:`run_sample` runs one OpInfo sample under a capture: the forward call
(``op(sample.input, *sample.args, **sample.kwargs)``, the way ``OpInfo.__call__`` runs it) and, for the
backward phase, ``torch.autograd.grad`` of the forward's floating outputs with ones-like cotangents
against the sample's tensors that require grad, so the ``*_backward`` kernels run under the mode.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from neuron_conformance.conformance.results.coverage import overload_name

PHASES = ("forward", "backward")
"""Where a call is captured: the OpInfo's forward call, or the autograd backward of its outputs."""


def snapshot(value, memo: dict):
    """A copy of ``value`` (nested lists/tuples/dicts of tensors and plain values) whose strided CPU
    tensors are rebuilt on a clone of their storage with the same offset, sizes and strides.

    Args:
        value: a call argument.
        memo: ``id``-free storage memo shared across one call's arguments: ``(data_ptr, nbytes)`` of a
            storage -> its clone, so tensors that shared a storage still share one.

    Returns:
        The copy; tensors of other layouts are ``detach().clone()``d, other values are returned as they are.
    """

    def one(v):
        if not isinstance(v, torch.Tensor):
            return v
        if v.layout != torch.strided or v.device.type != "cpu":
            return v.detach().clone()
        storage = v.untyped_storage()
        key = (storage.data_ptr(), storage.nbytes())
        if key[0] == 0 or key not in memo:  # an empty storage (pointer 0) is its own
            memo[key] = storage.clone()
        out = torch.empty(0, dtype=v.dtype)
        out.set_(memo[key], v.storage_offset(), v.size(), v.stride())
        if v.is_conj():
            out = out.conj()
        if v.is_neg():
            out = out._neg_view()
        return out

    return tree_map(one, value)


@dataclass
class Captured:
    """One captured call: ``op`` (an ``OpOverload``) with copies of its ``args`` and ``kwargs`` taken
    before it ran, its dispatcher ``name`` (``aten::add.Tensor``), and ``full``: every tensor argument
    has elements (``out=`` tensors aside, which a kernel may resize)."""

    name: str
    op: object
    args: tuple
    kwargs: dict
    full: bool = True


def _all_nonempty(args, kwargs) -> bool:
    leaves, _ = tree_flatten((args, {k: v for k, v in kwargs.items() if k != "out"}))
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    return bool(tensors) and all(t.numel() > 0 for t in tensors)


_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


def _nestable(func, args, kwargs) -> bool:
    """True when ``func``'s CPU kernel can be entered directly with the mode still active, so the aten
    calls the kernel makes (a ``CompositeExplicitAutograd`` kernel such as ``convolution`` calling
    ``_convolution`` then ``slow_conv_dilated2d``) pass through the mode too. Not for view and alias
    ops (their kernels re-enter the same op), calls whose ``Tensor`` argument arrived as a Python number
    (a wrapped scalar, which a boxed redispatch refuses), or calls with a tensor that is not a plain CPU
    strided one (conjugate, negative and zero-tensor bits are resolved by fallbacks above the CPU key)."""
    schema = func._schema
    if any(r.alias_info is not None for r in schema.returns):
        return False
    bound = {**dict(zip((a.name for a in schema.arguments), args)), **kwargs}
    for a in schema.arguments:
        v = bound.get(a.name)
        if str(a.type) == "Tensor" and not isinstance(v, torch.Tensor):
            return False
    leaves, _ = tree_flatten((args, kwargs))
    return all(
        t.device.type == "cpu" and t.layout == torch.strided and not (t.is_conj() or t.is_neg() or t._is_zerotensor())
        for t in leaves
        if isinstance(t, torch.Tensor)
    )


class AtenCapture(TorchDispatchMode):
    """Records the names of the aten overloads called while active (``seen``: name -> whether some call
    had only non-empty tensors, in first-call order) and one call of each overload named in ``keep``
    (``calls``: name -> :class:`Captured`): the first whose tensors all have elements, else the first
    (a zero-element call checks metadata only).

    With ``nested`` (the default), the calls CPU kernels make to other aten overloads are seen too: a
    call that :func:`_nestable` allows runs its CPU kernel by ``OpOverload.redispatch`` with this mode
    pushed again, so the kernel's own dispatcher calls come back here (the mode is popped while its
    ``__torch_dispatch__`` runs: ``torch/utils/_python_dispatch.py``); other calls run as they are.
    """

    def __init__(self, keep=frozenset(), nested: bool = True):
        super().__init__()
        self.keep = frozenset(keep)
        self.nested = nested
        self.seen: dict[str, int] = {}
        self.calls: dict[str, Captured] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = overload_name(func)
        full = _all_nonempty(args, kwargs)
        self.seen[name] = self.seen.get(name, False) or full
        if name in self.keep and (name not in self.calls or (full and not self.calls[name].full)):
            memo: dict = {}
            self.calls[name] = Captured(name, func, snapshot(tuple(args), memo), snapshot(dict(kwargs), memo), full)
        if self.nested and _nestable(func, args, kwargs):
            with self:
                return func.redispatch(_CPU_KEYS, *args, **kwargs)
        return func(*args, **kwargs)


def _grad_inputs(sample) -> list[torch.Tensor]:
    leaves, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]


def run_sample(op, sample, phase: str, capture: AtenCapture) -> None:
    """Run OpInfo ``op`` on ``sample`` (CPU) with ``capture`` active for ``phase``.

    ``forward``: the forward call is captured. ``backward``: the forward runs outside the capture and
    ``torch.autograd.grad`` of its floating outputs (cotangents of ones) runs inside it.

    Raises:
        ValueError: ``phase`` is not one of :data:`PHASES`; or, for ``backward``, the sample has no tensor
            that requires grad or the forward has no floating output that requires grad.
        Exception: whatever the op raises on the sample (the caller decides what a refusal means).
    """
    if phase not in PHASES:
        raise ValueError(f"phase {phase!r}: expected one of {PHASES}")
    if phase == "forward":
        with capture:
            op(sample.input, *sample.args, **sample.kwargs)
        return
    inputs = _grad_inputs(sample)
    if not inputs:
        raise ValueError(f"{op.full_name}: the sample has no tensor that requires grad")
    out = op(sample.input, *sample.args, **sample.kwargs)
    leaves, _ = tree_flatten(out)
    outs = [
        t
        for t in leaves
        if isinstance(t, torch.Tensor) and t.requires_grad and (t.is_floating_point() or t.is_complex())
    ]
    if not outs:
        raise ValueError(f"{op.full_name}: the forward has no floating output that requires grad")
    cotangents = [torch.ones_like(t) for t in outs]
    with capture:
        torch.autograd.grad(outs, inputs, cotangents, allow_unused=True)


__all__ = ["AtenCapture", "Captured", "PHASES", "run_sample", "snapshot"]
