"""The inputs of the bug classes strided-reductions, tile-edges and special-values hold what they claim.

A class loses its teeth silently if an edit makes its layouts contiguous, its sizes miss the edges or its
special values round away in a dtype; these checks pin the properties each class's docstring names.
"""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.opsuites.bugclasses import special_values, strided_reductions, tile_edges

FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


@pytest.mark.parametrize("layout", sorted(strided_reductions._LAYOUTS))
def test_strided_layouts_are_what_they_are_named(layout):
    shape, view = strided_reductions._LAYOUTS[layout]
    x = view(torch.randn(shape))
    assert x.dim() == int(layout[-2]) and not x.is_contiguous()
    kind = layout.split("-")[0]
    if kind == "expanded":
        assert 0 in x.stride()
    if kind == "offset":
        assert x.storage_offset() > 0
    if kind == "stepped":
        assert x.untyped_storage().nbytes() // x.element_size() > x.numel()  # skips elements of its storage


def test_strided_cases_reduce_along_every_dim_and_none():
    fn, _, _ = strided_reductions._OPS["sum"]
    out = fn(torch.ones(3, 4, 5))
    # 3 dims + one tuple, keepdim False/True, then dim=None
    assert len(out) == 2 * (3 + 1) + 1 and out[-1].dim() == 0


def test_tile_edge_sizes_bracket_every_width():
    for width in (64, 128, 256, 512):
        assert {width - 1, width, width + 1} <= set(tile_edges.SIZES)
    assert sum(len(s) for s in tile_edges._BANDS.values()) == len(tile_edges.SIZES)
    assert tile_edges.LARGE >= 2**20 and tile_edges.LARGE % 64


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_specials_survive_in_every_dtype(dtype):
    s = special_values.specials(dtype)
    fi = torch.finfo(dtype)
    assert s.dtype == dtype and bool(torch.isnan(s).any())
    assert bool((s == float("inf")).any()) and bool((s == float("-inf")).any())
    assert bool(((s == 0) & torch.signbit(s)).any())
    subnormal = (s != 0) & (s.abs() < fi.tiny)
    assert int(subnormal.sum()) >= 3, "tiny/2 and +-the smallest subnormal must stay subnormal"
    assert bool((s == fi.max).any()) and bool((s == fi.min).any())


def test_grid_drops_only_opposite_zero_pairs():
    a, b = special_values._grid(torch.float32)
    a2, b2 = special_values._grid(torch.float32, drop_opposite_zeros=True)
    n = len(special_values.specials(torch.float32))
    assert len(a) == n * n and len(a2) == n * n - 2


def test_conversion_inputs_sit_on_rounding_midpoints():
    convs = {name: (src, dst, values()) for name, src, dst, values in special_values._conversions()}
    _, _, half = convs["to-float16"]
    got = half.to(torch.float16).double()
    # 65520 is the midpoint between float16's max and 65536 (odd last bit): overflows; 1 + 2**-11 ties to 1
    assert got[half == 65520.0].isinf().all() and bool((got[half == 1 + 2.0**-11] == 1.0).all())
    _, _, bf = convs["to-bfloat16"]
    assert bool(bf.to(torch.bfloat16).isinf()[1 + 10].item())  # 0x7F7F8000, the midpoint to inf
