"""Duplicate indices with accumulation: every write to a repeated index must be combined.

Kernels that scatter in parallel must combine writes to the same destination (atomics or a sort and
segmented reduction); a kernel that lets the last writer win keeps one write per duplicate. Gathers
(``x[idx]``, ``take``) must return the same element for every repeat. OpInfo's samples for these ops
rarely repeat an index together with accumulation.

Sources (PyTorch docs): ``torch.Tensor.index_put_`` ("If accumulate is True, the elements in values are
added to self"; duplicates with ``accumulate=False`` are undefined, so only ``accumulate=True`` is
checked), ``torch.Tensor.index_add_``, ``torch.Tensor.scatter_add_``, ``torch.Tensor.scatter_reduce_``
(``reduce`` = sum/prod/mean/amax/amin, ``include_self``), ``torch.Tensor.put_(accumulate=True)``,
``torch.take``, "Indexing, Slicing, Joining" (advanced indexing gathers each index), ``torch.bincount``
(counts of each value, weighted sums with ``weights``), ``torch.histc`` and the backward of
``torch.nn.functional.embedding`` (gradient rows of repeated indices are summed).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from neuron_conformance.opsuites.bugclasses.case import BugCase

BUG_CLASS = "duplicate-indices"
DESCRIPTION = (
    "repeated indices with accumulation: index_put, index_add, scatter_add/reduce, put, take, "
    "advanced indexing, embedding backward, bincount, histc"
)

_FLOATS = ("float32", "bfloat16", "float16")
_INTS = ("int32", "int64")
_ROWS = [1, 1, 1, 5, 5, 0, 7, 1]
"""Destination rows of 8 writes into 8 rows: row 1 four times, row 5 twice, rows 2-4 and 6 never."""


def _values(shape, dtype, seed):
    """Random values of ``shape``: normal for floats, in [-5, 5) for integers (no overflow when summed)."""
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-5, 5, shape, generator=g, dtype=dtype)


def _index_put_rows(dtype):
    base, vals = torch.zeros(8, 3, dtype=dtype), _values((8, 3), dtype, 1)
    return (lambda b, i, v: b.index_put_((i,), v, accumulate=True)), (base, torch.tensor(_ROWS), vals), {}


def _index_put_points(dtype):
    rows, cols = torch.tensor([0, 2, 0, 2, 0, 3]), torch.tensor([1, 1, 1, 1, 1, 0])
    base, vals = _values((4, 2), dtype, 2), _values((6,), dtype, 3)
    return (lambda b, r, c, v: b.index_put_((r, c), v, accumulate=True)), (base, rows, cols, vals), {}


def _getitem(dtype):
    return (lambda x, i: x[i]), (_values((8, 3), dtype, 4), torch.tensor(_ROWS)), {}


def _index_add(dtype):
    base, src = _values((8, 3), dtype, 5), _values((8, 3), dtype, 6)
    return (lambda b, i, s: b.index_add_(0, i, s, alpha=2)), (base, torch.tensor(_ROWS), src), {}


def _scatter_add(dtype):
    index = torch.tensor([[0, 1, 0, 0], [2, 2, 2, 1]])
    base, src = torch.zeros(3, 4, dtype=dtype), _values((2, 4), dtype, 7)
    return (lambda b, i, s: b.scatter_add_(0, i, s)), (base, index, src), {}


def _scatter_reduce(reduce, include_self):
    def build(dtype):
        index = torch.tensor([0, 1, 0, 0, 3, 3, 1, 0])
        base, src = _values((5,), dtype, 8), _values((8,), dtype, 9)
        if reduce == "prod" and dtype.is_floating_point:
            base, src = 1 + base / 4, 1 + src / 4  # factors near 1: no underflow or overflow in low precision

        def fn(b, i, s):
            return b.scatter_reduce_(0, i, s, reduce, include_self=include_self)

        return fn, (base, index, src), {}

    return build


def _put(dtype):
    base, vals = _values((3, 4), dtype, 10), _values((6,), dtype, 11)
    index = torch.tensor([5, 0, 5, 11, 5, 0])  # flat indices into the 3x4 tensor
    return (lambda b, i, v: b.put_(i, v, accumulate=True)), (base, index, vals), {}


def _take(dtype):
    return (lambda x, i: torch.take(x, i)), (_values((3, 4), dtype, 12), torch.tensor([[5, 5], [0, 5]])), {}


def _embedding_backward(dtype):
    weight, grad = _values((6, 4), dtype, 13), _values((2, 5, 4), dtype, 14)
    index = torch.tensor([[1, 3, 1, 1, 0], [3, 1, 5, 5, 1]])

    def fn(w, idx, g):
        w = w.detach().requires_grad_(True)
        F.embedding(idx, w).backward(g)
        return w.grad

    return fn, (weight, index, grad), {}


def _bincount(dtype):
    return (lambda x: torch.bincount(x, minlength=9)), (torch.tensor([1, 1, 3, 7, 1, 0, 3], dtype=dtype),), {}


def _bincount_weighted(dtype):
    x = torch.tensor([2, 2, 0, 4, 2, 4])
    return (lambda x, w: torch.bincount(x, weights=w)), (x, _values((6,), dtype, 15)), {}


def _histc(dtype):
    x = torch.tensor([0.5, 0.5, 1.25, 3.0, 0.5, 2.0, 2.0, 3.9], dtype=dtype)  # repeated bin members, one at max
    return (lambda x: torch.histc(x, bins=4, min=0, max=4)), (x,), {}


_TABLE = [
    # name, op, builder, dtypes, semantics
    (
        "index_put_accumulate-rows",
        "index_put",
        _index_put_rows,
        _FLOATS + _INTS,
        "index_put_(accumulate=True) adds every value of a repeated row index (torch.Tensor.index_put_ docs)",
    ),
    (
        "index_put_accumulate-points",
        "index_put",
        _index_put_points,
        ("float32", "int64"),
        "index_put_ with two index tensors and repeated (row, col) pairs adds each value (index_put_ docs)",
    ),
    (
        "getitem-repeated",
        "__getitem__",
        _getitem,
        ("float32", "int64"),
        "advanced indexing x[idx] gathers row idx[k] for each k, repeats included (torch indexing docs)",
    ),
    (
        "index_add-repeated",
        "index_add",
        _index_add,
        _FLOATS + _INTS,
        "index_add_ adds alpha*source[k] to row index[k] for every k (torch.Tensor.index_add_ docs)",
    ),
    (
        "scatter_add-repeated",
        "scatter_add",
        _scatter_add,
        _FLOATS + _INTS,
        "scatter_add_ sums all src values sent to one position (torch.Tensor.scatter_add_ docs)",
    ),
    (
        "put_accumulate",
        "put",
        _put,
        ("float32", "float16", "int64"),
        "put_(accumulate=True) adds every value of a repeated flat index (torch.Tensor.put_ docs)",
    ),
    (
        "take-repeated",
        "take",
        _take,
        ("float32", "int64"),
        "take gathers input.flatten()[index] for each index, repeats included (torch.take docs)",
    ),
    (
        "embedding_backward-repeated",
        "nn.functional.embedding",
        _embedding_backward,
        ("float32", "float16"),
        "the gradient of an embedding row is the sum of the output gradients of every lookup of it "
        "(torch.nn.functional.embedding; embedding_dense_backward in aten/src/ATen/native/Embedding.cpp)",
    ),
    (
        "bincount-repeated",
        "bincount",
        _bincount,
        ("int64", "int32", "uint8"),
        "bincount counts the occurrences of each value, minlength bins at least (torch.bincount docs)",
    ),
    (
        "bincount-weighted",
        "bincount",
        _bincount_weighted,
        ("float32",),
        "bincount with weights sums the weights of each value (torch.bincount docs)",
    ),
    (
        "histc-repeated",
        "histc",
        _histc,
        _FLOATS,
        "histc counts the elements of each of `bins` equal bins in [min, max], max in the last bin (torch.histc)",
    ),
]
for _reduce in ("sum", "prod", "mean", "amax", "amin"):
    for _self in (True, False):
        _TABLE.append(
            (
                f"scatter_reduce-{_reduce}-include_self_{_self}",
                "scatter_reduce",
                _scatter_reduce(_reduce, _self),
                ("float32", "int64") if _reduce != "mean" else ("float32",),
                f"scatter_reduce_(reduce={_reduce!r}, include_self={_self}) reduces every src value sent to "
                "one position (with self's value when include_self) (torch.Tensor.scatter_reduce_ docs)",
            )
        )


def _bind(builder, dtype_name):
    return lambda: builder(getattr(torch, dtype_name))


def cases() -> list[BugCase]:
    """One case per (table row, dtype): 8-element scatters/gathers with indices repeated 2-4 times."""
    out = []
    for name, op, builder, dtypes, semantics in _TABLE:
        for dt in dtypes:
            exact = not getattr(torch, dt).is_floating_point
            out.append(BugCase(BUG_CLASS, name, op, dt, _bind(builder, dt), semantics, exact=exact))
    return out
