"""Backend module for ``--conformance-backend-module neuron_conformance.conformance.emulator.backend``: importing it installs the emulator.

The mode comes from ``$CONFORMANCE_EMULATOR_MODE`` (``mirror`` by default). The harness reads the two
constants below (see docs/architecture.md, "Device under test"). When ``torch.distributed`` is available,
the ``neuron_gloo`` collective backend (:mod:`neuron_conformance.conformance.emulator.distributed`) is registered too, so the
name in :data:`CONFORMANCE_DIST_BACKEND` is usable as soon as this import returns.
"""

from __future__ import annotations

import torch

from . import CAPABILITIES, DIST_BACKEND, _state, get_mode, install, optracking
from .memory import declared_budget
from .opcount import count_ops

install()

from . import custom_ops  # noqa: E402 - after install(): custom_op(device_types="neuron") needs the device type

CONFORMANCE_MIRRORS_CPU: bool = get_mode() == "mirror"
"""True in mirror mode: every op runs its CPU kernel, so results must be bitwise equal to CPU."""

CONFORMANCE_DIST_BACKEND: str = DIST_BACKEND
"""Collective backend name for ``torch.distributed`` on the emulated device (neuron_conformance.conformance.emulator.distributed)."""


CONFORMANCE_MEMORY_BUDGET: int = declared_budget()
"""Bytes of device memory the stress suite may hold at once (:data:`neuron_conformance.conformance.emulator.memory.STRESS_BUDGET`)."""


CONFORMANCE_CAPABILITIES: dict[str, bool] = CAPABILITIES
"""What the emulated device does not claim (:data:`neuron_conformance.conformance.emulator.CAPABILITIES`, :mod:`neuron_conformance.conformance.capabilities`)."""

CONFORMANCE_COUNT_OPS = count_ops
"""Counts the aten overloads the device runs, for the harness's aten coverage (:mod:`neuron_conformance.conformance.emulator.opcount`)."""

CONFORMANCE_CUSTOM_OPS = custom_ops.CUSTOM_OPS
"""The emulated device's custom ops and their CPU references (:mod:`neuron_conformance.conformance.emulator.custom_ops`,
:mod:`neuron_conformance.conformance.custom_ops`; the suite ``custom_ops``)."""

CONFORMANCE_MODES: dict[str, list[str]] = _state.EXECUTION_MODES
"""The emulator's execution modes, environment variable -> values to try (:data:`._state.EXECUTION_MODES`)."""

CONFORMANCE_OP_TRACKING = optracking
"""Native versus CPU-fallback ops (``clear_op_tracking``, ``get_executed_ops``, ``get_fallback_ops``), for
fallback-aware verdicts (:mod:`neuron_conformance.conformance.emulator.optracking`, :mod:`neuron_conformance.conformance.fallbacks`)."""


def _register_collectives() -> None:
    if not torch.distributed.is_available():
        return
    try:
        from . import distributed  # deferred: the collective backend is optional (ImportError below)
    except ImportError:  # the collective backend module is optional
        return
    register = getattr(distributed, "register", None)
    if register is not None:
        register()


_register_collectives()
