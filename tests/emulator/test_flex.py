"""FlexAttention on the emulated device (``neuron_conformance.emulator.flex``): refused in eager
mode as torch refuses it, run under the ``neuron`` compile backend by the device's own kernels, with the
block mask's absent / partial / full blocks honoured."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from neuron_conformance.emulator import flex


def _causal(b, h, q_idx, kv_idx):
    return kv_idx <= q_idx


def _qkv(requires_grad=False):
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(1, 2, 40, 8, generator=gen).to("neuron").requires_grad_(requires_grad) for _ in range(3)]


def test_eager_flex_attention_is_refused_as_torch_refuses_it():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="FlexAttention is only supported on"):
        flex_attention(q, k, v)


def test_block_states_mark_absent_partial_and_full_blocks():
    mask = create_block_mask(_causal, 1, 1, 40, 40, device="neuron", BLOCK_SIZE=16)
    states = flex._block_states(mask.as_tuple(), (1, 1, 40, 40)).cpu()[0, 0]
    # blocks of 16: diagonal blocks partial, blocks below full, blocks above absent; the blocks of the last
    # row and column (8 positions, padded by create_block_mask with False) are partial even below the diagonal
    assert states[0, 0] == 1 and states[0, 16] == 0 and states[20, 3] == 2 and states[39, 39] == 1
    assert states[17, 33] == 0 and states[35, 20] == 1 and states[35, 36] == 1
    assert states.shape == (40, 40)


def test_compiled_flex_runs_the_device_kernels_and_matches_the_math():
    calls = []
    forward, backward = flex.KERNELS["forward"], flex.KERNELS["backward"]
    flex.set_kernels(
        forward=lambda *a, **k: (calls.append("forward"), forward(*a, **k))[1],
        backward=lambda *a, **k: (calls.append("backward"), backward(*a, **k))[1],
    )
    try:
        torch._dynamo.reset()
        q, k, v = _qkv(requires_grad=True)
        mask = create_block_mask(_causal, 1, 2, 40, 40, device="neuron", BLOCK_SIZE=16)
        out = torch.compile(flex_attention, backend="neuron", fullgraph=True)(q, k, v, block_mask=mask)
        out.sum().backward()
    finally:
        flex.set_kernels(forward=forward, backward=backward)
    assert calls == ["forward", "backward"]
    qc, kc, vc = (t.detach().cpu().double() for t in (q, k, v))
    scores = (qc @ kc.transpose(-2, -1)) / 8**0.5
    scores = scores.masked_fill(~torch.ones(40, 40, dtype=torch.bool).tril(), float("-inf"))
    ref = torch.softmax(scores, dim=-1) @ vc
    torch.testing.assert_close(out.detach().cpu().double(), ref, atol=1e-5, rtol=1e-5)
    assert q.grad is not None and q.grad.device.type == "neuron"


def test_set_kernels_and_uninstall_compiled_path():
    with pytest.raises(TypeError):
        flex.set_kernels(None)  # keyword-only: a positional kernel is not taken by mistake
    flex.uninstall_compiled_path()
    try:
        torch._dynamo.reset()
        q, k, v = _qkv()
        # under fullgraph, Dynamo reports torch's ValueError as an observed exception it cannot trace past
        with pytest.raises(torch._dynamo.exc.Unsupported, match="FlexAttention is only supported on"):
            torch.compile(flex_attention, backend="neuron", fullgraph=True)(q, k, v)
    finally:
        flex.install()
    torch._dynamo.reset()
    q, k, v = _qkv()
    assert torch.compile(flex_attention, backend="neuron", fullgraph=True)(q, k, v).device.type == "neuron"
