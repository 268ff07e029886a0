"""opsuites/test_errors.py: an error input generated for the device type decides when CPU and device differ."""

from __future__ import annotations

import torch

import neuron_conformance.emulator.backend  # noqa: F401 - the emulated neuron device
from neuron_conformance.opsuites import test_errors as E
from neuron_conformance.opsuites.samples import opinfo_by_name


def _error_input(op, index):
    return list(op.error_inputs("cpu"))[index]


def test_device_specific_expectation_accepts_what_pytorch_expects_there():
    # narrow_copy error input 1: the CPU kernel's RuntimeError on cpu, narrow's IndexError elsewhere
    op = opinfo_by_name()["narrow_copy"]
    err = _error_input(op, 1)
    assert err.error_type is RuntimeError
    device = torch.device("neuron")
    good = IndexError("Dimension out of range (expected to be in range of [-3, 2], but got 3)")
    assert E._meets_device_expectation(op, device, 1, err, good)
    assert not E._meets_device_expectation(op, device, 1, err, None)  # not raising never passes
    assert not E._meets_device_expectation(op, device, 1, err, ValueError("Dimension out of range"))
    assert not E._meets_device_expectation(op, device, 1, err, IndexError("some other message"))


def test_no_device_specific_expectation_on_the_cpu():
    op = opinfo_by_name()["narrow_copy"]
    err = _error_input(op, 1)
    assert not E._meets_device_expectation(op, torch.device("cpu"), 1, err, IndexError("Dimension out of range"))
