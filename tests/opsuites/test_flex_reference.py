"""The FlexAttention suite's CPU reference (``opsuites/flex/checks.py``): SDPA over the dense mask and bias
is attention with the case's score mod and mask, values and gradients, fully masked rows zero; and its
tolerance and refusal rules."""

from __future__ import annotations

import math

import pytest
import torch

import neuron_conformance.emulator as emu
from neuron_conformance.opsuites.flex.cases import BY_NAME, CASES
from neuron_conformance.opsuites.flex.checks import attention_atol, inputs, is_refusal, sdpa_reference

# The autograd engine sizes its per-device queues at its first backward: a CPU backward before the
# emulated device is registered leaves no queue for neuron, and every later neuron backward in this
# process fails (engine.cpp, device_ready_queues_). These tests run CPU backwards, so register it first.
emu.install()


def _direct(case, q, k, v):
    """softmax(mask(score_mod(scale q k^T))) v written out, fully masked rows 0."""
    group = case.q_heads // case.kv_heads
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = case.dense_score((q @ k.transpose(-2, -1)) / math.sqrt(case.head_dim))
    keep = case.dense_keep()
    scores = scores.masked_fill(~keep, float("-inf"))
    probs = torch.softmax(scores.masked_fill(~keep.any(-1, keepdim=True), 0.0), dim=-1)
    return (probs @ v) * keep.any(-1, keepdim=True)


@pytest.mark.parametrize("name", ["alibi", "softcap", "padded", "gqa", "document"])
def test_sdpa_reference_is_the_case_attention(name):
    case = BY_NAME[name]
    q, k, v, grad_out = (t.double() for t in inputs(case, torch.float32))
    out, grads = sdpa_reference(case, q, k, v, grad_out)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    want = _direct(case, *leaves)
    torch.testing.assert_close(out, want.detach(), atol=1e-12, rtol=1e-12)
    for got, exp in zip(grads, torch.autograd.grad(want, leaves, grad_out)):
        torch.testing.assert_close(got, exp, atol=1e-11, rtol=1e-11)


def test_padded_case_has_fully_masked_rows_with_zero_output_and_gradient():
    case = BY_NAME["padded"]
    q, k, v, grad_out = (t.double() for t in inputs(case, torch.float32))
    out, (dq, _dk, _dv) = sdpa_reference(case, q, k, v, grad_out)
    dead = ~case.dense_keep().any(-1)
    assert int(dead.sum()) == 4 * 25
    assert torch.all(out[dead] == 0) and torch.all(dq[dead] == 0)


def test_cases_have_lengths_off_the_block_sizes():
    assert all(c.q_len % (c.block or 128) or c.kv_len % (c.block or 128) for c in CASES)


def test_attention_atol_follows_the_tensor_scale():
    ref = torch.full((10,), 0.5, dtype=torch.float64)
    assert attention_atol(ref, torch.bfloat16) == pytest.approx(1.6e-2 * 0.5)
    assert attention_atol(ref, torch.float32) == 1e-5  # the dtype's default atol is the floor


def test_refusals_are_told_from_failures():
    assert is_refusal(ValueError("FlexAttention is only supported on CUDA, CPU, HPU, or MPS devices. Found neuron"))
    assert is_refusal(NotImplementedError("no kernel"))
    assert not is_refusal(ValueError("Expect query and key/value to have the same embedding dimension"))
    assert not is_refusal(RuntimeError("shape mismatch"))
