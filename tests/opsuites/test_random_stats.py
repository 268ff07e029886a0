"""The random_ops suite's statistics and case table: bounds, power against wrong parameters, completeness."""

from __future__ import annotations

import math

import pytest
import torch

from neuron_conformance.conformance.results import aten_audit
from neuron_conformance.conformance.verdict.failures import NumericFailure
from neuron_conformance.opsuites.randomops import stats as st
from neuron_conformance.opsuites.test_random_ops import all_cases


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_ks_critical_is_the_dkw_bound():
    assert st.ks_critical(20_000) == pytest.approx(math.sqrt(math.log(2 / 1e-6) / 2) / math.sqrt(20_000))
    assert 0.018 < st.ks_critical(20_000) < 0.020
    with pytest.raises(ValueError, match="n >= 1"):
        st.ks_critical(0)


def test_ks_continuous_accepts_the_law_and_rejects_a_wrong_parameter():
    x = torch.randn(20_000, generator=_gen())
    ok = st.ks_continuous("randn", x, st.normal_cdf)
    assert ok["rule"] == "ks" and ok["max_abs"] <= ok["atol"]
    with pytest.raises(NumericFailure, match="normal_ std 2") as info:
        st.ks_continuous("normal_ std 2", x / 2, st.normal_cdf)  # std 1 drawn where 2 was asked
    assert info.value.fields["rule"] == "ks" and info.value.fields["max_abs"] > 0.15
    with pytest.raises(NumericFailure):
        st.ks_continuous("constant", torch.full((1000,), 0.5), lambda v: v)


def test_ks_discrete_on_integer_laws():
    x = torch.randint(-3, 7, (20_000,), generator=_gen())
    st.ks_discrete("randint", x, lambda k: ((k + 4) / 10).clamp(0, 1), -3, 6)
    with pytest.raises(NumericFailure, match="discrete"):
        st.ks_discrete("randint off by one", x + 1, lambda k: ((k + 4) / 10).clamp(0, 1), -3, 6)
    p = torch.poisson(torch.full((20_000,), 4.0), generator=_gen())
    st.ks_discrete("poisson", p, st.poisson_cdf(4.0), 0, int(p.max()))
    b = torch.binomial(torch.full((20_000,), 10.0), torch.full((20_000,), 0.3), generator=_gen())
    st.ks_discrete("binomial", b, st.binomial_cdf(10, 0.3), 0, 10)
    with pytest.raises(NumericFailure):
        st.ks_discrete("binomial p 0.5", b, st.binomial_cdf(10, 0.5), 0, 10)


def test_z_tests():
    p = torch.linspace(0.05, 0.95, 20_000)
    st.bernoulli_z("bernoulli", torch.bernoulli(p, generator=_gen()), p)
    with pytest.raises(NumericFailure, match="z = ") as info:
        st.bernoulli_z("bernoulli p ignored", torch.bernoulli(torch.full_like(p, 0.3), generator=_gen()), p)
    assert info.value.fields["rule"] == "z-test"
    with pytest.raises(ValueError, match="variance"):
        st.z_sum("x", 1.0, 1.0, 0.0)


def test_every_random_target_has_a_case_per_dtype():
    cases = all_cases()
    assert sorted({o for o, _ in cases}) == sorted(aten_audit.random_targets())
    assert all(c.dtype == dt and c.overload == o for (o, dt), c in cases.items())
    dtypes = {o: {dt for oo, dt in cases if oo == o} for o, _ in cases}
    assert dtypes["aten::exponential_"] == {"float32", "bfloat16", "float16", "float64"}
    assert {"int8", "uint8", "bool", "bfloat16"} <= dtypes["aten::random_.from"]
    assert dtypes["aten::randint.low"] == {"int8", "int16", "int32", "int64", "uint8", "bool"}
    assert dtypes["aten::_standard_gamma"] == {"float32", "float64"}


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        ("aten::uniform_", "float32"),
        ("aten::randperm", "int64"),
        ("aten::native_dropout", "float32"),
        ("aten::multinomial", "float32"),
        ("aten::exponential_", "bfloat16"),
        ("aten::exponential_", "float16"),
        ("aten::normal.Tensor_Tensor", "bfloat16"),
        ("aten::log_normal_", "float16"),
        ("aten::rand", "bfloat16"),
        ("aten::random_", "bfloat16"),
        ("aten::random_.from", "uint8"),
        ("aten::randint.low", "bool"),
        ("aten::randperm", "int8"),
        ("aten::native_dropout", "bfloat16"),
        ("aten::rrelu_with_noise", "bfloat16"),
        ("aten::bernoulli.Tensor", "float16"),
        ("aten::bernoulli_.float", "bool"),
        ("aten::poisson", "bfloat16"),
    ],
)
def test_cases_accept_the_cpu_kernel(name, dtype):
    """The documented semantics hold for the CPU kernel (the --conformance-device cpu self-check, in small), in half
    precision and in integer dtypes too."""
    case = all_cases()[name, dtype]
    op = aten_audit.overload_of(name)
    torch.manual_seed(0)
    args, kwargs = case.build(torch.device("cpu"), None)
    fields = case.check(op(*args, **kwargs), args, kwargs)
    assert fields["rule"] in ("ks", "z-test", "support") and fields["max_abs"] <= fields["atol"]


