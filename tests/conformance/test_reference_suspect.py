"""``reference-suspect``: the device agrees with an independent float64 computation and the CPU does not.

The CPU's float32 ``mean`` of values near the float32 maximum overflows to inf in its float32 sum; the true
mean is finite, and a device that accumulates in a wider type returns it. That device used to fail
("NaN/inf value(s) of the reference not reproduced"). Now such a comparison is ``reference-suspect``: never a
pass of the device and never its failure, counted and listed apart. A device that is wrong where the CPU is
suspect is still a failure, and so is any other sample of the same test that fails.
"""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.results.outcomes import OUTCOMES, REFERENCE_SUSPECT
from neuron_conformance.conformance.verdict.compare import ErrorTally, compare_outputs, raise_if_suspect
from neuron_conformance.conformance.verdict.failures import NumericFailure, ReferenceSuspect
from neuron_conformance.conformance.verdict.oracle import judge
from neuron_conformance.conformance.verdict.tolerances import default_tolerance
from neuron_conformance.reports.to_markdown import suspects_markdown


def _overflowing_mean():
    x = torch.full((4, 8), 3.0e38)
    x[:, ::2] = 1.0e38
    cpu = x.mean(1)  # float32 sum overflows: inf
    r64 = x.double().mean(1)
    return x, cpu, r64


def test_the_overflowing_cpu_mean_makes_the_reference_suspect():
    _, cpu, r64 = _overflowing_mean()
    assert torch.isinf(cpu).all() and torch.isfinite(r64).all()
    device = r64.float()
    v = judge(device, cpu, reference64=r64)
    assert (v.passed, v.rule, v.failure_class) == (False, REFERENCE_SUSPECT, REFERENCE_SUSPECT)
    assert "float64" in v.message and "CPU" in v.message
    with pytest.raises(ReferenceSuspect):
        v.raise_if_failed("mean float32 sample 0")


def test_a_wrong_device_where_the_cpu_is_suspect_still_fails():
    _, cpu, r64 = _overflowing_mean()
    v = judge((r64 * 1.01).float(), cpu, reference64=r64)
    assert not v.passed and v.rule == "nonfinite-positions"
    with pytest.raises(NumericFailure):
        v.raise_if_failed()


def test_without_a_float64_reference_the_cpu_is_trusted():
    _, cpu, r64 = _overflowing_mean()
    v = judge(r64.float(), cpu)
    assert not v.passed and v.rule == "nonfinite-positions"


def test_a_device_off_the_cpu_and_float64_alike_is_numeric():
    x = torch.linspace(1, 2, 50)
    r64 = x.double().exp()
    cpu = x.exp()
    v = judge(cpu * (1 + 1e-3), cpu, reference64=r64)
    assert not v.passed and v.failure_class == "numeric"


def test_compare_outputs_carries_the_suspicion_to_the_end_of_the_test():
    _, cpu, r64 = _overflowing_mean()
    tally = ErrorTally()
    tol = default_tolerance(torch.float32)
    for v in compare_outputs(r64.float(), cpu, device_type="cpu", tolerance=tol, reference64=lambda: r64, where="s0"):
        tally.add(v, 0)
    assert tally.suspect is not None and tally.suspect.startswith("s0: ")
    # a later sample that fails still fails the test: the comparison raises before the end
    with pytest.raises(NumericFailure):
        compare_outputs(cpu[:0] + 1.0, cpu[:0] + 2.0, device_type="cpu", tolerance=tol, where="s1")
        compare_outputs(torch.ones(3) * 1.1, torch.ones(3), device_type="cpu", tolerance=tol, where="s1")
    with pytest.raises(ReferenceSuspect, match="s0: "):
        raise_if_suspect(tally)
    raise_if_suspect(ErrorTally())  # nothing suspect: returns


def test_the_outcome_is_known_and_listed_in_the_summary():
    assert REFERENCE_SUSPECT in OUTCOMES
    summary = {
        "records": [
            {"nodeid": "a", "outcome": REFERENCE_SUSPECT, "op": "mean", "suite": "properties", "dtype": "float32",
             "message": "mean(...): the device agrees with the float64 computation"},
            {"nodeid": "b", "outcome": "passed", "op": "add"},
        ]
    }  # fmt: skip
    lines = suspects_markdown(summary)
    assert lines[0].startswith("### CPU reference suspect")
    assert any("`mean`" in line and "float64" in line for line in lines)
    assert suspects_markdown({"records": summary["records"][1:]}) == []
