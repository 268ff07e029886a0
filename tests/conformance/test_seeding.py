"""neuron_conformance.conformance.pytest_plugin.seeding.manual_seed: the same numbers as torch.manual_seed on the CPU and the device."""

from __future__ import annotations

import torch

from neuron_conformance.conformance.pytest_plugin.seeding import manual_seed


def test_cpu_generator_matches_torch_manual_seed():
    torch.manual_seed(1234)
    expected = torch.randn(5), torch.initial_seed()
    manual_seed(1234)
    assert torch.equal(torch.randn(5), expected[0]) and torch.initial_seed() == expected[1]


def test_privateuse1_device_generator_is_seeded():
    import neuron_conformance.emulator.backend  # noqa: F401 - the emulated neuron device

    torch.manual_seed(99)
    expected = torch.rand(4, device="neuron").cpu()
    torch.manual_seed(5)  # another state in between
    torch.rand(4, device="neuron")
    manual_seed(99)
    assert torch.equal(torch.rand(4, device="neuron").cpu(), expected)


def test_does_not_queue_lazy_seeds_for_devices_not_initialised():
    if torch.cuda.is_initialized():
        import pytest

        pytest.skip("CUDA is initialised in this process")
    import torch.cuda as cuda

    before = (list(getattr(cuda, "_queued_calls", [])), getattr(cuda._lazy_seed_tracker, "manual_seed_all_cb", None))
    manual_seed(3)
    after = (list(getattr(cuda, "_queued_calls", [])), getattr(cuda._lazy_seed_tracker, "manual_seed_all_cb", None))
    assert after == before
