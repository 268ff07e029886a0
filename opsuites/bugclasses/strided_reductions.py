"""Reductions and scans over non-contiguous inputs, along every dim: the stride-handling branches.

A reduction kernel picks its loop from the input's strides: the inner (reduced) dim contiguous, the
outer dim contiguous, or neither; and a fast path when the input is dense. Kernels that assume a dense
input read the wrong elements of a transposed, stepped (``x[::2, ::3]``), expanded (stride 0) or offset
(``storage_offset() > 0``) tensor; kernels that handle one reduced dim well get another wrong. OpInfo's
samples are mostly contiguous and reduce along one dim. Here every layout is built on the CPU and kept
on the device by the suite (:func:`neuron_conformance.conformance.backend.transfer.to_device_exact`), and each case reduces along
every dim, a tuple of dims where the op takes one, and all dims (``dim=None``), with ``keepdim`` False
and True.

Sources: the reduction and scan docs of PyTorch (``torch.sum``, ``torch.mean``, ``torch.prod``,
``torch.amax``/``amin``, ``torch.max(dim)``/``min(dim)`` and ``torch.argmax``/``argmin`` ("the indices of
the first maximal value are returned" on ties), ``torch.linalg.vector_norm``, ``torch.var``/``std``
(``correction=1``), ``torch.logsumexp``, ``torch.any``/``all``, ``torch.nansum``/``nanmean`` (NaN treated
as zero / ignored), ``torch.cumsum``/``cumprod``/``cummax``/``logcumsumexp``); the layouts are PyTorch's
strided model (``torch.Tensor.stride``, ``torch.Tensor.expand``: "a new view ... with the stride set to 0").
A reduction's value does not depend on the input's layout, so the CPU result on the same layout is the
reference.
"""

from __future__ import annotations

import torch

from neuron_conformance.opsuites.bugclasses.case import BugCase

BUG_CLASS = "strided-reductions"
DESCRIPTION = (
    "reductions and scans on transposed, stepped, expanded (stride 0) and offset 2-D/3-D inputs, "
    "along every dim, dim tuples and dim=None, keepdim both"
)

_FLOATS = ("float32", "bfloat16", "float16")

# layout name -> (base shape, view of the base); every view is 2-D (5, 7) or 3-D (3, 4, 5)
_LAYOUTS = {
    "transposed-2d": ((7, 5), lambda b: b.t()),
    "stepped-2d": ((10, 21), lambda b: b[::2, ::3]),
    "expanded-2d": ((5, 1), lambda b: b.expand(5, 7)),
    "offset-2d": ((7, 10), lambda b: b[2:, 3:]),
    "transposed-3d": ((5, 3, 4), lambda b: b.permute(1, 2, 0)),
    "stepped-3d": ((6, 4, 15), lambda b: b[::2, :, 1::3]),
    "expanded-3d": ((3, 1, 5), lambda b: b.expand(3, 4, 5)),
    "offset-3d": ((4, 5, 7), lambda b: b[1:, 1:, 2:]),
}


