"""Scenario judging (model_zoo/distributed/check.py) and the bounded end-to-end subset CI runs: DDP on the
emulated device, correct and with a broken all_reduce."""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.verdict.failures import ConformanceFailure, NumericFailure
from neuron_conformance.model_zoo.distributed import check
from neuron_conformance.model_zoo.distributed.launch import LaunchResult, RankFailure, run_world
from neuron_conformance.model_zoo.distributed.reference import REFERENCES, reference_run
from neuron_conformance.model_zoo.distributed.scenarios import SCENARIOS, by_id


def _fake(params_per_rank, checks=None):
    return [{"params": p, "checks": checks or {}} for p in params_per_rank]


def test_registry_is_consistent():
    ids = [s.id for s in SCENARIOS]
    assert len(ids) == len(set(ids))
    assert all(s.reference in REFERENCES and s.dtype in check.TOLERANCES for s in SCENARIOS)
    assert {s.world_size for s in SCENARIOS} == {2, 4}
    with pytest.raises(KeyError, match="unknown scenario 'nope'"):
        by_id("nope")


def test_reference_is_deterministic_and_trains():
    first, second = reference_run("tinynet"), reference_run("tinynet")
    assert first["params"].keys() == second["params"].keys()
    assert all(torch.equal(first["params"][k], second["params"][k]) for k in first["params"])
    assert first["losses"][-1] < first["losses"][0]


def test_judge_passes_within_tolerance_and_fills_record_fields():
    ref = reference_run("matmlp")
    nudged = {k: v + 1e-7 for k, v in ref["params"].items()}
    fields = check.judge_scenario(by_id("dtensor_redistribute-fp32"), _fake([nudged, nudged]), ref)
    assert fields["rule"] == "tolerance" and fields["samples"] == 2
    assert 0 < fields["max_abs"] < 1e-6 and fields["atol"] == 1e-5


def test_judge_fails_a_wrong_parameter_with_numeric_class():
    ref = reference_run("matmlp")
    bad = dict(ref["params"], w2=ref["params"]["w2"] * 1.01)
    with pytest.raises(NumericFailure, match="parameter 'w2'") as info:
        check.judge_scenario(by_id("dtensor_redistribute-fp32"), _fake([bad, bad]), ref)
    assert info.value.record_fields["sample"] == 1


def test_judge_catches_ranks_out_of_sync_and_missing_params_and_checks():
    ref = reference_run("matmlp")
    scenario = by_id("dtensor_redistribute-fp32")
    other = dict(ref["params"], w1=ref["params"]["w1"] + 1e-9)
    with pytest.raises(NumericFailure, match="ranks 0 and 1 disagree on parameter 'w1'"):
        check.judge_scenario(scenario, _fake([ref["params"], other]), ref)
    with pytest.raises(ConformanceFailure, match=r"missing \['w2'\]"):
        check.judge_scenario(scenario, _fake([{"w1": ref["params"]["w1"]}]), ref)
    with pytest.raises(NumericFailure, match="consistency check 'partial_to_replicate'"):
        check.judge_scenario(scenario, _fake([ref["params"]], {"partial_to_replicate": 0.5}), ref)


def test_raise_for_status_maps_failure_classes():
    from neuron_conformance.conformance.verdict.failures import classify_exception

    timeout = LaunchResult("timeout", [None, None], [], [-9, -9], 8.0)
    with pytest.raises(pytest.fail.Exception) as info:
        check.raise_for_status("ddp-fp32", timeout, 8.0)
    assert classify_exception(info.value, str(info.value)) == "timeout"
    unsupported = LaunchResult("error", [None], [RankFailure(0, "NotImplementedError", "no kernel", "tb")], [1], 1.0)
    with pytest.raises(NotImplementedError, match="rank 0: no kernel"):
        check.raise_for_status("ddp-fp32", unsupported, 8.0)
    crashed = LaunchResult("error", [None], [], [-11], 1.0, logs=["Segmentation fault"])
    with pytest.raises(check.ScenarioError, match="Segmentation fault"):
        check.raise_for_status("ddp-fp32", crashed, 8.0)


def _run_ddp(env=None):
    scenario = by_id("ddp-fp32")
    result = run_world(scenario.target, scenario.world_size, device_type="neuron", timeout_s=180, env=env)
    check.raise_for_status(scenario.id, result, 180)
    return scenario, result


def test_ddp_on_emulated_neuron_matches_cpu_reference():
    scenario, result = _run_ddp()
    assert result.dist_backend == "neuron_gloo"
    fields = check.judge_scenario(scenario, result.results, reference_run(scenario.reference))
    assert fields["max_abs"] < 1e-6


def test_ddp_fails_when_all_reduce_averages_instead_of_summing():
    scenario, result = _run_ddp(env={"CONFORMANCE_DIST_FAULT": "allreduce_average"})
    with pytest.raises(NumericFailure, match="differs from the single-process CPU reference") as info:
        check.judge_scenario(scenario, result.results, reference_run(scenario.reference))
    assert info.value.record_fields["max_abs"] > 1e-3
