"""``aten::histc`` for integer tensors, with CUDA's semantics (the CPU kernel has floating types only).

Library code branches on the device: transformers' MoE routing counts experts with ``torch.histc`` on an
``int32`` tensor whenever the device is neither CPU nor MPS (``load_balancing_loss_func`` in
``transformers/models/mixtral/modeling_mixtral.py``; ``transformers/integrations/moe.py``), because CUDA
accepts integer input and the CPU kernel (``histogram_histc_cpu``) raises ``"histogram_cpu" not
implemented for 'Int'``. A device has to accept it, so the emulator registers these kernels on
PrivateUse1 for ``aten::histc`` and ``aten::histc.out``: floating and other inputs go to the CPU kernel
through the fallback (unchanged, bitwise equal to CPU), integer inputs are computed here.

CUDA's integer path (``_histc_cuda_template`` and ``getBin`` in aten/src/ATen/native/cuda/SummaryOps.cu):

* dtypes: ``AT_DISPATCH_ALL_TYPES``, i.e. ``uint8``, ``int8``, ``int16``, ``int32``, ``int64`` among the
  integers (``bool`` and the other unsigned types are not dispatched);
* ``bins <= 0`` raises ``bins must be > 0``; the result has ``bins`` elements of the input's dtype;
* ``min`` and ``max`` are converted to the accumulate type ``int64`` (``Scalar::to<int64_t>``: truncation
  toward zero, overflow raises); when ``min == max`` and the input is not empty they become the input's
  minimum and maximum; when they are still equal they widen to ``min - 1`` and ``max + 1``; ``min < max``
  is required (``max must be larger than min``);
* an element ``v`` with ``min <= v <= max`` falls in bin ``(v - min) * bins / (max - min)`` computed in
  ``int64`` (integer division), and the value ``bins`` (``v == max``) goes to the last bin; elements
  outside ``[min, max]`` are not counted; counts are stored in the input dtype (they wrap like CUDA's
  integer atomics when a bin holds more than the dtype can count).

The bins are computed exactly with ``int64`` tensor arithmetic rather than by calling the CPU kernel on a
float copy: a float path is exact only while ``|v - min| * bins`` fits the float's significand (2**24 for
float32, 2**53 for float64) and the CPU kernel's edge rounding (``linspace`` edges) differs from CUDA's
integer division near bin edges for large ranges.
"""

from __future__ import annotations

import math

import torch

from . import fallback, storage

aten = torch.ops.aten

INTEGER_DTYPES = frozenset({torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64})
"""Integer dtypes CUDA's ``histc`` dispatches (``AT_DISPATCH_ALL_TYPES``), computed by :func:`histc_integer`."""


def _bound(value, name: str) -> int:
    """``Scalar::to<int64_t>`` of a histc bound: truncation toward zero, overflow raises."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        result = value
    else:
        v = float(value)
        if not math.isfinite(v):
            raise RuntimeError(f"histc: value cannot be converted to type int64_t without overflow ({name}={value})")
        result = int(v)
    if not -(2**63) <= result < 2**63:
        raise RuntimeError(f"histc: value cannot be converted to type int64_t without overflow ({name}={value})")
    return result


def histc_integer(values: torch.Tensor, bins: int, min, max) -> torch.Tensor:
    """The CUDA ``histc`` of an integer CPU tensor (see the module docstring for the rules and source).

    Args:
        values: CPU tensor of one of :data:`INTEGER_DTYPES`, any shape (flattened).
        bins: number of bins, > 0.
        min, max: lower and upper bound (Python numbers; converted like ``Scalar::to<int64_t>``).

    Returns:
        A CPU tensor of shape ``(bins,)`` and ``values.dtype`` holding the counts.

    Raises:
        RuntimeError: ``bins <= 0``, a bound that does not fit ``int64``, or ``min > max``.
    """
    if bins <= 0:
        raise RuntimeError("bins must be > 0")
    lo, hi = _bound(min, "min"), _bound(max, "max")
    flat = values.reshape(-1).to(torch.int64)
    if lo == hi and flat.numel() > 0:
        lo, hi = int(flat.min()), int(flat.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not lo < hi:
        raise RuntimeError("max must be larger than min")
    kept = flat[(flat >= lo) & (flat <= hi)]
    index = torch.div((kept - lo) * bins, hi - lo, rounding_mode="floor")  # both >= 0: floor == truncation
    index = index.clamp_(max=bins - 1)  # v == max gives bins: the last bin is closed
    counts = torch.bincount(index, minlength=bins)
    return counts.to(values.dtype)


def _histc(self: torch.Tensor, bins: int = 100, min=0, max=0) -> torch.Tensor:
    if self.dtype not in INTEGER_DTYPES:
        return fallback.run(aten.histc.default, (self, bins, min, max), {})
    return storage.adopt_tensor(histc_integer(storage.cpu_alias(self), bins, min, max))


def _histc_out(self: torch.Tensor, bins: int = 100, min=0, max=0, *, out: torch.Tensor) -> torch.Tensor:
    if self.dtype not in INTEGER_DTYPES:
        return fallback.run(aten.histc.out, (self, bins, min, max), {"out": out})
    result = histc_integer(storage.cpu_alias(self), bins, min, max)
    # as _histc_out_cuda: resize_output(result, ret.sizes()); result.copy_(ret)
    aten._resize_output_.default(out, result.shape, out.device)
    out.copy_(result)
    return out


KERNELS = {"histc": _histc, "histc.out": _histc_out}
"""PrivateUse1 kernels registered by :func:`neuron_conformance.emulator.registrations.install_fallback`."""
