"""Special floating values: NaN, +-inf, -0.0, subnormals, the dtype's extremes, overflow and underflow.

Backends get these wrong in their fast paths: a kernel that flushes subnormals to zero (FTZ/DAZ), a
saturating one that turns inf into ``finfo.max``, a ``max`` built from ``a > b ? a : b`` that drops NaN,
a reduction whose vector path skips NaN, a conversion that truncates instead of rounding to nearest even.
OpInfo's samples are random normals and rarely hold these values. Every case runs in each floating
dtype (float64 when selected) on the same value set mapped into that dtype.

Sources: IEEE 754-2019 (NaN propagation, signed zeros, x/0 = +-inf by the signs, inf - inf = NaN,
gradual underflow, round-to-nearest-even conversions; +, *, /, sqrt and reciprocal correctly rounded, so
their results are exact: a float32 intermediate rounds a float16/bfloat16 result correctly, since
24 >= 2p + 2); PyTorch's docs of ``torch.maximum``/``minimum`` ("If one of the elements being compared
is a NaN, then that element is returned"), ``torch.fmax``/``fmin`` ("if exactly one of them is NaN the
non-NaN element is taken"), ``torch.nansum``, ``torch.isnan``/``isinf``/``isfinite``/``signbit``,
``torch.clamp``; ``torch.Tensor.to`` (float->int of NaN/inf is undefined: not checked).

``fp64`` is off in every case: a float64 reference neither overflows nor underflows where the dtype
does, so it cannot arbitrate these values.
"""

from __future__ import annotations

import torch

from neuron_conformance.opsuites.bugclasses.case import BugCase

BUG_CLASS = "special-values"
DESCRIPTION = (
    "NaN, +-inf, -0.0, subnormals, finfo max/min/tiny, overflow/underflow through elementwise ops, "
    "NaN-propagating vs NaN-ignoring max/min, reductions, comparisons, conversions"
)

_DTYPES = ("float32", "bfloat16", "float16", "float64")

_NAN, _INF = float("nan"), float("inf")


def specials(dtype: torch.dtype) -> torch.Tensor:
    """The special values of ``dtype`` (1-D, CPU): NaN, +-inf, +-0.0, +-``tiny`` (smallest normal),
    ``tiny / 2`` and +-the smallest subnormal (``tiny * eps``), ``finfo.max``/``finfo.min`` and a few
    ordinary values, plus arguments where ``exp`` overflows/underflows in float16 (11.5, -17) and in
    float32/bfloat16 (89, -104, -120)."""
    fi = torch.finfo(dtype)
    sub = fi.tiny * fi.eps
    vals = [
        _NAN,
        _INF,
        -_INF,
        0.0,
        -0.0,
        fi.tiny,
        -fi.tiny,
        fi.tiny / 2,
        sub,
        -sub,
        fi.max,
        fi.min,
        1.0,
        -1.0,
        0.5,
        -2.5,
        3.0,
        11.5,
        -17.0,
        89.0,
        -104.0,
        -120.0,
    ]
    return torch.tensor(vals, dtype=torch.float64).to(dtype)


def _grid(dtype: torch.dtype, *, drop_opposite_zeros: bool = False):
    """Every pair of :func:`specials`: ``(a, b)`` with ``a`` repeating each value and ``b`` tiling them.

    ``drop_opposite_zeros`` removes the pairs (+0, -0) and (-0, +0): which zero ``maximum``/``fmax``
    return for them is not documented (IEEE 754-2019 orders -0 < +0; C's fmax leaves it open)."""
    s = specials(dtype)
    a, b = s.repeat_interleave(len(s)), s.repeat(len(s))
    if drop_opposite_zeros:
        keep = ~((a == 0) & (b == 0) & (torch.signbit(a) != torch.signbit(b)))
        a, b = a[keep], b[keep]
    return a, b


_UNARY = {  # op -> (fn, exact: correctly rounded by IEEE 754)
    "exp": (torch.exp, False),
    "log": (torch.log, False),
    "sqrt": (torch.sqrt, True),
    "reciprocal": (torch.reciprocal, True),
    "tanh": (torch.tanh, False),
    "sigmoid": (torch.sigmoid, False),
    "abs": (torch.abs, True),
    "neg": (torch.neg, True),
    "isnan": (torch.isnan, True),
    "isinf": (torch.isinf, True),
    "isfinite": (torch.isfinite, True),
    "signbit": (torch.signbit, True),
    "clamp": (lambda x: (x.clamp(-1.0, 1.0), x.clamp(min=-2.0), x.clamp(max=0.5), x.clamp(1.0, -1.0)), True),
}

_BINARY = {  # op -> fn; all exact (IEEE 754 operations, selections and comparisons)
    "add": torch.add,
    "mul": torch.mul,
    "div": torch.div,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "fmax": torch.fmax,
    "fmin": torch.fmin,
    "eq": torch.eq,
    "lt": torch.lt,
}
_UNSIGNED_ZERO = ("maximum", "minimum", "fmax", "fmin")


