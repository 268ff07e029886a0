"""The SimpleFSDP frontend (model_zoo/distributed/simple_fsdp.py) and its scenario's teeth: on the emulated
device the scenario passes clean and fails when the all-gather or the reduce-scatter is broken
(``CONFORMANCE_DIST_FAULT``, emulator/distributed.py)."""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.verdict.failures import NumericFailure
from neuron_conformance.emulator import distributed as nd
from neuron_conformance.model_zoo.distributed import check, simple_fsdp
from neuron_conformance.model_zoo.distributed.launch import run_world
from neuron_conformance.model_zoo.distributed.probes import expected_collectives
from neuron_conformance.model_zoo.distributed.reference import reference_run
from neuron_conformance.model_zoo.distributed.scenarios import by_id


def test_plain_name_drops_the_parametrization_path():
    assert simple_fsdp.plain_name("blocks.0.fc1.parametrizations.weight.original") == "blocks.0.fc1.weight"
    assert simple_fsdp.plain_name("fc.bias") == "fc.bias"


@pytest.mark.parametrize("fault", ["allgather_swap_chunks", "reduce_scatter_no_average"])
def test_new_fault_kinds_are_accepted(fault, monkeypatch):
    monkeypatch.setenv(nd.ENV_FAULT, fault)
    assert nd.active_fault() == fault
    nd.set_fault(fault)
    try:
        assert nd.active_fault() == fault
    finally:
        nd.set_fault(None)


def test_allgather_fault_reverses_the_chunks_of_every_all_gather_and_nothing_else():
    result = run_world(
        "neuron_conformance.model_zoo.distributed.probes:collectives",
        2,
        device_type="neuron",
        timeout_s=120,
        env={nd.ENV_FAULT: "allgather_swap_chunks"},
    )
    assert result.status == "ok", result.describe()
    expected, got = expected_collectives(2)[0], result.results[0]
    gathers = ("all_gather", "all_gather_into_tensor", "funcol_all_gather_tensor")
    for name in gathers:
        assert torch.equal(got[name]["value"], torch.cat(expected[name].chunk(2)[::-1])), name
    for name in set(expected) - set(gathers):
        assert torch.equal(got[name]["value"], expected[name]), name  # SUM reduce-scatters are not touched


def _run(fault: str):
    scenario = by_id("simple_fsdp-fp32")
    env = {nd.ENV_FAULT: fault} if fault else None
    result = run_world(
        scenario.target, scenario.world_size, device_type="neuron", timeout_s=240, env=env, kwargs=scenario.kwargs
    )
    check.raise_for_status(scenario.id, result, 240)
    return scenario, result


def test_simple_fsdp_on_emulated_neuron_shards_regathers_and_matches_cpu_reference():
    scenario, result = _run("")
    assert result.dist_backend == "neuron_gloo"
    for rank_result in result.results:
        assert rank_result["checks"] == {
            "backward_all_gathers_missing": 0,
            "backward_reduce_scatters_missing": 0,
            "shard_rows_off": 0.0,
        }
    fields = check.judge_scenario(scenario, result.results, reference_run(scenario.reference))
    assert fields["max_abs"] < 1e-6


@pytest.mark.parametrize("fault", ["allgather_swap_chunks", "reduce_scatter_no_average"])
def test_simple_fsdp_fails_with_a_broken_collective(fault):
    scenario, result = _run(fault)
    reference = reference_run(scenario.reference)
    with pytest.raises(NumericFailure, match="differs from the single-process CPU reference") as info:
        check.judge_scenario(scenario, result.results, reference)
    assert info.value.record_fields["max_abs"] > 1e-3
    first_loss = sum(r["losses"][0] for r in result.results) / len(result.results)
    if fault == "allgather_swap_chunks":  # the forward already computes with wrongly gathered weights
        assert abs(first_loss - reference["losses"][0]) > 1e-4
    else:  # the forward is right; only the gradient (hence the parameters) is off
        assert first_loss == pytest.approx(reference["losses"][0], abs=1e-6)
