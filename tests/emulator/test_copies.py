"""Moving data: .to / .cpu / dtype casts / copy_ both ways / printing / deepcopy / save and load."""

from __future__ import annotations

import copy
import io

import torch


def test_to_neuron_and_back_keeps_values_and_strides():
    cpu = torch.randn(4, 3).t()
    dev = cpu.to("neuron")
    assert dev.device == torch.device("neuron", 0)
    assert dev.stride() == cpu.stride()
    back = dev.cpu()
    assert back.device.type == "cpu" and torch.equal(back, cpu)
    assert torch.equal(dev.to("cpu"), cpu)


def test_dtype_casts_on_device():
    dev = torch.tensor([1.5, -2.25, 3.0], device="neuron")
    for dtype in (torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.bool, torch.complex64):
        moved = dev.to(dtype)
        assert moved.device.type == "neuron" and moved.dtype == dtype
        assert torch.equal(moved.cpu(), dev.cpu().to(dtype))


def test_copy_both_ways():
    dev = torch.zeros(3, device="neuron")
    src = torch.tensor([1.0, 2.0, 3.0])
    dev.copy_(src)
    assert dev.cpu().tolist() == [1.0, 2.0, 3.0]
    dst = torch.zeros(3, dtype=torch.float64)
    dst.copy_(dev * 2)
    assert dst.tolist() == [2.0, 4.0, 6.0]


def test_non_blocking_to_cpu():
    dev = torch.arange(3.0, device="neuron")
    assert dev.to("cpu", non_blocking=True).tolist() == [0.0, 1.0, 2.0]


def test_printing():
    dev = torch.arange(4.0, device="neuron")
    assert repr(dev) == "tensor([0., 1., 2., 3.], device='neuron:0')"
    big = torch.ones(200, 200, device="neuron")
    assert "device='neuron:0'" in str(big)


def test_item_tolist_bool():
    dev = torch.tensor([[1, 2], [3, 4]], device="neuron")
    assert dev.sum().item() == 10
    assert dev.tolist() == [[1, 2], [3, 4]]
    assert bool(dev.any())


def test_deepcopy_is_independent():
    dev = torch.arange(3.0, device="neuron")
    clone = copy.deepcopy(dev)
    assert clone.device.type == "neuron"
    assert clone.untyped_storage().data_ptr() != dev.untyped_storage().data_ptr()
    dev.add_(1)
    assert clone.cpu().tolist() == [0.0, 1.0, 2.0]


def test_deepcopy_module():
    model = torch.nn.Linear(3, 2).to("neuron")
    twin = copy.deepcopy(model)
    assert twin.weight.device.type == "neuron" and isinstance(twin.weight, torch.nn.Parameter)
    assert torch.equal(twin.weight.cpu(), model.weight.cpu())


def test_save_load_roundtrip_and_map_location():
    dev = torch.arange(6.0, device="neuron").reshape(2, 3)
    buf = io.BytesIO()
    torch.save({"x": dev, "view": dev[1]}, buf)
    for location in ("neuron", "cpu", None):
        buf.seek(0)
        loaded = torch.load(buf, map_location=location)
        expected_type = "neuron" if location in ("neuron", None) else "cpu"
        assert loaded["x"].device.type == expected_type
        assert torch.equal(loaded["x"].cpu(), dev.cpu())
        assert torch.equal(loaded["view"].cpu(), dev[1].cpu())


def test_cpu_checkpoint_loads_onto_neuron():
    buf = io.BytesIO()
    torch.save(torch.nn.Linear(2, 2).state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf, map_location="neuron")
    assert all(v.device.type == "neuron" for v in state.values())


def test_storage_ops():
    dev = torch.arange(4.0, device="neuron")
    st = dev.untyped_storage()
    assert st.device.type == "neuron" and st.nbytes() == 16
    cloned = st.clone()
    assert cloned.device.type == "neuron" and cloned.data_ptr() != st.data_ptr()
    assert torch.equal(torch.empty(0, device="neuron").set_(cloned).cpu(), dev.cpu())
    fresh = torch.UntypedStorage(8, device="neuron")
    assert fresh.device.type == "neuron" and fresh.nbytes() == 8
    assert st.cpu().device.type == "cpu"


def test_module_to_and_optimizer_step():
    torch.manual_seed(0)
    ref = torch.nn.Linear(4, 2)
    dev = copy.deepcopy(ref).to("neuron")
    x = torch.randn(8, 4)
    for model, inp in ((ref, x), (dev, x.to("neuron"))):
        opt = torch.optim.AdamW(model.parameters(), lr=0.1)
        model(inp).square().mean().backward()
        opt.step()
    assert torch.equal(dev.weight.cpu(), ref.weight)