def _reduction_inputs(dtype: torch.dtype) -> list:
    """Vectors whose reductions are decided by special values; the last one holds its NaN in the tail
    (index 256 of 257, past every whole vector of 8/64 elements)."""
    fi = torch.finfo(dtype)
    rows = [
        [1.0, _NAN, 2.0],
        [_INF, 1.0],
        [_INF, -_INF],
        [-_INF, -_INF],
        [fi.max, fi.max],
        [fi.min, -1.0],
        [_NAN, _NAN],
        [-0.0, -0.0],
        [fi.tiny / 2, fi.tiny * fi.eps],
    ]
    out = [torch.tensor(r, dtype=torch.float64).to(dtype) for r in rows]
    tail = torch.linspace(-1, 1, 257, dtype=torch.float64)
    tail[256] = _NAN
    out.append(tail.to(dtype))
    return out


def _reduce(op):
    return lambda *xs: [op(x) for x in xs]


_REDUCTIONS = {
    "sum": (torch.sum, False),
    "amax": (torch.amax, True),
    "amin": (torch.amin, True),
    "nansum": (torch.nansum, False),
}


def _conversions() -> list[tuple]:
    """``(name, source dtype, target dtype, values())`` of the conversion cases: overflow to inf past the
    target's max (at the rounding midpoint and beyond), round-to-nearest-even at halfway points, gradual
    underflow to subnormals and to signed zero."""
    h = 2.0**-11  # half an ulp of 1.0 in float16
    to_half = [
        65504.0,
        65519.0,
        65520.0,
        65536.0,
        1e5,
        -65520.0,
        -1e5,
        3e38,
        _INF,
        -_INF,
        _NAN,
        1 + h,
        1 + 3 * h,
        2049.0,
        2051.0,
        -(1 + h),
        2.0**-24,
        2.0**-25,
        3 * 2.0**-25,
        1e-8,
        -(2.0**-25),
        -0.0,
    ]
    b = 2.0**-8  # half an ulp of 1.0 in bfloat16
    f32 = torch.finfo(torch.float32)
    # float32 bit patterns: just below / at the midpoint to inf from bfloat16's max; subnormal midpoints
    # 0x00008000 (to 0, even) and 0x00018000 (to 0x0002, even); 0x80008000, the negative midpoint (to -0.0)
    bits = [0x7F7F7FFF, 0x7F7F8000, 0x00008000, 0x00018000, 0x80008000 - (1 << 32)]

    def to_bf16():
        plain = torch.tensor(
            [f32.max, f32.min, 1 + b, 1 + 3 * b, 1 + b + 2.0**-20, -(1 + b), _INF, _NAN, -0.0, f32.tiny],
            dtype=torch.float32,
        )
        return torch.cat([plain, torch.tensor(bits, dtype=torch.int32).view(torch.float32)])

    return [
        ("to-float16", torch.float32, torch.float16, lambda: torch.tensor(to_half, dtype=torch.float32)),
        ("to-bfloat16", torch.float32, torch.bfloat16, to_bf16),
        ("float16-to-float32", torch.float16, torch.float32, lambda: specials(torch.float16)),
        ("bfloat16-to-float32", torch.bfloat16, torch.float32, lambda: specials(torch.bfloat16)),
        ("float16-to-bfloat16", torch.float16, torch.bfloat16, lambda: specials(torch.float16)),
    ]


def _case(name, op, dtype, build, semantics, exact=True):
    return BugCase(BUG_CLASS, name, op, dtype, build, semantics, exact=exact, fp64=False)


def _unary_build(fn, dtype):
    return lambda: (fn, (specials(dtype),), {})


def _binary_build(op, fn, dtype):
    return lambda: (fn, _grid(dtype, drop_opposite_zeros=op in _UNSIGNED_ZERO), {})


def _reduction_build(fn, dtype):
    return lambda: (_reduce(fn), tuple(_reduction_inputs(dtype)), {})


def _conversion_build(src, dst, values):
    return lambda: ((lambda x: x.to(dst)), (values().to(src),), {})


def cases() -> list[BugCase]:
    """Unary, binary (all pairs of specials), reduction and conversion cases in each floating dtype."""
    out = []
    for dt in _DTYPES:
        dtype = getattr(torch, dt)
        for op, (fn, exact) in _UNARY.items():
            out.append(
                _case(
                    op,
                    op,
                    dt,
                    _unary_build(fn, dtype),
                    f"torch.{op} on NaN/inf/signed zeros/subnormals/finfo extremes (IEEE 754; PyTorch docs)",
                    exact,
                )
            )
        for op, fn in _BINARY.items():
            out.append(
                _case(
                    f"{op}-pairs",
                    op,
                    dt,
                    _binary_build(op, fn, dtype),
                    f"torch.{op} on every pair of special values (IEEE 754; PyTorch docs of "
                    "maximum/minimum (NaN propagates) and fmax/fmin (NaN ignored))",
                )
            )
        for op, (fn, exact) in _REDUCTIONS.items():
            out.append(
                _case(
                    f"{op}-specials",
                    op,
                    dt,
                    _reduction_build(fn, dtype),
                    f"torch.{op}: a NaN anywhere (also in the tail) gives NaN, inf - inf gives NaN, "
                    "finfo.max + finfo.max overflows to inf; nansum treats NaN as zero (PyTorch docs)",
                    exact,
                )
            )
    for name, src, dst, values in _conversions():
        out.append(
            _case(
                name,
                "to",
                str(src).removeprefix("torch."),
                _conversion_build(src, dst, values),
                f"Tensor.to({dst}): round to nearest even, overflow past max to inf, gradual underflow "
                "(IEEE 754 conversion; PyTorch's c10/util/Half.h, BFloat16.h)",
            )
        )
    return out
