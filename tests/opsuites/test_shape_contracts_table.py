"""The shape-contract tables and their machinery (opsuites/contracts/registry.py), without a device.

Checked: the tables reach every schema-unsafe overload that has a Python binding and no exclusion, and
every core overload the audit left unreached (but the random ones, another suite's); each sample fits its
overload's schema and the CPU kernel accepts it; ``out=`` tensors are made from the functional result;
bad tables and bad argument names fail with a message naming them.
"""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.results import aten_audit
from neuron_conformance.opsuites.contracts import conv as contracts_conv
from neuron_conformance.opsuites.contracts import extra as contracts_extra
from neuron_conformance.opsuites.contracts import misc as contracts_misc
from neuron_conformance.opsuites.contracts import nn as contracts_nn
from neuron_conformance.opsuites.contracts.registry import Contract, call_arguments, call_samples, registry

TABLES = [contracts_nn.CONTRACTS, contracts_conv.CONTRACTS, contracts_misc.CONTRACTS, contracts_extra.CONTRACTS]
CORE_LEFT = (
    "aten::_native_batch_norm_legit_no_training",
    "aten::adaptive_avg_pool1d",
    "aten::avg_pool1d",
    "aten::constant_pad_nd",
    "aten::div.Scalar_mode",
    "aten::native_group_norm",
    "aten::native_layer_norm",
    "aten::select_scatter",
    "aten::sym_is_contiguous",
    "aten::sym_numel",
    "aten::sym_size.int",
    "aten::sym_storage_offset",
    "aten::sym_stride.int",
    "aten::upsample_bilinear2d.vec",
    "aten::upsample_nearest2d.vec",
    "aten::var.dim",
)
"""The core overloads no suite reached in the full run before this suite (rand, randn, randperm and
native_dropout are the random suite's)."""


def test_tables_reach_the_schema_unsafe_and_the_core_overloads_left():
    reached = registry(TABLES)
    unsafe = {n for n in aten_audit.SCHEMA_UNSAFE if aten_audit.exclusion(n) is None}
    assert not unsafe - set(reached), sorted(unsafe - set(reached))
    assert not set(CORE_LEFT) - set(reached), sorted(set(CORE_LEFT) - set(reached))
    assert set(CORE_LEFT) <= set(aten_audit.coverage.core_overloads())


@pytest.mark.parametrize("name", sorted(registry(TABLES)))
def test_every_sample_fits_the_schema_and_the_cpu_kernel(name):
    contract = registry(TABLES)[name]
    op = aten_audit.overload_of(name)
    samples = call_samples(name, contract)
    assert samples
    for args, kwargs in samples:
        op(*args, **kwargs)  # raises when the contract is wrong: the CPU kernel is the judge


def test_out_tensors_come_from_the_functional_result():
    contract = registry(TABLES)["aten::native_group_norm.out"]
    ((_, kwargs),) = call_samples("aten::native_group_norm.out", contract)
    assert [kwargs[k].shape for k in ("out0", "out1", "out2")] == [torch.Size([0])] * 3  # resized by the kernel
    sized = registry(TABLES)["aten::_int_mm.out"]
    ((_, kwargs),) = call_samples("aten::_int_mm.out", sized)
    assert kwargs["out"].shape == (17, 8) and kwargs["out"].dtype == torch.int32
    adam = registry(TABLES)["aten::_fused_adam.out"]
    (_, kwargs), *_ = call_samples("aten::_fused_adam.out", adam)
    assert [t.shape for t in kwargs["out"]] == [torch.Size([3, 4]), torch.Size([5])]  # one per parameter


def _build(gen):
    return [dict(self=torch.ones(2), other=torch.ones(2))]


def test_bad_tables_and_arguments_name_the_culprit():
    c = Contract(("aten::add.Tensor",), _build, "torch.add docs")
    with pytest.raises(ValueError, match=r"'aten::add.Tensor' has two contracts"):
        registry([[c], [c]])
    with pytest.raises(ValueError, match=r"'aten::no_such_op' has no torch.ops.aten binding"):
        registry([[Contract(("aten::no_such_op",), _build, "")]])
    absent: list[str] = []  # the suite's form: an op the running torch lacks is left out, named
    assert registry([[c, Contract(("aten::no_such_op",), _build, "")]], absent=absent) == {"aten::add.Tensor": c}
    assert absent == ["aten::no_such_op"]
    op = torch.ops.aten.add.Tensor
    with pytest.raises(ValueError, match=r"my sample: .*has no argument \['bogus'\]"):
        call_arguments(op, {"self": torch.ones(1), "other": torch.ones(1), "bogus": 1}, "my sample")
    with pytest.raises(ValueError, match=r"my sample: argument 'other' of aten::add has no value"):
        call_arguments(op, {"self": torch.ones(1)}, "my sample")
    args, kwargs = call_arguments(op, {"self": torch.ones(1), "other": torch.ones(1), "alpha": 2}, "s")
    assert len(args) == 2 and kwargs == {"alpha": 2}  # keyword-only by name
