"""Writes into duplicate indices: which of the written values lands is left to the device.

PyTorch's docs say so for every overwrite through an index: ``Tensor.index_copy_`` ("if index contains
duplicate entries, multiple elements from tensor will be copied to the same index of self. The result is
nondeterministic since it depends on which copy occurs last"), ``Tensor.put_`` with ``accumulate=False``
("undefined" for repeated indices) and ``Tensor.scatter_`` ("the order in which the elements are written is
undefined" for repeated indices). The CPU writes in one order; a GPU's threads in another. So on a backend
that does not mirror the CPU, a position written more than once is judged by the set of values written to
it: the device's value must be one of them; every other position is compared with the CPU's as usual.

:func:`write_pairs` names the writes of a call (flat target positions and the values written there) from
its bound arguments; :func:`reconcile` checks the positions written more than once and returns the device
result with them replaced by the CPU's (so the ordinary comparison judges the rest), or raises.
"""

from __future__ import annotations

import torch

from neuron_conformance.conformance.verdict.failures import NumericFailure

UNDEFINED_WRITES = frozenset({"index_copy", "index_copy_", "put", "put_", "scatter", "scatter_"})
"""aten ops (names without ``aten::`` and overload) whose repeated-index writes are undefined."""


def _host(t):
    return t.detach().cpu() if isinstance(t, torch.Tensor) else t


def write_pairs(name: str, bound: dict):
    """``(targets, values)`` of a call of aten op ``name`` with ``bound`` arguments: flat positions into
    ``self`` and the values written there, in the call's order; None when the op accumulates or writes no
    tensor of values (``scatter.value``: one value everywhere, ``put(accumulate=True)``, ``scatter(reduce=)``)."""
    self = _host(bound.get("self"))
    if not isinstance(self, torch.Tensor) or self.numel() == 0:
        return None
    grid = torch.arange(self.numel()).reshape(self.shape)
    base = name.rstrip("_")
    try:
        if base == "index_copy":
            dim, index, source = bound["dim"], _host(bound["index"]), _host(bound["source"])
            targets = grid.index_select(dim, index.reshape(-1)) if self.dim() else grid.reshape(1)
            return targets.reshape(-1), source.reshape(-1)
        if base == "put":
            if bound.get("accumulate"):
                return None
            index, source = _host(bound["index"]).reshape(-1), _host(bound["source"]).reshape(-1)
            return index % self.numel(), source
        if base == "scatter":
            src = _host(bound.get("src"))
            if not isinstance(src, torch.Tensor) or bound.get("reduce") is not None:
                return None
            index = _host(bound["index"])
            if index.numel() == 0:
                return None
            region = src[tuple(slice(0, n) for n in index.shape)] if src.dim() else src
            targets = grid.gather(bound["dim"], index) if self.dim() else grid.reshape(1)
            return targets.reshape(-1), region.reshape(-1)
    except (KeyError, IndexError, RuntimeError):  # arguments that do not fit: compare as usual
        return None
    return None


def reconcile(actual: torch.Tensor, expected: torch.Tensor, pairs, where: str) -> torch.Tensor:
    """``actual`` with each position written more than once replaced by the CPU's value, once the device's
    value there is found among the values written to it.

    Raises:
        NumericFailure: a position written more than once holds a value none of its writes wrote.
    """
    targets, values = pairs
    if not isinstance(actual, torch.Tensor) or actual.shape != expected.shape or targets.numel() != values.numel():
        return actual
    counts = torch.bincount(targets, minlength=expected.numel())
    repeated = counts > 1
    if not bool(repeated.any()):
        return actual
    got = _host(actual).reshape(-1)
    if values.dtype != got.dtype:
        values = values.to(got.dtype)
    landed = got[targets]
    same = landed == values
    if got.is_floating_point() or got.is_complex():
        same |= torch.isnan(landed) & torch.isnan(values)
    hits = torch.zeros(expected.numel(), dtype=torch.int64).index_add_(0, targets, same.to(torch.int64))
    wrong = repeated & (hits == 0)
    if bool(wrong.any()):
        position = int(wrong.nonzero()[0])
        raise NumericFailure(
            f"{where}: position {position} is written {int(counts[position])} times (duplicate indices), and holds "
            f"{got[position].item()!r}, which none of those writes wrote ({values[targets == position].tolist()[:6]})"
        )
    merged = got.clone()
    merged[repeated] = _host(expected).reshape(-1)[repeated]
    return merged.reshape(expected.shape).to(actual.device)


__all__ = ["UNDEFINED_WRITES", "reconcile", "write_pairs"]
