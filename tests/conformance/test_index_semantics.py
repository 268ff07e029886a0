"""neuron_conformance.conformance.verdict.index_semantics: integer outputs judged by what the op's semantics fix (index selects
value, sort indices a permutation, unique's inverse and counts, LU pivots), right results pass, wrong
indices fail."""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.verdict.failures import MetadataFailure, NumericFailure
from neuron_conformance.conformance.verdict.index_semantics import RULE, checker
from neuron_conformance.conformance.verdict.tolerances import Tolerance

TOL = Tolerance(atol=1e-5, rtol=1.3e-6, source="torch.testing float32")
TIED = torch.tensor([[3, 1, 3, 2, 1], [0, 0, 5, 5, 5]], dtype=torch.int32)


def _judge(op_name, fn, x, *args, actual=None, **kwargs):
    """The check of ``op_name`` on ``fn(x, *args, **kwargs)``; ``actual`` (a function of the CPU result)
    stands in for the device's result."""
    expected = fn(x, *args, **kwargs)
    got = expected if actual is None else actual(expected)
    return checker(op_name, (x, args, kwargs))(got, expected, TOL, f"{op_name} sample 0")


def _shift(t):
    return (t + 1) % 5


@pytest.mark.parametrize(
    "op_name, fn, args, kwargs",
    [
        ("sort", torch.sort, (1,), {}),
        ("sort", torch.sort, (), {"dim": 0, "descending": True, "stable": True}),
        ("argsort", torch.argsort, (1, True), {}),
        ("topk", torch.topk, (3,), {}),
        ("topk", torch.topk, (2, 1, False, False), {}),
        ("max.reduction_with_dim", torch.max, (1,), {}),
        ("min.reduction_with_dim", torch.min, (0, True), {}),
        ("kthvalue", torch.kthvalue, (2, 1), {}),
        ("mode", torch.mode, (), {"dim": 1}),
        ("median", torch.median, (1,), {"keepdim": True}),
    ],
)
def test_right_indices_pass_for_ties(op_name, fn, args, kwargs):
    assert [v.rule for v in _judge(op_name, fn, TIED, *args, **kwargs)] == [RULE]


def test_median_without_dim_has_no_index_to_judge():
    assert _judge("median", torch.median, TIED) == []


def test_other_tie_breaking_passes():
    """sort's indices of equal values may come in any order: the last of the tied indices first is fine."""
    x = torch.tensor([2, 1, 2, 1])
    flipped = lambda r: (r.values, torch.tensor([3, 1, 2, 0]))  # noqa: E731 - a tie order the CPU does not give
    assert _judge("sort", torch.sort, x, actual=flipped)[0].rule == RULE
    last = lambda r: (r.values, torch.tensor(2))  # noqa: E731 - the last of the tied maxima
    assert _judge("max.reduction_with_dim", torch.max, x, 0, actual=last)[0].rule == RULE


@pytest.mark.parametrize(
    "op_name, fn, args, wrong, needle",
    [
        ("sort", torch.sort, (1,), lambda r: (r.values, _shift(r.indices)), "not the returned values"),
        ("sort", torch.sort, (1,), lambda r: (r.values, torch.zeros_like(r.indices)), "repeats an index"),
        ("argsort", torch.argsort, (1,), lambda r: _shift(r), "not the CPU's sorted values"),
        ("topk", torch.topk, (3,), lambda r: (r.values, torch.zeros_like(r.indices)), "repeats an index"),
        ("max.reduction_with_dim", torch.max, (1,), lambda r: (r.values, r.indices + 5), "out of range"),
        ("max.reduction_with_dim", torch.max, (1,), lambda r: (r.values, _shift(r.indices)), "not the returned"),
        ("kthvalue", torch.kthvalue, (2, 1), lambda r: (r.values, r.indices.float()), "not an integer dtype"),
    ],
)
def test_wrong_indices_fail(op_name, fn, args, wrong, needle):
    with pytest.raises((NumericFailure, MetadataFailure), match=needle) as err:
        _judge(op_name, fn, TIED, *args, actual=wrong)
    assert err.value.fields["rule"] == RULE


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"return_inverse": True, "return_counts": True},
        {"sorted": False, "return_inverse": True},
        {"dim": 1, "return_inverse": True, "return_counts": True},
        {"dim": 0, "return_counts": True},
    ],
)
def test_unique_right_outputs_pass(kwargs):
    x = torch.tensor([[1, 2, 1, 2], [1, 2, 1, 3], [1, 2, 1, 2]])
    assert _judge("unique", torch.unique, x, **kwargs)[0].rule == RULE


@pytest.mark.parametrize(
    "kwargs, wrong, needle",
    [
        ({"return_inverse": True}, lambda r: (r[0], (r[1] + 1) % r[0].numel()), "does not rebuild the input"),
        ({"return_inverse": True}, lambda r: (r[0], r[1] + 7), "inverse out of range"),
        ({"return_counts": True}, lambda r: (r[0], r[1].flip(0)), "number of occurrences"),
        ({"return_counts": True}, lambda r: (r[0][:-1], r[1][:-1]), "not the CPU's"),
        ({"sorted": False}, lambda r: r.flip(0), None),  # another order of the same distinct values: fine
        ({"dim": 1, "return_inverse": True}, lambda r: (r[0], r[1].flip(0)), "does not rebuild"),
        ({"return_inverse": True, "return_counts": True}, lambda r: (r[0], r[1]), "unique returns 3"),
    ],
)
def test_unique_wrong_outputs_fail(kwargs, wrong, needle):
    x = torch.tensor([[1, 2, 1, 2], [1, 2, 1, 3], [1, 2, 1, 2]])
    if needle is None:
        assert _judge("unique", torch.unique, x, actual=wrong, **kwargs)[0].rule == RULE
        return
    with pytest.raises((NumericFailure, MetadataFailure), match=needle):
        _judge("unique", torch.unique, x, actual=wrong, **kwargs)


def test_lu_pivots():
    a = torch.tensor([[1.0, 2.0, 0.5], [4.0, 1.0, 3.0], [2.0, 7.0, 1.0]])
    assert _judge("linalg.lu_factor", torch.linalg.lu_factor, a)[0].rule == RULE
    assert _judge("linalg.lu_factor_ex", torch.linalg.lu_factor_ex, a)[0].rule == RULE
    with pytest.raises(NumericFailure, match="pivots out of range"):
        _judge("linalg.lu_factor", torch.linalg.lu_factor, a, actual=lambda r: (r[0], r[1] * 0))
    with pytest.raises(NumericFailure, match="does not rebuild the input"):
        _judge(
            "linalg.lu_factor",
            torch.linalg.lu_factor,
            a,
            actual=lambda r: (r[0], torch.tensor([1, 2, 3], dtype=torch.int32)),
        )
    with pytest.raises(NumericFailure, match="info"):
        _judge("linalg.lu_factor_ex", torch.linalg.lu_factor_ex, a, actual=lambda r: (r[0], r[1], r[2] + 1))


def test_ops_without_a_rule_have_no_checker():
    assert checker("add", (torch.ones(1), (), {})) is None
    assert checker("unique", (3, (), {})) is None
