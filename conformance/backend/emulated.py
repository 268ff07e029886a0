"""Emulated devices: device types that an installed distribution declares, with the backend module that
brings each one into being (torch-free).

An emulated device is a backend like any other (its module's ``CONFORMANCE_*`` declarations are all the
harness reads); what is particular is only how it is found: when the device type under test is declared in
the entry-point group :data:`GROUP` and nothing else registered it, the harness imports the declared module
(:func:`neuron_conformance.conformance.backend.device.resolve_profile`). This distribution declares the
``neuron`` device there (``pyproject.toml``).
"""

from __future__ import annotations

import importlib.metadata

GROUP = "neuron_conformance.emulated_devices"
"""Entry-point group of emulated devices: name = device type, value = its backend module."""

DEFAULT_DEVICE = "neuron"
"""The device type under test when none is given and no accelerator is available."""


def _entries() -> list[importlib.metadata.EntryPoint]:
    return list(importlib.metadata.entry_points(group=GROUP))


def backend_module(device_type: str | None) -> str | None:
    """The backend module of the emulated device ``device_type``, or None when none is declared."""
    for entry in _entries():
        if device_type and entry.name == device_type:
            return entry.value.split(":")[0]
    return None


def package_of(module_name: str) -> str:
    """The package holding ``module_name`` (``a.b.c`` -> ``a.b``)."""
    return module_name.rpartition(".")[0]


def installs_emulated_device(module_name: str) -> bool:
    """True when ``module_name`` (e.g. a ``[torch.backends]`` entry point) lives in the package of a
    declared emulated device: it installs that device, which the harness handles as the emulated device."""
    packages = {package_of(entry.value.split(":")[0]) for entry in _entries()}
    return any(pkg and module_name.startswith(f"{pkg}.") for pkg in packages)
