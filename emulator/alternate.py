"""The ``alternate`` numeric mode: a correct device that does not compute like the CPU.

Composite ops decompose as in ``device`` mode; on top of that, the kernels below give results that PyTorch
documents as the device's choice, and that a real accelerator gives:

* **transcendental functions a few ULP apart** ("Numerical accuracy" in PyTorch's notes: results may differ
  between backends): the CPU's result moved 1 ULP, up at even and down at odd positions, wherever it is
  finite and not a whole number (exact points such as ``exp(0) = 1`` stay exact, as on every libm); a
  float16/bfloat16 result is the float32 one moved, then rounded;
* **reductions, scans and matrix products in another association order**: accumulated in float64 and
  rounded once to the output dtype (a tree or blocked summation differs from the CPU's in the last bits in
  the same way);
* **accumulation into duplicate indices in another order** (``index_add``, ``scatter_add``, ``index_put``
  with ``accumulate=True``: atomics on a GPU), accumulated in float64 as above;
* **the other valid index among ties** (``sort`` and ``argsort`` unless ``stable=True``, ``topk``,
  ``kthvalue``, ``median``/``nanmedian`` along a dim, ``mode``): the last of the tied elements instead of
  the first; ``max``/``min`` along a dim and ``argmax``/``argmin`` keep the documented first index;
* **TF32-like float32 matrix products** while ``torch.get_float32_matmul_precision()`` is not ``"highest"``:
  the inputs rounded to a 10-bit mantissa before the product.

Each kernel runs the op's CPU kernel through :func:`neuron_conformance.emulator.fallback.run` (so shapes,
dtypes, strides, aliasing and errors are the CPU's) and then rewrites the values in place through the
result's CPU alias; inputs are never changed.
"""

from __future__ import annotations

import torch

from . import fallback, storage

TRANSCENDENTAL = (
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin", "acos", "atan",
    "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv", "sigmoid", "atan2", "lgamma",
    "digamma", "special_i0e", "special_i1", "special_i1e", "special_ndtri", "special_erfcx", "logit",
)  # fmt: skip
"""aten ops (``.default`` overloads) whose float results are moved 1 ULP."""

REASSOCIATED = (
    "sum.default", "sum.dim_IntList", "mean.default", "mean.dim", "nansum.default", "cumsum.default",
    "mm.default", "bmm.default", "addmm.default", "baddbmm.default", "addbmm.default", "dot.default",
    "mv.default", "addmv.default", "index_add.default", "scatter_add.default", "index_put.default",
)  # fmt: skip
"""aten overloads accumulated in float64 and rounded once (functional overloads: inputs are unchanged)."""

MATMULS = frozenset({"mm", "bmm", "addmm", "baddbmm", "addbmm", "mv", "addmv", "dot"})
"""Of :data:`REASSOCIATED`, the matrix products (TF32-like while the float32 matmul precision is reduced)."""

TIES = (
    "sort.default", "sort.stable", "argsort.default", "argsort.stable", "topk.default", "kthvalue.default",
    "median.dim", "nanmedian.dim", "mode.default",
)  # fmt: skip
"""aten overloads whose index among ties is the device's choice; answered with the last tied element."""

_HALF = (torch.float16, torch.bfloat16)


def _overload(name: str) -> torch._ops.OpOverload:
    base, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def _host(t: torch.Tensor) -> torch.Tensor:
    return storage.cpu_alias(t) if t.device.type != "cpu" else t


def _cpu_args(values):
    """``values`` with every neuron tensor replaced by its CPU alias (lists and tuples walked)."""
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(_host(v))
        elif isinstance(v, (list, tuple)):
            out.append(type(v)(_cpu_args(v)))
        else:
            out.append(v)
    return out


def _move_one_ulp(t: torch.Tensor) -> None:
    """Move every finite, non-whole element of floating ``t`` 1 ULP: up at even, down at odd positions."""
    if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.numel() == 0:
        return
    host = _host(t)
    flat = host.reshape(-1).clone()
    movable = torch.isfinite(flat) & (flat != torch.round(flat))
    up = torch.arange(flat.numel()) % 2 == 0
    target = torch.where(up, torch.full_like(flat, float("inf")), torch.full_like(flat, float("-inf")))
    moved = torch.where(movable, torch.nextafter(flat, target), flat)
    host.copy_(moved.reshape(host.shape))


def _upcast(values):
    return [v.to(torch.float32) if isinstance(v, torch.Tensor) and v.dtype in _HALF else v for v in values]


