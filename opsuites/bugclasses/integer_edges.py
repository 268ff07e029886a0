"""Integer edges: overflow, shifts, signed division and the most negative value.

Integer tensors wrap around on overflow (two's complement), ``floor_divide`` and ``remainder`` round
toward minus infinity (Python's rule) while ``fmod`` truncates (C's rule), ``abs(INT_MIN)`` is ``INT_MIN``
again, and an integer ``cumsum`` that keeps the input dtype wraps. Kernels that compute in a wider or
floating type, saturate, or use C's ``%`` for ``remainder`` differ exactly here. Shifts are judged only
within the bit width (shift counts in ``[0, bits)``), where the result is defined.

Sources: PyTorch's integer kernels compute in the tensor's dtype with C++ arithmetic, which wraps in two's
complement (aten/src/ATen/native/cpu/BinaryOpsKernel.cpp; no saturating mode is documented), so the CPU
result is the reference; PyTorch docs for ``torch.floor_divide`` ("rounds the
quotient towards negative infinity" since 1.13), ``torch.remainder`` ("the result has the same sign as the
divisor", Python's ``%``), ``torch.fmod`` ("same sign as the dividend", C's ``fmod``/``%``), ``torch.abs``,
``torch.bitwise_left_shift`` / ``bitwise_right_shift`` (arithmetic shift for signed types),
``torch.cumsum`` (``dtype`` argument: computed in that dtype).
"""

from __future__ import annotations

import torch

from neuron_conformance.opsuites.bugclasses.case import BugCase

BUG_CLASS = "integer-edges"
DESCRIPTION = "two's complement overflow of add/mul/cumsum, shifts within the width, floor_divide/remainder/fmod signs, abs(INT_MIN)"

_SIGNED = ("int8", "int16", "int32", "int64")


def _edges(dtype):
    """Extremes and their neighbours of ``dtype``, plus small values of both signs (1-D, 12 elements)."""
    info = torch.iinfo(dtype)
    return torch.tensor([info.min, info.min + 1, info.max, info.max - 1, -1, 0, 1, 2, -2, 3, -7, 7], dtype=dtype)


def _add_overflow(dtype):
    x = _edges(dtype)
    return (lambda x, y: (x + y, x - y, x + 1, x - 1)), (x, x.flip(0)), {}


def _mul_overflow(dtype):
    x = _edges(dtype)
    return (lambda x, y: (x * y, x * x, x * 2)), (x, x.roll(3)), {}


def _shifts(dtype):
    bits = torch.iinfo(dtype).bits
    x = _edges(dtype)
    counts = torch.arange(12, dtype=dtype) * (bits - 1) // 11  # 0 .. bits-1
    return (lambda x, s: (torch.bitwise_left_shift(x, s), torch.bitwise_right_shift(x, s))), (x, counts), {}


def _division(dtype):
    info = torch.iinfo(dtype)
    a = torch.tensor([-7, 7, -7, 7, -6, 6, 0, -1, info.max, info.min + 1, 5, -5], dtype=dtype)
    b = torch.tensor([2, -2, -2, 2, 3, -3, 5, 4, -3, 7, -1, -1], dtype=dtype)
    return (lambda a, b: (torch.floor_divide(a, b), torch.remainder(a, b), torch.fmod(a, b))), (a, b), {}


def _abs_min(dtype):
    return (lambda x: (torch.abs(x), torch.neg(x))), (_edges(dtype),), {}


def _cumsum_wrap(dtype):
    info = torch.iinfo(dtype)
    x = torch.tensor([info.max, 1, 1, info.max, info.min, -1, 5, info.max, 2], dtype=dtype)
    return (lambda x: (torch.cumsum(x, 0, dtype=x.dtype), torch.cumsum(x, 0))), (x,), {}


_TABLE = [
    (
        "add-overflow_wraps",
        "add",
        _add_overflow,
        "integer add/sub wrap around in two's complement: max + 1 == min (C++ arithmetic of the CPU kernels)",
    ),
    (
        "mul-overflow_wraps",
        "mul",
        _mul_overflow,
        "integer mul keeps the low bits of the product (two's complement wraparound)",
    ),
    (
        "shift-within_width",
        "bitwise_left_shift",
        _shifts,
        "x << s and x >> s for 0 <= s < bits: left shift keeps the low bits, right shift is arithmetic "
        "(torch.bitwise_left_shift / bitwise_right_shift docs)",
    ),
    (
        "floor_divide_remainder_fmod-signs",
        "remainder",
        _division,
        "floor_divide rounds toward -inf, remainder takes the divisor's sign, fmod the dividend's "
        "(torch.floor_divide, torch.remainder, torch.fmod docs)",
    ),
    ("abs-int_min", "abs", _abs_min, "abs(INT_MIN) and -INT_MIN are INT_MIN (two's complement; torch.abs)"),
    (
        "cumsum-overflow",
        "cumsum",
        _cumsum_wrap,
        "cumsum with dtype= the input's wraps at the width; without dtype, integers accumulate in int64 "
        "(torch.cumsum docs)",
    ),
]


def _bind(builder, dtype_name):
    return lambda: builder(getattr(torch, dtype_name))


def cases() -> list[BugCase]:
    """One case per (table row, signed integer dtype); integer results, compared exactly."""
    return [
        BugCase(BUG_CLASS, name, op, dt, _bind(builder, dt), semantics, exact=True)
        for name, op, builder, semantics in _TABLE
        for dt in _SIGNED
    ]
