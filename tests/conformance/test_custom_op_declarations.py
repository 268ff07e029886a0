"""``neuron_conformance.conformance.backend.custom_ops``: a custom-op declaration is validated with one line naming what is wrong.

Uses an operator every torch has (``aten::add``) so no custom op needs defining; the suite's own run is
tested by ``tests/faults/test_custom_op_faults.py``.
"""

from __future__ import annotations

import sys
import types

import pytest
import torch

from neuron_conformance.conformance.backend.custom_ops import (
    CustomOpError,
    CustomOpSpec,
    TensorArg,
    build_args,
    declared_ops,
    parse_declaration,
)

SRC = "mod:CONFORMANCE_CUSTOM_OPS"


def _spec(**over):
    fields = dict(
        name="aten::add",
        reference=torch.add,
        dtypes=("float32",),
        samples=((TensorArg((2, 3), grad=True), TensorArg((2, 3))),),
    )
    fields.update(over)
    return CustomOpSpec(**fields)


def test_a_valid_declaration_is_returned_in_order():
    specs = parse_declaration([_spec(), _spec(name="aten::mul", reference=torch.mul)], SRC)
    assert [s.name for s in specs] == ["aten::add", "aten::mul"]
    assert specs[0].overload() is torch.ops.aten.add.default
    assert specs[0].test_id == "aten.add"


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        (
            {"aten::add": 1},
            "must be a list of neuron_conformance.conformance.backend.custom_ops.CustomOpSpec (or mappings of its fields), got dict",
        ),
        (
            ["aten::add"],
            "entries must be neuron_conformance.conformance.backend.custom_ops.CustomOpSpec or a mapping of its fields, got str",
        ),
        ([_spec(name="add")], "name 'add' is not 'namespace::op'"),
        ([_spec(name="no_ns_here::nothing")], "'no_ns_here::nothing' names no registered operator"),
        ([_spec(reference="torch.add")], "reference must be a callable CPU implementation, got str"),
        ([_spec(dtypes=("int64",))], "dtypes must be a non-empty tuple of float32, float64, bfloat16, float16"),
        ([_spec(dtypes=())], "dtypes must be a non-empty tuple"),
        ([_spec(samples=())], "samples must be a non-empty tuple of argument tuples"),
        ([_spec(samples=((TensorArg((2, -1)),),))], "shape must be a tuple of non-negative ints, got (2, -1)"),
        ([_spec(samples=((TensorArg((2,), dtype="float99"),),))], "dtype 'float99' is not a torch dtype name"),
        ([_spec(samples=((TensorArg((2,), grad=True, dtype="int64"),),))], "grad=True needs a floating dtype"),
        ([_spec(samples=(("x",),))], "arguments must be TensorArg, a number, a bool or None; got str"),
        ([_spec(), _spec()], "aten::add declared more than once"),
    ],
)
def test_a_broken_declaration_is_one_line_naming_it(value, needle):
    with pytest.raises(CustomOpError) as info:
        parse_declaration(value, SRC)
    message = str(info.value)
    assert message.startswith(SRC) and needle in message and "\n" not in message


def test_declared_ops_reads_the_backend_module(monkeypatch):
    module = types.ModuleType("fake_backend_for_custom_ops")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    assert declared_ops(module.__name__) == [] and declared_ops(None) == []
    module.CONFORMANCE_CUSTOM_OPS = [_spec()]
    assert [s.name for s in declared_ops(module.__name__)] == ["aten::add"]
    module.CONFORMANCE_CUSTOM_OPS = [_spec(name="bad")]
    with pytest.raises(CustomOpError, match="^fake_backend_for_custom_ops:CONFORMANCE_CUSTOM_OPS: name 'bad'"):
        declared_ops(module.__name__)


def test_build_args_is_seeded_and_keeps_the_declaration():
    sample = (TensorArg((4, 5), grad=True), TensorArg((5,), dtype="float64", low=0.0, high=1.0), 1e-6, True)
    first, again = build_args(sample, torch.bfloat16, 7), build_args(sample, torch.bfloat16, 7)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert (first[0].dtype, first[0].shape, first[0].requires_grad) == (torch.bfloat16, (4, 5), True)
    assert (first[1].dtype, first[1].requires_grad) == (torch.float64, False)
    assert bool(((first[1] >= 0) & (first[1] <= 1)).all()) and first[2:] == (1e-6, True)
    assert not torch.equal(build_args(sample, torch.float32, 8)[0], first[0].float())