def _transcendental(op):
    def kernel(*args, **kwargs):
        result = fallback.run(op, args, kwargs)
        if not isinstance(result, torch.Tensor) or result.dtype not in _HALF:
            _move_one_ulp(result)
            return result
        # a half-precision result is the float32 one rounded (as on the CPU and on GPUs): move the float32
        # result, then round; it differs from the CPU's only where the move crosses a rounding boundary
        wide = op(*_upcast(_cpu_args(args)), **dict(zip(kwargs, _upcast(_cpu_args(kwargs.values())))))
        if isinstance(wide, torch.Tensor) and wide.shape == result.shape and wide.is_floating_point():
            _move_one_ulp(wide)
            _host(result).copy_(wide.to(result.dtype))
        return result

    return kernel


def _widened(values, tf32: bool):
    out = []
    for v in values:
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            wide = v.to(torch.float64)
            if tf32 and v.dtype == torch.float32:
                wide = _round_mantissa(wide, 10)
            out.append(wide)
        elif isinstance(v, (list, tuple)):
            out.append(type(v)(_widened(v, tf32)))
        else:
            out.append(v)
    return out


def _round_mantissa(t: torch.Tensor, bits: int) -> torch.Tensor:
    """``t`` rounded to ``bits`` explicit mantissa bits (round half to even on the scaled value)."""
    mantissa, exponent = torch.frexp(t)
    scale = float(2 ** (bits + 1))
    return torch.ldexp(torch.round(mantissa * scale) / scale, exponent)


def _reduced_matmul_precision() -> bool:
    return torch.get_float32_matmul_precision() != "highest"


def _reassociated(op, name: str):
    tf32_family = name.split(".")[0] in MATMULS

    def kernel(*args, **kwargs):
        result = fallback.run(op, args, kwargs)
        if not isinstance(result, torch.Tensor) or not result.is_floating_point() or result.numel() == 0:
            return result
        wide_kwargs = dict(kwargs)
        if isinstance(wide_kwargs.get("dtype"), torch.dtype) and wide_kwargs["dtype"].is_floating_point:
            wide_kwargs["dtype"] = torch.float64
        tf32 = tf32_family and result.dtype == torch.float32 and _reduced_matmul_precision()
        cpu = _widened(_cpu_args(args), tf32)
        cpu_kwargs = dict(zip(wide_kwargs, _widened(_cpu_args(wide_kwargs.values()), tf32)))
        try:
            wide = op(*cpu, **cpu_kwargs)
        except RuntimeError:  # an argument combination float64 does not take: keep the CPU's order
            return result
        if isinstance(wide, torch.Tensor) and wide.shape == result.shape:
            _host(result).copy_(wide.to(result.dtype))
        return result

    return kernel


def _tie_dim(name: str, args, kwargs) -> int:
    if name.startswith(("sort.stable", "argsort.stable")):
        return kwargs.get("dim", -1)
    position = {"topk": 2, "kthvalue": 2}.get(name.split(".")[0], 1)
    if len(args) > position:
        return args[position]
    return kwargs.get("dim", -1)


def _stable_requested(name: str, args, kwargs) -> bool:
    if name in ("sort.stable", "argsort.stable"):
        return bool(kwargs.get("stable", False))
    return False


def _ties(op, name: str):
    returns_indices_only = name.startswith("argsort")

    def kernel(*args, **kwargs):
        self = args[0]
        if _stable_requested(name, args, kwargs) or self.dim() == 0 or self.numel() == 0:
            return fallback.run(op, args, kwargs)
        dim = _tie_dim(name, args, kwargs) % self.dim()
        flipped = torch.flip(self, (dim,))
        result = fallback.run(op, (flipped, *args[1:]), kwargs)
        indices = result if returns_indices_only else result[1]
        host = _host(indices)
        host.copy_(self.shape[dim] - 1 - host)
        return result

    return kernel


def kernels() -> dict[str, object]:
    """aten overload name (``"sum.dim_IntList"``) -> the alternate-mode PrivateUse1 kernel."""
    table: dict[str, object] = {}
    for base in TRANSCENDENTAL:
        name = f"{base}.default" if base != "atan2" else "atan2.default"
        if hasattr(torch.ops.aten, base):
            table[name] = _transcendental(_overload(name))
    for name in REASSOCIATED:
        table[name] = _reassociated(_overload(name), name)
    for name in TIES:
        table[name] = _ties(_overload(name), name)
    return table


_lib: torch.library.Library | None = None


def install() -> int:
    """Register the alternate-mode kernels on PrivateUse1; returns how many (idempotent)."""
    global _lib
    if _lib is None:
        lib = torch.library.Library("aten", "IMPL")
        for name, kernel in kernels().items():
            lib.impl(name.removesuffix(".default"), kernel, "PrivateUse1")
        _lib = lib
    return len(kernels())


def uninstall() -> None:
    """Remove the alternate-mode kernels."""
    global _lib
    if _lib is not None:
        _lib._destroy()
        _lib = None


def installed() -> bool:
    """True while the alternate-mode kernels are registered."""
    return _lib is not None


__all__ = ["MATMULS", "REASSOCIATED", "TIES", "TRANSCENDENTAL", "install", "installed", "kernels", "uninstall"]
