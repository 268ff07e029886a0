"""The DTensor op sweep (:mod:`neuron_conformance.model_zoo.distributed.dtensor_ops`): op selection and its bad input,
the placement choices (PyTorch's DTensorConverter rule), the strict expected failures, and teeth: with the
emulator's collective fault (every SUM all_reduce averages) ``sum`` and ``mm`` over a sharded dimension fail while ``neg``
(elementwise, no reduction) passes; the clean device passes both."""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.model_zoo.distributed import dtensor_expected, dtensor_ops
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


def _listed(ops: str, match: str, release: str | None = None) -> dtensor_expected.ExpectedFailures:
    release = release or dtensor_expected.release(torch.__version__)
    return dtensor_expected.parse(
        f'torch = "{release}"\n[[expected]]\nops = [{ops}]\nmeshes = ["1d"]\n'
        f'match = "{match}"\nreason = "listed for the test"\n'
    )


def test_expected_failures_are_strict_both_ways():
    ref = [[torch.ones(2)]]
    listed = _listed('"neg"', "no sharding strategy")
    right = [(0, "R", [torch.ones(2)])]
    refused = [(0, "S(0)", "NotImplementedError: aten.neg has no sharding strategy")]
    wrong = [(0, "S(0)", [torch.full((2,), 2.0)])]
    # a listed op that passes on the measured torch release asks for its entry to be removed
    assert dtensor_ops.judge_op("neg", "1d", right, ref, listed)["outcome"] == "unexpected-pass"
    # failing with the listed text is the expected failure; passing combinations beside it are still compared
    assert dtensor_ops.judge_op("neg", "1d", right + refused, ref, listed)["outcome"] == "expected"
    # a wrong value, or another exception, where DTensor should refuse is a failure, not an expected one
    verdict = dtensor_ops.judge_op("neg", "1d", refused + wrong, ref, listed)
    assert verdict["outcome"] == "unexpected"
    assert verdict["unexplained"].startswith("sample 0, placements S(0): output 0")
    other = [(0, "S(0)", "RuntimeError: invalid python storage")]
    assert dtensor_ops.judge_op("neg", "1d", other, ref, listed)["outcome"] == "unexpected"
    # the entry is for its mesh only; an unlisted op is judged as usual
    assert dtensor_ops.judge_op("neg", "2d", refused, ref, listed)["outcome"] == "failed"
    assert dtensor_ops.judge_op("abs", "1d", wrong, ref, listed)["outcome"] == "failed"
    assert dtensor_ops.judge_op("abs", "1d", [(0, "R", "RuntimeError: boom")], ref, listed)["first"].endswith("boom")


def test_expected_pass_on_another_torch_release_is_a_stale_entry_not_a_failure():
    listed = _listed('"neg"', "no sharding strategy", release="1.0")
    verdict = dtensor_ops.judge_op("neg", "1d", [(0, "R", [torch.ones(2)])], [[torch.ones(2)]], listed)
    assert verdict["outcome"] == "passed" and verdict["stale_entry"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("torch = 2\n", "major.minor"),
        ('torch = "2.13"\n[[expected]]\nops = []\nmatch = "x"\nreason = "r"\n', "'ops'"),
        ('torch = "2.13"\n[[expected]]\nops = ["a"]\nmeshes = ["3d"]\nmatch = "x"\nreason = "r"\n', "'meshes'"),
        ('torch = "2.13"\n[[expected]]\nops = ["a"]\nmatch = "("\nreason = "r"\n', "not a regular expression"),
        ('torch = "2.13"\n[[expected]]\nops = ["a"]\nreason = "r"\n', "'match'"),
        ('torch = "2.13"\n[[expected]]\nops = ["a"]\nmatch = "x"\n', "'reason'"),
        ('torch = "2.13"\n[[expected]]\nops = ["a", "a"]\nmatch = "x"\nreason = "r"\n', "listed twice"),
        ("torch = [", "not valid TOML"),
    ],
)
def test_a_broken_expected_failure_file_is_refused_naming_the_entry(text, says):
    with pytest.raises(dtensor_expected.ExpectedFailuresError, match=says) as info:
        dtensor_expected.parse(text, "my.toml")
    assert str(info.value).startswith("my.toml")


def test_the_shipped_expected_failures_name_real_opinfos_and_measured_release():
    shipped = dtensor_ops.expected_failures()
    assert shipped.torch_release == "2.13" and len(shipped.entries) >= 6
    known = set(dtensor_ops.selected_ops("all"))
    assert {op for op, _ in shipped.entries} <= known


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
    result = run_world(
        f"{dtensor_ops.__name__}:sweep",
        2,
        device_type="neuron",
        timeout_s=300,
        env=env,
        kwargs={"ops": ["sum", "mm", "neg"], "mesh_shape": [2]},
    )
    assert result.status == "ok", result.describe()
    verdicts = {
        op: dtensor_ops.judge_op(op, "1d", result.results[0][op], dtensor_ops.reference(op))
        for op in ("sum", "mm", "neg")
    }
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

    names = list(dtensor_ops.DEFAULT_OPS)[: dtensor_ops.OPS_PER_WORLD + 2]
    monkeypatch.setenv(dtensor_ops.ENV_OPS, ",".join(names))
    batch = module._batch_of()
    assert [batch[n] for n in names] == [0] * dtensor_ops.OPS_PER_WORLD + [1, 1]


