"""Helpers of opsuites/test_variants.py's out= checks: out= tensors and the CPU reproducibility probe."""

from __future__ import annotations

import torch

from opsuites import test_variants as V


class _Op:
    """The part of an OpInfo the helpers use: a name and a call."""

    def __init__(self, fn):
        self.name = fn.__name__
        self.fn = fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


@_Op
def _deterministic(x, *, out):
    return torch.add(x, 1, out=out)


@_Op
def _garbage(x, *, out):
    """An out= op whose CPU result differs from run to run (what the probe must notice)."""
    out.resize_(x.shape)
    return out.copy_(torch.randn(x.shape))


def test_out_kinds_have_the_promised_geometry():
    expected = torch.zeros(3, 4)
    sized = V._make_out(expected, "cpu", "sized")
    noncontig = V._make_out(expected, "cpu", "noncontig")
    empty = V._make_out(expected, "cpu", "empty")
    assert sized.shape == (3, 4) and torch.isnan(sized).all()
    assert noncontig.shape == (3, 4) and not noncontig.is_contiguous() and noncontig.stride() == (8, 2)
    assert empty.numel() == 0
    ints = V._make_out(torch.zeros(2, dtype=torch.int32), "cpu", "sized")
    assert (ints == torch.iinfo(torch.int32).max).all()


def test_cpu_reproducibility_probe():
    x = torch.arange(4.0)
    pristine = (x, (), {})
    expected = x + 1
    first = V._make_out(expected, "cpu", "sized")
    V._run_out(_deterministic, pristine, first)
    assert V._cpu_out_reproducible(_deterministic, pristine, expected, "sized", first)
    noisy = V._make_out(expected, "cpu", "empty")
    V._run_out(_garbage, pristine, noisy)
    assert not V._cpu_out_reproducible(_garbage, pristine, expected, "empty", noisy)


def test_cpu_out_agreement_with_the_functional_result():
    expected = (torch.tensor([1.0, float("nan")]), torch.tensor(5))
    assert V._cpu_out_agrees((torch.tensor([1.0, float("nan")]), torch.tensor(5)), expected)
    assert not V._cpu_out_agrees((torch.tensor([1.0, float("nan")]), torch.tensor(0)), expected)
    assert not V._cpu_out_agrees((torch.tensor([1.0, 2.0]),), expected)
