"""The DTensor op sweep (:mod:`neuron_conformance.model_zoo.distributed.dtensor_ops`): op selection and its bad input,
the placement choices (PyTorch's DTensorConverter rule), the strict expected failures, and teeth: with the
emulator's collective fault (every SUM all_reduce averages) ``sum`` and ``mm`` over a sharded dimension fail while ``neg``
(elementwise, no reduction) passes; the clean device passes both."""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.model_zoo.distributed import dtensor_ops
from neuron_conformance.model_zoo.distributed.launch import run_world


def test_selected_ops_default_all_and_bad_names(monkeypatch):
    monkeypatch.delenv(dtensor_ops.ENV_OPS, raising=False)
    assert dtensor_ops.selected_ops() == list(dtensor_ops.DEFAULT_OPS)
    assert len(dtensor_ops.selected_ops("all")) > 500
    assert dtensor_ops.selected_ops("add, nn.functional.gelu") == ["add", "nn.functional.gelu"]
    with pytest.raises(ValueError, match="no_such_op not in torch's op_db"):
        dtensor_ops.selected_ops("add,no_such_op")


def test_placement_choices_follow_pytorchs_rule():
    from torch.distributed.tensor import Replicate, Shard

    assert dtensor_ops._choices(torch.ones(4, 3), (2,)) == [(Replicate(),), (Shard(0),)]
    assert dtensor_ops._choices(torch.ones(4, 3, dtype=torch.bool), (2,)) == [(Replicate(),)]
    two_d = dtensor_ops._choices(torch.ones(4, 6), (2, 2))
    assert (Shard(0), Replicate()) in two_d and (Replicate(), Shard(0)) in two_d and (Shard(0), Shard(1)) in two_d
    combos = dtensor_ops.combinations([torch.ones(4, 4), 2.0, torch.ones(3)], (2,))
    assert combos[0] == [(Replicate(),), None, (Replicate(),)] and combos[1][0] == (Shard(0),)
    assert len(combos) <= dtensor_ops.MAX_COMBOS


def test_expected_failures_are_strict(monkeypatch):
    ref = [[torch.ones(2)]]
    rows = [(0, "R", [torch.ones(2)])]
    monkeypatch.setitem(dtensor_ops.EXPECTED_FAILURES, ("neg", "1d"), "listed for the test")
    assert dtensor_ops.judge_op("neg", "1d", rows, ref)["outcome"] == "unexpected-pass"
    wrong = [(0, "S(0)", [torch.full((2,), 2.0)])]
    assert dtensor_ops.judge_op("neg", "1d", wrong, ref)["outcome"] == "expected"
    assert dtensor_ops.judge_op("abs", "1d", wrong, ref)["outcome"] == "failed"
    assert dtensor_ops.judge_op("abs", "1d", [(0, "R", "RuntimeError: boom")], ref)["first"].endswith("boom")


def test_random_and_empty_ops_are_judged_by_shape_and_dtype_only():
    ref = [[torch.rand(4, 2)]]
    other_draw = [(0, "S(0)", [torch.rand(4, 2)])]
    for op in ("nn.functional.dropout", "uniform", "empty_like"):
        assert dtensor_ops.values_undefined(op)
        assert dtensor_ops.judge_op(op, "1d", other_draw, ref)["outcome"] == "passed"
        wrong_shape = dtensor_ops.judge_op(op, "1d", [(0, "S(0)", [torch.rand(2, 2)])], ref)
        assert wrong_shape["outcome"] == "failed" and "values not compared" in wrong_shape["first"]
        wrong_dtype = dtensor_ops.judge_op(op, "1d", [(0, "S(0)", [torch.rand(4, 2).double()])], ref)
        assert wrong_dtype["outcome"] == "failed"
        assert dtensor_ops.judge_op(op, "1d", [(0, "R", "AssertionError: ")], ref)["outcome"] == "failed"
    assert not dtensor_ops.values_undefined("add")
    assert dtensor_ops.judge_op("add", "1d", other_draw, ref)["outcome"] == "failed"


@pytest.mark.parametrize("fault", ["", "allreduce_average"])
def test_sweep_catches_a_collective_that_averages(fault):
    env = {"CONFORMANCE_DIST_FAULT": fault} if fault else None
    result = run_world(f"{dtensor_ops.__name__}:sweep", 2, device_type="neuron", timeout_s=300, env=env,
                       kwargs={"ops": ["sum", "mm", "neg"], "mesh_shape": [2]})
    assert result.status == "ok", result.describe()
    verdicts = {op: dtensor_ops.judge_op(op, "1d", result.results[0][op], dtensor_ops.reference(op))
                for op in ("sum", "mm", "neg")}
    assert verdicts["neg"]["outcome"] == "passed", verdicts["neg"]
    for op in ("sum", "mm"):  # a reduction over a sharded dimension ends in a SUM all_reduce (Partial -> Replicate)
        assert verdicts[op]["outcome"] == ("failed" if fault else "passed"), (op, verdicts[op])


def test_batches_keep_order_and_bound_each_launch():
    names = [f"op{i}" for i in range(35)]
    cut = dtensor_ops.batches(names, 16)
    assert [len(b) for b in cut] == [16, 16, 3]
    assert [n for b in cut for n in b] == names
    assert dtensor_ops.batches([], 16) == []
    with pytest.raises(ValueError, match="must be >= 1"):
        dtensor_ops.batches(names, 0)


def test_each_batch_of_the_selection_is_its_own_launch_group(monkeypatch):
    """The sweep's tests map to their batch in selection order; the 17th selected op starts batch 1, so its
    tests get their own xdist group and launch."""
    from neuron_conformance.model_zoo.distributed import test_dtensor_ops as module

    names = list(dtensor_ops.DEFAULT_OPS)[:dtensor_ops.OPS_PER_WORLD + 2]
    monkeypatch.setenv(dtensor_ops.ENV_OPS, ",".join(names))
    batch = module._batch_of()
    assert [batch[n] for n in names] == [0] * dtensor_ops.OPS_PER_WORLD + [1, 1]
