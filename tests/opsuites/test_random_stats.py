"""The random_ops suite's statistics and case table: bounds, power against wrong parameters, completeness."""

from __future__ import annotations

import math

import pytest
import torch

from conformance import aten_audit
from conformance.failures import NumericFailure
from opsuites import random_stats as st
from opsuites.test_random_ops import all_cases


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


def test_every_random_target_has_exactly_one_case():
    cases = all_cases()
    assert sorted(cases) == sorted(aten_audit.random_targets())
    assert all(c.dtype in ("float32", "int64") for c in cases.values())


@pytest.mark.parametrize("name", ["aten::uniform_", "aten::randperm", "aten::native_dropout", "aten::multinomial"])
def test_cases_accept_the_cpu_kernel(name):
    """The documented semantics hold for the CPU kernel (the --device cpu self-check, in small)."""
    case = all_cases()[name]
    op = aten_audit.overload_of(name)
    torch.manual_seed(0)
    args, kwargs = case.build(torch.device("cpu"), None)
    fields = case.check(op(*args, **kwargs), args, kwargs)
    assert fields["rule"] in ("ks", "z-test", "support") and fields["max_abs"] <= fields["atol"]
