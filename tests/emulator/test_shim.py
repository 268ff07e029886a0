"""The opt-in shim for torch.accelerator / torch.Event calls, and the probed api_support() table."""

from __future__ import annotations

import gc

import pytest
import torch

import neuron_conformance.emulator as emu
from neuron_conformance.emulator import shim


def test_shim_installed_by_default():
    assert shim.installed()
    assert getattr(torch.accelerator.synchronize, "__neuron_shim__", False)


def test_accelerator_synchronize_runs():
    torch.ones(3, device="neuron").add_(1)
    torch.accelerator.synchronize()
    torch.accelerator.synchronize("neuron")
    torch.accelerator.synchronize(0)


def test_accelerator_memory_functions_follow_emulator_counts():
    gc.collect()
    before = torch.accelerator.memory_allocated()
    assert before == torch.neuron.memory_allocated()
    x = torch.empty(512, device="neuron")
    assert torch.accelerator.memory_allocated() - before == 2048
    assert torch.accelerator.max_memory_allocated() >= before + 2048
    assert torch.accelerator.memory_stats()["allocated_bytes.all.current"] == torch.neuron.memory_allocated()
    torch.accelerator.reset_peak_memory_stats()
    torch.accelerator.empty_cache()
    free, total = torch.accelerator.get_memory_info()
    assert 0 <= free <= total
    del x


def test_event_elapsed_time():
    start = torch.Event(enable_timing=True)
    end = torch.Event(enable_timing=True)
    start.record()
    torch.randn(64, 64, device="neuron").matmul(torch.randn(64, 64, device="neuron"))
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and ms >= 0.0


def test_event_without_timing_raises():
    a, b = torch.Event(), torch.Event()
    a.record()
    b.record()
    with pytest.raises(RuntimeError, match="enable_timing"):
        a.elapsed_time(b)


def test_disabled_restores_originals_and_they_fail():
    with shim.disabled():
        assert not getattr(torch.accelerator.synchronize, "__neuron_shim__", False)
        with pytest.raises(RuntimeError):
            torch.accelerator.synchronize()
    assert getattr(torch.accelerator.synchronize, "__neuron_shim__", False)


def test_api_support_table_is_probed():
    table = emu.api_support()
    assert set(table.values()) <= {"native", "shim", "missing"}
    assert table["torch.accelerator.device_count"] == "native"
    assert table["torch.accelerator.synchronize"] == "shim"
    assert table["torch.accelerator.memory_allocated"] == "shim"
    assert table["torch.Event.elapsed_time"] == "shim"
    assert table["torch.Generator(device)"] == "missing"
    assert table["pin_memory"] == "missing"
    assert table["multiple devices"] == "missing"
    assert table["torch.profiler"] == "native"
    # torch lists ProfilerActivity.PrivateUse1 for the renamed backend, but no device-side profiler exists
    assert table["torch.profiler (ProfilerActivity.PrivateUse1)"] == "missing"


def test_api_support_without_shim_reports_missing():
    shim.uninstall()
    try:
        table = emu.api_support()
    finally:
        shim.install()
    assert table["torch.accelerator.synchronize"] == "missing"
    # without shim.py only the storage resize guard (installed by install() itself) is still a patch
    assert {name for name, how in table.items() if how == "shim"} == {"UntypedStorage.resize_(0) and back (FSDP2)"}


def test_set_device_index_checks_ordinal():
    torch.accelerator.set_device_index(0)
    with pytest.raises(RuntimeError, match="invalid device ordinal 1"):
        torch.accelerator.set_device_index(1)
    assert torch.accelerator.current_device_index() == 0


def test_record_stream_is_a_noop():
    x = torch.ones(2, device="neuron")
    x.record_stream(torch.Stream(device="neuron"))
    assert x.cpu().tolist() == [1.0, 1.0]
