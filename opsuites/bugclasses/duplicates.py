"""Duplicate indices with accumulation: every write to a repeated index must be summed.

Kernels that scatter in parallel must combine writes to the same destination (atomics or a sort and
segmented reduction); a kernel that lets the last writer win keeps one write per duplicate. OpInfo's
samples for these ops rarely repeat an index together with accumulation.

Sources: ``torch.Tensor.index_put_`` ("If accumulate is True, the elements in values are added to self";
duplicate indices with ``accumulate=False`` are undefined, so only ``accumulate=True`` is checked),
``torch.Tensor.index_add_``, ``torch.Tensor.scatter_add_``, ``torch.Tensor.scatter_reduce_``,
``torch.Tensor.put_(accumulate=True)``, ``torch.bincount``, ``torch.histc`` and the backward of
``torch.nn.functional.embedding`` (gradient rows of repeated indices are summed) in PyTorch's docs.
"""

from __future__ import annotations

import torch

from .case import BugCase

BUG_CLASS = "duplicate-indices"
DESCRIPTION = "repeated indices with accumulation: index_put, index_add, scatter_add/reduce, put, embedding backward"

_FLOATS = ("float32", "bfloat16", "float16")


def _index_put(dtype):
    def build():
        g = torch.Generator().manual_seed(0)
        base = torch.zeros(8, 3, dtype=dtype)
        idx = torch.tensor([1, 1, 1, 5, 5, 0, 7, 1])
        vals = torch.randn(8, 3, generator=g).to(dtype)
        return (lambda b, i, v: b.index_put_((i,), v, accumulate=True)), (base, idx, vals), {}
    return build


def cases() -> list[BugCase]:
    out = []
    for dt in _FLOATS:
        out.append(BugCase(BUG_CLASS, "index_put_accumulate-rows", "index_put", dt,
                           _index_put(getattr(torch, dt)),
                           "index_put_(accumulate=True) adds every value of a repeated index (torch docs)"))
    return out
