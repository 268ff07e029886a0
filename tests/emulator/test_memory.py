"""Memory statistics count the bytes the emulator really holds."""

from __future__ import annotations

import gc

import torch


def test_allocated_moves_with_alloc_and_free():
    gc.collect()
    before = torch.neuron.memory_allocated()
    x = torch.empty(1000, device="neuron")  # 4000 bytes
    during = torch.neuron.memory_allocated()
    assert during - before == 4000
    del x
    gc.collect()
    assert torch.neuron.memory_allocated() == before


def test_view_does_not_allocate():
    x = torch.empty(100, device="neuron")
    before = torch.neuron.memory_allocated()
    v = x[10:].view(9, 10)
    assert torch.neuron.memory_allocated() == before
    del v, x


def test_results_are_counted():
    a = torch.ones(256, device="neuron")
    before = torch.neuron.memory_allocated()
    b = a * 2
    assert torch.neuron.memory_allocated() - before == 1024
    del b


def test_peak_and_reset():
    gc.collect()
    torch.neuron.reset_peak_memory_stats()
    base = torch.neuron.memory_allocated()
    assert torch.neuron.max_memory_allocated() == base
    x = torch.empty(2048, device="neuron")
    del x
    gc.collect()
    assert torch.neuron.max_memory_allocated() >= base + 8192
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == torch.neuron.memory_allocated()


def test_memory_stats_keys_and_counts():
    stats0 = torch.neuron.memory_stats()
    x = torch.empty(10, device="neuron")
    stats1 = torch.neuron.memory_stats()
    assert stats1["allocation.all.allocated"] == stats0["allocation.all.allocated"] + 1
    assert stats1["allocated_bytes.all.current"] == torch.neuron.memory_allocated()
    del x
    gc.collect()
    assert torch.neuron.memory_stats()["allocation.all.freed"] >= stats1["allocation.all.freed"] + 1


def test_cpu_tensors_are_not_counted():
    before = torch.neuron.memory_allocated()
    y = torch.empty(10_000)
    assert torch.neuron.memory_allocated() == before
    del y