def _values(kind: str, shape: tuple, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Base values (CPU): ``normal`` N(0, 1); ``positive`` U[0.5, 1.5) (products stay in range);
    ``nan`` N(0, 1) with every 4th element NaN; ``bool`` N(0, 1) > 0.3; ``int`` uniform in [-50, 50)."""
    g = torch.Generator().manual_seed(seed)
    if kind == "int":
        return torch.randint(-50, 50, shape, generator=g).to(dtype)
    x = torch.randn(shape, generator=g)
    if kind == "positive":
        x = torch.rand(shape, generator=g) + 0.5
    elif kind == "nan":
        x.view(-1)[::4] = float("nan")
    elif kind == "bool":
        return x > 0.3
    return x.to(dtype)


def _reduce(op, *, none: bool, tuples: bool, keepdim: bool = True):
    """Reduction ``op(x, dim, keepdim)`` along every dim (and a tuple of the first and last dims when
    ``tuples``), then over all dims when ``none``: a flat list of results."""

    def fn(x):
        dims = list(range(x.dim())) + ([(0, x.dim() - 1)] if tuples else [])
        out = [op(x, d, k) for d in dims for k in ((False, True) if keepdim else (False,))]
        if none:
            out.append(op(x, None, False))
        return out

    return fn


def _scan(op):
    """Scan ``op(x, dim)`` along every dim: a flat list of results."""
    return lambda x: [op(x, d) for d in range(x.dim())]


def _all_or(f, g):
    """``f(x, d, k)`` for a dim, ``g(x)`` for ``d=None`` (ops whose full reduction is a separate overload)."""
    return lambda x, d, k: g(x) if d is None else f(x, d, k)


def _cummax(x, d):
    # values, and the values the indices point at: ties may return any tied index (undocumented)
    values, indices = torch.cummax(x, d)
    return values, torch.gather(x, d, indices)


def _norms(x, d, k):
    return (
        torch.linalg.vector_norm(x, 2, dim=d, keepdim=k),
        torch.linalg.vector_norm(x, float("inf"), dim=d, keepdim=k),
    )


# op -> (fn over the view, value kind, dtypes)
_OPS = {
    "sum": (
        _reduce(lambda x, d, k: torch.sum(x, d, keepdim=k) if d is not None else x.sum(), none=True, tuples=True),
        "normal",
        _FLOATS + ("int32",),
    ),
    "mean": (
        _reduce(_all_or(lambda x, d, k: torch.mean(x, d, keepdim=k), torch.mean), none=True, tuples=True),
        "normal",
        _FLOATS,
    ),
    "prod": (
        _reduce(_all_or(lambda x, d, k: torch.prod(x, d, keepdim=k), torch.prod), none=True, tuples=False),
        "positive",
        _FLOATS,
    ),
    "amax": (
        _reduce(lambda x, d, k: torch.amax(x, () if d is None else d, keepdim=k), none=True, tuples=True),
        "normal",
        _FLOATS + ("int32",),
    ),
    "amin": (
        _reduce(lambda x, d, k: torch.amin(x, () if d is None else d, keepdim=k), none=True, tuples=True),
        "normal",
        _FLOATS,
    ),
    "max": (
        _reduce(_all_or(lambda x, d, k: tuple(torch.max(x, d, keepdim=k)), torch.max), none=True, tuples=False),
        "normal",
        _FLOATS,
    ),
    "min": (
        _reduce(_all_or(lambda x, d, k: tuple(torch.min(x, d, keepdim=k)), torch.min), none=True, tuples=False),
        "normal",
        _FLOATS,
    ),
    "argmax": (
        _reduce(lambda x, d, k: torch.argmax(x, d, keepdim=k), none=True, tuples=False),
        "normal",
        _FLOATS + ("int32",),
    ),
    "argmin": (_reduce(lambda x, d, k: torch.argmin(x, d, keepdim=k), none=True, tuples=False), "normal", _FLOATS),
    "linalg.vector_norm": (_reduce(_norms, none=True, tuples=True), "normal", _FLOATS),
    "var": (
        _reduce(_all_or(lambda x, d, k: torch.var(x, d, keepdim=k), torch.var), none=True, tuples=True),
        "normal",
        _FLOATS,
    ),
    "std": (
        _reduce(_all_or(lambda x, d, k: torch.std(x, d, keepdim=k), torch.std), none=True, tuples=True),
        "normal",
        _FLOATS,
    ),
    "logsumexp": (
        _reduce(lambda x, d, k: torch.logsumexp(x, d, keepdim=k), none=False, tuples=True),
        "normal",
        _FLOATS,
    ),
    "any": (
        _reduce(_all_or(lambda x, d, k: torch.any(x, d, keepdim=k), torch.any), none=True, tuples=False),
        "bool",
        ("bool",),
    ),
    "all": (
        _reduce(_all_or(lambda x, d, k: torch.all(x, d, keepdim=k), torch.all), none=True, tuples=False),
        "bool",
        ("bool",),
    ),
    "nansum": (
        _reduce(_all_or(lambda x, d, k: torch.nansum(x, d, keepdim=k), torch.nansum), none=True, tuples=True),
        "nan",
        _FLOATS,
    ),
    "nanmean": (
        _reduce(_all_or(lambda x, d, k: torch.nanmean(x, d, keepdim=k), torch.nanmean), none=True, tuples=True),
        "nan",
        _FLOATS,
    ),
    "cumsum": (_scan(torch.cumsum), "normal", _FLOATS + ("int32",)),
    "cumprod": (_scan(torch.cumprod), "positive", _FLOATS),
    "logcumsumexp": (_scan(torch.logcumsumexp), "normal", _FLOATS),
    "cummax": (_scan(_cummax), "normal", _FLOATS),
}


def _build(fn, kind: str, layout: str, dtype: torch.dtype, seed: int):
    shape, view = _LAYOUTS[layout]

    def build():
        return fn, (view(_values(kind, shape, dtype, seed)),), {}

    return build


def cases() -> list[BugCase]:
    """One case per (op, layout, dtype): 21 ops x 8 layouts, over the default floating dtypes (and
    ``bool`` for any/all, ``int32`` for sum/amax/argmax/cumsum, whose results are then exact)."""
    out = []
    for seed, (op, (fn, kind, dtypes)) in enumerate(_OPS.items()):
        for layout in _LAYOUTS:
            for dt in dtypes:
                dtype = getattr(torch, dt)
                exact = not dtype.is_floating_point or op in (
                    "argmax",
                    "argmin",
                    "amax",
                    "amin",
                    "max",
                    "min",
                    "cummax",
                )
                out.append(
                    BugCase(
                        BUG_CLASS,
                        f"{op}-{layout}",
                        op,
                        dt,
                        _build(fn, kind, layout, dtype, seed),
                        f"torch.{op}: the result does not depend on the input's strides or storage "
                        "offset (PyTorch reduction docs; strided tensor model)",
                        exact=exact,
                    )
                )
    return out
