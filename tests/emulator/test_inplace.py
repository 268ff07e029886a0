"""In-place ops mutate neuron tensors in place, including through views and metadata changes."""

from __future__ import annotations

import torch


def test_add_inplace_keeps_data_ptr():
    x = torch.ones(4, device="neuron")
    ptr = x.data_ptr()
    y = x.add_(2)
    assert y is x and x.data_ptr() == ptr
    assert x.cpu().tolist() == [3.0] * 4


def test_inplace_on_view_updates_base():
    base = torch.zeros(3, 3, device="neuron")
    base[:, 1].add_(5)
    base.diagonal().zero_()
    expected = torch.zeros(3, 3)
    expected[:, 1].add_(5)
    expected.diagonal().zero_()
    assert torch.equal(base.cpu(), expected)


def test_masked_fill_on_transposed_view():
    cpu = torch.arange(6.0).reshape(2, 3)
    dev = cpu.to("neuron")
    mask = torch.tensor([[True, False], [False, True], [True, True]])
    cpu.t().masked_fill_(mask, -1)
    dev.t().masked_fill_(mask.to("neuron"), -1)
    assert torch.equal(dev.cpu(), cpu)


def test_index_put_and_copy_from_flip():
    cpu = torch.zeros(5)
    dev = cpu.to("neuron")
    idx = torch.tensor([0, 3])
    cpu.index_put_((idx,), torch.tensor([1.0, 2.0]))
    dev.index_put_((idx.to("neuron"),), torch.tensor([1.0, 2.0], device="neuron"))
    assert torch.equal(dev.cpu(), cpu)
    dev.copy_(dev.flip(0))
    cpu.copy_(cpu.flip(0))
    assert torch.equal(dev.cpu(), cpu)


def test_metadata_inplace_ops():
    dev = torch.arange(6.0, device="neuron").reshape(2, 3)
    cpu = torch.arange(6.0).reshape(2, 3)
    for fn in (
        lambda t: t.t_(),
        lambda t: t.unsqueeze_(0),
        lambda t: t.squeeze_(0),
        lambda t: t.transpose_(0, 1),
        lambda t: t.as_strided_((3,), (2,), 1),
    ):
        fn(dev)
        fn(cpu)
        assert dev.size() == cpu.size() and dev.stride() == cpu.stride()
        assert dev.storage_offset() == cpu.storage_offset()
        assert torch.equal(dev.cpu(), cpu)


def test_resize_grow_and_shrink():
    x = torch.arange(4.0, device="neuron")
    x.resize_(2)
    assert x.cpu().tolist() == [0.0, 1.0]
    x.resize_(3, 3)
    assert x.shape == (3, 3)
    assert x.cpu().flatten()[:4].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert x.untyped_storage().nbytes() >= 36


def test_set_to_other_tensor_storage():
    a = torch.arange(6.0, device="neuron")
    b = torch.empty(0, device="neuron")
    b.set_(a)
    assert b.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    b.set_(a.untyped_storage(), 2, (2,), (1,))
    assert b.cpu().tolist() == [2.0, 3.0]
    b.set_()
    assert b.numel() == 0


def test_inplace_autograd_copyslices():
    w = torch.ones(3, device="neuron", requires_grad=True)
    y = w * 2
    y[1:].mul_(3)
    y.sum().backward()
    assert w.grad.cpu().tolist() == [2.0, 6.0, 6.0]
