"""Start-up on a hostile backend: a probe that segfaults, a canary that misfires on a healthy device."""

from __future__ import annotations

import json

import pytest

from tests.hostile.backend import FAULTS, install_faults
from tests.hostile.conftest import records, run_json

TESTS = """
import pytest, torch

@pytest.mark.conformance(op="add", dtype="float32", suite="hostile")
def test_float_add(device):
    assert (torch.ones(2, device=device) + torch.ones(2, device=device)).cpu().tolist() == [2.0, 2.0]

@pytest.mark.conformance(op="add", dtype="int64", suite="hostile")
def test_int_add(device):
    torch.ones(2, dtype=torch.int64, device=device).add(1)

@pytest.mark.conformance(op="mul", dtype="float32", suite="hostile")
def test_mul(device):
    assert torch.ones(2, device=device).mul(3.0).cpu().tolist() == [3.0, 3.0]
"""


def test_unknown_fault_is_one_clear_error():
    with pytest.raises(ValueError, match="unknown fault 'nope'; known: abort-neg"):
        install_faults("nope")
    assert {"probe-segv", "no-int-scalar-add", "conj-segv", "abort-neg", "hang-neg"} <= set(FAULTS)


def test_probe_segfault_costs_a_line_not_the_run(pytester, hostile):
    """pin_memory() segfaults: the preflight child dies, the API is missing, the run goes on under xdist."""
    pytester.makepyfile(test_h=TESTS)
    result = pytester.runpytest_subprocess(
        "--conformance-backend-module",
        hostile("probe-segv"),
        "--conformance-device",
        "neuron",
        "--conformance-report-dir",
        "out",
        "-n",
        "1",
        "-p",
        "no:randomly",
        timeout=300,
    )
    out = result.stdout.str()
    line = [ln for ln in out.splitlines() if ln.startswith("conformance: device APIs missing")]
    assert len(line) == 1 and "torch.Tensor.pin_memory (crashed (SIGSEGV))" in line[0], out[-3000:]
    meta = run_json(pytester.path / "out")
    assert meta["complete"] is True
    assert meta["device"]["api_support"]["torch.Tensor.pin_memory"] == "missing"
    assert meta["device"]["api_support"]["torch.Stream"] == "native"  # probes after the crash still ran
    recs = records(pytester.path / "out")
    assert recs["test_float_add"]["outcome"] == "passed" and recs["test_mul"]["outcome"] == "passed"
    assert (pytester.path / "out" / "summary.json").is_file()
    assert result.ret == 0


def test_canary_that_fails_on_a_fresh_device_is_replaced(pytester, hostile):
    """No integer-scalar add: the default canary fails at start, the float canary is used instead, so the
    failing int test does not poison the device (under -n 0 that used to stop the run)."""
    pytester.makepyfile(test_h=TESTS)
    result = pytester.runpytest_subprocess(
        "--conformance-backend-module",
        hostile("no-int-scalar-add"),
        "--conformance-device",
        "neuron",
        "--conformance-report-dir",
        "out",
        "-p",
        "no:xdist",
        "-p",
        "no:randomly",
        timeout=300,
    )
    out = result.stdout.str()
    line = [ln for ln in out.splitlines() if ln.startswith("conformance: the harness needs")]
    assert len(line) == 1 and "canary" in line[0] and "used instead" in line[0], out[-3000:]
    recs = records(pytester.path / "out")
    assert set(recs) == {"test_float_add", "test_int_add", "test_mul"}
    assert recs["test_int_add"]["outcome"] == "failed" and not recs["test_int_add"].get("device_poisoned")
    assert recs["test_mul"]["outcome"] == "passed"
    meta = run_json(pytester.path / "out")
    assert meta["complete"] is True and meta["stop_reason"] is None
    assert json.loads((pytester.path / "out" / "summary.json").read_text())["totals"]["failed"] == 1
    assert result.ret == 1
