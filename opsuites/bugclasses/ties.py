"""Ties: selections and sorts over inputs with many equal values.

A parallel arg-reduction combines partial results; unless it breaks ties by the lower index it returns
whichever tied index won the race (often the last). Sorts that are not stable reorder equal keys. Only
what PyTorch documents is judged: argmax/argmin and max/min along a dim return the first occurrence, a
stable sort keeps the input order of equal keys, unique is exactly specified. Where the docs leave the
index of a tie open (topk, kthvalue, mode, median), the values are compared and each index is checked only
for pointing at its value (the case returns ``x.gather(dim, indices)``, which must equal the values).

Sources (PyTorch docs): ``torch.argmax`` / ``torch.argmin`` ("If there are multiple maximal values then
the indices of the first maximal value are returned"), ``torch.max`` / ``torch.min`` with ``dim`` (same
rule), ``torch.sort`` (``stable=True`` "preserve the order of equivalent elements"), ``torch.topk``,
``torch.kthvalue``, ``torch.mode``, ``torch.median`` ("indices ... not necessarily the first occurrence"),
``torch.unique`` (``sorted``, ``return_inverse``, ``return_counts``).
"""

from __future__ import annotations

import torch

from neuron_conformance.opsuites.bugclasses.case import BugCase

BUG_CLASS = "ties"
DESCRIPTION = "tied values: argmax/argmin, max/min.dim (first index), stable sort, topk, kthvalue, mode, median, unique"

_MOST = ("float32", "bfloat16", "float16", "int32", "int64")
_SOME = ("float32", "int64")


def _tied(dtype, shape=(6, 70), seed=0, high=4):
    """Values in {0..high-1} (so each row holds many ties), width 70: past a multiple of 64."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, high, shape, generator=g).to(dtype)


def _arg(fn_name, dim):
    def build(dtype):
        x = _tied(dtype, seed=1)
        op = getattr(torch, fn_name)
        return (lambda x: op(x) if dim is None else op(x, dim=dim)), (x,), {}

    return build


def _maxmin_dim(which, dim):
    def build(dtype):
        op = getattr(torch, which)
        return (lambda x: tuple(op(x, dim=dim))), (_tied(dtype, seed=2),), {}

    return build


def _sort(descending):
    def build(dtype):
        return (lambda x: tuple(torch.sort(x, dim=-1, stable=True, descending=descending))), (_tied(dtype, seed=3),), {}

    return build


def _gathered(op_name, *op_args):
    """``(values, x.gather(-1, indices))``: indices are judged only by what they point at."""

    def build(dtype):
        op = getattr(torch, op_name)

        def fn(x):
            values, indices = op(x, *op_args)
            return values, x.gather(-1, indices if indices.dim() == x.dim() else indices.unsqueeze(-1)).squeeze(-1)

        return fn, (_tied(dtype, seed=4),), {}

    return build


def _topk_distinct(dtype):
    g = torch.Generator().manual_seed(5)
    x = torch.stack([torch.randperm(70, generator=g) for _ in range(6)]).to(dtype)  # distinct in each row
    return (lambda x: tuple(torch.topk(x, 9, dim=-1))), (x,), {}


def _unique(dtype):
    def fn(x):
        return tuple(torch.unique(x, sorted=True, return_inverse=True, return_counts=True))

    return fn, (_tied(dtype, seed=6, high=11),), {}


_TABLE = [
    ("argmax-flat", "argmax", _arg("argmax", None), _MOST, "argmax returns the first maximal index (torch.argmax)"),
    ("argmax-dim1", "argmax", _arg("argmax", 1), _MOST, "argmax along dim 1 returns the first maximal index"),
    ("argmax-dim0", "argmax", _arg("argmax", 0), _SOME, "argmax along dim 0 (strided) returns the first maximal index"),
    ("argmin-dim1", "argmin", _arg("argmin", 1), _MOST, "argmin along dim 1 returns the first minimal index"),
    ("max-dim1", "max", _maxmin_dim("max", 1), _MOST, "max(dim) returns the first maximal index (torch.max docs)"),
    ("min-dim0", "min", _maxmin_dim("min", 0), _SOME, "min(dim) returns the first minimal index (torch.min docs)"),
    ("sort-stable", "sort", _sort(False), _MOST, "sort(stable=True) keeps the input order of equal values"),
    (
        "sort-stable_descending",
        "sort",
        _sort(True),
        _SOME,
        "sort(stable=True, descending=True) keeps the input order of equal values (torch.sort)",
    ),
    (
        "topk-tied_values",
        "topk",
        _gathered("topk", 9),
        _SOME,
        "topk values of tied rows; each index points at its value (which tie is not documented: torch.topk)",
    ),
    ("topk-distinct", "topk", _topk_distinct, _SOME, "topk of distinct values: values and indices are unique"),
    (
        "kthvalue-tied",
        "kthvalue",
        _gathered("kthvalue", 30),
        _SOME,
        "kthvalue of tied rows; the index points at the value (which tie is not documented: torch.kthvalue)",
    ),
    (
        "mode-tied",
        "mode",
        _gathered("mode", -1),
        _SOME,
        "mode of tied rows; the index points at the value (torch.mode)",
    ),
    (
        "median-tied",
        "median",
        _gathered("median", -1),
        _SOME,
        "median of tied rows; the index points at the value (not necessarily the first: torch.median)",
    ),
    (
        "unique-inverse_counts",
        "unique",
        _unique,
        _MOST,
        "unique(sorted=True) returns sorted distinct values, the inverse map and counts (torch.unique)",
    ),
]


def _bind(builder, dtype_name):
    return lambda: builder(getattr(torch, dtype_name))


def cases() -> list[BugCase]:
    """One case per (table row, dtype); every result is a selection, so compared exactly."""
    return [
        BugCase(BUG_CLASS, name, op, dt, _bind(builder, dt), semantics, exact=True)
        for name, op, builder, dtypes, semantics in _TABLE
        for dt in dtypes
    ]
