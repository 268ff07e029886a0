"""Tests of the float8 format table (conformance/verdict/float8_formats.py), the dtype option, the float8 tolerances,
the oracle on float8 results and the cast suite's inputs (opsuites/float8_cases.py)."""

from __future__ import annotations

import math

import pytest
import torch

from neuron_conformance.conformance.pytest_plugin import options as opts
from neuron_conformance.conformance.verdict import float8_formats as f8
from neuron_conformance.conformance.verdict.oracle import judge, ulp_distance
from neuron_conformance.conformance.verdict.tolerances import (
    EXACT,
    Tolerance,
    default_tolerance,
    float8_tolerance,
    for_output,
    tolerance_for,
)
from neuron_conformance.opsuites import float8_cases as cases

NAMES = f8.available_names()


@pytest.mark.parametrize("name", NAMES)
def test_table_decodes_every_pattern_as_torch_does(name):
    """The table's layout gives torch's CPU value for all 256 bit patterns (NaN for NaN)."""
    fmt = f8.FORMATS[name]
    torch_values = cases.all_patterns(name).double().tolist()
    for b, want in enumerate(torch_values):
        got = fmt.decode(b)
        assert (math.isnan(got) and math.isnan(want)) or got == want, (name, hex(b), got, want)


@pytest.mark.parametrize("name", NAMES)
def test_eps_is_the_gap_after_one_and_finfo_agrees_except_e5m2fnuz(name):
    fmt = f8.FORMATS[name]
    finite = sorted(v for v in (fmt.decode(b) for b in range(256)) if math.isfinite(v))
    assert finite[finite.index(1.0) + 1] - 1.0 == fmt.eps
    assert fmt.largest == float(torch.finfo(getattr(torch, name)).max)
    if name == "float8_e5m2fnuz":  # torch 2.13's finfo reads E5M2's epsilon pattern with the fnuz bias
        assert torch.finfo(torch.float8_e5m2fnuz).eps in (0.125, fmt.eps)
    else:
        assert torch.finfo(getattr(torch, name)).eps == fmt.eps


def test_decode_rejects_a_pattern_outside_a_byte():
    with pytest.raises(ValueError, match="float8_e4m3fn: bit pattern 256"):
        f8.FORMATS["float8_e4m3fn"].decode(256)


def test_dtype_option_accepts_float8_names_outside_the_default_set():
    assert opts._parse_dtypes("float8_e4m3fn, float8_e8m0fnu") == ("float8_e4m3fn", "float8_e8m0fnu")
    assert set(NAMES) <= set(opts._parse_dtypes("all"))
    assert not set(NAMES) & set(opts.DEFAULT_DTYPES)
    with pytest.raises(opts.OptionError, match="unknown dtype 'float8_e4m3'"):
        opts._parse_dtypes("float8_e4m3")


def test_a_float8_name_this_torch_lacks_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(opts, "KNOWN_DTYPES", tuple(n for n in opts.KNOWN_DTYPES if n != "float8_e8m0fnu"))
    monkeypatch.setattr(f8, "available_names", lambda: tuple(n for n in NAMES if n != "float8_e8m0fnu"))
    with pytest.raises(
        opts.OptionError,
        match=r"float8_e8m0fnu' is a float8 format this torch .* does not "
        r"define \(torch.float8_e8m0fnu is missing\); it has: float8_e4m3fn",
    ):
        opts._parse_dtypes("float32,float8_e8m0fnu")


def test_float8_tolerance_is_one_ulp_of_the_format():
    tol = float8_tolerance(torch.float8_e4m3fn)
    assert (tol.rtol, tol.atol) == (0.125, 2.0**-9)
    assert default_tolerance(torch.float8_e5m2fnuz).rtol == 0.25  # from the layout, not finfo's 0.125
    assert default_tolerance(torch.float8_e8m0fnu).atol == 2.0**-127
    assert tolerance_for(torch.float8_e5m2, mirrors_cpu=True).exact
    with pytest.raises(KeyError, match="not a float8 dtype"):
        float8_tolerance(torch.float32)


