"""``torch.neuron`` device module and ``torch.accelerator`` on the emulated device."""

from __future__ import annotations

import pytest
import torch


def test_device_module_basics():
    mod = torch.neuron
    assert mod.is_available() and mod.device_count() == 1 and mod.current_device() == 0
    mod.set_device(0)
    mod.set_device("neuron:0")
    mod.synchronize()
    assert torch.float16 in mod.get_amp_supported_dtype() and torch.bfloat16 in mod.get_amp_supported_dtype()
    assert mod.is_bf16_supported()


def test_set_device_1_raises():
    with pytest.raises(RuntimeError, match="invalid device ordinal 1"):
        torch.neuron.set_device(1)


def test_accelerator_queries():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.accelerator.device_count() == 1
    assert torch.accelerator.current_device_index() == 0
    with torch.accelerator.device_index(0):
        assert torch.accelerator.current_device_index() == 0


def test_generated_tensor_and_module_methods():
    x = torch.ones(2).neuron()
    assert x.is_neuron and x.device.type == "neuron"
    m = torch.nn.Linear(2, 2).neuron()
    assert m.weight.is_neuron and isinstance(m.weight, torch.nn.Parameter)


def test_streams():
    s = torch.Stream(device="neuron")
    assert s.device_type == torch._C._autograd.DeviceType.PrivateUse1 or "neuron" in repr(s)
    s.synchronize()
    assert s.query()
    ms = torch.neuron.Stream()
    ev = ms.record_event()
    ms.wait_event(ev)
    assert torch.neuron.current_stream() == torch.neuron.default_stream()


def test_device_module_event_timing():
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    start.record()
    torch.ones(10, device="neuron").sum()
    end.record()
    assert start.elapsed_time(end) >= 0.0
    with pytest.raises(RuntimeError, match="enable_timing"):
        torch.neuron.Event().elapsed_time(end)


def test_device_context_manager_used_by_load():
    with torch.neuron.device(0):
        pass
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        with torch.neuron.device(1):
            pass
