"""The float8 cast suite's cases and inputs, built from each format's semantics.

A case is one cast ``src -> dst`` (:class:`CastCase`, :func:`cast_cases`): every selected float8 format
to and from float32, bfloat16 and float16, and between every two selected float8 formats (torch 2.13's
CPU casts all of them). Its input (:func:`cast_input`), a 1-D tensor of ``src`` on the CPU:

* from a float8 format: all 256 bit patterns (``torch.arange(256, dtype=uint8).view(src)``): every finite
  value, both zeros, the subnormals, every NaN encoding and the infinities the format has;
* to a float8 format, from a wider one (:func:`boundary_values`), the values that decide a rounding:
  every value of the format and its negation; every midpoint between two neighbours (ties: round to
  nearest, ties to even), and the wider format's neighbours of each midpoint (one unit of the wider format
  below and above: rounded down and up, never a tie); the overflow boundary (the midpoint between the
  largest value and the next one the exponent range would give, and its neighbours), values far beyond it,
  the wider format's largest value, ±inf; the underflow boundary (half the smallest value and its
  neighbours); signed zeros; quiet NaNs of both signs, and NaNs with payloads (a signalling NaN and a
  quiet NaN with low payload bits) in the wider format's own encoding.

Values a wider format cannot hold (e8m0's range in float16) are rounded by the CPU while the input is
built: still a valid input, just not a boundary of the format; duplicates (by bit pattern) are dropped.

Sources: round to nearest, ties to even for conversions, IEEE 754-2019 section 4.3.1 (and OCP OFP8 v1.0
section 4.1, which makes saturation optional: hence comparing with the CPU bit for bit, not with a rule);
NaN encodings, :mod:`neuron_conformance.conformance.verdict.float8_formats`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from neuron_conformance.conformance.verdict.float8_formats import format_of, is_float8

WIDE = ("float32", "bfloat16", "float16")
"""The wider dtypes every float8 format is cast to and from."""

BITS_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32}
"""Element size in bytes -> the integer dtype whose view holds a float's bit pattern."""

_NAN_PAYLOADS = {
    # (quiet NaN with the lowest payload bit set, signalling NaN with payload 1), as raw bit patterns
    "float32": (0x7FC00001, 0x7F800001),
    "bfloat16": (0x7FC1, 0x7F81),
    "float16": (0x7E01, 0x7C01),
}
"""NaNs with payloads in each wider format (IEEE 754-2019 section 6.2.1: the top mantissa bit is the quiet bit)."""


@dataclass(frozen=True)
class CastCase:
    """One cast under test.

    Attributes:
        src, dst: dtype names (``float32 -> float8_e4m3fn``).
        float8: the float8 dtype of the record (``dst`` for casts to float8, else ``src``).
        variant: the record's variant: ``from_<src>`` for casts to float8, ``to_<dst>`` otherwise.
    """

    src: str
    dst: str

    @property
    def float8(self) -> str:
        return self.src if is_float8(self.src) else self.dst

    @property
    def variant(self) -> str:
        return f"to_{self.dst}" if is_float8(self.src) else f"from_{self.src}"

    @property
    def id(self) -> str:
        return f"{self.src}-to-{self.dst}"


def cast_cases(selected) -> list[CastCase]:
    """Every cast of the selected float8 dtypes (names in ``selected``, order kept): to and from each of
    :data:`WIDE`, then to every other selected float8 dtype."""
    f8 = [n for n in selected if is_float8(n)]
    cases = []
    for name in f8:
        cases += [CastCase(w, name) for w in WIDE] + [CastCase(name, w) for w in WIDE]
        cases += [CastCase(name, other) for other in f8 if other != name]
    return cases


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def all_patterns(name: str) -> torch.Tensor:
    """The 256 bit patterns of float8 dtype ``name`` in order, as a tensor of that dtype, shape ``(256,)``."""
    return torch.arange(256, dtype=torch.int32).to(torch.uint8).view(_dtype(name))


def _neighbours(x: torch.Tensor) -> torch.Tensor:
    """For positive finite values ``x`` of a wider float dtype: the next value below and above each
    (one unit of that dtype), from the bit patterns."""
    view = BITS_VIEW[x.element_size()]
    bits = x.view(view).to(torch.int64)
    return torch.cat([bits - 1, bits + 1]).to(view).view(x.dtype)


