"""The exact classes (neuron_conformance.conformance.verdict.exact): which ops must be bit-identical to CPU."""

from __future__ import annotations

import pytest

from neuron_conformance.conformance.verdict.exact import EXACT_OPS, NOT_EXACT, exact_class, is_exact_op, is_view_aten
from neuron_conformance.opsuites.samples import opinfo_by_name


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("transpose", "view"),
        ("view", "view"),
        ("cat", "data-movement"),
        ("gather", "indexing"),
        ("eq", "comparison"),
        ("amax", "selection"),
        ("sort", "selection"),
        ("abs", "sign-magnitude"),
        ("neg", "sign-magnitude"),
        ("to", "conversion"),
        ("zeros", "factory"),
    ],
)
def test_exactly_specified_ops_are_exact(name, cls):
    assert exact_class(opinfo_by_name()[name]) == cls
    assert is_exact_op(name)


@pytest.mark.parametrize(
    "name", ["add", "sum", "mm", "exp", "scatter_add", "index_add", "round.decimals_3", "cumsum", "softmax", "arange"]
)
def test_accumulating_or_approximate_ops_are_not_exact(name):
    assert not is_exact_op(opinfo_by_name()[name])


def test_every_listed_name_is_an_opinfo():
    names = set(opinfo_by_name())
    assert set(EXACT_OPS) - names == set()
    assert set(NOT_EXACT) - names == set()


def test_view_detection_reads_the_schema():
    assert is_view_aten("transpose") and is_view_aten("expand")
    assert not is_view_aten("add") and not is_view_aten("add_") and not is_view_aten("no_such_op")


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="OpInfo"):
        exact_class(3)
