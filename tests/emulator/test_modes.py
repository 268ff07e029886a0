"""Mirror mode (bitwise equal to CPU) and device mode (composites decompose as on a non-CPU device)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import neuron_conformance.emulator as emu
from neuron_conformance.emulator import registrations


def _inputs(dtype=torch.float32):
    torch.manual_seed(0)
    return (torch.randn(2, 4, 16, 8, dtype=dtype) for _ in range(3))


def test_mode_api(mirror_mode):
    assert emu.get_mode() == "mirror" and emu.mirrors_cpu()
    assert registrations.mirror_installed()
    emu.set_mode("device")
    assert emu.get_mode() == "device" and not emu.mirrors_cpu()
    assert not registrations.mirror_installed()
    emu.set_mode("mirror")
    assert registrations.mirror_installed()
    with pytest.raises(ValueError, match="unknown mode 'fast'"):
        emu.set_mode("fast")


def test_mirror_registers_cpu_and_composite_ops(mirror_mode):
    names = registrations.mirror_op_names()
    assert len(names) > 300
    assert "aten::add.Tensor" in names and "aten::native_group_norm" in names


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mirror_bitwise_equal_to_cpu(mirror_mode, dtype):
    torch.manual_seed(0)
    x = torch.randn(4, 6, 5, dtype=dtype)
    w = torch.randn(6, dtype=dtype)
    b = torch.randn(6, dtype=dtype)
    m = torch.randn(5, 3, dtype=dtype)
    ops = [
        lambda x, w, b, m: F.group_norm(x, 3, w, b),
        lambda x, w, b, m: F.layer_norm(x, (5,)),
        lambda x, w, b, m: torch.addmm(m[:1].expand(4, 3), x[:, 0], m),
        lambda x, w, b, m: (x * 3 + 1).softmax(-1),
        lambda x, w, b, m: F.gelu(x).sum(-1),
    ]
    for op in ops:
        cpu = op(x, w, b, m)
        dev = op(*(t.to("neuron") for t in (x, w, b, m)))
        assert torch.equal(dev.cpu(), cpu)


def test_device_mode_sdpa_equals_cpu_math_backend(device_mode):
    q, k, v = _inputs()
    with sdpa_kernel(SDPBackend.MATH):
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out = F.scaled_dot_product_attention(q.to("neuron"), k.to("neuron"), v.to("neuron"), is_causal=True)
    assert torch.equal(out.cpu(), ref)


def test_mirror_mode_sdpa_bitwise_equal_to_cpu_default(mirror_mode):
    q, k, v = _inputs()
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out = F.scaled_dot_product_attention(q.to("neuron"), k.to("neuron"), v.to("neuron"), is_causal=True)
    assert torch.equal(out.cpu(), ref)


def test_device_mode_results_close_to_cpu(device_mode):
    torch.manual_seed(0)
    x = torch.randn(4, 6, 5, dtype=torch.bfloat16)
    out = F.group_norm(x.to("neuron"), 3)
    torch.testing.assert_close(out.cpu(), F.group_norm(x, 3), atol=2e-2, rtol=2e-2)
    y = torch.randn(8, 8)
    torch.testing.assert_close((y.to("neuron") @ y.to("neuron")).cpu(), y @ y)


def test_device_mode_autograd(device_mode):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4)).to("neuron")
    model(torch.randn(3, 4, device="neuron")).sum().backward()
    assert all(p.grad is not None and p.grad.device.type == "neuron" for p in model.parameters())


def test_mode_from_environment_variable(run_py):
    proc = run_py(
        """
        import neuron_conformance.emulator as emu
        emu.install()
        from neuron_conformance.emulator import backend
        print(emu.get_mode(), backend.CONFORMANCE_MIRRORS_CPU(), backend.CONFORMANCE_DIST_BACKEND)
        """,
        env={"CONFORMANCE_EMULATOR_MODE": "device"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["device", "False", "neuron_gloo"]


def test_mirror_mode_sdpa_with_an_attn_mask_requiring_grad_has_cpu_gradients(mirror_mode):
    """CPU picks the math backend for a mask that requires grad (the flash kernel cannot differentiate it);
    mirror mode must ask the CPU's choice with the flag kept (the SDPA OpInfo's float32 sample 24)."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(4, 4, n, 8) for n in (3, 6, 6))
    mask = torch.randn(3, 6)

    def grads(device):
        leaves = [t.to(device).requires_grad_() for t in (q, k, v, mask)]
        F.scaled_dot_product_attention(*leaves[:3], attn_mask=leaves[3]).sum().backward()
        return [t.grad.cpu() for t in leaves]

    for dev, cpu in zip(grads("neuron"), grads("cpu")):
        assert torch.equal(dev, cpu)


def test_mirror_mode_max_pool1d_takes_the_cpu_branch(mirror_mode):
    """Without a gradient CPU's max_pool1d returns a contiguous output; with one (and on other devices) it
    goes through max_pool1d_with_indices, which keeps a transposed input's memory order."""
    x = torch.randn(2, 8, 3).transpose(1, 2)
    for requires_grad in (False, True):
        cpu = F.max_pool1d(x.detach().requires_grad_(requires_grad), 2)
        dev = F.max_pool1d(x.detach().to("neuron").requires_grad_(requires_grad), 2)
        assert dev.stride() == cpu.stride() and torch.equal(dev.detach().cpu(), cpu.detach())