def boundary_values(float8: str, wide: str) -> torch.Tensor:
    """The inputs of the cast ``wide -> float8`` (module docstring), a 1-D tensor of dtype ``wide`` with
    unique bit patterns, positive and negative.

    Raises:
        KeyError: ``float8`` is not a float8 dtype name; AttributeError: ``wide`` names no torch dtype.
    """
    fmt, wdt = format_of(float8), _dtype(wide)
    finite = sorted({v for v in (fmt.decode(b) for b in range(256)) if v == v and abs(v) != float("inf") and v >= 0})
    values = torch.tensor(finite, dtype=torch.float64)
    step = values[-1] - values[-2]  # the ULP at the top of the range (the next binade's would be 2x)
    beyond = values[-1] + step if fmt.mantissa_bits else values[-1] * 2
    lower = torch.cat([torch.zeros(1, dtype=torch.float64), values]) if values[0] > 0 else values
    mids = (lower[:-1] + lower[1:]) / 2
    smallest = fmt.smallest_positive
    edges = torch.tensor([smallest / 2, float(values[-1] + beyond) / 2], dtype=torch.float64)
    far = torch.tensor([float(beyond), 2 * float(beyond), 1e30, float(torch.finfo(wdt).max)], dtype=torch.float64)
    positive = torch.cat([values, mids, edges, far]).to(wdt)
    positive = positive[torch.isfinite(positive) & (positive > 0)]
    ties = torch.cat([mids, edges]).to(wdt)
    ties = ties[torch.isfinite(ties) & (ties > 0)]
    positive = torch.cat([positive, _neighbours(ties), torch.tensor([smallest / 4], dtype=wdt)])
    view = BITS_VIEW[positive.element_size()]
    specials = torch.tensor([0.0, float("inf"), float("nan")], dtype=wdt)
    payloads = torch.tensor(_NAN_PAYLOADS[wide], dtype=torch.int64).to(view).view(wdt)
    signed = torch.cat([positive, specials, payloads])
    return _unique_bits(torch.cat([signed, _negated(signed)]))


def _negated(x: torch.Tensor) -> torch.Tensor:
    """``x`` with its sign bit flipped in the bit pattern (arithmetic negation of a bfloat16 or float16 NaN
    on the CPU goes through float32 and drops the payload)."""
    view = BITS_VIEW[x.element_size()]
    return (x.view(view) ^ torch.iinfo(view).min).view(x.dtype)


def _unique_bits(x: torch.Tensor) -> torch.Tensor:
    """``x`` without repeated bit patterns, in first-seen order."""
    view = BITS_VIEW[x.element_size()]
    seen, keep = set(), []
    for i, b in enumerate(x.view(view).tolist()):
        if b not in seen:
            seen.add(b)
            keep.append(i)
    return x[torch.tensor(keep, dtype=torch.int64)]


def cast_input(case: CastCase) -> torch.Tensor:
    """The CPU input of ``case``: :func:`all_patterns` of a float8 source, else :func:`boundary_values`."""
    if is_float8(case.src):
        return all_patterns(case.src)
    return boundary_values(case.dst, case.src)


def deselect_unselected(config, items: list) -> None:
    """Deselect the cast suite's placeholder item of a run that selects no float8 dtype (pytest's
    "got empty parameter set" skip), so the default run records nothing for the suite rather than a skip.
    Called from the op suites' ``pytest_collection_modifyitems``."""
    drop = [
        i
        for i in items
        if getattr(i, "originalname", None) == "test_float8_casts"
        and not isinstance(getattr(getattr(i, "callspec", None), "params", {}).get("cast_case"), CastCase)
    ]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [i for i in items if i not in drop]


def bits(t: torch.Tensor) -> torch.Tensor:
    """The bit patterns of CPU tensor ``t`` as an integer tensor of the same element size (unsigned for
    one byte), for a bit-for-bit comparison in which NaN payloads and the sign of zero count."""
    return t.contiguous().view(BITS_VIEW[t.element_size()])


__all__ = [
    "BITS_VIEW",
    "CastCase",
    "WIDE",
    "all_patterns",
    "bits",
    "boundary_values",
    "cast_cases",
    "cast_input",
    "deselect_unselected",
]
