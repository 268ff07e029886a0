"""The fused LSTM and GRU cells (emulator/rnn_cells.py): ``nn.LSTM``/``nn.GRU`` run on the emulated device.

On a PrivateUse1 tensor the recurrent modules call ``_thnn_fused_lstm_cell`` / ``_thnn_fused_gru_cell``
(aten/src/ATen/native/RNN.cpp), which only CUDA implements; the results must agree with the CPU's
unfused cells, forward and backward, in every numeric mode.
"""

from __future__ import annotations

import pytest
import torch

import neuron_conformance.emulator as emu


@pytest.fixture(params=["mirror", "device", "alternate"])
def mode(request):
    previous = emu.get_mode()
    emu.set_mode(request.param)
    yield request.param
    emu.set_mode(previous)


def _run(module: torch.nn.Module, x: torch.Tensor):
    out = module(x)
    out = out[0] if isinstance(out, tuple) else out
    out.square().sum().backward()
    return [out.detach(), x.grad] + [p.grad for p in module.parameters()]


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU, torch.nn.LSTMCell, torch.nn.GRUCell])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_recurrent_modules_agree_with_the_cpu_forward_and_backward(mode, cls, bias, dtype):
    torch.manual_seed(0)
    is_cell = cls in (torch.nn.LSTMCell, torch.nn.GRUCell)
    kwargs = {} if is_cell else {"num_layers": 2}
    ref_module = cls(5, 7, bias=bias, **kwargs).to(dtype)
    dev_module = cls(5, 7, bias=bias, **kwargs).to(dtype)
    dev_module.load_state_dict(ref_module.state_dict())
    dev_module = dev_module.to("neuron")
    x = torch.randn((3, 5) if is_cell else (4, 3, 5), dtype=dtype)
    ref = _run(ref_module, x.clone().requires_grad_())
    got = _run(dev_module, x.to("neuron").requires_grad_())
    assert len(ref) == len(got)
    tol = {"atol": 1e-5, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 1e-12, "rtol": 1e-12}
    for r, g in zip(ref, got):
        assert g.device.type == "neuron"
        torch.testing.assert_close(g.cpu(), r, **tol)


def test_the_fused_kernels_pass_gradcheck_and_double_backward(mode):
    dev = torch.device("neuron")
    gates = torch.randn(2, 32, dtype=torch.float64, device=dev, requires_grad=True)
    cx = torch.randn(2, 4, dtype=torch.float64, device=dev, requires_grad=True)
    bias = torch.randn(16, dtype=torch.float64, device=dev, requires_grad=True)

    def lstm(g, c, b):
        return torch.ops.aten._thnn_fused_lstm_cell(g[:, :16], g[:, 16:], c, b, b)[:2]

    def gru(g, h, b):
        return torch.ops.aten._thnn_fused_gru_cell(g[:, :12], g[:, 12:24], h, b[:12], b[4:])[0]

    assert torch.autograd.gradcheck(lstm, (gates, cx, bias))
    assert torch.autograd.gradcheck(gru, (gates[:, :24], cx, bias))
    assert torch.autograd.gradgradcheck(lstm, (gates, cx, bias))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_gates_are_computed_in_float32(mode, dtype):
    torch.manual_seed(0)
    ig, hg = torch.randn(3, 16).to(dtype), torch.randn(3, 16).to(dtype)
    cx = torch.randn(3, 4).to(dtype)
    hy, cy, workspace = torch.ops.aten._thnn_fused_lstm_cell(ig.to("neuron"), hg.to("neuron"), cx.to("neuron"))
    assert (hy.dtype, cy.dtype, workspace.dtype) == (dtype, dtype, dtype)
    assert workspace.shape == (3, 16)
    i, f, g, o = (ig.float() + hg.float()).chunk(4, 1)
    c = f.sigmoid() * cx.float() + i.sigmoid() * g.tanh()
    torch.testing.assert_close(cy.cpu(), c.to(dtype))
    torch.testing.assert_close(hy.cpu(), (o.sigmoid() * c.tanh()).to(dtype))


@pytest.mark.parametrize(
    "gates, state, biases, match",
    [
        ((2, 12), (2, 4), (), "do not match a state of shape"),  # 12 is not 4 gates x 4
        ((2, 16), (1, 4), (), "do not match a state of shape"),  # a batch of 1 is not broadcast
        ((2, 16), (4,), (), "do not match a state of shape"),
        ((2, 16), (2, 4), ((16,), None), "both be given or both be None"),
        ((2, 16), (2, 4), ((2, 16), (2, 16)), "a bias must be 1-D with 16 elements"),
    ],
)
def test_inputs_cuda_refuses_are_refused_naming_the_kernel(gates, state, biases, match):
    g = torch.randn(*gates, device="neuron")
    b = [None if s is None else torch.randn(*s, device="neuron") for s in biases] or [None, None]
    with pytest.raises(RuntimeError, match=f"_thnn_fused_lstm_cell: .*{match}"):
        torch.ops.aten._thnn_fused_lstm_cell(g, g, torch.randn(*state, device="neuron"), *b)


def test_mixed_or_integer_dtypes_are_refused():
    g = torch.randn(2, 12, device="neuron")
    with pytest.raises(RuntimeError, match="one floating dtype"):
        torch.ops.aten._thnn_fused_gru_cell(g, g, torch.randn(2, 4, dtype=torch.float64, device="neuron"))
    i = torch.ones(2, 12, dtype=torch.int32, device="neuron")
    with pytest.raises(RuntimeError, match="one floating dtype"):
        torch.ops.aten._thnn_fused_gru_cell(i, i, torch.ones(2, 4, dtype=torch.int32, device="neuron"))
