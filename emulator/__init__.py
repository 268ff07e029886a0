"""The emulated ``neuron`` device: PyTorch's PrivateUse1 key implemented in pure Python over CPU memory.

Usage::

    import neuron_conformance.emulator as emu
    emu.install()                  # or install(mode="device"); idempotent
    x = torch.randn(3, device="neuron")

Importing this package installs nothing; :func:`install` does (importing
``neuron_conformance.emulator.backend`` also does, for ``--conformance-backend-module``). Modes:

* ``mirror`` (default): every op runs its CPU kernel; results are bitwise equal to CPU.
* ``device``: composite ops decompose as on a non-CPU device (e.g. SDPA takes the math path), so results
  differ from CPU the way a real backend's do.

The mode comes from ``install(mode=...)``, else ``$CONFORMANCE_EMULATOR_MODE``, else ``mirror``, and can be
switched at run time with :func:`set_mode`. See ``docs`` in each submodule: :mod:`.device` (registration,
``torch.neuron``), :mod:`.storage`, :mod:`.fallback`, :mod:`.registrations`, :mod:`.autocast`,
:mod:`.compile`, :mod:`.flex` (FlexAttention under compile), :mod:`.rng`, :mod:`.memory`, :mod:`.shim`, :mod:`.faults`,
:mod:`.support`.
"""

from __future__ import annotations

import threading

from . import _state, requirements
from ._state import BACKEND_NAME, DIST_BACKEND, ENV_ASYNC, ENV_MODE, MODES

CAPABILITIES: dict[str, bool] = {
    "sparse": False,  # SparseCPU kernels are not reached: aten::_to_sparse raises NotImplementedError
    "pinned_memory": False,  # pinning needs a C++ getPinnedMemoryAllocator hook (torch 2.13): pin_memory() copies
    "generators": False,  # torch.Generator(device="neuron") needs a C++ PrivateUse1HooksInterface
    "inductor": False,  # inductor generates no code for a Python PrivateUse1 device; compile(backend="neuron") works
}
"""What the emulated device does not claim (``CONFORMANCE_CAPABILITIES``, :mod:`neuron_conformance.conformance.backend.capabilities`);
every other capability of the vocabulary is claimed: float64, complex and float8 run the CPU kernels,
streams/events (:mod:`.streams`), autocast (:mod:`.autocast`), torch.compile with its own backend
(:mod:`.compile`) and the ``neuron_gloo`` collectives (:mod:`.distributed`) exist."""

CONFORMANCE_TORCH_REQUIREMENT = requirements.unmet
"""None when the running torch can run the emulated device, else one line naming the torch it needs (read by a
harness before it imports the backend module, whose import installs the device: :mod:`.requirements`)."""

__all__ = [
    "BACKEND_NAME",
    "CAPABILITIES",
    "DIST_BACKEND",
    "ENV_ASYNC",
    "ENV_MODE",
    "MODES",
    "api_support",
    "get_mode",
    "install",
    "is_async",
    "is_installed",
    "mirrors_cpu",
    "set_async",
    "set_mode",
]

_lock = threading.RLock()


