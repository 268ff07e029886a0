"""neuron_conformance.conformance.backend.transfer: sample inputs moved with their storage, offset, strides and sharing intact."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import neuron_conformance.emulator.backend  # noqa: F401 - the emulated neuron device
from neuron_conformance.conformance.backend.transfer import (
    sample_to_device,
    to_device_exact,
    to_float64,
    triple_to_device,
)


@pytest.mark.parametrize("device", ["cpu", "neuron"])
def test_view_keeps_offset_strides_and_the_bytes_outside_it(device):
    base = torch.arange(24, dtype=torch.float32)
    view = base.as_strided((2, 3), (1, 4), 5)
    moved = to_device_exact(view, device)
    assert moved.device.type == device
    assert (moved.shape, moved.stride(), moved.storage_offset()) == ((2, 3), (1, 4), 5)
    assert moved.untyped_storage().nbytes() == base.untyped_storage().nbytes()
    assert torch.equal(moved.cpu(), view)
    # a copy, never an alias of the input (the CPU self-check must not share memory with the reference)
    assert moved.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()


def test_tensors_sharing_a_storage_share_one_on_the_device():
    base = torch.randn(6)
    sample = SimpleNamespace(input=base[:3], args=(base[3:],), kwargs={"other": base})
    inp, args, kwargs = sample_to_device(sample, "neuron")
    ptrs = {t.untyped_storage().data_ptr() for t in (inp, args[0], kwargs["other"])}
    assert len(ptrs) == 1 and args[0].storage_offset() == 3


def test_grad_conj_and_neg_bits_survive():
    x = torch.randn(3, requires_grad=True)
    assert to_device_exact(x, "neuron").requires_grad
    z = torch.randn(3, dtype=torch.complex64).conj()
    moved = to_device_exact(z, "cpu")
    assert moved.is_conj() and torch.equal(moved.resolve_conj(), z.resolve_conj())


def test_device_arguments_swap_and_cpu_arguments_stay():
    sample = SimpleNamespace(
        input=torch.ones(4), args=(torch.tensor([1, 2]),), kwargs={"device": torch.device("cpu"), "where": "cpu"}
    )
    inp, args, kwargs = sample_to_device(sample, "neuron", "tensor_split")
    assert inp.device.type == "neuron"
    assert args[0].device.type == "cpu"  # torch.tensor_split wants its index tensor on the CPU
    assert kwargs["device"] == torch.device("neuron") and kwargs["where"] == "neuron"


def test_meta_tensors_stay_on_meta():
    """OpInfo error inputs put tensors on ``meta`` on purpose (torch.gradient's spacing on another device)."""
    spacing = torch.empty(3, device="meta")
    inp, args, _ = sample_to_device(SimpleNamespace(input=torch.ones(3), args=(spacing,), kwargs={}), "neuron")
    assert inp.device.type == "neuron" and args[0] is spacing
    again = triple_to_device((torch.ones(2), (spacing,), {}), "cpu")
    assert again[1][0] is spacing


def test_to_float64_only_touches_the_given_dtype():
    h, i = torch.ones(2, dtype=torch.float16), torch.ones(2, dtype=torch.int64)
    up = to_float64((h, [i, torch.ones(1, dtype=torch.float16)]), torch.float16)
    assert up[0].dtype == torch.float64 and up[1][0] is i and up[1][1].dtype == torch.float64


def test_whole_storage_tensor_then_a_view_of_it_share_one_device_storage():
    base = torch.arange(6.0)
    sample = SimpleNamespace(input=base, args=(base[2:],), kwargs={})
    inp, args, _ = sample_to_device(sample, "neuron")
    assert inp.untyped_storage().data_ptr() == args[0].untyped_storage().data_ptr()
    assert torch.equal(args[0].cpu(), base[2:]) and args[0].storage_offset() == 2


def test_size_one_dimension_keeps_an_unusual_stride():
    t = torch.empty(3, 1).as_strided((3, 1), (1, 7))  # contiguous by PyTorch's rule, not row-major
    assert t.is_contiguous() and t.stride() == (1, 7)
    assert to_device_exact(t, "neuron").stride() == (1, 7)
    assert to_device_exact(torch.ones(2, 3), "neuron").stride() == (3, 1)


def test_to_float64_clone_others_leaves_the_originals_alone():
    h, i = torch.ones(2, dtype=torch.float16), torch.ones(2, dtype=torch.int64)
    up = to_float64({"x": h, "index": i}, torch.float16, clone_others=True)
    assert up["x"].dtype == torch.float64 and up["index"] is not i and torch.equal(up["index"], i)
    up["index"].add_(1)
    assert i.tolist() == [1, 1]
