"""The layout rewrites of opsuites/test_layouts.py keep values and change the memory layout."""

from __future__ import annotations

import torch
from torch.testing._internal.opinfo.core import SampleInput

from neuron_conformance.opsuites import test_layouts as L


def _sample():
    x = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    return SampleInput(x, args=(torch.ones(5),), kwargs={})


def test_value_preserving_layouts_keep_values_and_change_strides():
    s = _sample()
    for name, fn in (
        ("transposed", L._transposed),
        ("sliced", L._sliced),
        ("offset", L._offset),
        ("channels_last", L._channels_last),
    ):
        y = fn(s.input)
        assert torch.equal(y, s.input), name
        assert (y.stride(), y.storage_offset()) != (s.input.stride(), s.input.storage_offset()), name
    assert L._sliced(s.input).storage_offset() == 1 and L._sliced(s.input).stride()[-1] == 2
    assert L._offset(s.input).storage_offset() == 3


def test_expanded_has_a_zero_stride():
    y = L._expanded(_sample().input)
    assert y.stride()[-1] == 0 and y.shape == (2, 3, 4, 5)


def test_layouts_lists_only_changed_samples():
    names = [n for n, _ in L._layouts(_sample())]
    assert names == ["noncontiguous", "transposed", "sliced", "offset", "channels_last", "expanded"]
    scalar = SampleInput(torch.tensor(2.0))
    assert L._layouts(scalar) == []


def test_each_layout_needs_the_dims_it_changes():
    """A layout rewrites only tensors it changes for real: transposing a dim of one element, channels_last
    with one channel, or reordering a single element would leave the memory order as it was."""

    def names(t):
        return [n for n, _ in L._layouts(SampleInput(t))]

    assert names(torch.ones(5)) == ["noncontiguous", "sliced", "offset", "expanded"]
    assert names(torch.ones(5, 1)) == ["noncontiguous", "sliced", "offset"]
    assert names(torch.ones(3, 4)) == ["noncontiguous", "transposed", "sliced", "offset", "expanded"]
    assert "channels_last" not in names(torch.ones(2, 1, 3, 3))
    assert names(torch.ones(1)) == ["offset"]


def test_samples_without_a_tensor_of_two_elements_are_left_out_with_a_reason():
    assert L.reject(SampleInput(torch.tensor(2.0), args=(torch.tensor(1.0),))) == "0-dim input"
    assert L.reject(SampleInput(torch.ones(1, 1), args=(torch.tensor(1.0),))) == "one-element tensors only"
    assert L.reject(SampleInput(torch.ones(3, 3).to_sparse())) == "no strided tensor"
    assert L.reject(SampleInput(torch.tensor(2.0), args=(torch.ones(2),))) is None
