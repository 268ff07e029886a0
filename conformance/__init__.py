"""Conformance harness for PyTorch device backends.

Public API (re-exports only): the device profile, the oracle, failure classes, manifests and records.
The pytest plugin lives in :mod:`conformance.plugin`; the emulated device in :mod:`conformance.emulator`.
Importing this package imports no CUDA-only code path and installs no backend.
"""

from .device import DeviceError, DeviceProfile, resolve_profile
from .failures import (
    FAILURE_CLASSES,
    ConformanceFailure,
    MetadataFailure,
    NonFiniteFailure,
    NumericFailure,
    WrongErrorFailure,
)
from .manifest import Manifest, ManifestError, load_manifest, parse_manifest
from .oracle import Verdict, check, judge
from .records import RecordWriter, read_records
from .tolerances import Tolerance, tolerance_for

__version__ = "0.1.0"

__all__ = [
    "FAILURE_CLASSES", "ConformanceFailure", "DeviceError", "DeviceProfile", "Manifest", "ManifestError",
    "MetadataFailure", "NonFiniteFailure", "NumericFailure", "RecordWriter", "Tolerance", "Verdict",
    "WrongErrorFailure", "check", "judge", "load_manifest", "parse_manifest", "read_records",
    "resolve_profile", "tolerance_for",
]