def test_proposal_turns_a_cpu_runs_failure_texts_into_anchored_patterns():
    from neuron_conformance.model_zoo.distributed import dtensor_expected_proposal as proposal

    refusal = "raised NotImplementedError: Operator aten.take.default does not have a sharding strategy registered."
    shape = "output 0: shape (2, 4) differs from the reference's (4, 4)"
    records = [
        {
            "suite": "distributed",
            "variant": "dtensor-1d",
            "op": "take",
            "outcome": "failed",
            "metrics": {"problems": [refusal]},
        },
        {
            "suite": "distributed",
            "variant": "dtensor-2d",
            "op": "nn.functional.conv1d",
            "outcome": "failed",
            "metrics": {"problems": [shape]},
        },
        {"suite": "distributed", "variant": "dtensor-1d", "op": "add", "outcome": "passed", "metrics": {}},
        {"suite": "distributed", "variant": "dtensor-1d", "op": "hung", "outcome": "failed", "metrics": {}},
        {"suite": "compare_cpu", "variant": "", "op": "take", "outcome": "failed", "metrics": {"problems": ["x"]}},
    ]
    listed = dtensor_expected.parse(proposal.propose(records), "proposed")
    assert set(listed.entries) == {("take", "1d"), ("nn.functional.conv1d", "2d")}
    take = listed.get("take", "1d")
    assert take.explains(refusal) and "sharding strategy" in take.reason
    assert not take.explains("raised RuntimeError: Attempted to access the data pointer on an invalid python storage")
    conv = listed.get("nn.functional.conv1d", "2d")
    assert conv.explains("output 0: shape (1, 8) differs from the reference's (8, 8)")  # other sizes, same refusal
    assert not conv.explains("output 0: 3 of 16 element(s) outside atol=1e-05, rtol=1.3e-06")  # a wrong value
    assert proposal.pattern("a.b (1, -2.5e-3)") == r"^a\.b \([-+0-9.e]+, [-+0-9.e]+\)$"


def test_proposal_cli_reports_an_unreadable_report_dir_in_one_line(tmp_path, capsys):
    from neuron_conformance.model_zoo.distributed import dtensor_expected_proposal as proposal

    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "gw0.jsonl").write_text("not json\n{}\n")
    assert proposal.main([str(tmp_path)]) == 2
    assert str(tmp_path) in capsys.readouterr().err
    assert proposal.main([]) == 2


def test_arguments_the_op_takes_on_the_cpu_stay_plain_cpu_tensors():
    sample = next(s for s in dtensor_ops.samples("tensor_split") if isinstance(s.args[0], torch.Tensor))
    leaves, _ = torch.utils._pytree.tree_flatten(((sample.input, *sample.args), sample.kwargs))
    host = dtensor_ops.kept_on_cpu("tensor_split", sample)
    assert host[:2] == [False, True] and not any(host[2:])
    combos = dtensor_ops.combinations([None if h else x for x, h in zip(leaves, host)], (2,))
    assert all(c[1] is None for c in combos)  # never distributed
    assert not any(dtensor_ops.kept_on_cpu("add", dtensor_ops.samples("add")[0]))


def test_eval_batch_norm_statistics_the_cpu_leaves_empty_are_judged_by_shape():
    ref = [[torch.ones(2, 3), torch.empty(0), torch.empty(0)]]
    filled = [(0, "R", [torch.ones(2, 3), torch.zeros(3), torch.ones(3)])]
    assert dtensor_ops.judge_op("native_batch_norm", "1d", filled, ref)["outcome"] == "passed"
    wrong_main = [(0, "R", [torch.zeros(2, 3), torch.zeros(3), torch.ones(3)])]
    assert dtensor_ops.judge_op("native_batch_norm", "1d", wrong_main, ref)["outcome"] == "failed"
    assert dtensor_ops.judge_op("add", "1d", [(0, "R", [torch.zeros(3)])], [[torch.empty(0)]])["outcome"] == "failed"


@pytest.mark.parametrize("backend_module", [None, "wrong_conv_backend"])
def test_a_wrong_kernel_in_a_listed_op_is_not_hidden_by_its_expected_failure(backend_module):
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    env = {"PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
    op = "nn.functional.conv1d"
    result = run_world(
        f"{dtensor_ops.__name__}:sweep",
        2,
        device_type="neuron",
        timeout_s=300,
        env=env,
        backend_module=backend_module,
        kwargs={"ops": [op], "mesh_shape": [2]},
    )
    assert result.status == "ok", result.describe()
    verdict = dtensor_ops.judge_op(op, "1d", result.results[0][op], dtensor_ops.reference(op))
    assert dtensor_ops.expected_failures().get(op, "1d") is not None
    if backend_module is None:
        assert verdict["outcome"] == "expected", verdict
    else:
        assert verdict["outcome"] == "unexpected" and "outside atol" in verdict["unexplained"], verdict
