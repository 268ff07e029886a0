"""Backend module for ``--conformance-backend-module neuron_conformance.emulator.backend``: importing it installs the emulator.

The mode comes from ``$CONFORMANCE_EMULATOR_MODE`` (``mirror`` by default). The harness reads the
declarations below (see docs/architecture.md, "Device under test"). When ``torch.distributed`` is available,
the ``neuron_gloo`` collective backend (:mod:`neuron_conformance.emulator.distributed`) is registered too, so the
name in :data:`CONFORMANCE_DIST_BACKEND` is usable as soon as this import returns.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import torch

from . import CAPABILITIES, DIST_BACKEND, _state, api_support, get_mode, install, mirrors_cpu, optracking
from .memory import declared_budget

install()  # first: on a torch the device cannot run on, one line naming the torch it needs (ImportError)

from . import custom_ops  # noqa: E402 - after install(): custom_op(device_types="neuron") needs the device type
from .opcount import count_ops  # noqa: E402 - after install(): its kernel modules need the torch install() checks


def _version() -> str:
    try:
        release = importlib.metadata.version("neuron-conformance")
    except importlib.metadata.PackageNotFoundError:
        release = "0+unknown"
    return f"{release} (torch {torch.__version__})"


__version__ = _version()
"""The emulated device's version: the distribution's release and the torch whose CPU kernels it runs."""

CONFORMANCE_EMULATED: bool = True
"""The device is emulated over host memory (reported as such; its ranks are started like the harness's)."""

CONFORMANCE_MIRRORS_CPU = mirrors_cpu
"""True in mirror mode: every op runs its CPU kernel, so results must be bitwise equal to CPU (a callable:
the mode can change after import)."""

CONFORMANCE_NUMERIC_MODE = get_mode
"""The current numeric mode, ``mirror``, ``device`` or ``alternate``."""


def _set_numeric_mode(mode: str) -> None:
    install(mode=mode)  # switches the mode; re-reads the fallback set; refuses a mode autoload contradicts


CONFORMANCE_SET_NUMERIC_MODE = _set_numeric_mode
"""Switch the numeric mode (the harness's ``--conformance-emulator-mode``).

Raises:
    ValueError: an unknown mode, a bad ``$CONFORMANCE_EMULATOR_FALLBACK`` entry, or a mode other than the
        one ``$CONFORMANCE_EMULATOR`` installed at ``import torch``."""

CONFORMANCE_API_SUPPORT = api_support
"""The device API table (``native``/``shim``/``missing``), probed in this process (:mod:`.support`)."""

_MANIFESTS = Path(__file__).parent


_MODE_MANIFESTS = {
    "mirror": ("manifest-mirror.toml",),
    "device": ("manifest-device.toml", "manifest-device-only.toml"),
    "alternate": ("manifest-device.toml", "manifest-alternate.toml"),
}


def _manifests(mode: str | None) -> list[Path]:
    own = _MODE_MANIFESTS.get(mode or "", (f"manifest-{mode}.toml",))
    return [_MANIFESTS / "manifest.toml", *(_MANIFESTS / name for name in own)]


CONFORMANCE_MANIFESTS = _manifests
"""The expected-failure manifests of the emulated device: the common one, then its mode's. The device and
alternate modes share the decomposed composites' entries (``manifest-device.toml``); device mode adds the CPU
kernels it runs where the alternate mode has its own (``manifest-device-only.toml``)."""

CONFORMANCE_DIST_BACKEND: str = DIST_BACKEND
"""Collective backend name for ``torch.distributed`` on the emulated device (neuron_conformance.emulator.distributed)."""


CONFORMANCE_MEMORY_BUDGET: int = declared_budget()
"""Bytes of device memory the stress suite may hold at once (:data:`neuron_conformance.emulator.memory.STRESS_BUDGET`)."""


CONFORMANCE_CAPABILITIES: dict[str, bool] = CAPABILITIES
"""What the emulated device does not claim (:data:`neuron_conformance.emulator.CAPABILITIES`, :mod:`neuron_conformance.conformance.backend.capabilities`)."""

CONFORMANCE_COUNT_OPS = count_ops
"""Counts the aten overloads the device runs, for the harness's aten coverage (:mod:`neuron_conformance.emulator.opcount`)."""

CONFORMANCE_CUSTOM_OPS = custom_ops.CUSTOM_OPS
"""The emulated device's custom ops and their CPU references (:mod:`neuron_conformance.emulator.custom_ops`,
:mod:`neuron_conformance.conformance.backend.custom_ops`; the suite ``custom_ops``)."""

CONFORMANCE_MODES: dict[str, list[str]] = _state.EXECUTION_MODES
"""The emulator's execution modes, environment variable -> values to try (:data:`._state.EXECUTION_MODES`)."""

CONFORMANCE_OP_TRACKING = optracking
"""Native versus CPU-fallback ops (``clear_op_tracking``, ``get_executed_ops``, ``get_fallback_ops``), for
fallback-aware verdicts (:mod:`neuron_conformance.emulator.optracking`, :mod:`neuron_conformance.conformance.backend.fallbacks`)."""


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
