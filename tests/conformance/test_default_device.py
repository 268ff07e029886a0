"""The default device under test is an accelerator that is available, else the emulated device.

PyPI's default Linux wheel of torch is a CUDA build: on a host without a GPU,
``torch.accelerator.current_accelerator()`` still answers ``cuda`` (only ``check_available=True`` asks
whether it can be used). A run with no ``--conformance-device`` must then test the emulated device, and a
named accelerator that cannot allocate must be named with the option that picks another.
"""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.backend import device as device_mod
from neuron_conformance.conformance.backend.device import DeviceError, available_accelerator


def _cuda_build_without_gpu(check_available: bool = False):
    """``current_accelerator`` of a CUDA wheel on a CPU-only host."""
    return None if check_available else torch.device("cuda")


def test_an_accelerator_that_is_not_available_is_not_the_default(monkeypatch):
    monkeypatch.setattr(torch.accelerator, "current_accelerator", _cuda_build_without_gpu)
    assert available_accelerator() is None


def test_an_available_accelerator_is_the_default(monkeypatch):
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda check_available=False: torch.device("xpu"))
    assert available_accelerator() == torch.device("xpu")


def test_older_torch_without_check_available_asks_is_available(monkeypatch):
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda: torch.device("cuda"))
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: False)
    assert available_accelerator() is None
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    assert available_accelerator() == torch.device("cuda")


def test_no_device_option_on_a_cuda_build_without_gpu_tests_the_emulated_device(monkeypatch):
    monkeypatch.setattr(torch.accelerator, "current_accelerator", _cuda_build_without_gpu)
    profile = device_mod.resolve_profile(None, None, "mirror")
    assert (profile.type, profile.emulated, profile.registered_by) == ("neuron", True, "harness")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a host where cuda cannot allocate")
def test_an_unusable_accelerator_is_named_with_the_option_that_picks_another():
    with pytest.raises(DeviceError) as info:
        device_mod.resolve_profile("cuda", None, "mirror")
    message = str(info.value)
    assert "--conformance-device 'cuda' cannot allocate a tensor" in message
    assert "--conformance-device neuron" in message
