"""Helpers of opsuites/test_variants.py's out= checks: out= tensors and the CPU reproducibility probe."""

from __future__ import annotations

import torch

from neuron_conformance.opsuites import test_variants as V


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


def _rounding_op(scale: float):
    """An out= op whose CPU path rounds through bfloat16 (a lossy CPU reference) and whose path on the
    device is exact times ``scale`` (1: more accurate than the CPU; else wrong); float64 runs are exact."""

    def rounding(x, *, out=None):
        if x.device.type != "cpu":
            r = (x.cpu() * scale).to(x.device)
        else:
            r = x.to(torch.bfloat16).to(torch.float32) if x.dtype == torch.float32 else x.clone()
        if out is None:
            return r
        out.resize_(r.shape)
        return out.copy_(r)

    return _Op(rounding)


def _judge_out(op, reference64: bool):
    import neuron_conformance.emulator.backend  # noqa: F401  deferred: installs the emulated device for this check
    from neuron_conformance.conformance.verdict.compare import ErrorTally
    from neuron_conformance.conformance.verdict.tolerances import Tolerance
    from neuron_conformance.opsuites.suite_helpers import ValuePolicy

    x = torch.linspace(1.0, 3.0, 64)
    pristine = (x, (), {})
    profile = type("Profile", (), {"mirrors_cpu": False})()
    tally = ErrorTally()
    ref64 = V.out_reference64(op, pristine, torch.float32) if reference64 else None
    V._check_out_sample(
        op,
        pristine,
        x.to(torch.bfloat16).float(),
        torch.device("neuron"),
        profile,
        Tolerance(atol=1e-5, rtol=1.3e-6, source="torch.testing float32"),
        tally,
        0,
        "rounding float32 sample 0 (out=)",
        ValuePolicy(True, True, False, "metadata-only"),
        ref64,
    )
    return tally


def test_out_values_are_arbitrated_by_fp64_like_compare_cpu():
    import pytest

    from neuron_conformance.conformance.verdict.failures import NumericFailure

    tally = _judge_out(_rounding_op(1.0), reference64=True)  # nearer fp64 than the CPU: accepted
    assert tally.rule == "fp64" and tally.max_abs > 1e-5
    with pytest.raises(NumericFailure):  # the same device result under the plain tolerance fails
        _judge_out(_rounding_op(1.0), reference64=False)
    with pytest.raises(NumericFailure) as wrong:  # 1e-2 off: further from fp64 than the CPU's error allows
        _judge_out(_rounding_op(1.01), reference64=True)
    assert "fp64 arbitration: device RMSE vs fp64" in str(wrong.value)
