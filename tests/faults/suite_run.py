"""One op suite run in a pytest subprocess against the emulated device with a fault of ``fault_backend``.

Shared by the fault tests of the suites whose tests are one per aten overload (``generated``,
``aten_replay``, ``random_ops``, ``shape_contracts``): each asserts on the records of the overloads it
named.
"""

from __future__ import annotations

from pathlib import Path

from neuron_conformance.conformance.results.records import read_records

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def run_suite(pytester, monkeypatch, suite_file: str, fault: str, overloads: str, mode: str, *extra: str):
    """Run ``opsuites/<suite_file>`` on ``overloads`` (an ``--conformance-ops`` list) in emulator ``mode`` (``mirror`` or
    ``device``) with fault ``fault`` (a key of ``fault_backend.FAULTS``; ``""``: none) installed through
    ``--conformance-backend-module fault_backend``, and the command-line arguments ``extra`` (``--conformance-dtypes=...``);
    returns ``(pytester result, records)``."""
    monkeypatch.setenv("PYTHONPATH", f"{HERE}:{ROOT}")
    monkeypatch.setenv("CONFORMANCE_TEST_FAULT", fault)
    monkeypatch.setenv("CONFORMANCE_EMULATOR_MODE", mode)
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(
        str(ROOT / "opsuites" / suite_file),
        "--rootdir",
        str(ROOT),
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        "--conformance-backend-module",
        "fault_backend",
        "--conformance-device",
        "neuron",
        "--conformance-ops",
        overloads,
        f"--conformance-report-dir={report}",
        "--conformance-no-report",
        "-q",
        *extra,
        timeout=600,
    )
    return result, read_records(report)
