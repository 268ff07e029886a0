"""Zero-size and 0-dim variants of OpInfo sample inputs, for the stress suite.

Backends break on degenerate shapes that OpInfo's samples rarely hold: a batch of zero matrices (torch-opencl's
``bmm`` divides by the batch size and raises SIGFPE), a reduction over an empty dimension, a contraction of
length zero (``mm`` of ``(N, 0) @ (0, P)`` is an ``(N, P)`` tensor of zeros), a 0-dim tensor where a kernel
assumes ``ndim >= 1``. Each variant is derived from one OpInfo sample by shape alone; its expectation is
what the CPU does with it (values, shape, dtype, or the exception type when the CPU raises), never what a
rule here predicts. Derived inputs that no longer fit together (an index past a now empty dimension) make
the CPU raise, and then the device must raise the same exception type.

Variants of a sample whose reference tensor ``x`` (the input, or the first tensor of an input list such as
``cat``'s) has ``ndim >= 1`` and at least one element:

* ``zero-size dim 0`` / ``zero-size dim -1``: ``x`` narrowed to length 0 along that dimension (size ``s``
  before). Every other tensor is narrowed along its dimension aligned to it from the right (broadcasting's
  alignment, PyTorch's "Broadcasting semantics" note) when that has size ``s``, else along its right-most
  dimension of size ``s`` (a contraction partner: ``mm``'s second operand), else left alone.
* ``zero-dim``: ``x`` and every tensor of ``x``'s shape replaced by a 0-dim tensor holding its first element.

Variants are deduplicated by their tensors' shapes and dtypes and the other arguments' reprs; the first
:data:`MAX_VARIANTS` distinct ones of each kind are kept.
"""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

MAX_VARIANTS = 6
"""Distinct variants of one kind kept per OpInfo and dtype (the first ones, in sample order): shapes repeat
across an OpInfo's samples, so a few cover its kernels' degenerate branches at a bounded cost."""

KINDS = ("zero-size", "zero-dim")

CPU_CRASHES = {
    ("_chunk_cat", "zero-dim"): "torch 2.13's CPU kernel dies of SIGSEGV on 0-dim tensors "
    "(torch._chunk_cat([torch.tensor(1.), torch.tensor(2.)], dim=0, num_chunks=2))"
}
"""(OpInfo full_name, kind) -> why no variant of that kind is run: the CPU reference itself crashes the
process on it (found by this suite; reproduced with the call quoted), so there is nothing to compare."""


def _reference_tensor(sample) -> torch.Tensor | None:
    inp = sample.input
    if isinstance(inp, (list, tuple)):
        inp = next((t for t in inp if isinstance(t, torch.Tensor)), None)
    if isinstance(inp, torch.Tensor) and inp.layout == torch.strided and inp.ndim >= 1 and inp.numel() > 0:
        return inp
    return None


def _empty_along(t: torch.Tensor, dim: int) -> torch.Tensor:
    """A fresh contiguous tensor of ``t``'s shape with ``dim`` of length 0 (same dtype, no grad)."""
    return t.detach().narrow(dim, 0, 0).contiguous().clone()


def _narrowed(t: torch.Tensor, x: torch.Tensor, dim: int) -> torch.Tensor:
    """``t`` with the dimension that matches ``x``'s ``dim`` (size ``s``) emptied, or ``t`` itself."""
    s = x.shape[dim]
    if t.layout != torch.strided or t.ndim == 0:
        return t
    aligned = dim - x.ndim + t.ndim
    if 0 <= aligned < t.ndim and t.shape[aligned] == s:
        return _empty_along(t, aligned)
    for d in range(t.ndim - 1, -1, -1):
        if t.shape[d] == s:
            return _empty_along(t, d)
    return t


