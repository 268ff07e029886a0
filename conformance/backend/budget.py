"""The memory budget of the stress suite: how many bytes of device memory its tests may hold at once.

A backend declares it as ``CONFORMANCE_MEMORY_BUDGET`` (an int, bytes) in its backend module; the emulated
device declares its own (:data:`neuron_conformance.emulator.backend.CONFORMANCE_MEMORY_BUDGET`). ``--conformance-memory-budget``
(:mod:`neuron_conformance.conformance.pytest_plugin.options`) overrides it: a size (``6GiB``, ``512MiB``, ``3000000000``), ``0`` (no large
tests) or ``auto`` (the default: the declared budget, else the free memory ``torch.accelerator.get_memory_info``
reports, else none). A test that needs more than the budget is skipped with a reason that names both sizes
(``needs 4.3 GiB of device memory, budget 2.0 GiB (--conformance-memory-budget)``).

This module is torch-free at import; :func:`resolve_budget` imports torch only to ask for free memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tib": 1 << 40,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}
"""Size suffixes: binary (``KiB``, ``MiB``, ``GiB``, ``TiB``, and bare ``K``/``M``/``G``/``T``, as
``torch.cuda.memory_summary`` prints sizes) and decimal (``KB``, ``MB``, ``GB``, ``TB``, as SI)."""

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


class BudgetError(ValueError):
    """A size that does not parse (the message names the value and the accepted forms)."""


def parse_size(value) -> int:
    """Bytes of a size written ``3000000000``, ``2.5GiB``, ``512 MiB``, ``4G`` or ``8GB`` (int >= 0).

    Raises:
        BudgetError: not a number with an optional unit of :data:`_UNITS`, or negative.
    """
    if isinstance(value, bool):
        raise BudgetError(f"{value!r} is not a size")
    if isinstance(value, int):
        if value < 0:
            raise BudgetError(f"{value} is negative")
        return value
    m = _SIZE.match(str(value))
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _UNITS:
        raise BudgetError(
            f"{value!r} is not a size; write bytes (3000000000) or a number with a unit: "
            f"KiB, MiB, GiB, TiB (binary; K, M, G, T too) or KB, MB, GB, TB (decimal)"
        )
    return int(float(m.group(1)) * _UNITS[unit])


def format_size(nbytes: int) -> str:
    """``2.0 GiB``, ``512.0 MiB``, ``17 B``: binary units with one decimal."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"


def parse_budget_option(value) -> int | str:
    """``--conformance-memory-budget``: ``"auto"`` or a size in bytes (:func:`parse_size`)."""
    if str(value).strip().lower() == "auto":
        return "auto"
    return parse_size(value)


@dataclass(frozen=True)
class MemoryBudget:
    """Bytes of device memory the stress suite may hold at once, and where that number came from.

    Attributes:
        nbytes: the budget in bytes, or None when nothing declares one.
        source: ``--conformance-memory-budget``, ``CONFORMANCE_MEMORY_BUDGET of <module>``, ``free memory
            (torch.accelerator.get_memory_info)``, or why there is none.
    """

    nbytes: int | None
    source: str

    def shortfall(self, needed: int) -> str | None:
        """None when ``needed`` bytes fit the budget, else the skip reason naming both sizes."""
        if self.nbytes is None:
            return (
                f"needs {format_size(needed)} of device memory, no budget: {self.source}; pass "
                f"--conformance-memory-budget SIZE or declare CONFORMANCE_MEMORY_BUDGET in the backend module"
            )
        if needed > self.nbytes:
            return f"needs {format_size(needed)} of device memory, budget {format_size(self.nbytes)} ({self.source})"
        return None


def declared_budget(backend_module) -> int | None:
    """The backend module's ``CONFORMANCE_MEMORY_BUDGET`` in bytes (an int or a size string), or None.

    Raises:
        BudgetError: the attribute is not a size (the message names the module).
    """
    declared = getattr(backend_module, "CONFORMANCE_MEMORY_BUDGET", None)
    if declared is None:
        return None
    try:
        return parse_size(declared)
    except BudgetError as exc:
        name = getattr(backend_module, "__name__", "the backend module")
        raise BudgetError(f"CONFORMANCE_MEMORY_BUDGET of {name}: {exc}") from None


def resolve_budget(option, profile) -> MemoryBudget:
    """The stress suite's budget: ``--conformance-memory-budget`` when it gives a size, else the budget the backend
    declares (``profile.memory_budget``), else an accelerator's free memory
    (``torch.accelerator.get_memory_info``), else none (the CPU, or a backend without that API).

    Args:
        option: the parsed ``--conformance-memory-budget`` (``"auto"``, bytes, or None for ``auto``).
        profile: the :class:`neuron_conformance.conformance.backend.device.DeviceProfile` under test (``type``, ``backend``,
            ``memory_budget``).
    """
    if option not in (None, "auto"):
        return MemoryBudget(int(option), "--conformance-memory-budget")
    if profile.memory_budget is not None:
        return MemoryBudget(int(profile.memory_budget), f"CONFORMANCE_MEMORY_BUDGET of {profile.backend}")
    if profile.type == "cpu":
        return MemoryBudget(None, "the CPU declares no device memory")
    import torch  # deferred: the module is torch-free at import (options and reports use it)

    try:
        free, _total = torch.accelerator.get_memory_info()
    except Exception as exc:  # noqa: BLE001 - a backend without the API: no budget, said so
        return MemoryBudget(None, f"torch.accelerator.get_memory_info() failed ({type(exc).__name__})")
    return MemoryBudget(int(free), "free memory (torch.accelerator.get_memory_info)")
