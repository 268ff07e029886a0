"""Emulator fixes the shape_contracts suite found (opsuites/test_shape_contracts.py), each against the CPU.

* ``_batch_norm_no_update``: its composite calls ``batch_norm_cpu`` (CPU tensors only), so the emulator
  registers it (``batch_norm.KERNELS``) and it runs its CPU kernel (in evaluation mode with the
  statistics of one element per channel that its meta kernel gives);
* a tensor passed twice (``query is key is value``) reaches the CPU kernel as one tensor, so kernels that
  branch on identity (``_native_multi_head_attention``'s self-attention path) compute what the CPU does:
  bitwise in mirror mode;
* the Tensor ``scalars`` of ``_foreach_addcdiv/addcmul`` stay CPU tensors, as every device requires
  (ForeachUtils.h), while other CPU tensors mixed with neuron ones are still refused.
"""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.backend.transfer import to_device_exact


def _dev(t):
    return to_device_exact(t, "neuron", {})


def test_batch_norm_no_update_runs_and_matches_cpu():
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(2, 3, 4, generator=g), torch.rand(3, generator=g) + 0.5, torch.randn(3, generator=g)
    rm, rv = torch.zeros(3), torch.ones(3)
    expected = torch.ops.aten._batch_norm_no_update(x, w, b, rm, rv, 0.1, 1e-5)
    actual = torch.ops.aten._batch_norm_no_update(*map(_dev, (x, w, b, rm, rv)), 0.1, 1e-5)
    assert all(a.device.type == "neuron" for a in actual)
    for i in (0, 3):  # output and reserve; the statistics are (C,) as the meta kernel's (emulator/batch_norm.py)
        torch.testing.assert_close(actual[i].cpu(), expected[i], rtol=1e-6, atol=1e-6)
    assert tuple(expected[1].shape) == (0,) and tuple(actual[1].shape) == tuple(actual[2].shape) == (3,)


def test_a_tensor_given_twice_stays_one_tensor(mirror_mode):
    g = torch.Generator().manual_seed(0)
    e, heads = 4, 2
    x = torch.randn(2, 3, e, generator=g)
    w = [
        torch.randn(3 * e, e, generator=g),
        torch.randn(3 * e, generator=g),
        torch.randn(e, e, generator=g),
        torch.randn(e, generator=g),
    ]
    expected = torch.ops.aten._native_multi_head_attention(x, x, x, e, heads, *w)
    xd = _dev(x)
    actual = torch.ops.aten._native_multi_head_attention(xd, xd, xd, e, heads, *map(_dev, w))
    for a, ex in zip(actual, expected):
        assert torch.equal(a.cpu(), ex)  # mirror mode: the CPU kernel on the same (identical) inputs


def test_foreach_scalars_stay_on_cpu():
    g = torch.Generator().manual_seed(0)
    self_ = [torch.randn(3, generator=g), torch.randn(2, 2, generator=g)]
    t1 = [torch.randn(3, generator=g), torch.randn(2, 2, generator=g)]
    t2 = [torch.rand(3, generator=g) + 0.5, torch.rand(2, 2, generator=g) + 0.5]
    scalars = torch.tensor([0.5, -2.0])
    expected = torch.ops.aten._foreach_addcdiv.Tensor(self_, t1, t2, scalars)
    actual = torch.ops.aten._foreach_addcdiv.Tensor(
        [_dev(t) for t in self_], [_dev(t) for t in t1], [_dev(t) for t in t2], scalars
    )
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a.cpu(), e)
    with pytest.raises(RuntimeError, match="same device"):
        torch.ops.aten._foreach_addcdiv.Tensor([_dev(t) for t in self_], t1, [_dev(t) for t in t2], scalars)
