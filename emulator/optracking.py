"""The emulated device's op tracking and its configurable CPU-fallback set.

Out-of-tree backends run an op they have no kernel for on the CPU (PyTorch's boxed CPU fallback,
``at::native::cpu_fallback`` in aten/src/ATen/native/CPUFallback.cpp) and expose which ops did so;
TorchNeuron offers ``clear_op_tracking()``, ``get_executed_ops()`` and ``get_fallback_ops()``. The
harness reads the same three functions from a backend module's ``CONFORMANCE_OP_TRACKING``
(docs/architecture.md, "Device under test"; :mod:`neuron_conformance.conformance.backend.fallbacks`). This module gives the
emulator those functions, so fallback-aware verdicts have a subject without a vendor backend.

The fallback set is the aten ops the emulator treats as having no native kernel:
``$CONFORMANCE_EMULATOR_FALLBACK`` (:data:`ENV_FALLBACK`), comma-separated; empty by default, so a
default run reports every op native. An entry with an overload (``aten::add.Tensor``) names that
overload; one without (``aten::cumsum``) names every overload of the op (``aten::cumsum``,
``aten::cumsum.out``, ...), because which overload reaches the device differs between the emulator's
modes (a structured op runs ``op.out`` in device mode). The emulator's memory is host memory and its
native kernels are CPU kernels, so a fallback op runs the same kernel: what the set changes is which
list the tracking puts the op in, which is what the harness judges.

Every aten overload that enters one of the emulator's PrivateUse1 kernels (:func:`note`, called from
:func:`neuron_conformance.emulator.fallback.run` and from injected faults) is an executed op; one in the set
is also a fallback op. A kernel that gives up natively and runs the CPU kernel instead (a fault test's
hidden fallback) calls :func:`note_fallback` for its op.
"""

from __future__ import annotations

import os

import torch

ENV_FALLBACK = "CONFORMANCE_EMULATOR_FALLBACK"
"""Environment variable naming the fallback set, e.g. ``aten::cumsum,aten::mm`` (empty: no fallback)."""

_fallback_names: frozenset[str] = frozenset()
_fallback_packets: frozenset[str] = frozenset()
_executed: set[str] = set()
_fallback: set[str] = set()


def parse_fallback_set(text: str, where: str = ENV_FALLBACK) -> tuple[frozenset[str], frozenset[str]]:
    """``(overloads, ops)`` named by ``text``, a comma-separated list of aten names.

    ``overloads`` holds the entries with an overload (``aten::add.Tensor``), ``ops`` those without
    (``aten::cumsum``: every overload of the op). The ``aten::`` prefix may be left out.

    Raises:
        ValueError: an entry that names no aten op or overload, naming ``where`` and the entry.
    """
    overloads, ops = set(), set()
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        name = entry[len("aten::") :] if entry.startswith("aten::") else entry
        base, _, overload = name.partition(".")
        packet = getattr(torch.ops.aten, base, None) if base.isidentifier() else None
        if packet is None or (overload and overload not in packet.overloads()):
            raise ValueError(
                f"{where}: {entry!r} is not an aten op or overload (e.g. 'aten::cumsum', 'aten::add.Tensor')"
            )
        (overloads.add(f"aten::{name}") if overload else ops.add(f"aten::{base}"))
    return frozenset(overloads), frozenset(ops)


def set_fallback_ops(text: str | None = None) -> list[str]:
    """Make the fallback set the ops named by ``text`` (None: ``$CONFORMANCE_EMULATOR_FALLBACK``).

    Returns:
        the set's entries, sorted.

    Raises:
        ValueError: an entry that names no aten op (see :func:`parse_fallback_set`).
    """
    global _fallback_names, _fallback_packets
    where = ENV_FALLBACK if text is None else "set_fallback_ops"
    _fallback_names, _fallback_packets = parse_fallback_set(
        os.environ.get(ENV_FALLBACK, "") if text is None else text, where
    )
    return sorted(_fallback_names | _fallback_packets)


def fallback_set() -> list[str]:
    """The fallback set's entries (``aten::cumsum``, ``aten::add.Tensor``), sorted."""
    return sorted(_fallback_names | _fallback_packets)


def is_fallback(schema_name: str, overload: str) -> bool:
    """True when the overload ``overload`` (dispatcher name) of op ``schema_name`` is in the fallback set."""
    return overload in _fallback_names or schema_name in _fallback_packets


def note(schema_name: str, overload: str) -> None:
    """Track one call of ``overload`` (``aten::cumsum.out``) of op ``schema_name`` (``aten::cumsum``)."""
    _executed.add(overload)
    if overload in _fallback_names or schema_name in _fallback_packets:
        _fallback.add(overload)


def note_fallback(overload: str) -> None:
    """Track that ``overload`` ran on the CPU because its device kernel gave up (a hidden fallback)."""
    _executed.add(overload)
    _fallback.add(overload)


def clear_op_tracking() -> None:
    """Forget the ops tracked so far (the harness calls it before each test)."""
    _executed.clear()
    _fallback.clear()


def get_executed_ops() -> list[str]:
    """Dispatcher names of the aten overloads that entered the device since the last clear, sorted
    (native and fallback alike)."""
    return sorted(_executed)


def get_fallback_ops() -> list[str]:
    """Dispatcher names of the executed overloads that ran as a CPU fallback since the last clear, sorted."""
    return sorted(_fallback)


__all__ = [
    "ENV_FALLBACK",
    "clear_op_tracking",
    "fallback_set",
    "get_executed_ops",
    "get_fallback_ops",
    "is_fallback",
    "note",
    "note_fallback",
    "parse_fallback_set",
    "set_fallback_ops",
]
