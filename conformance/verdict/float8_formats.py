"""The float8 formats torch knows: their bit layout, special values and precision, and which this torch has.

One table, :data:`FORMATS`, states each 8-bit floating format from its specification; everything the
harness needs about float8 is derived from it (the dtype names ``--conformance-dtypes`` accepts, the
tolerances of float8 results, the cast suite's inputs), and ``tests/conformance/test_float8_formats.py``
checks it against what torch's CPU decodes from all 256 bit patterns.

====================  ===  ===  ====  ========  ======================  ===========  ===================
name                  exp  man  bias  sign      NaN encodings           inf          largest finite
====================  ===  ===  ====  ========  ======================  ===========  ===================
``float8_e4m3fn``      4    3     7   yes       S.1111.111 (2)          none         448
``float8_e5m2``        5    2    15   yes       S.11111.{01,10,11} (6)  S.11111.00   57344
``float8_e4m3fnuz``    4    3     8   yes       1.0000.000 only         none         240
``float8_e5m2fnuz``    5    2    16   yes       1.00000.00 only         none         57344
``float8_e8m0fnu``     8    0   127   none      11111111 only           none         2^127 (no zero)
====================  ===  ===  ====  ========  ======================  ===========  ===================

Sources: OCP "8-bit Floating Point Specification (OFP8)", revision 1.0 (2023-06-20), table 1 (E4M3 and
E5M2: bias, NaN and inf encodings, largest normal 448 and 57344); the ``fnuz`` ("finite, NaN, unsigned
zero") variants of Noune et al., "8-bit Numerical Formats for Deep Neural Networks" (arXiv:2206.02915),
as implemented in torch's ``c10/util/Float8_e4m3fnuz.h`` and ``Float8_e5m2fnuz.h`` (bias one larger than
OCP's, the negative-zero pattern 0x80 is the only NaN, no inf); E8M0 of the OCP "Microscaling Formats (MX)
Specification" v1.0 (2023-09), section 5.4.1 (an unsigned power-of-two scale, 0xFF is NaN, no zero), in
torch as ``c10/util/Float8_e8m0fnu.h``.

Precision: a format with ``m`` mantissa bits has machine epsilon ``2**-m`` (the gap from 1.0 to the next
value). ``torch.finfo`` agrees for four formats but gives 0.125 for ``float8_e5m2fnuz`` in torch 2.13
(its ``epsilon()`` bit pattern 0x34 is E5M2's, decoded with the fnuz bias 16); the next value after 1.0
in that format is 1.25 (pattern 0x41), so this module derives epsilon from the bit layout, never from
``torch.finfo``.

``float4_e2m1fn_x2`` (two 4-bit values packed in a byte) is not a float8 format and is not listed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Float8Format:
    """One 8-bit floating format.

    Attributes:
        name: the torch dtype name (``float8_e4m3fn``).
        exponent_bits, mantissa_bits: field widths in bits (sign bit, when present, is the top bit).
        bias: exponent bias; a normal value is ``2**(E - bias) * (1 + M / 2**mantissa_bits)``.
        signed: False for ``float8_e8m0fnu`` (no sign bit, all 8 bits are the exponent).
        nan_patterns: every bit pattern (0..255) that encodes NaN.
        inf_patterns: the patterns of +inf and -inf (empty when the format has no inf).
        has_zero: False for ``float8_e8m0fnu`` (exponent 0 is ``2**-127``; no subnormals).
        source: the specification the row comes from.
    """

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    signed: bool
    nan_patterns: frozenset
    inf_patterns: frozenset
    has_zero: bool
    source: str

    @property
    def eps(self) -> float:
        """Machine epsilon ``2**-mantissa_bits``: the gap between 1.0 and the next larger value."""
        return 2.0**-self.mantissa_bits

    @property
    def smallest_positive(self) -> float:
        """The smallest positive value: the smallest subnormal ``2**(1 - bias - m)`` for formats with a
        mantissa, ``2**-bias`` for ``float8_e8m0fnu`` (which has no subnormals)."""
        if self.mantissa_bits == 0:
            return 2.0**-self.bias
        return 2.0 ** (1 - self.bias - self.mantissa_bits)

    def decode(self, bits: int) -> float:
        """The value bit pattern ``bits`` (0..255) encodes, from the layout alone (``nan`` for NaN).

        Raises:
            ValueError: ``bits`` is not in 0..255.
        """
        if not (isinstance(bits, int) and 0 <= bits <= 255):
            raise ValueError(f"{self.name}: bit pattern {bits!r} is not an integer in 0..255")
        if bits in self.nan_patterns:
            return math.nan
        sign = -1.0 if self.signed and bits & 0x80 else 1.0
        if bits in self.inf_patterns:
            return sign * math.inf
        man = bits & ((1 << self.mantissa_bits) - 1)
        exp = (bits >> self.mantissa_bits) & ((1 << self.exponent_bits) - 1)
        scale = 1 << self.mantissa_bits
        if exp == 0 and self.has_zero:  # subnormal (or zero): no implicit leading 1
            return sign * 2.0 ** (1 - self.bias) * (man / scale)
        return sign * 2.0 ** (exp - self.bias) * (1 + man / scale)

    @property
    def largest(self) -> float:
        """The largest finite value (448, 57344, 240, 57344, 2**127)."""
        return max(v for v in (self.decode(b) for b in range(256)) if math.isfinite(v))


def _ocp(name, e, m, bias, nan, inf):
    return Float8Format(name, e, m, bias, True, frozenset(nan), frozenset(inf), True, "OCP OFP8 v1.0 (2023), table 1")


def _fnuz(name, e, m, bias, header):
    return Float8Format(
        name,
        e,
        m,
        bias,
        True,
        frozenset({0x80}),
        frozenset(),
        True,
        f"Noune et al., arXiv:2206.02915; torch c10/util/{header}",
    )


FORMATS: dict[str, Float8Format] = {
    f.name: f
    for f in (
        _ocp("float8_e4m3fn", 4, 3, 7, {0x7F, 0xFF}, ()),
        _ocp("float8_e5m2", 5, 2, 15, {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}, (0x7C, 0xFC)),
        _fnuz("float8_e4m3fnuz", 4, 3, 8, "Float8_e4m3fnuz.h"),
        _fnuz("float8_e5m2fnuz", 5, 2, 16, "Float8_e5m2fnuz.h"),
        Float8Format(
            "float8_e8m0fnu",
            8,
            0,
            127,
            False,
            frozenset({0xFF}),
            frozenset(),
            False,
            "OCP Microscaling Formats (MX) v1.0 (2023), section 5.4.1",
        ),
    )
}
"""Every float8 format the harness knows, by torch dtype name (module docstring)."""

FLOAT8_NAMES = tuple(FORMATS)
"""The known float8 dtype names, whether or not this torch has them."""


def available_names() -> tuple[str, ...]:
    """The names of :data:`FLOAT8_NAMES` this torch defines as dtypes (torch 2.13: all five)."""
    return tuple(n for n in FLOAT8_NAMES if isinstance(getattr(torch, n, None), torch.dtype))


def is_float8(dtype) -> bool:
    """True when ``dtype`` (a ``torch.dtype`` or its name) is one of :data:`FORMATS`."""
    return str(dtype).removeprefix("torch.") in FORMATS


def format_of(dtype) -> Float8Format:
    """The :class:`Float8Format` of ``dtype`` (a ``torch.dtype`` or its name).

    Raises:
        KeyError: ``dtype`` is not a float8 dtype; the message lists the known ones.
    """
    name = str(dtype).removeprefix("torch.")
    if name not in FORMATS:
        raise KeyError(f"{name!r} is not a float8 dtype (known: {', '.join(FLOAT8_NAMES)})")
    return FORMATS[name]


def missing_message(name: str) -> str:
    """The one-line error for a known float8 name this torch lacks (``--conformance-dtypes``)."""
    return (
        f"dtype {name!r} is a float8 format this torch {torch.__version__} does not define "
        f"(torch.{name} is missing); it has: {', '.join(available_names()) or 'none'}"
    )


__all__ = ["FLOAT8_NAMES", "FORMATS", "Float8Format", "available_names", "format_of", "is_float8", "missing_message"]