def install(mode: str | None = None, *, shim: bool = True, asynchronous: bool | None = None) -> None:
    """Register the emulated ``neuron`` device in this process (idempotent).

    Args:
        mode: ``"mirror"``, ``"device"`` or ``"alternate"``; None reads ``$CONFORMANCE_EMULATOR_MODE`` (default
            ``"mirror"``) on the first call and keeps the current mode on a later one. Calling again with
            another mode switches the mode.
        shim: also patch the ``torch.accelerator`` / ``torch.Event`` calls torch 2.13 cannot route to a
            Python backend (see :mod:`.shim`).
        asynchronous: queue kernels on per-stream workers (:mod:`.async_mode`); None reads
            ``$CONFORMANCE_EMULATOR_ASYNC`` (``"1"`` on, ``"0"`` or unset off) on the first call and keeps
            the current setting on a later one.

    Raises:
        ValueError: unknown mode, ``$CONFORMANCE_EMULATOR_ASYNC`` is neither ``"0"`` nor ``"1"``, or an
            entry of ``$CONFORMANCE_EMULATOR_FALLBACK`` names no aten op (the fallback set is read on every
            call, :mod:`.optracking`), or ``mode`` differs from the one ``$CONFORMANCE_EMULATOR`` installed at
            ``import torch`` (:mod:`.autoload`).
        RuntimeError: another PrivateUse1 backend (e.g. a real ``torch_neuronx``) is already registered.
        ImportError: the running torch is older than the emulated device needs (:mod:`.requirements`).
    """
    with _lock:
        if mode is not None and _state.autoload_mode is not None:
            from . import autoload  # deferred: only reached after $CONFORMANCE_EMULATOR installed the device

            autoload.check_install_mode(_state.check_mode(mode))
        was_installed = _state.installed
        if mode is not None:
            mode = _state.check_mode(mode)
        else:
            # a later install() without a mode keeps the current one: the harness switches the mode with
            # set_mode() after its own install, and a module imported afterwards that installs the
            # emulator again (the emulator's backend module, imported to read its declarations) must not
            # switch a device-mode session back to mirror mode
            mode = _state.mode if was_installed else _state.default_mode()
        if asynchronous is None:
            asynchronous = _state.async_mode if was_installed else _state.default_async()
        if not _state.installed:
            requirements.check()  # one line naming the torch it needs, before any kernel module is loaded
            # deferred: the kernels' modules are loaded by install(); importing the package installs nothing
            from . import autocast, compile, device, flex, registrations, storage

            device.register()
            storage.neuron_device()
            storage.install_guards()
            registrations.install_fallback()
            autocast.install()
            compile.register_backend()
            flex.install()
            _state.installed = True
        from . import optracking as _tracking  # deferred: see install() above

        _tracking.set_fallback_ops()  # $CONFORMANCE_EMULATOR_FALLBACK (ValueError on a bad entry)
        if shim:
            from . import shim as _shim  # deferred: see install() above

            _shim.install()
        set_mode(mode)
        set_async(bool(asynchronous))


def is_installed() -> bool:
    """True once :func:`install` has registered the device in this process."""
    return _state.installed


def set_mode(mode: str) -> None:
    """Switch the numeric mode at run time (``"mirror"``, ``"device"`` or ``"alternate"``, :data:`MODES`).

    Raises:
        ValueError: unknown mode.
        RuntimeError: the emulator is not installed.
    """
    _state.check_mode(mode)
    if not _state.installed:
        raise RuntimeError("neuron emulator: call neuron_conformance.emulator.install() before set_mode()")
    from . import (
        alternate,  # deferred: as registrations
        registrations,  # deferred: loaded by install(); importing the package installs nothing
    )

    with _lock:
        if mode == "mirror":
            alternate.uninstall()
            registrations.install_mirror()
        else:
            registrations.uninstall_mirror()
            if mode == "alternate":
                alternate.install()
            else:
                alternate.uninstall()
        _state.mode = mode


def set_async(on: bool) -> None:
    """Switch the execution mode: True queues kernels on per-stream worker threads, False (the default)
    runs them on the calling thread after waiting for queued work (:mod:`.async_mode`).

    Raises:
        RuntimeError: the emulator is not installed.
    """
    if not _state.installed:
        raise RuntimeError("neuron emulator: call neuron_conformance.emulator.install() before set_async()")
    from . import async_mode  # deferred: loaded by install(); importing the package installs nothing

    with _lock:
        if on:
            async_mode.enable()
        else:
            async_mode.disable()


def is_async() -> bool:
    """True while kernels are queued on per-stream workers ($CONFORMANCE_EMULATOR_ASYNC=1)."""
    return _state.async_mode


def get_mode() -> str:
    """The current numeric mode, one of :data:`MODES` (the pending default before install)."""
    return _state.mode if _state.installed else _state.default_mode()


def mirrors_cpu() -> bool:
    """True when results are meant to be bitwise equal to CPU (installed in mirror mode)."""
    return _state.installed and _state.mode == "mirror"


def api_support() -> dict[str, str]:
    """Device API name -> ``"native"``, ``"shim"`` or ``"missing"``, decided by probing (see :mod:`.support`)."""
    from . import support  # deferred: probing needs the installed device

    return support.api_support()
