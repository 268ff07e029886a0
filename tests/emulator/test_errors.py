"""Ops that cannot work raise clear errors naming the op; nothing crashes or silently succeeds."""

from __future__ import annotations

import pytest
import torch


def test_to_sparse_names_op():
    x = torch.ones(2, 2, device="neuron")
    with pytest.raises(
        NotImplementedError, match=r"neuron emulator: aten::_to_sparse is not supported \(sparse layouts\)"
    ):
        x.to_sparse()


def test_sparse_layout_factory():
    with pytest.raises(NotImplementedError, match="sparse"):
        torch.empty(2, 2, device="neuron", layout=torch.sparse_coo)


def test_pin_memory_returns_an_unpinned_copy_with_the_same_geometry():
    src = torch.arange(12.0).reshape(3, 4).t()
    copy = src.pin_memory()
    assert copy.is_pinned() is False
    assert copy.stride() == src.stride() and torch.equal(copy, src)
    assert copy.untyped_storage().data_ptr() != src.untyped_storage().data_ptr()


def test_pinned_dataloader_runs_and_copies_reach_the_device():
    data = torch.utils.data.TensorDataset(torch.arange(4.0))
    loader = torch.utils.data.DataLoader(data, batch_size=2, pin_memory=True)
    batches = [b.to("neuron", non_blocking=True).cpu().tolist() for (b,) in loader]
    assert batches == [[0.0, 1.0], [2.0, 3.0]]


def test_is_pinned_is_false():
    assert torch.ones(2).is_pinned() is False


def test_neuron_1_raises_invalid_ordinal():
    with pytest.raises(RuntimeError, match="invalid device ordinal 1"):
        torch.empty(2, device="neuron:1")
    with pytest.raises(RuntimeError, match="invalid device ordinal 1"):
        torch.ones(2).to("neuron:1")
    with pytest.raises(RuntimeError, match="invalid device ordinal 1"):
        torch.UntypedStorage(4, device="neuron:1")


def test_generator_on_device_is_clear():
    with pytest.raises((RuntimeError, NotImplementedError), match="getNewGenerator|Generator"):
        torch.Generator("neuron")


def test_mixing_with_non_scalar_cpu_tensor_raises():
    x = torch.ones(3, device="neuron")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x + torch.ones(3)
    with pytest.raises(RuntimeError, match="same device"):
        torch.mm(torch.ones(2, 2, device="neuron"), torch.ones(2, 2))


def test_cpu_scalars_and_indices_allowed():
    x = torch.arange(5.0, device="neuron")
    assert (x * torch.tensor(2.0)).cpu().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert x[torch.tensor([4, 0])].cpu().tolist() == [4.0, 0.0]
    x[torch.tensor([1])] = 9.0
    assert x.cpu()[1].item() == 9.0
    parts = torch.tensor_split(x, torch.tensor([2]))
    assert [p.numel() for p in parts] == [2, 3]


def test_numpy_refused_like_a_device():
    with pytest.raises(TypeError, match="neuron"):
        torch.ones(2, device="neuron").numpy()


def test_quantize_is_unsupported():
    with pytest.raises(NotImplementedError, match="neuron emulator"):
        torch.quantize_per_tensor(torch.ones(2, device="neuron"), 0.1, 0, torch.qint8)
