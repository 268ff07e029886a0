"""The fused LSTM and GRU cells every non-CPU device provides, which the CPU has no kernel for.

``nn.LSTM``, ``nn.GRU``, ``nn.LSTMCell`` and ``nn.GRUCell`` take the fused cell path on a PrivateUse1
tensor as they do on CUDA and XPU (``LSTMCell`` / ``GRUCell`` in aten/src/ATen/native/RNN.cpp: "use the
fused kernel" when the input is a CUDA, XPU or PrivateUse1 tensor): they call
``aten::_thnn_fused_lstm_cell`` / ``aten::_thnn_fused_gru_cell``, whose only kernels are CUDA's
(aten/src/ATen/native/cuda/RNN.cu). A backend without them cannot run a recurrent model at all, so the
emulated device registers them on PrivateUse1, with the contract CUDA's kernels define:

* ``_thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias, hidden_bias) -> (hy, cy, workspace)``:
  the gates are ``input_gates + hidden_gates (+ input_bias + hidden_bias)``, split into four along
  dimension 1 (input, forget, cell, output); ``cy = f * cx + i * g`` and ``hy = o * tanh(cy)`` with the
  sigmoid of i, f, o and the tanh of g; the workspace holds the four activated gates, ``(B, 4H)``;
* ``_thnn_fused_lstm_cell_backward_impl(grad_hy, grad_cy, cx, cy, workspace, has_bias)
  -> (grad_gates, grad_cx, grad_bias)``: an undefined gradient counts as zero; ``grad_bias`` is
  ``grad_gates`` summed over the batch when ``has_bias``;
* ``_thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias, hidden_bias) -> (hy, workspace)``:
  reset ``r`` and update ``z`` gates are sigmoids of the summed first and second thirds, the new gate is
  ``n = tanh(in + b_in + r * (hn + b_hn))`` and ``hy = n + z * (hx - n)``; the workspace holds
  ``r, z, n, hn + b_hn, hx``, ``(B, 5H)``;
* ``_thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias)
  -> (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias)``.

The autograd formulas (tools/autograd/derivatives.yaml) call these backward kernels, or the composite
``_thnn_differentiable_*_backward`` when a graph of the backward is built, so double backward needs
nothing more. As CUDA does (``accscalar_t``), half-precision gates are computed in float32 and the results
stored in the input dtype. The arithmetic runs as aten ops on the device tensors, so each mode's kernels
(the CPU's in mirror and device modes, their own in the alternate mode) compute it and the asynchronous
mode queues it like any op.
"""

from __future__ import annotations

import torch

_HALF = (torch.float16, torch.bfloat16)


def _acc(t: torch.Tensor | None) -> torch.Tensor | None:
    """``t`` in the accumulate type: float32 for half-precision tensors, else ``t`` itself."""
    if t is None or t.dtype not in _HALF:
        return t
    return t.float()


def _summed_gates(input_gates, hidden_gates, input_bias, hidden_bias) -> torch.Tensor:
    gates = _acc(input_gates) + _acc(hidden_gates)
    if input_bias is not None:
        gates = gates + _acc(input_bias)
    if hidden_bias is not None:
        gates = gates + _acc(hidden_bias)
    return gates


def _check_gates(name: str, input_gates, hidden_gates, state, input_bias, hidden_bias, n: int) -> None:
    """CUDA's ``checkSizes`` of a fused cell (aten/src/ATen/native/cuda/RNN.cu): 2-D gates of one shape,
    ``n`` gates per state column, a ``(batch, hidden)`` state, both biases or none, each 1-D of the gates'
    width; one floating dtype for every tensor (``AT_DISPATCH_FLOATING_TYPES_AND2(Half, BFloat16)``)."""
    if input_gates.dim() != 2 or input_gates.shape != hidden_gates.shape:
        raise RuntimeError(
            f"{name}: input_gates and hidden_gates must be 2-D of one shape, got {tuple(input_gates.shape)} "
            f"and {tuple(hidden_gates.shape)}"
        )
    if state.dim() != 2 or state.size(0) != input_gates.size(0) or input_gates.size(1) != n * state.size(1):
        raise RuntimeError(
            f"{name}: gates of shape {tuple(input_gates.shape)} do not match a state of shape {tuple(state.shape)} "
            f"({n} gates per state column)"
        )
    if (input_bias is None) != (hidden_bias is None):
        raise RuntimeError(f"{name}: input_bias and hidden_bias must both be given or both be None")
    biases = [b for b in (input_bias, hidden_bias) if b is not None]
    if any(b.dim() != 1 or b.numel() != input_gates.size(1) for b in biases):
        raise RuntimeError(f"{name}: a bias must be 1-D with {input_gates.size(1)} elements")
    dtypes = {t.dtype for t in (input_gates, hidden_gates, state, *biases)}
    if len(dtypes) != 1 or not input_gates.is_floating_point():
        raise RuntimeError(f"{name}: expected tensors of one floating dtype, got {sorted(map(str, dtypes))}")


def lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    """``aten::_thnn_fused_lstm_cell`` (see the module docstring)."""
    _check_gates("_thnn_fused_lstm_cell", input_gates, hidden_gates, cx, input_bias, hidden_bias, 4)
    i, f, g, o = _summed_gates(input_gates, hidden_gates, input_bias, hidden_bias).chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * _acc(cx) + i * g
    hy = o * cy.tanh()
    dtype = input_gates.dtype
    workspace = torch.cat((i, f, g, o), 1)
    return hy.to(dtype), cy.to(dtype), workspace.to(dtype)


def lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    """``aten::_thnn_fused_lstm_cell_backward_impl`` (see the module docstring)."""
    dtype = workspace.dtype
    i, f, g, o = _acc(workspace).chunk(4, 1)
    tanh_cy = _acc(cy).tanh()
    gcx = torch.zeros_like(tanh_cy)
    if grad_hy is not None:
        go = _acc(grad_hy)
        gcx = gcx + go * o * (1 - tanh_cy * tanh_cy)
        gog = go * tanh_cy * o * (1 - o)
    else:
        gog = torch.zeros_like(tanh_cy)
    if grad_cy is not None:
        gcx = gcx + _acc(grad_cy)
    gig = gcx * g * i * (1 - i)
    gfg = gcx * _acc(cx) * f * (1 - f)
    gcg = gcx * i * (1 - g * g)
    grad_gates = torch.cat((gig, gfg, gcg, gog), 1)
    grad_cx = gcx * f
    grad_bias = grad_gates.sum(0) if has_bias else torch.empty(0, dtype=grad_gates.dtype, device=grad_gates.device)
    return grad_gates.to(dtype), grad_cx.to(dtype), grad_bias.to(dtype)


def gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    """``aten::_thnn_fused_gru_cell`` (see the module docstring)."""
    _check_gates("_thnn_fused_gru_cell", input_gates, hidden_gates, hx, input_bias, hidden_bias, 3)
    ir, ii, in_ = _acc(input_gates).chunk(3, 1)
    hr, hi, hn = _acc(hidden_gates).chunk(3, 1)
    if input_bias is not None:
        bir, bii, bin_ = _acc(input_bias).chunk(3, 0)
        ir, ii, in_ = ir + bir, ii + bii, in_ + bin_
    if hidden_bias is not None:
        bhr, bhi, bhn = _acc(hidden_bias).chunk(3, 0)
        hr, hi, hn = hr + bhr, hi + bhi, hn + bhn
    r = (ir + hr).sigmoid()
    z = (ii + hi).sigmoid()
    n = (in_ + r * hn).tanh()
    h = _acc(hx)
    hy = n + z * (h - n)
    dtype = input_gates.dtype
    workspace = torch.cat((r, z, n, hn, h), 1)
    return hy.to(dtype), workspace.to(dtype)


def gru_cell_backward(grad_hy, workspace, has_bias):
    """``aten::_thnn_fused_gru_cell_backward`` (see the module docstring)."""
    dtype = workspace.dtype
    r, z, n, hn, hx = _acc(workspace).chunk(5, 1)
    go = _acc(grad_hy)
    gz = go * (hx - n) * z * (1 - z)
    ghx = go * z
    gn = go * (1 - z) * (1 - n * n)
    ghn = gn * r
    gr = gn * hn * r * (1 - r)
    grad_input_gates = torch.cat((gr, gz, gn), 1)
    grad_hidden_gates = torch.cat((gr, gz, ghn), 1)
    if has_bias:
        grad_input_bias, grad_hidden_bias = grad_input_gates.sum(0), grad_hidden_gates.sum(0)
    else:
        grad_input_bias = grad_hidden_bias = torch.empty(0, dtype=go.dtype, device=go.device)
    return tuple(t.to(dtype) for t in (grad_input_gates, grad_hidden_gates, ghx, grad_input_bias, grad_hidden_bias))


KERNELS = {
    "_thnn_fused_lstm_cell": lstm_cell,
    "_thnn_fused_lstm_cell_backward_impl": lstm_cell_backward,
    "_thnn_fused_gru_cell": gru_cell,
    "_thnn_fused_gru_cell_backward": gru_cell_backward,
}
"""PrivateUse1 kernels (op name -> Python kernel), registered in every mode (:data:`..registrations.REQUIRED`)."""
