"""Views on the neuron device alias their base exactly like CPU views (storage, strides, offsets)."""

from __future__ import annotations

import pytest
import torch

VIEWS = {
    "t": lambda x: x.t(),
    "select": lambda x: x.select(0, 1),
    "slice": lambda x: x[1:],
    "step_slice": lambda x: x[:, ::2],
    "view": lambda x: x.view(12),
    "reshape": lambda x: x.reshape(2, 6),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "expand": lambda x: x[:1].expand(5, 4),
    "diagonal": lambda x: x.diagonal(),
    "as_strided": lambda x: x.as_strided((2, 2), (1, 3), 1),
    "unfold": lambda x: x.unfold(1, 2, 1),
    "narrow": lambda x: x.narrow(1, 1, 2),
    "split": lambda x: x.split(1)[1],
    "view_dtype": lambda x: x.view(torch.int32),
    "detach": lambda x: x.detach(),
    "permute": lambda x: x.permute(1, 0),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_view_geometry_matches_cpu(name):
    fn = VIEWS[name]
    base_cpu = torch.arange(12.0).reshape(3, 4)
    base = base_cpu.to("neuron")
    v_cpu, v = fn(base_cpu), fn(base)
    assert v.device.type == "neuron"
    assert v.size() == v_cpu.size()
    assert v.stride() == v_cpu.stride()
    assert v.storage_offset() == v_cpu.storage_offset()
    assert v.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    assert v.data_ptr() - base.data_ptr() == v_cpu.data_ptr() - base_cpu.data_ptr()
    assert torch.equal(v.cpu(), v_cpu)


def test_write_through_transpose_is_seen_by_base():
    x = torch.zeros(2, 3, device="neuron")
    x.T[2, 1] = 7.0
    assert x.cpu()[1, 2].item() == 7.0


def test_write_through_slice_is_seen_by_base():
    x = torch.zeros(4, device="neuron")
    x[1:].fill_(3.0)
    assert x.cpu().tolist() == [0.0, 3.0, 3.0, 3.0]


def test_view_base_and_is_view():
    x = torch.ones(3, 3, device="neuron")
    v = x[1]
    assert v._is_view() and v._base is x


def test_view_keeps_storage_alive_after_base_dies():
    x = torch.arange(6.0, device="neuron")
    v = x[2:]
    del x
    assert v.cpu().tolist() == [2.0, 3.0, 4.0, 5.0]


def test_channels_last_strides_survive_move():
    cpu = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    dev = cpu.to("neuron")
    assert dev.stride() == cpu.stride()
    assert dev.is_contiguous(memory_format=torch.channels_last)


def test_conj_view_round_trip():
    c = torch.randn(4, dtype=torch.complex64)
    d = c.to("neuron")
    assert d.conj().is_conj()
    assert torch.equal(d.conj().cpu(), c.conj())
    assert torch.equal(d.conj().resolve_conj().cpu(), c.conj().resolve_conj())
    assert torch.equal((-d.conj()).cpu(), -c.conj())


def test_module_to_keeps_tied_parameters_tied():
    """``Module.to("neuron")`` must keep one Parameter shared by two modules (tied embeddings)."""
    import torch.nn as nn

    emb, head = nn.Embedding(4, 3), nn.Linear(3, 4, bias=False)
    head.weight = emb.weight
    model = nn.ModuleList([emb, head]).to("neuron")
    assert model[0].weight is model[1].weight
    assert model[0].weight.device.type == "neuron"
    model[1](model[0](torch.tensor([1, 2], device="neuron"))).sum().backward()
    assert model[0].weight.grad is not None and model[0].weight.grad.device.type == "neuron"


def test_views_follow_their_base_in_and_out_of_inference_mode():
    """A view is an inference tensor exactly when its base is (as on the CPU): a view of a normal tensor taken
    inside ``torch.inference_mode()`` works and stays normal, so modules run there; a view of an inference
    tensor taken outside stays an inference tensor."""
    normal = torch.randn(4, 3, device="neuron")
    weight = torch.randn(3, device="neuron", requires_grad=True)
    with torch.inference_mode():
        view = normal.view(12)
        grad_view = weight.view(3)
        created = torch.randn(4, 3, device="neuron")
        linear = torch.nn.Linear(3, 2).to("neuron")(normal)
    assert not view.is_inference() and view.untyped_storage().data_ptr() == normal.untyped_storage().data_ptr()
    assert not grad_view.is_inference() and grad_view.requires_grad
    assert linear.is_inference() and created.view(-1).is_inference()
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
        created.view(-1).add_(1)
