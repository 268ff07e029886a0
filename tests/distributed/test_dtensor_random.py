"""DTensor's random ops on a mesh of the emulated device: DTensor's ``OffsetBasedRNGTracker``
(torch/distributed/tensor/_random.py) reads the device RNG state as CUDA's Philox state (16 bytes: seed, offset)
and moves the offset to each shard's start. With the emulator's former mt19937 state (5,056 bytes) every random
op raised a bare ``AssertionError`` there (emulator/rng.py now gives the Philox layout)."""

from __future__ import annotations

import torch

from neuron_conformance.model_zoo.distributed import dtensor_ops
from neuron_conformance.model_zoo.distributed.launch import run_world


def shard_draws(rank: int, world_size: int, device: torch.device) -> dict:
    """Rank side: ``rand`` of a DTensor sharded on dim 0 and of a replicated one, after the same seed, twice."""
    from torch.distributed.tensor import Replicate, Shard, init_device_mesh
    from torch.distributed.tensor import rand as dtensor_rand

    mesh = init_device_mesh(device.type, (world_size,))
    out = {}
    for attempt in range(2):
        torch.manual_seed(17)
        sharded = dtensor_rand(8, 4, device_mesh=mesh, placements=[Shard(0)])
        replicated = dtensor_rand(8, 4, device_mesh=mesh, placements=[Replicate()])
        out[attempt] = {
            "local": sharded.to_local().cpu(),
            "full": sharded.full_tensor().cpu(),
            "replicated": replicated.to_local().cpu(),
        }
    return out


def test_dropout_sweep_passes_on_a_neuron_mesh():
    result = run_world(
        f"{dtensor_ops.__name__}:sweep",
        2,
        device_type="neuron",
        timeout_s=300,
        kwargs={"ops": ["nn.functional.dropout"], "mesh_shape": [2]},
    )
    assert result.status == "ok", result.describe()
    rows = result.results[0]["nn.functional.dropout"]
    verdict = dtensor_ops.judge_op("nn.functional.dropout", "1d", rows, dtensor_ops.reference("nn.functional.dropout"))
    assert verdict["outcome"] == "passed" and verdict["combinations"] > 0, verdict


def test_sharded_draws_differ_per_shard_and_repeat_after_the_seed():
    result = run_world(f"{__name__}:shard_draws", 2, device_type="neuron", timeout_s=300)
    assert result.status == "ok", result.describe()
    r0, r1 = result.results
    # each shard has its own offset, so its own stream; gathering gives every rank the same tensor
    assert not torch.equal(r0[0]["local"], r1[0]["local"])
    assert torch.equal(r0[0]["full"], r1[0]["full"])
    assert torch.equal(r0[0]["full"][:4], r0[0]["local"]) and torch.equal(r0[0]["full"][4:], r1[0]["local"])
    # a replicated draw is the same on every rank (the same seed and offset)
    assert torch.equal(r0[0]["replicated"], r1[0]["replicated"])
    # the same seed again: the same values
    for r in (r0, r1):
        assert all(torch.equal(r[0][k], r[1][k]) for k in ("local", "full", "replicated"))
