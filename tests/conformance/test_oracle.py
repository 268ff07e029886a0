"""Tests of neuron_conformance.conformance.verdict.oracle: rules, error sizes, ULP distance, fp64 arbitration."""

import pytest
import torch

from neuron_conformance.conformance.verdict.failures import NonFiniteFailure, NumericFailure
from neuron_conformance.conformance.verdict.oracle import CEILING, arbitration_k, check, judge, ulp_distance


def test_ulp_distance_counts_representable_steps():
    one = torch.tensor([1.0, -1.0])
    up = torch.nextafter(one, torch.tensor([2.0, -2.0]))
    assert ulp_distance(up, one).tolist() == [1.0, 1.0]
    # across zero: -tiny .. +tiny is two steps, -0 and +0 are zero steps apart
    tiny = torch.tensor([1e-45])
    assert ulp_distance(-tiny, tiny).item() == 2.0
    assert ulp_distance(torch.tensor([-0.0]), torch.tensor([0.0])).item() == 0.0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_ulp_distance_other_widths(dtype):
    x = torch.tensor([3.0, -7.5], dtype=dtype)
    y = torch.nextafter(torch.nextafter(x, x * 2), x * 2)
    assert ulp_distance(y, x).tolist() == [2.0, 2.0]


def test_exact_rule_catches_one_ulp_and_signed_zero():
    a = torch.tensor([1.0, 2.0])
    b = torch.nextafter(a, a + 1)
    v = judge(b, a, exact=True)
    assert not v.passed and v.rule == "exact" and v.failure_class == "numeric" and v.max_ulp == 1.0
    v0 = judge(torch.tensor([-0.0]), torch.tensor([0.0]), exact=True)
    assert not v0.passed


def test_integers_are_always_exact():
    v = judge(torch.tensor([1, 2, 4]), torch.tensor([1, 2, 3]))
    assert not v.passed and v.rule == "exact" and v.max_abs == 1.0


def test_tolerance_rule_uses_assert_close_defaults():
    e = torch.ones(10)
    ok = judge(e * (1 + 1e-7), e)
    assert ok.passed and ok.rule == "tolerance" and ok.rtol == 1.3e-6 and ok.atol == 1e-5
    bad = judge(e * (1 + 1e-3), e)
    assert not bad.passed and bad.failure_class == "numeric"
    assert bad.max_rel == pytest.approx(1e-3, rel=1e-2)


def test_nan_where_reference_finite_is_nonfinite_in_every_dtype():
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        v = judge(torch.tensor([1.0, float("nan")], dtype=dtype), torch.tensor([1.0, 2.0], dtype=dtype))
        assert not v.passed and v.failure_class == "nonfinite" and v.rule == "nonfinite-positions"


def test_dropped_nan_and_wrong_inf_sign_fail():
    v = judge(torch.tensor([1.0, 0.0]), torch.tensor([1.0, float("nan")]))
    assert not v.passed and v.failure_class == "numeric"
    w = judge(torch.tensor([float("-inf")]), torch.tensor([float("inf")]))
    assert not w.passed
    same = judge(torch.tensor([float("nan"), float("inf")]), torch.tensor([float("nan"), float("inf")]))
    assert same.passed


def test_shape_and_dtype_mismatch_are_metadata():
    assert judge(torch.ones(2), torch.ones(3)).failure_class == "metadata"
    assert judge(torch.ones(2, dtype=torch.float64), torch.ones(2)).failure_class == "metadata"


def test_fp64_arbitration_accepts_device_no_worse_than_cpu():
    torch.manual_seed(0)
    r64 = torch.randn(1000, dtype=torch.float64)
    cpu = r64.to(torch.bfloat16)
    # the device rounds differently (toward zero): a different but equally good bf16 answer
    dev = (r64.float().view(torch.int32) & ~0xFFFF).view(torch.float32).to(torch.bfloat16)
    tol_only = judge(dev, cpu, atol=1e-5, rtol=1e-3)
    assert not tol_only.passed and tol_only.rule == "tolerance"
    v = judge(dev, cpu, reference64=r64, atol=1e-5, rtol=1e-3)
    assert v.rule == "fp64" and v.passed, v.message
    assert arbitration_k(torch.bfloat16) == 3.0 and arbitration_k(torch.float32) == 2.0


def test_fp64_arbitration_rejects_device_much_worse_than_cpu():
    torch.manual_seed(0)
    r64 = torch.randn(1000, dtype=torch.float64)
    cpu = r64.float()
    dev = (r64 * (1 + 1e-4)).float()
    v = judge(dev, cpu, reference64=r64)
    assert not v.passed and v.rule == "fp64" and "fp64 arbitration" in v.message


def test_fp64_ceiling_bounds_a_heavy_tail_the_rmse_hides():
    torch.manual_seed(0)
    r64 = torch.randn(100_000, dtype=torch.float64)
    cpu = r64.float()
    dev = cpu.clone()
    dev[:3] += 0.015  # three elements 15 atol off: the RMSE stays within its bound
    v = judge(dev, cpu, reference64=r64, atol=1e-3, rtol=0.0)
    assert v.extra["rmse_device_vs_fp64"] <= 2 * v.extra["rmse_cpu_vs_fp64"] + 1e-4
    assert not v.passed and "3 element(s) beyond the ceiling" in v.message and CEILING == 10.0


def test_fp64_ceiling_follows_cpu_where_cpu_itself_exceeds_ten_tolerances():
    # the truth is 0 (e.g. the gradient of an attention key bias); CPU's rounding noise is 30 tolerances
    r64 = torch.zeros(100, dtype=torch.float64)
    cpu = torch.full((100,), 3e-4)
    dev = torch.full((100,), -4e-4)  # another rounding, as far from fp64 as 1.33 x CPU: passes
    v = judge(dev, cpu, reference64=r64, atol=1e-5, rtol=1e-3)
    assert v.passed and v.rule == "fp64", v.message
    assert v.extra["cpu_max_err_vs_fp64"] == pytest.approx(3e-4)
    worse = torch.full((100,), 3e-4)
    worse[0] = 7e-4  # one element beyond 2 x CPU's largest error (k = 2 in float32)
    w = judge(worse, cpu, reference64=r64, atol=1e-5, rtol=1e-3)
    assert not w.passed and "1 element(s) beyond the ceiling" in w.message, w.message


def test_check_raises_matching_failure():
    with pytest.raises(NumericFailure, match="sample 3"):
        check(torch.tensor([1.0]), torch.tensor([2.0]), where="sample 3")
    with pytest.raises(NonFiniteFailure):
        check(torch.tensor([float("inf")]), torch.tensor([2.0]))
    assert check(torch.tensor([1]), torch.tensor([1])).passed


def test_scalars():
    assert judge(3, 3).passed and not judge(3, 4).passed
    assert judge(True, True).passed and not judge(False, True).passed
    assert judge(1.0 + 1e-9, 1.0).passed and not judge(1.1, 1.0).passed
    assert judge(float("nan"), float("nan")).passed