def test_resolution_and_ulp_band():
    assert st.resolution(torch.bfloat16) == 2.0**-8 and st.resolution(torch.float16) == 2.0**-11
    assert st.resolution(torch.float32) == 2.0**-24 and st.resolution(torch.int64) == 0.0
    lo, hi = st.ulp_band(torch.tensor([1.0, 0.0], dtype=torch.bfloat16))
    assert lo.tolist()[0] == 1.0 - 2.0**-8 and hi.tolist()[0] == 1.0 + 2.0**-7  # spacing halves below 1
    assert lo.tolist()[1] < 0.0 < hi.tolist()[1]
    lo, hi = st.ulp_band(torch.tensor([3, -1]))
    assert lo.tolist() == hi.tolist() == [3.0, -1.0]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_ks_in_half_precision_no_false_alarm_yet_a_wrong_rate_is_caught(dtype):
    """A rounded sample of the right law passes; rate 1 for rate 3 fails."""
    n = 200_000
    x = torch.empty(n, dtype=dtype).exponential_(3.0, generator=_gen(1))
    cdf = lambda v: 1 - torch.exp(-3.0 * v.clamp_min(0))  # noqa: E731
    ok = st.ks_continuous("exponential_(3)", x, cdf)
    assert ok["max_abs"] <= ok["atol"] and ok["atol"] == pytest.approx(st.ks_critical(n) + st.resolution(dtype))
    for seed in range(2, 6):
        u = torch.empty(n, dtype=dtype).uniform_(-2.0, 3.0, generator=_gen(seed))
        st.ks_continuous("uniform_(-2, 3)", u, lambda v: (v + 2) / 5)
        z = torch.empty(n, dtype=dtype).normal_(0.5, 2.0, generator=_gen(seed))
        st.ks_continuous("normal_(0.5, 2)", z, st.normal_cdf, transform=lambda v: (v - 0.5) / 2.0)
    wrong = torch.empty(20_000, dtype=dtype).exponential_(1.0, generator=_gen(7))
    with pytest.raises(NumericFailure, match="resolution") as info:
        st.ks_continuous("exponential_ lambd ignored", wrong, cdf)
    assert info.value.fields["max_abs"] > 0.3


def test_resolution_allowance_is_needed_for_a_quantised_bfloat16_rand():
    """The CPU's bfloat16 ``rand`` is not the continuous law rounded (its uniform word is quantised: P(x <
    0.5) is 0.501): at 2 million draws its statistic, even with the ULP band, is above the DKW value alone
    (a false alarm without the allowance) and below it with the 2^-8 resolution."""
    n = 2_000_000
    x = torch.rand(n, dtype=torch.bfloat16, generator=_gen(0))
    fields = st.ks_continuous("rand bfloat16", x, lambda v: v)
    assert st.ks_critical(n) < fields["max_abs"] <= fields["atol"]


def test_z_sum_bias_allowance():
    assert st.z_sum("x", 110.0, 100.0, 1.0, bias=10.0)["max_abs"] == 0.0
    with pytest.raises(NumericFailure, match="bias allowed"):
        st.z_sum("x", 117.0, 100.0, 1.0, bias=10.0)
    with pytest.raises(ValueError, match="bias"):
        st.z_sum("x", 1.0, 1.0, 1.0, bias=-1.0)
