"""In-process checks of the truth-telling pieces: exception groups, verdict fields, device errors."""

from __future__ import annotations

import builtins

import pytest
import torch

from neuron_conformance.conformance.backend import device as devmod
from neuron_conformance.conformance.verdict.failures import (
    NumericFailure,
    classify_exception,
    describe_group,
    verdict_fields,
)
from neuron_conformance.conformance.verdict.oracle import judge

ExceptionGroup = getattr(builtins, "ExceptionGroup", None)  # Python >= 3.11
needs_groups = pytest.mark.skipif(ExceptionGroup is None, reason="exception groups need Python >= 3.11")


@needs_groups
def test_exception_group_of_one_class():
    """D3: a Hypothesis-style group of NotImplementedErrors is ``unsupported``, its message lists them."""
    group = ExceptionGroup(
        "Hypothesis found 2 distinct failures.",
        [NotImplementedError("no kernel a"), NotImplementedError("no kernel b")],
    )
    assert classify_exception(group) == "unsupported"
    text = describe_group(group)
    assert "NotImplementedError: no kernel a" in text and "NotImplementedError: no kernel b" in text


@needs_groups
def test_exception_group_mixed_takes_most_severe():
    group = ExceptionGroup("found 2", [NumericFailure("off"), NotImplementedError("none")])
    assert classify_exception(group) == "unsupported"  # unsupported ranks above numeric


def test_numeric_failure_carries_its_verdict():
    """D1: the failure raised by a verdict carries rule, errors and tolerance for the record."""
    v = judge(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]), atol=1e-5, rtol=1e-5)
    with pytest.raises(NumericFailure) as info:
        v.raise_if_failed("x")
    fields = verdict_fields(info.value)
    assert fields["rule"] and fields["max_abs"] == pytest.approx(0.5) and fields["atol"] == 1e-5


def test_other_privateuse1_backend_is_a_device_error(monkeypatch):
    """D5: --conformance-device neuron with PrivateUse1 taken by another backend: one line naming it and the env var."""
    monkeypatch.setattr(devmod, "_privateuse1_name", lambda: "opencl")
    monkeypatch.setattr(devmod, "_registered_by_package", lambda device, module_name: False)
    with pytest.raises(devmod.DeviceError) as info:
        devmod.resolve_profile(device="neuron")
    msg = str(info.value)
    assert "'opencl'" in msg and "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in msg and "\n" not in msg