def _scalarised(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    if t.layout == torch.strided and t.shape == x.shape:
        return t.detach().reshape(-1)[0].clone()
    return t


def _rebuild(sample, fn):
    """A new ``SampleInput`` with ``fn(tensor)`` applied to every tensor of ``sample`` (input, args, kwargs)."""
    from torch.testing._internal.opinfo.core import SampleInput  # deferred: the OpInfo machinery is heavy

    leaves, spec = tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
    new = [fn(v) if isinstance(v, torch.Tensor) else v for v in leaves]
    inp, args, kwargs = tree_unflatten(new, spec)
    return SampleInput(inp, args=tuple(args), kwargs=dict(kwargs))


def _signature(sample) -> str:
    leaves, _ = tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
    parts = [f"T{tuple(v.shape)}{v.dtype}" if isinstance(v, torch.Tensor) else repr(v)[:80] for v in leaves]
    return "|".join(parts)


def variants_of(sample, kind: str) -> list[tuple[str, object]]:
    """``[(label, SampleInput)]``: the ``kind`` variants (:data:`KINDS`) of one OpInfo sample.

    Raises:
        ValueError: ``kind`` is not one of :data:`KINDS`.
    """
    if kind not in KINDS:
        raise ValueError(f"variant kind {kind!r} is not one of {KINDS}")
    x = _reference_tensor(sample)
    if x is None:
        return []
    if kind == "zero-dim":
        return [("zero-dim", _rebuild(sample, lambda t: _scalarised(t, x)))]
    dims = [0] if x.ndim == 1 else [0, x.ndim - 1]
    out = []
    for d in dims:
        label = "zero-size dim 0" if d == 0 else "zero-size dim -1"
        out.append((label, _rebuild(sample, lambda t, d=d: _empty_along(t, d) if t is x else _narrowed(t, x, d))))
    return out


def filled_rerun(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` again with uninitialised memory filled (NaN for floating dtypes, the largest
    value for integers): ``torch.use_deterministic_algorithms(True, warn_only=True)`` with
    ``torch.utils.deterministic.fill_uninitialized_memory`` (its default, True). Returns the result, or None
    when the call raises. The previous settings are restored."""
    enabled, warn_only = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        return fn(*args, **kwargs)
    except Exception:  # noqa: BLE001 - no second reference: the first one stands
        return None
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


def same_cpu_result(a, b) -> bool:
    """True when two CPU results of one call are bitwise equal (NaN equal to NaN) output by output.

    A kernel that returns uninitialised memory for an empty input (``multi_margin_loss`` of an empty batch,
    ``resize_`` growing an empty tensor) gives a different result when run again with the memory filled
    (:func:`filled_rerun`); its values are no reference."""
    la, _ = tree_flatten(a)
    lb, _ = tree_flatten(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.layout != torch.strided or x.shape != y.shape or x.dtype != y.dtype:
                return x.layout == y.layout and x.shape == y.shape
            if not torch.equal(x, y) and not (
                x.is_floating_point()
                and torch.equal(x.nan_to_num(0.0), y.nan_to_num(0.0))
                and torch.equal(x.isnan(), y.isnan())
            ):
                return False
        elif x != y and not (x != x and y != y):
            return False
    return True


def degenerate_cases(samples, kind: str, limit: int = MAX_VARIANTS) -> list[tuple[int, str, object]]:
    """``[(sample index, label, SampleInput)]``: the first ``limit`` distinct ``kind`` variants of
    ``samples`` (``[(index, SampleInput)]``, e.g. :func:`neuron_conformance.opsuites.samples.cpu_samples`)."""
    seen: set = set()
    out = []
    for index, sample in samples:
        for label, variant in variants_of(sample, kind):
            key = _signature(variant)
            if key in seen:
                continue
            seen.add(key)
            out.append((index, label, variant))
            if len(out) >= limit:
                return out
    return out


def first_dtype(op, selected: tuple[str, ...]) -> str | None:
    """The first of the ``selected`` dtype names (``--conformance-dtypes`` order: float32 first by default) that ``op``
    supports on the CPU, or None: the degenerate shapes are checked in one dtype per OpInfo."""
    supported = op.supported_dtypes("cpu")
    return next((name for name in selected if getattr(torch, name) in supported), None)