def test_outputs_of_another_dtype_than_a_float8_test_get_their_own_tolerance():
    tol = tolerance_for(torch.float8_e4m3fn)
    assert for_output(tol, torch.bfloat16) == default_tolerance(torch.bfloat16)
    assert for_output(tol, torch.float8_e4m3fn) is tol
    assert for_output(tolerance_for(torch.float32), torch.float8_e5m2) == float8_tolerance(torch.float8_e5m2)
    assert for_output(tolerance_for(torch.float16), torch.float32) == tolerance_for(torch.float16)  # unchanged
    assert for_output(EXACT, torch.bfloat16) is EXACT
    assert for_output(Tolerance(0.1, 0.2, "opinfo-override", torch.float8_e4m3fn), torch.float32).rtol == 0.2


def test_oracle_counts_float8_ulps_and_applies_the_tolerance():
    e = torch.tensor([1.0, -3.5, 448.0, 0.0]).to(torch.float8_e4m3fn)
    one = torch.tensor([1.125, -3.75, 416.0, 2.0**-9]).to(torch.float8_e4m3fn)
    two = torch.tensor([1.25, -4.0, 384.0, 2.0**-8]).to(torch.float8_e4m3fn)
    assert ulp_distance(one, e).tolist() == [1.0, 1.0, 1.0, 1.0]
    assert judge(one, e).passed and judge(one, e).max_ulp == 1.0
    v = judge(two, e)
    assert not v.passed and v.rule == "tolerance" and v.max_ulp == 2.0
    assert not judge(one, e, exact=True).passed
    nan = torch.tensor([float("nan"), 1.0]).to(torch.float8_e5m2fnuz)
    assert judge(nan, nan).passed and not judge(torch.ones(2).to(torch.float8_e5m2fnuz), nan).passed
    # e8m0 has no sign bit: its bytes order its values
    p = torch.tensor([1.0, 8.0]).to(torch.float8_e8m0fnu)
    assert ulp_distance(p, torch.tensor([2.0, 2.0]).to(torch.float8_e8m0fnu)).tolist() == [1.0, 2.0]


def test_cast_cases_cover_every_direction():
    got = [c.id for c in cases.cast_cases(["float32", "float8_e4m3fn", "float8_e5m2"])]
    assert len(got) == 2 * (6 + 1) and "float8_e4m3fn-to-float8_e5m2" in got and "bfloat16-to-float8_e5m2" in got
    c = cases.CastCase("float16", "float8_e4m3fn")
    assert (c.float8, c.variant) == ("float8_e4m3fn", "from_float16")
    assert cases.CastCase("float8_e4m3fn", "float8_e5m2").variant == "to_float8_e5m2"


@pytest.mark.parametrize("wide", cases.WIDE)
def test_boundary_values_hold_values_ties_their_neighbours_and_specials(wide):
    x = cases.boundary_values("float8_e4m3fn", wide)
    bits = cases.bits(x).tolist()
    assert len(set(bits)) == len(bits)
    vals = set(x.double().tolist())
    for v in (448.0, -448.0, 1.0, 1.0625, 464.0, 2.0**-10, -(2.0**-10), float("inf"), float("-inf")):
        assert v in vals, v  # a value, a tie, the overflow tie, half the smallest subnormal, infinities
    tie = cases.bits(torch.tensor([1.0625], dtype=getattr(torch, wide))).item()
    assert tie - 1 in bits and tie + 1 in bits  # one unit of the wider format below and above the tie
    zeros = x[x == 0]
    assert sorted(torch.signbit(zeros).tolist()) == [False, True]
    assert int(x.isnan().sum()) == 6  # +-NaN, and a quiet and a signalling NaN with payloads, both signs


def test_all_patterns_is_every_byte():
    assert cases.bits(cases.all_patterns("float8_e5m2")).tolist() == list(range(256))
