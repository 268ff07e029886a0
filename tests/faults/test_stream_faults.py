"""The streams suite and the op suites catch a misbehaving asynchronous device, in both numeric modes.

Each case runs a suite in a pytest subprocess against the emulated device in its asynchronous mode
(``CONFORMANCE_EMULATOR_ASYNC=1``) with one of its misbehaviours switched on by ``fault_backend``
(:func:`neuron_conformance.emulator.faults.skip_waits`, :func:`~neuron_conformance.emulator.faults.events_do_not_order`,
:func:`~neuron_conformance.emulator.faults.reuse_ignores_record_stream`), then reads the result records and asserts
that the named checks failed with a value failure class. The clean controls run the same suites in the same
modes without a fault and must pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_conformance.conformance.results.records import read_records

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
MODES = ("mirror", "device")
VALUE_CLASSES = {"numeric", "nonfinite", "metadata"}

CASES = [
    # fault, the checks (record op names) that must all be flagged
    ("async-skip-waits", {"streams.wait_event"}),
    ("async-events-do-not-order", {"streams.wait_event", "streams.event_wait"}),
    ("async-early-reuse", {"streams.record_stream"}),
]


def _run(pytester, monkeypatch, fault, module, mode, *extra):
    """Suite ``module`` with ``fault`` in emulator ``mode``, asynchronous; returns (result, records)."""
    monkeypatch.setenv("PYTHONPATH", f"{HERE}:{ROOT}")
    monkeypatch.setenv("CONFORMANCE_EMULATOR_MODE", mode)
    monkeypatch.setenv("CONFORMANCE_EMULATOR_ASYNC", "1")
    monkeypatch.setenv("CONFORMANCE_TEST_FAULT", fault)
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(
        str(ROOT / "opsuites" / module),
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
        "--conformance-report-dir",
        str(report),
        "--conformance-no-report",
        "-q",
        *extra,
        timeout=600,
    )
    return result, read_records(report)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("fault", "flagged"), CASES, ids=[c[0] for c in CASES])
def test_streams_suite_flags_async_fault(pytester, monkeypatch, fault, flagged, mode):
    result, records = _run(pytester, monkeypatch, fault, "test_streams.py", mode)
    failed = {
        r["op"]
        for r in records
        if r.get("suite") == "streams" and r.get("outcome") == "failed" and r.get("failure_class") in VALUE_CLASSES
    }
    assert flagged <= failed, (
        f"{mode} mode, fault {fault!r}: expected {sorted(flagged)} flagged, flagged: "
        f"{sorted(failed)}\n{result.stdout.str()[-3000:]}"
    )


@pytest.mark.parametrize("mode", MODES)
def test_compare_cpu_flags_skipped_waits(pytester, monkeypatch, mode):
    """A blocking copy to the host that does not wait shows in the op suites: matrix products' outputs are
    read before the stream worker wrote them (poisoned NaN). Whether one sample's read overtakes its
    kernel depends on timing, so several product ops are run and one flagged op is enough."""
    result, records = _run(
        pytester,
        monkeypatch,
        "async-skip-waits",
        "test_compare_cpu.py",
        mode,
        "--conformance-ops",
        MATMULS,
        "--conformance-dtypes",
        "float32",
    )
    mine = [r for r in records if r.get("suite") == "compare_cpu" and r.get("op") in MATMULS.split(",")]
    assert any(r["outcome"] == "failed" and r.get("failure_class") in {"nonfinite", "numeric"} for r in mine), (
        f"{mode}: {mine}\n{result.stdout.str()[-3000:]}"
    )


MATMULS = "matmul,mm,bmm,addmm"
"""compare_cpu ops of the skipped-waits case (each OpInfo has several samples of matrix products)."""


@pytest.mark.parametrize("mode", MODES)
def test_clean_async_emulator_passes(pytester, monkeypatch, mode):
    """Control: without a fault the streams suite and compare_cpu on matmul pass in the asynchronous mode."""
    result, records = _run(pytester, monkeypatch, "", "test_streams.py", mode)
    streams = [r for r in records if r.get("suite") == "streams"]
    assert len(streams) == 9 and all(r["outcome"] == "passed" for r in streams), result.stdout.str()[-3000:]
    result, records = _run(
        pytester,
        monkeypatch,
        "",
        "test_compare_cpu.py",
        mode,
        "--conformance-ops",
        "matmul",
        "--conformance-dtypes",
        "float32",
    )
    mine = [r for r in records if r.get("suite") == "compare_cpu" and r.get("op") == "matmul"]
    assert mine and all(r["outcome"] == "passed" for r in mine), result.stdout.str()[-3000:]


@pytest.mark.parametrize("mode", MODES)
def test_errors_suite_attributes_asynchronous_errors(pytester, monkeypatch, mode):
    """The asynchronous mode reports a kernel's data-dependent error (an index out of bounds, a fill value
    that overflows) at the next synchronising call, as an asynchronous accelerator does; the errors suite
    synchronises inside each error input's window, so these error inputs still pass. Before, all three
    failed in a sync/async comparison (the error surfaced at a later call)."""
    ops = "scatter_add,masked_fill,cat"
    result, records = _run(pytester, monkeypatch, "", "test_errors.py", mode, "--conformance-ops", ops)
    mine = {r["op"]: r["outcome"] for r in records if r.get("suite") == "errors"}
    assert mine == dict.fromkeys(ops.split(","), "passed"), f"{mode}: {mine}\n{result.stdout.str()[-3000:]}"
