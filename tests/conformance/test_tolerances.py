"""Tests of neuron_conformance.conformance.verdict.tolerances."""

import torch

from neuron_conformance.conformance.verdict.tolerances import (
    DEFAULT_TOLERANCES,
    default_tolerance,
    opinfo_override,
    tolerance_for,
)


def test_defaults_match_torch_testing():
    # the table must agree with what torch.testing.assert_close actually uses
    from torch.testing._comparison import default_tolerances

    for dtype, (rtol, atol) in DEFAULT_TOLERANCES.items():
        assert default_tolerances(torch.empty(0, dtype=dtype)) == (rtol, atol)


def test_exact_for_integers_bool_and_mirror():
    assert tolerance_for(torch.int32).exact and tolerance_for(torch.bool).exact
    t = tolerance_for(torch.float32, mirrors_cpu=True)
    assert t.exact and t.source == "mirror"
    assert tolerance_for(torch.bfloat16, exact=True).exact
    assert default_tolerance(torch.bfloat16).rtol == 1.6e-2


def test_opinfo_override_is_honoured():
    from torch.testing._internal.common_methods_invocations import op_db

    found = None
    for op in op_db:
        for dt in (torch.float16, torch.bfloat16, torch.float32):
            over = opinfo_override(op, dt)
            base = default_tolerance(dt)
            if over and (over[0] > base.atol or over[1] > base.rtol):
                found = (op, dt, over)
                break
        if found:
            break
    assert found is not None, "torch 2.13's OpInfos declare tolerance overrides"
    op, dt, over = found
    t = tolerance_for(dt, opinfo=op)
    assert t.source == "opinfo-override"
    assert t.atol >= over[0] and t.rtol >= over[1]


def test_a_floating_output_of_an_integer_test_gets_its_own_dtypes_tolerance():
    """Rule 1: exactness follows the output's dtype (asinh of int64 returns float32)."""
    import torch

    from neuron_conformance.conformance.verdict.tolerances import default_tolerance, for_output, tolerance_for

    tol = tolerance_for(torch.int64)
    assert tol.exact
    assert for_output(tol, torch.int64).exact  # an integer output stays exact
    assert for_output(tol, torch.float32) == default_tolerance(torch.float32)
    assert for_output(tol, torch.complex64) == default_tolerance(torch.complex64)
    # a backend that mirrors the CPU kernels keeps every output exact; an exact-class op stays exact
    assert for_output(tolerance_for(torch.int64, mirrors_cpu=True), torch.float32).exact
    assert for_output(tolerance_for(torch.float32, exact=True), torch.float32).exact


def test_gradients_of_exact_class_ops_get_the_dtypes_tolerance():
    """Rule 5: the backward of an exact-class op accumulates, so its gradient is not compared bitwise."""
    import torch

    from neuron_conformance.conformance.verdict.tolerances import default_tolerance, for_gradient, tolerance_for

    assert for_gradient(tolerance_for(torch.float32, exact=True), torch.float32) == default_tolerance(torch.float32)
    assert for_gradient(tolerance_for(torch.bfloat16, exact=True), torch.bfloat16) == default_tolerance(torch.bfloat16)
    mirror = tolerance_for(torch.float32, mirrors_cpu=True)
    assert for_gradient(mirror, torch.float32, mirrors_cpu=True) is mirror
    exact_on_mirror = tolerance_for(torch.float32, exact=True, mirrors_cpu=True)
    assert for_gradient(exact_on_mirror, torch.float32, mirrors_cpu=True).exact
    plain = tolerance_for(torch.float32)
    assert for_gradient(plain, torch.float32) is plain
