"""The emulated device's declared capacity: allocations past it raise ``torch.OutOfMemoryError`` and the
device stays usable; ``get_memory_info`` reports the capacity."""

from __future__ import annotations

import gc

import pytest
import torch

from neuron_conformance.emulator import memory


@pytest.fixture
def small_capacity():
    """A capacity of what is held now plus 1 MiB, restored afterwards."""
    gc.collect()
    memory.set_capacity(memory.memory_allocated() + (1 << 20))
    yield 1 << 20
    memory.set_capacity(None)


def test_default_capacity_is_declared(monkeypatch):
    monkeypatch.delenv(memory.CAPACITY_ENV, raising=False)
    memory.set_capacity(None)
    assert memory.capacity() == memory.DEFAULT_CAPACITY
    free, total = torch.accelerator.get_memory_info()
    assert total == memory.DEFAULT_CAPACITY and free == total - memory.memory_allocated()


def test_capacity_from_the_environment(monkeypatch):
    monkeypatch.setenv(memory.CAPACITY_ENV, "3GiB")
    memory.set_capacity(None)
    try:
        assert memory.capacity() == 3 << 30
        assert memory.declared_budget() == 3 << 30  # the stress budget never exceeds the capacity
    finally:
        monkeypatch.delenv(memory.CAPACITY_ENV)
        memory.set_capacity(None)


def test_bad_capacity_names_the_variable(monkeypatch):
    monkeypatch.setenv(memory.CAPACITY_ENV, "lots")
    memory.set_capacity(None)
    try:
        with pytest.raises(ValueError, match=memory.CAPACITY_ENV):
            memory.capacity()
    finally:
        monkeypatch.delenv(memory.CAPACITY_ENV)
        memory.set_capacity(None)


def test_allocation_past_capacity_raises_out_of_memory_then_recovers(small_capacity):
    before = memory.memory_allocated()
    ooms = memory.memory_stats()["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError, match="Tried to allocate 2.0 MiB"):
        torch.empty(2 << 20, dtype=torch.uint8, device="neuron")
    assert memory.memory_allocated() == before  # nothing was counted for the refused block
    assert memory.memory_stats()["num_ooms"] == ooms + 1
    x = torch.full((1024,), 2.0, device="neuron")  # within capacity: works
    assert float(x.sum()) == 2048.0


def test_results_of_ops_are_refused_too(small_capacity):
    x = torch.ones(1 << 17, device="neuron")  # 512 KiB held
    with pytest.raises(torch.OutOfMemoryError):
        torch.cat([x, x])  # 1 MiB more
    del x


def test_negative_capacity_is_refused():
    with pytest.raises(ValueError, match="negative"):
        memory.set_capacity(-1)
