"""Wrong kernels for the bug classes strided-reductions, tile-edges and special-values (fault_backend's FAULTS).

Each fault installs one wrong kernel on every overload of an op that the emulated device runs: the
functional overload in mirror mode (``aten::sum.dim_IntList``) and the ``.out`` overload that device mode
reaches through the structured decomposition (``aten::sum.IntList_out``). A kernel computes the correct
result first (:func:`neuron_conformance.emulator.faults.override`), then writes over it what a buggy backend
would return, computed on CPU aliases of the device tensors (:func:`neuron_conformance.emulator.storage.cpu_alias`).
Each bug is one real backends ship: a kernel that assumes a dense input, a vector loop without its
epilogue, a K loop that drops the last partial tile, per-tile partial sums combined in bfloat16, a
``max`` that drops NaN, flush-to-zero, a saturating ``exp``.
"""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_map

from neuron_conformance.emulator import faults, storage

aten = torch.ops.aten


def _cpu(value):
    return tree_map(
        lambda x: storage.cpu_alias(x) if isinstance(x, torch.Tensor) and x.device.type != "cpu" else x, value
    )


def rewrite(overloads: tuple[str, ...], wrong) -> tuple:
    """Fault ``overloads`` so they return ``wrong(*cpu_args, **cpu_kwargs)`` (``out=`` removed): a tensor or
    tuple of tensors written over the correct result's bytes (so ``.out`` tensors are wrong too)."""

    def kernel(result, *args, **kwargs):
        kwargs = {k: v for k, v in kwargs.items() if k != "out"}
        bad = wrong(*_cpu(args), **_cpu(kwargs))
        outs = result if isinstance(result, (tuple, list)) else (result,)
        for o, b in zip(outs, bad if isinstance(bad, (tuple, list)) else (bad,)):
            storage.cpu_alias(o).copy_(b)
        return result

    return tuple(faults.override(name, kernel) for name in overloads)


def dense_view(x: torch.Tensor) -> torch.Tensor:
    """``x`` read as if it were contiguous from its storage offset (the bug of a kernel that ignores
    strides); ``x`` itself when contiguous or when its storage is too short (expanded inputs)."""
    if x.is_contiguous():
        return x
    available = x.untyped_storage().nbytes() // x.element_size() - x.storage_offset()
    if available < x.numel():
        return x
    return x.as_strided(x.shape, torch.empty(x.shape, device="meta").stride(), x.storage_offset())


def ignores_strides(functional) -> object:
    """Wrong kernel: ``functional`` (an aten overload) run on :func:`dense_view` of its first argument."""
    return lambda x, *rest, **kw: functional(dense_view(x), *rest, **kw)


def tail_dropped(functional, width: int = 64) -> object:
    """Wrong kernel: the elements past the last whole ``width``-element vector are left zero (a vector
    loop without its scalar epilogue); outputs of ``width`` elements or fewer are right."""

    def wrong(*args, **kw):
        r = functional(*args, **kw).contiguous()
        n = r.numel()
        if n > width and n % width:
            r.view(-1)[n - n % width :] = 0
        return r

    return wrong


def k_tail_dropped(tile: int = 16) -> object:
    """Wrong ``mm``: the last partial tile of K is skipped (``K > tile`` and ``K % tile != 0``)."""

    def wrong(a, b):
        k = a.shape[-1]
        kk = k - k % tile if k > tile else k
        return aten.mm.default(a[:, :kk], b[:kk])

    return wrong


def low_precision_combine(block: int = 1024) -> object:
    """Wrong full ``sum`` of a bfloat16/float16 tensor of ``>= 2**16`` elements: float32 partial sums per
    ``block`` elements, combined one after another in the input dtype (so the total stalls once its ulp
    outgrows the partials). Other sums are right."""

    def wrong(x, dim=None, keepdim=False, *, dtype=None):
        r = aten.sum.dim_IntList(x, dim, keepdim, dtype=dtype)
        if x.dtype not in (torch.bfloat16, torch.float16) or x.numel() < 2**16 or dim not in (None, []):
            return r
        flat = x.reshape(-1).float()
        flat = torch.cat([flat, flat.new_zeros(-flat.numel() % block)])
        total = torch.zeros((), dtype=x.dtype)
        for p in flat.view(-1, block).sum(1).to(x.dtype):
            total = total + p
        return total.reshape(r.shape)

    return wrong


def flushes_subnormals(functional) -> object:
    """Wrong kernel: results below ``finfo.tiny`` in magnitude become zero of the same sign (FTZ)."""

    def wrong(*args, **kw):
        r = functional(*args, **kw)
        return torch.where(r.abs() < torch.finfo(r.dtype).tiny, r * 0, r)

    return wrong


def saturates_inf(functional) -> object:
    """Wrong kernel: +-inf results become ``finfo.max``/``finfo.min`` (a saturating kernel); NaN stays."""
    return lambda *args, **kw: torch.nan_to_num(functional(*args, **kw), nan=float("nan"))


def amax_skips_nan(x, dim=(), keepdim=False):
    """Wrong ``amax``: NaN never wins (a vector max instruction that returns the non-NaN operand)."""
    return aten.amax.default(torch.where(torch.isnan(x), float("-inf"), x), dim, keepdim)


FAULTS_B = {
    "reduction-ignores-strides": lambda: rewrite(
        ("aten::sum.dim_IntList", "aten::sum.IntList_out"), ignores_strides(aten.sum.dim_IntList)
    ),
    "scan-ignores-strides": lambda: rewrite(("aten::cumsum", "aten::cumsum.out"), ignores_strides(aten.cumsum.default)),
    "vector-tail-dropped": lambda: rewrite(("aten::add.Tensor", "aten::add.out"), tail_dropped(aten.add.Tensor)),
    "mm-k-tail-dropped": lambda: rewrite(("aten::mm", "aten::mm.out"), k_tail_dropped()),
    "low-precision-combine": lambda: rewrite(
        ("aten::sum.dim_IntList", "aten::sum.IntList_out"), low_precision_combine()
    ),
    "maximum-drops-nan": lambda: rewrite(("aten::maximum", "aten::maximum.out"), aten.fmax.default),
    "subnormals-flushed": lambda: rewrite(("aten::mul.Tensor", "aten::mul.out"), flushes_subnormals(aten.mul.Tensor)),
    "exp-saturates-inf": lambda: rewrite(("aten::exp", "aten::exp.out"), saturates_inf(aten.exp.default)),
    "amax-skips-nan": lambda: rewrite(("aten::amax", "aten::amax.out"), amax_skips_nan),
}
"""Fault name -> factory of the tuple of :class:`neuron_conformance.emulator.faults.Fault` it installs (merged into fault_backend's FAULTS)."""
