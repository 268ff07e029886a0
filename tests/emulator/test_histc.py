"""``torch.histc`` on integer neuron tensors follows CUDA (aten/src/ATen/native/cuda/SummaryOps.cu).

The CPU kernel has floating types only; transformers' MoE routing calls ``histc`` on ``int32`` tensors on
every device but CPU and MPS, so the emulator accepts integers (emulator/histc.py).
"""

from __future__ import annotations

import warnings

import pytest
import torch

INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


def cuda_histc_reference(values: list[int], bins: int, lo: int, hi: int) -> list[int]:
    """CUDA's integer histc written out with Python ints: the bounds rules of ``_histc_cuda_template``
    and ``getBin``'s ``(v - min) * nbins / (max - min)`` with the last bin closed."""
    if lo == hi and values:
        lo, hi = min(values), max(values)
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    counts = [0] * bins
    for v in values:
        if lo <= v <= hi:
            counts[min((v - lo) * bins // (hi - lo), bins - 1)] += 1
    return counts


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_integer_histc_matches_cuda_rules(dtype):
    gen = torch.Generator().manual_seed(3)
    low = 0 if dtype == torch.uint8 else -20
    values = torch.randint(low, 40, (200,), generator=gen, dtype=torch.int64).to(dtype)
    for bins, lo, hi in [(4, 0, 4), (7, 0, 6), (5, -3, 17), (3, 0, 0), (13, 2, 9)]:
        got = torch.histc(values.to("neuron"), bins=bins, min=lo, max=hi)
        assert got.device.type == "neuron" and got.dtype == dtype and got.shape == (bins,)
        assert got.cpu().tolist() == cuda_histc_reference(values.tolist(), bins, lo, hi), (bins, lo, hi)


def test_integer_histc_agrees_with_cpu_float_histc_on_small_ranges():
    # what transformers computes on CPU (float32 input) and on a device (int32 input) must agree
    selected = torch.tensor([[0, 3], [1, 3], [2, 0], [3, 1], [3, 2]])
    for bins, hi in [(4, 4), (4, 3)]:  # mixtral's load-balancing loss / integrations.moe's grouped_mm
        on_cpu = torch.histc(selected.reshape(-1).float(), bins=bins, min=0, max=hi)
        on_dev = torch.histc(selected.reshape(-1).int().to("neuron"), bins=bins, min=0, max=hi)
        assert on_dev.dtype == torch.int32
        assert torch.equal(on_dev.cpu().float(), on_cpu)


def test_bounds_conversion_edge_cases_and_errors():
    x = torch.tensor([0, 1, 2, 3, 250], dtype=torch.uint8, device="neuron")
    # float bounds truncate toward zero like Scalar::to<int64_t>: [0.9, 3.9] -> [0, 3]
    assert torch.histc(x, bins=3, min=0.9, max=3.9).cpu().tolist() == [1, 1, 2]
    # min == max: the input's range (0 .. 250)
    assert torch.histc(x, bins=2).cpu().tolist() == [4, 1]
    # counts wrap in the input dtype, like CUDA's integer atomics
    assert torch.histc(torch.full((300,), 2, dtype=torch.uint8, device="neuron"), bins=2).cpu().tolist() == [0, 44]
    assert torch.histc(torch.tensor([], dtype=torch.int64, device="neuron"), bins=3).cpu().tolist() == [0, 0, 0]
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        torch.histc(x, bins=0)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(x, bins=3, min=5, max=1)
    with pytest.raises(RuntimeError, match="int64_t without overflow"):
        torch.histc(x, bins=3, min=0, max=float("inf"))


def test_histc_out_resizes_like_resize_output():
    x = torch.tensor([0, 1, 1, 3, 3, 3, 7, -2], dtype=torch.int32, device="neuron")
    out = torch.empty(0, dtype=torch.int32, device="neuron")
    r = torch.histc(x, bins=5, min=0, max=7, out=out)
    assert r is out and out.cpu().tolist() == [3, 0, 3, 0, 1]
    out = torch.empty(2, dtype=torch.int32, device="neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.histc(x, bins=5, min=0, max=7, out=out)
    assert out.cpu().tolist() == [3, 0, 3, 0, 1]
    assert any("was resized" in str(w.message) for w in caught)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_floating_histc_is_still_the_cpu_kernel(dtype):
    x = torch.randn(100, generator=torch.Generator().manual_seed(0)).to(dtype)
    for kwargs in [dict(bins=7), dict(bins=5, min=-1, max=1)]:
        assert torch.equal(torch.histc(x.to("neuron"), **kwargs).cpu(), torch.histc(x, **kwargs))
    out = torch.empty(5, dtype=dtype, device="neuron")
    torch.histc(x.to("neuron"), bins=5, out=out)
    assert torch.equal(out.cpu(), torch.histc(x, bins=5))


def test_bool_input_raises_as_on_cpu():
    with pytest.raises(NotImplementedError, match="Bool"):
        torch.histc(torch.tensor([True, False]), bins=2)
    with pytest.raises(NotImplementedError, match="Bool"):
        torch.histc(torch.tensor([True, False], device="neuron"), bins=2)


def test_tiny_mixtral_router_aux_loss_on_neuron():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.MixtralConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        router_jitter_noise=0.0,
        output_router_logits=True,
        router_aux_loss_coef=0.01,
    )
    model = transformers.MixtralForCausalLM(config).eval()
    ids = torch.randint(0, 64, (2, 8))
    expected = model(ids, labels=ids)
    model = model.to("neuron")
    got = model(ids.to("neuron"), labels=ids.to("neuron"))  # load_balancing_loss_func: histc on int32
    assert got.aux_loss.device.type == "neuron"
    assert torch.allclose(got.aux_loss.cpu(), expected.aux_loss, rtol=1e-5, atol=1e-6)
    assert torch.allclose(got.loss.cpu(), expected.loss, rtol=1e-5, atol=1e-6)
    got.loss.backward()
