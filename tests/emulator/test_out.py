"""``out=`` arguments: same shape, resize of empty outs, wrong shape, tuple outs, strided views."""

from __future__ import annotations

import warnings

import pytest
import torch


def test_out_same_shape_keeps_storage():
    a = torch.randn(3, device="neuron")
    out = torch.empty(3, device="neuron")
    ptr = out.data_ptr()
    r = torch.add(a, a, out=out)
    assert r is out and out.data_ptr() == ptr
    assert torch.equal(out.cpu(), a.cpu() * 2)


def test_out_empty_is_resized():
    a = torch.randn(2, 3, device="neuron")
    out = torch.empty(0, device="neuron")
    torch.mul(a, 3, out=out)
    assert out.shape == (2, 3)
    assert torch.equal(out.cpu(), a.cpu() * 3)


def test_out_wrong_nonempty_shape_warns_and_resizes():
    a = torch.randn(4, device="neuron")
    out = torch.empty(2, device="neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.neg(a, out=out)
    assert any("resized" in str(w.message) for w in caught)
    assert torch.equal(out.cpu(), -a.cpu())


def test_tuple_out():
    a = torch.randn(3, 4, device="neuron")
    values = torch.empty(0, device="neuron")
    indices = torch.empty(0, dtype=torch.long, device="neuron")
    r = torch.max(a, 1, out=(values, indices))
    ref = torch.max(a.cpu(), 1)
    assert r[0] is values and r[1] is indices
    assert torch.equal(values.cpu(), ref.values) and torch.equal(indices.cpu(), ref.indices)


def test_noncontiguous_view_as_out():
    base = torch.zeros(3, 4, device="neuron")
    a = torch.ones(3, 2, device="neuron")
    torch.add(a, 1, out=base[:, ::2])
    expected = torch.zeros(3, 4)
    expected[:, ::2] = 2
    assert torch.equal(base.cpu(), expected)


def test_out_grows_beyond_storage():
    out = torch.empty(2, device="neuron")
    a = torch.arange(10.0, device="neuron")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.mul(a, 2, out=out)
    assert out.shape == (10,)
    assert torch.equal(out.cpu(), torch.arange(10.0) * 2)


def test_out_dtype_mismatch_raises_like_cpu():
    a = torch.randn(3, device="neuron")
    out = torch.empty(3, dtype=torch.long, device="neuron")
    with pytest.raises(RuntimeError):
        torch.add(a, a, out=out)


def test_out_on_cpu_is_rejected_even_for_a_0_dim_result():
    a = torch.randn(3, 4, device="neuron")
    with pytest.raises(RuntimeError, match="same device"):
        torch.amax(a, out=torch.empty((), dtype=a.dtype))
    with pytest.raises(RuntimeError, match="same device"):
        torch.mean(a, out=torch.empty(()))


def test_out_overlapping_an_input_raises_like_cpu():
    for device in ("cpu", "neuron"):
        x = torch.arange(6.0, device=device)
        with pytest.raises(RuntimeError, match="single memory location"):
            torch.take(x, torch.tensor([0, 1, 2], device=device), out=x[1:4])
        with pytest.raises(RuntimeError, match="single memory location"):
            torch.cat([x[:2], x[2:4]], out=x[1:5])


def test_out_of_the_right_shape_is_written_in_place_without_a_copy():
    a = torch.randn(4, device="neuron")
    out = torch.empty(8, device="neuron")[::2]  # strided view of a larger storage
    ptr = out.data_ptr()
    torch.exp(a, out=out)
    assert out.data_ptr() == ptr and out.stride() == (2,)
    assert torch.equal(out.cpu(), torch.exp(a.cpu()))
