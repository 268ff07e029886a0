"""Byte sizes as the emulated device reads and prints them (``$CONFORMANCE_EMULATOR_MEMORY``, its
out-of-memory message).

The emulator is a backend like a vendor's and imports nothing of the harness, so it reads sizes itself:
the same spellings the harness accepts for ``--conformance-memory-budget`` (bytes, or a number with a
binary unit ``KiB``/``MiB``/``GiB``/``TiB`` or ``K``/``M``/``G``/``T``, or a decimal unit ``KB``/``MB``/``GB``/``TB``).
"""

from __future__ import annotations

import re

_BINARY = {"k": 10, "m": 20, "g": 30, "t": 40}
_DECIMAL = {"kb": 3, "mb": 6, "gb": 9, "tb": 12}
_FORM = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*")


def _scale(unit: str) -> int | None:
    unit = unit.lower()
    if unit in ("", "b"):
        return 1
    if unit in _DECIMAL:
        return 10 ** _DECIMAL[unit]
    key = unit[:-2] if unit.endswith("ib") else unit
    return 1 << _BINARY[key] if key in _BINARY and len(key) == 1 else None


def parse_size(text: str) -> int:
    """Bytes of ``text`` (``"32GiB"``, ``"512 MiB"``, ``"3000000000"``).

    Raises:
        ValueError: not a number with an accepted unit (the message lists them).
    """
    match = _FORM.fullmatch(str(text))
    scale = _scale(match.group(2)) if match else None
    if scale is None:
        raise ValueError(
            f"{text!r} is not a size; write bytes (3000000000) or a number with a unit: "
            f"KiB, MiB, GiB, TiB (binary; K, M, G, T too) or KB, MB, GB, TB (decimal)"
        )
    return int(float(match.group(1)) * scale)


def format_size(nbytes: int) -> str:
    """``2.0 GiB``, ``512.0 MiB``, ``17 B``: the largest binary unit that fits, one decimal."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes / (1 << shift):.1f} {unit}"
    return f"{nbytes} B"
