"""torch.autocast(device_type="neuron"): ATen's op lists with CUDA's dtype policy."""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.emulator import autocast as emu_autocast


def _pair(shape=(4, 4)):
    torch.manual_seed(0)
    a = torch.randn(*shape)
    b = torch.randn(*shape)
    return a, b


CASES = {
    # op: (fn, expected dtype under bf16 autocast)
    "mm": (lambda a, b: torch.mm(a, b), torch.bfloat16),
    "matmul": (lambda a, b: a @ b, torch.bfloat16),
    "linear": (lambda a, b: torch.nn.functional.linear(a, b), torch.bfloat16),
    "addmm": (lambda a, b: torch.addmm(a, a, b), torch.bfloat16),
    "bmm": (lambda a, b: torch.bmm(a[None], b[None]), torch.bfloat16),
    "exp": (lambda a, b: torch.exp(a.bfloat16()), torch.float32),
    "log_softmax": (lambda a, b: torch.log_softmax(a.bfloat16(), 0), torch.float32),
    "softmax": (lambda a, b: torch.softmax(a.bfloat16(), 0), torch.float32),
    "sum": (lambda a, b: a.bfloat16().sum(), torch.float32),
    "cumsum": (lambda a, b: a.bfloat16().cumsum(0), torch.float32),
    "layer_norm": (lambda a, b: torch.nn.functional.layer_norm(a.bfloat16(), (4,)), torch.float32),
    "mse_loss": (lambda a, b: torch.nn.functional.mse_loss(a.bfloat16(), b.bfloat16()), torch.float32),
    "norm": (lambda a, b: a.bfloat16().norm(), torch.float32),
    "addcmul_promote": (lambda a, b: torch.addcmul(a, a.bfloat16(), b.bfloat16()), torch.float32),
    "addcmul_all_low": (lambda a, b: torch.addcmul(a.bfloat16(), a.bfloat16(), b.bfloat16()), torch.bfloat16),
    "relu_untouched": (lambda a, b: torch.relu(a), torch.float32),
    "add_untouched": (lambda a, b: a + b, torch.float32),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bf16_policy(name):
    fn, expected = CASES[name]
    a, b = _pair()
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
        out = fn(a.to("neuron"), b.to("neuron"))
    assert out.device.type == "neuron"
    assert out.dtype == expected


AGREE_WITH_CPU = ["mm", "matmul", "linear", "addmm", "bmm", "relu_untouched", "add_untouched", "mse_loss"]
"""Ops whose CPU autocast policy (AutocastCPU in autocast_mode.cpp) matches the CUDA policy used on neuron."""


@pytest.mark.parametrize("name", AGREE_WITH_CPU)
def test_matches_cpu_autocast_where_policies_agree(name):
    fn, _ = CASES[name]
    a, b = _pair()
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        ref = fn(a, b)
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
        out = fn(a.to("neuron"), b.to("neuron"))
    assert out.dtype == ref.dtype
    assert torch.equal(out.cpu(), ref)


def test_float16_default_and_double_untouched():
    a, _ = _pair()
    with torch.autocast(device_type="neuron"):
        assert torch.get_autocast_dtype("neuron") == torch.float16
        assert torch.mm(a.to("neuron"), a.to("neuron")).dtype == torch.float16
        d = a.double().to("neuron")
        assert torch.mm(d, d).dtype == torch.float64


def test_disabled_region_and_outside():
    a, _ = _pair()
    x = a.to("neuron")
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
        with torch.autocast(device_type="neuron", enabled=False):
            assert torch.mm(x, x).dtype == torch.float32
    assert torch.mm(x, x).dtype == torch.float32


def test_explicit_dtype_is_kept_for_set_opt_dtype_ops():
    x = torch.ones(4, device="neuron", dtype=torch.bfloat16)
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
        assert x.sum(dtype=torch.float64).dtype == torch.float64


def test_binary_cross_entropy_is_banned_like_cuda():
    p = torch.full((3,), 0.5, device="neuron")
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            torch.nn.functional.binary_cross_entropy(p, p)


def test_lists_follow_aten_headers():
    # spot checks against AT_FORALL_* in aten/src/ATen/autocast_mode.h
    assert "scaled_dot_product_attention" in emu_autocast.LOWER_PRECISION_FP
    assert "pow.Tensor_Scalar" in emu_autocast.FP32
    assert "softmax.int" in emu_autocast.FP32_SET_OPT_DTYPE
    assert "index_put" in emu_autocast.PROMOTE
    assert emu_autocast.policy_of("mm") == "lower_precision_fp"
    assert emu_autocast.policy_of("relu") is None
    total = sum(len(v) for v in emu_autocast.POLICIES.values())
    assert len(emu_autocast.registered) + len(emu_autocast.missing) == total
    assert len(emu_autocast.registered) > 100


def test_backward_under_autocast():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3).to("neuron")
    x = torch.randn(2, 4, device="neuron")
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
        loss = model(x).float().pow(2).mean()
    loss.backward()
    assert model.weight.grad.dtype == torch.float32 and model.weight.grad.device.type == "neuron"
