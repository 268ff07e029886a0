"""The layout rewrites of opsuites/test_layouts.py keep values and change the memory layout."""

from __future__ import annotations

import torch
from torch.testing._internal.opinfo.core import SampleInput

from opsuites import test_layouts as L


def _sample():
    x = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    return SampleInput(x, args=(torch.ones(5),), kwargs={})


def test_value_preserving_layouts_keep_values_and_change_strides():
    s = _sample()
    for name, fn in (("transposed", L._transposed), ("sliced", L._sliced), ("offset", L._offset),
                     ("channels_last", L._channels_last)):
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
    assert [n for n, _ in L._layouts(scalar)] == ["noncontiguous"]
