"""Conformance harness for PyTorch device backends.

Public API (re-exports only): the device profile, the oracle, failure classes, manifests and records.
The pytest plugin lives in :mod:`neuron_conformance.conformance.pytest_plugin.plugin`; the emulated device in :mod:`neuron_conformance.emulator`.
Importing this package imports no CUDA-only code path and installs no backend.

The re-exports are lazy (PEP 562 ``__getattr__``): ``import neuron_conformance.conformance`` imports neither torch nor any
submodule, so the torch-free modules (:mod:`neuron_conformance.conformance.results.records`, :mod:`neuron_conformance.conformance.results.atomic`,
:mod:`neuron_conformance.conformance.results.outcomes`) can be used by :mod:`reports` and :mod:`migrate` without importing torch.
``from neuron_conformance.conformance import DeviceProfile`` imports :mod:`neuron_conformance.conformance.backend.device` (and torch) on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> submodule that defines it
_EXPORTS = {
    "DeviceError": "backend.device",
    "DeviceProfile": "backend.device",
    "resolve_profile": "backend.device",
    "FAILURE_CLASSES": "verdict.failures",
    "ConformanceFailure": "verdict.failures",
    "MetadataFailure": "verdict.failures",
    "NonFiniteFailure": "verdict.failures",
    "NumericFailure": "verdict.failures",
    "WrongErrorFailure": "verdict.failures",
    "Manifest": "results.manifest",
    "ManifestError": "results.manifest",
    "load_manifest": "results.manifest",
    "parse_manifest": "results.manifest",
    "Verdict": "verdict.oracle",
    "check": "verdict.oracle",
    "judge": "verdict.oracle",
    "RecordWriter": "results.records",
    "read_records": "results.records",
    "Tolerance": "verdict.tolerances",
    "tolerance_for": "verdict.tolerances",
}

__all__ = [
    "FAILURE_CLASSES",
    "ConformanceFailure",
    "DeviceError",
    "DeviceProfile",
    "Manifest",
    "ManifestError",
    "MetadataFailure",
    "NonFiniteFailure",
    "NumericFailure",
    "RecordWriter",
    "Tolerance",
    "Verdict",
    "WrongErrorFailure",
    "check",
    "judge",
    "load_manifest",
    "parse_manifest",
    "read_records",
    "resolve_profile",
    "tolerance_for",
]

if TYPE_CHECKING:  # for type checkers and IDEs; at run time the names come from __getattr__
    from neuron_conformance.conformance.backend.device import DeviceError, DeviceProfile, resolve_profile
    from neuron_conformance.conformance.results.manifest import Manifest, ManifestError, load_manifest, parse_manifest
    from neuron_conformance.conformance.results.records import RecordWriter, read_records
    from neuron_conformance.conformance.verdict.failures import (
        FAILURE_CLASSES,
        ConformanceFailure,
        MetadataFailure,
        NonFiniteFailure,
        NumericFailure,
        WrongErrorFailure,
    )
    from neuron_conformance.conformance.verdict.oracle import Verdict, check, judge
    from neuron_conformance.conformance.verdict.tolerances import Tolerance, tolerance_for


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
