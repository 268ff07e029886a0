"""Wrong float8 cast kernels for the float8 cast suite's fault tests (``aten::_to_copy`` on PrivateUse1).

Each kernel computes the correct result of a cast on the device (the emulator's own ``_to_copy``; the
faults module's ``correct`` would put a device-to-host copy's result on the device) and rewrites its bytes
through a zero-copy CPU alias (:func:`neuron_conformance.emulator.storage.cpu_alias`) the way a
wrong conversion unit would, only for casts *to* a float8 dtype from another dtype on the device (the
transfers to and from the host, same dtype, stay right):

* ``float8-ties-away``: round to nearest, ties **away from zero** (the C ``round()`` rule) instead of
  ties to even: differs from the CPU only on exact midpoints between two neighbouring float8 values.
* ``float8-truncates``: round toward zero (drops the bits below the last kept one); catches the
  ``float8_e8m0fnu`` casts too, which the CPU rounds half up (1.5 -> 2, 3 -> 4), so ties-away is right there.
* ``float8-saturates``: every value beyond the largest finite one (and ±inf) becomes ±largest, where the
  CPU gives inf (``float8_e5m2``) or NaN (the fnuz formats, ``float8_e8m0fnu``); right for
  ``float8_e4m3fn``, which the CPU saturates too.

And two wrong ``_scaled_mm`` kernels (float8 results, compare_cpu's OpInfo): ``float8-mm-one-ulp`` and
``float8-mm-two-ulps``, every nonzero element one or two units in the last place too large: the float8
tolerance (:func:`neuron_conformance.conformance.verdict.tolerances.float8_tolerance`) admits one and not two.
"""

from __future__ import annotations

import torch

from neuron_conformance.conformance.verdict.float8_formats import format_of, is_float8
from neuron_conformance.emulator import faults, registrations, storage


def _applies(result, self) -> bool:
    """True for a cast on the device to a float8 dtype from another dtype."""
    return (
        isinstance(self, torch.Tensor)
        and self.device.type != "cpu"
        and result.device.type != "cpu"
        and is_float8(result.dtype)
        and self.dtype != result.dtype
    )


def _operands(result, self):
    """``(x, r)``: the cast's input as float64 and the result's bytes as int64, flat CPU copies."""
    x = storage.cpu_alias(self).contiguous().reshape(-1).double()
    r = storage.cpu_alias(result).contiguous().reshape(-1).view(torch.uint8).to(torch.int64)
    return x, r


def _write(result, new_bits: torch.Tensor) -> None:
    alias = storage.cpu_alias(result)
    alias.view(torch.uint8).copy_(new_bits.to(torch.uint8).reshape(alias.shape))


def _decode(bits: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return bits.clamp(0, 255).to(torch.uint8).view(dtype).double()


def _cast_kernel(rewrite):
    """A ``_to_copy`` kernel: the emulator's correct cast, then, for a cast to float8 on the device, the
    result's bytes replaced by ``rewrite(x, r, dtype)`` (``x`` the input as float64, ``r`` the result's bit
    patterns as int64, both flat) to write."""

    def kernel(self, *args, **kwargs):
        result = registrations._to_copy(self, *args, **kwargs)
        if _applies(result, self):
            x, r = _operands(result, self)
            _write(result, rewrite(x, r, result.dtype))
        return result

    kernel.__name__ = rewrite.__name__
    kernel.__doc__ = rewrite.__doc__
    return kernel


@_cast_kernel
def _ties_away(x, r, dtype):
    """``_to_copy`` whose float8 rounding breaks ties away from zero."""
    got = _decode(r, dtype)
    up = _decode(r + 1, dtype)  # one step up in magnitude (sign-magnitude and unsigned formats)
    tie = (x.abs() > got.abs()) & ((x.abs() - got.abs()) == (up.abs() - x.abs())) & (r < 255)
    return torch.where(tie, r + 1, r)


@_cast_kernel
def _truncates(x, r, dtype):
    """``_to_copy`` whose float8 rounding is toward zero: a result rounded up in magnitude is stepped back."""
    got = _decode(r, dtype)
    magnitude = r & 0x7F if format_of(dtype).signed else r
    down = (got.abs() > x.abs()) & torch.isfinite(got) & torch.isfinite(x) & (magnitude > 0)
    return torch.where(down, r - 1, r)


@_cast_kernel
def _saturates(x, r, dtype):
    """``_to_copy`` that clamps every float8 overflow to the largest finite value, keeping the sign."""
    fmt = format_of(dtype)
    top = next(b for b in range(256) if fmt.decode(b) == fmt.largest)
    over = (x.abs() > fmt.largest) & ~x.isnan()
    sat = torch.full_like(r, top)
    if fmt.signed:
        sat = torch.where(x < 0, sat | 0x80, sat)
    return torch.where(over, sat, r)


def _ulps_off(n: int):
    """A ``_scaled_mm`` kernel whose float8 result is ``n`` units in the last place too large in magnitude
    (every nonzero finite element whose pattern ``n`` steps up is still finite)."""

    def kernel(result, *args, **kwargs):
        if not is_float8(result.dtype):
            return result
        fmt = format_of(result.dtype)
        alias = storage.cpu_alias(result)
        r = alias.contiguous().reshape(-1).view(torch.uint8).to(torch.int64)
        value, moved = _decode(r, result.dtype), _decode(r + n, result.dtype)
        ok = (
            (value != 0)
            & torch.isfinite(value)
            & torch.isfinite(moved)
            & (r + n <= (255 if not fmt.signed else (r | 0x7F)))
        )
        _write(result, torch.where(ok, r + n, r))
        return result

    kernel.__name__ = f"scaled_mm_{n}_ulp"
    return kernel


FLOAT8_FAULTS = {
    # a float8 matmul output one / two ULPs off: within / beyond the float8 tolerance (device mode)
    "float8-mm-one-ulp": lambda: tuple(
        faults.override(o, _ulps_off(1)) for o in ("aten::_scaled_mm", "aten::_scaled_mm.out")
    ),
    "float8-mm-two-ulps": lambda: tuple(
        faults.override(o, _ulps_off(2)) for o in ("aten::_scaled_mm", "aten::_scaled_mm.out")
    ),
    "float8-ties-away": lambda: faults.override("aten::_to_copy", _ties_away, receives="args"),
    "float8-truncates": lambda: faults.override("aten::_to_copy", _truncates, receives="args"),
    "float8-saturates": lambda: faults.override("aten::_to_copy", _saturates, receives="args"),
}
"""Fault name -> factory of its :class:`neuron_conformance.emulator.faults.Fault`."""
