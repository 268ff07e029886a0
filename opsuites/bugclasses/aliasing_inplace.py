"""In-place ops and ``out=`` on aliasing or overlapping views.

An in-place op on a view must write through to the base's storage, with the view's strides and offset;
a kernel that makes the input contiguous, computes into the copy and never writes it back leaves the
base unchanged. Inputs that are the written tensor itself (``x.add_(x)``) or interleaved views of one
storage must read every element before it is overwritten. Where input and output overlap partially, or
the written tensor has stride 0 (``expand``), PyTorch refuses (``RuntimeError: unsupported operation``)
instead of returning an order-dependent result; the device must refuse too.

Sources: PyTorch docs "Tensor Views" (a view shares its base's data; in-place ops on a view modify the
base), ``torch.Tensor.expand`` ("more than one element of an expanded tensor may refer to a single memory
location ... in-place operations ... may result in incorrect behavior"), ``torch.Tensor.copy_``; the
overlap checks of TensorIterator (``assert_no_internal_overlap`` / ``assert_no_partial_overlap``,
aten/src/ATen/MemoryOverlap.cpp), which raise on the CPU: those cases expect the error.
"""

from __future__ import annotations

import torch

from neuron_conformance.opsuites.bugclasses.case import BugCase

BUG_CLASS = "aliasing-inplace"
DESCRIPTION = "in-place ops and out= on views: write-through to the base, self-aliasing inputs, overlap refusals"

_DTYPES = ("float32", "bfloat16", "int64")


def _base(dtype, shape=(6, 10)):
    """``arange - 7`` of ``shape`` (both signs, small integers) in ``dtype``."""
    return torch.arange(torch.Size(shape).numel()).reshape(shape).to(dtype) - 7


def _self_add(dtype):
    return (lambda x: x.add_(x)), (_base(dtype),), {}


def _transposed_write_through(dtype):
    def fn(base):
        view = base.t()
        view.mul_(2)
        view[1:4].add_(3)
        return view

    return fn, (_base(dtype),), {}


def _strided_write_through(dtype):
    def fn(base):
        view = base[1:, ::3]  # storage offset, step 3 along the row
        view.mul_(view)
        return view

    return fn, (_base(dtype),), {}


def _interleaved(dtype):
    def fn(x):
        x[::2].add_(x[1::2])  # one storage, disjoint elements
        return x

    return fn, (_base(dtype, (12,)),), {}


def _out_is_input(dtype):
    def fn(a, b):
        torch.mul(a, b, out=a)
        return a

    return fn, (_base(dtype), _base(dtype).flip(1)), {}


def _out_disjoint_view(dtype):
    def fn(base):
        torch.add(base[:3], base[3:], out=base[:3])
        return base

    return fn, (_base(dtype),), {}


def _copy_disjoint(dtype):
    def fn(base):
        base[:, :5].copy_(base[:, 5:])
        return base

    return fn, (_base(dtype),), {}


def _copy_overlap(dtype):
    return (lambda x: x[1:].copy_(x[:-1])), (_base(dtype, (12,)),), {}


def _add_partial_overlap(dtype):
    return (lambda x: x[1:].add_(x[:-1])), (_base(dtype, (12,)),), {}


def _out_transposed_alias(dtype):
    def fn(a):
        return torch.add(a, a.t(), out=a)

    return fn, (_base(dtype, (5, 5)),), {}


def _mul_expanded(dtype):
    return (lambda x: x.expand(4, 3).mul_(2)), (_base(dtype, (1, 3)),), {}


_TABLE = [
    # name, op, builder, expects_error, semantics
    ("add_-self", "add", _self_add, False, "x.add_(x) doubles every element (each read before its write)"),
    (
        "mul_-transposed_view_writes_through",
        "mul",
        _transposed_write_through,
        False,
        "in-place ops on a transposed view and a slice of it modify the base (Tensor Views docs)",
    ),
    (
        "mul_-strided_view_writes_through",
        "mul",
        _strided_write_through,
        False,
        "x.mul_(x) on a stepped, offset view squares those elements of the base only (Tensor Views docs)",
    ),
    (
        "add_-interleaved_views",
        "add",
        _interleaved,
        False,
        "x[::2].add_(x[1::2]) on one storage with disjoint elements adds pairwise (no overlap: allowed)",
    ),
    ("mul-out_is_input", "mul", _out_is_input, False, "torch.mul(a, b, out=a) writes the product into a"),
    (
        "add-out_disjoint_view",
        "add",
        _out_disjoint_view,
        False,
        "add with out= a view of the same storage disjoint from the other input is allowed (MemoryOverlap.cpp)",
    ),
    (
        "copy_-disjoint_views",
        "copy_",
        _copy_disjoint,
        False,
        "copy_ between disjoint column blocks of one tensor copies the values",
    ),
    (
        "copy_-overlapping_views",
        "copy_",
        _copy_overlap,
        True,
        "x[1:].copy_(x[:-1]) overlaps partially: RuntimeError on CPU (assert_no_partial_overlap)",
    ),
    (
        "add_-partial_overlap",
        "add",
        _add_partial_overlap,
        True,
        "x[1:].add_(x[:-1]) overlaps partially: RuntimeError on CPU (assert_no_partial_overlap)",
    ),
    (
        "add-out_transposed_alias",
        "add",
        _out_transposed_alias,
        True,
        "torch.add(a, a.t(), out=a) reads a through other strides than it writes: RuntimeError on CPU",
    ),
    (
        "mul_-expanded",
        "mul",
        _mul_expanded,
        True,
        "in-place mul_ on an expanded (stride 0) tensor: RuntimeError on CPU (assert_no_internal_overlap; "
        "Tensor.expand docs)",
    ),
]


def _bind(builder, dtype_name):
    return lambda: builder(getattr(torch, dtype_name))


def cases() -> list[BugCase]:
    """One case per (table row, dtype); small integer-valued data and single correctly rounded ops, so results are exact."""
    return [
        BugCase(BUG_CLASS, name, op, dt, _bind(builder, dt), semantics, exact=True, expects_error=err)
        for name, op, builder, err, semantics in _TABLE
        for dt in _DTYPES
    ]
