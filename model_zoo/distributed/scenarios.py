"""Distributed training scenarios: one function per scenario, run on every rank by ``launch.run_world``.

Every scenario trains a tiny model for :data:`STEPS` optimizer steps on data that is fixed by the step
number, using one parallelism feature of ``torch.distributed`` on the device under test, and returns
``{"params": {name: full fp32 CPU tensor}, "losses": [...], "checks": {...}}``. ``params`` are named as in
the unparallelised model, so :mod:`neuron_conformance.model_zoo.distributed.reference` (the same run in one CPU process) can
be compared name by name. A rank returns only the parameters it holds in full (a pipeline stage returns
its stage's); ranks that return the same name must agree (DDP replicas must stay in sync).

The models (seeded with ``torch.manual_seed(0)`` on CPU, then moved):

* :class:`TinyNet`: input ``(B, S, D)`` = ``(8, 4, 8)``; :data:`N_BLOCKS` residual blocks
  ``x + fc2(gelu(fc1(norm(x))))`` with ``D=8``, hidden ``H=16``; loss: mean squared error against a
  target of the input's shape. ``D`` and ``H`` divide by 2 and 4, so TP and FSDP shards are even.
* :class:`MatMLP`: ``gelu(x @ w1) @ w2`` on ``(B*S, D)`` rows, used by the DTensor scenario.
* a tiny ``LlamaForCausalLM`` (2 layers, hidden 32, vocab 64, eager attention) for the Hugging Face case.

Optimizer everywhere: SGD, lr :data:`LR`, momentum :data:`MOMENTUM` (SGD rather than Adam because Adam's
per-element normalisation would hide a wrong gradient scale, which is exactly what a broken collective
produces).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.nn.parallel import DistributedDataParallel

from neuron_conformance.model_zoo.distributed.models import (
    LR,
    MOMENTUM,
    N_BLOCKS,
    STEPS,
    D,
    batch,
    chunk,
    full_params,
    make_llama,
    make_matmlp,
    make_optimizer,
    make_tinynet,
    token_batch,
)

# ------------------------------------------------------------------------------------------------
# scenarios (rank side)


def _mesh(device: torch.device, shape: tuple[int, ...], names: tuple[str, ...] | None = None):
    return init_device_mesh(device.type, shape, mesh_dim_names=names)


def _train_data_parallel(model, step_model, device, shard_index, shard_count, opt) -> list[float]:
    losses = []
    for step in range(STEPS):
        x, y = batch(step)
        x = chunk(x, shard_index, shard_count).to(device)
        y = chunk(y, shard_index, shard_count).to(device)
        opt.zero_grad()
        loss = F.mse_loss(step_model(x).float(), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def ddp(rank: int, world_size: int, device: torch.device) -> dict:
    """DistributedDataParallel: each rank trains on its ``1/world_size`` of the batch; grads are averaged."""
    model = make_tinynet().to(device)
    wrapped = DistributedDataParallel(model)
    losses = _train_data_parallel(model, wrapped, device, rank, world_size, make_optimizer(wrapped.parameters()))
    return {"params": full_params(model), "losses": losses}


def zero(rank: int, world_size: int, device: torch.device) -> dict:
    """``ZeroRedundancyOptimizer`` (SGD, state sharded per rank) over DDP; parameters re-broadcast each step."""
    from torch.distributed.optim import ZeroRedundancyOptimizer  # deferred: start-up cost

    model = make_tinynet().to(device)
    wrapped = DistributedDataParallel(model)
    opt = ZeroRedundancyOptimizer(wrapped.parameters(), optimizer_class=torch.optim.SGD, lr=LR, momentum=MOMENTUM)
    losses = _train_data_parallel(model, wrapped, device, rank, world_size, opt)
    return {"params": full_params(model), "losses": losses}


def _mp_policy(variant: str):
    from torch.distributed.fsdp import MixedPrecisionPolicy  # deferred: start-up cost

    if variant == "bf16-mp":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    if variant == "fp32":
        return MixedPrecisionPolicy()
    raise ValueError(f"unknown FSDP2 variant {variant!r}; accepted: 'fp32', 'bf16-mp'")


def fsdp2(rank: int, world_size: int, device: torch.device, variant: str = "fp32") -> dict:
    """FSDP2 (``fully_shard`` per block and at the root) on a 1-D mesh; ``variant`` fp32 or bf16-mp.

    bf16-mp: ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``: bf16 compute,
    fp32 gradient reduction and fp32 sharded parameters.
    """
    from torch.distributed.fsdp import fully_shard  # deferred: start-up cost

    mesh = _mesh(device, (world_size,))
    policy = _mp_policy(variant)
    model = make_tinynet().to(device)
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    losses = _train_data_parallel(model, model, device, rank, world_size, make_optimizer(model.parameters()))
    return {"params": full_params(model), "losses": losses}


def simple_fsdp(rank: int, world_size: int, device: torch.device, variant: str = "fp32") -> dict:
    """SimpleFSDP (the frontend in ``simple_fsdp.py``): ``Shard(0)`` DTensor parameters, all-gathered by a
    parametrization, reduce-scattered (average) by its backward; blocks re-gather in backward.

    bf16-mp: bf16 all-gather and compute, fp32 reduce-scatter and master shards (as FSDP2's policy). ``checks``
    (0 to pass): ``shard_rows_off``, each rank's shard off ``1/world`` of dim 0; per backward, the all-gathers
    (re-gather) and reduce-scatters missing against one per parameter.
    """
    from neuron_conformance.model_zoo.distributed import simple_fsdp as sf  # deferred: start-up cost

    low = _mp_policy(variant).param_dtype  # the same variants as fsdp2: None (fp32) or bfloat16
    model = make_tinynet().to(device)
    sf.simple_fsdp(
        model,
        _mesh(device, (world_size,)),
        param_dtype=low,
        reduce_dtype=torch.float32 if low else None,
        regather=model.blocks,
    )
    n_params = len(sf.sharded_params(model))
    checks = dict.fromkeys(("backward_all_gathers_missing", "backward_reduce_scatters_missing"), 0)
    checks["shard_rows_off"] = sf.shard_layout_error(model, world_size)
    opt = make_optimizer(model.parameters())
    losses = []
    for step in range(STEPS):
        x, y = (chunk(t, rank, world_size).to(device) for t in batch(step))
        opt.zero_grad()
        loss = F.mse_loss(model(x.to(low or x.dtype)).float(), y)
        counts = sf.backward_collectives(loss)
        checks["backward_all_gathers_missing"] += abs(n_params - counts.get("all_gather_into_tensor", 0))
        checks["backward_reduce_scatters_missing"] += abs(n_params - counts.get("reduce_scatter_tensor", 0))
        opt.step()
        losses.append(loss.item())
    return {"params": sf.full_params(model), "losses": losses, "checks": checks}


def _tp_plan(sequence_parallel: bool) -> dict:
    from torch.distributed.tensor import Shard  # deferred: start-up cost

    # deferred: start-up cost
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel

    if not sequence_parallel:
        return {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
    return {
        "norm": SequenceParallel(),
        "fc1": ColwiseParallel(input_layouts=Shard(1)),
        "fc2": RowwiseParallel(output_layouts=Shard(1)),
    }


def tensor_parallel(rank: int, world_size: int, device: torch.device) -> dict:
    """Tensor parallel: ``fc1`` ColwiseParallel, ``fc2`` RowwiseParallel via ``parallelize_module``.

    Every rank sees the whole batch (TP shards weights, not data).
    """
    from torch.distributed.tensor.parallel import parallelize_module  # deferred: start-up cost

    mesh = _mesh(device, (world_size,))
    model = make_tinynet().to(device)
    for block in model.blocks:
        parallelize_module(block, mesh, _tp_plan(False))
    # LayerNorm stays a plain tensor while fc1/fc2 become DTensors: the foreach SGD kernels (the default
    # on accelerators) refuse such a mix, on CUDA as on any device, so use the per-tensor loop.
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, foreach=False)
    losses = []
    for step in range(STEPS):
        x, y = (t.to(device) for t in batch(step))
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"params": full_params(model), "losses": losses}


def sequence_parallel(rank: int, world_size: int, device: torch.device) -> dict:
    """Sequence parallel: LayerNorm on sequence shards (``SequenceParallel``), fc1/fc2 Colwise/Rowwise.

    The activations between blocks are sharded along the sequence (dim 1); each rank's loss is its
    shard's squared error divided by the *global* element count, so the ranks' losses sum to the
    reference's mean.
    """
    from torch.distributed.tensor.parallel import parallelize_module  # deferred: start-up cost

    mesh = _mesh(device, (world_size,))
    model = make_tinynet().to(device)
    for block in model.blocks:
        parallelize_module(block, mesh, _tp_plan(True))
    opt = make_optimizer(model.parameters())
    losses = []
    for step in range(STEPS):
        x, y = batch(step)
        count = y.numel()
        x = chunk(x, rank, world_size, dim=1).to(device)
        y = chunk(y, rank, world_size, dim=1).to(device)
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).sum() / count
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"params": full_params(model), "losses": losses}


def dtensor_redistribute(rank: int, world_size: int, device: torch.device) -> dict:
    """DTensor training step that goes through shard -> replicate -> partial and back.

    ``w1`` is ``Shard(1)``, ``w2`` ``Shard(0)``; ``gelu(x @ w1) @ w2`` is ``Partial``. It is redistributed
    Partial -> Shard(0) (reduce-scatter) -> Replicate (all-gather) for the loss, and the backward runs
    the adjoints. Checks returned in ``checks`` (max abs difference, must be 0): Partial -> Replicate
    (all-reduce) equals the two-hop path; a Partial built from local parts (the value on rank 0, zeros
    elsewhere) reduces to the value; Replicate -> Shard(0) -> Replicate is the identity; Shard ->
    Replicate of ``w1`` equals ``full_tensor()``.
    """
    # deferred: start-up cost
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    mesh = _mesh(device, (world_size,))
    model = make_matmlp().to(device)
    model.w1 = nn.Parameter(distribute_tensor(model.w1.detach(), mesh, [Shard(1)]))
    model.w2 = nn.Parameter(distribute_tensor(model.w2.detach(), mesh, [Shard(0)]))
    opt = make_optimizer(model.parameters())
    checks = {
        "partial_to_replicate": 0.0,
        "local_partial_to_replicate": 0.0,
        "replicate_shard_roundtrip": 0.0,
        "shard_to_replicate": 0.0,
    }

    def worst(key: str, a, b) -> None:
        checks[key] = max(checks[key], (a.to_local() - b.to_local()).abs().max().item())

    losses = []
    for step in range(STEPS):
        x, y = batch(step)
        x = distribute_tensor(x.reshape(-1, D).to(device), mesh, [Replicate()])
        y = distribute_tensor(y.reshape(-1, D).to(device), mesh, [Replicate()])
        opt.zero_grad()
        partial = model(x)
        if not partial.placements[0].is_partial():
            raise AssertionError(f"expected a Partial output, got {partial.placements}")
        out = partial.redistribute(mesh, [Shard(0)]).redistribute(mesh, [Replicate()])
        with torch.no_grad():
            worst("partial_to_replicate", partial.redistribute(mesh, [Replicate()]), out)
            # Replicate -> Partial is internal-only in DTensor; build the Partial from local parts instead
            parts = DTensor.from_local(out.to_local() * float(rank == 0), mesh, [Partial()], run_check=False)
            worst("local_partial_to_replicate", parts.redistribute(mesh, [Replicate()]), out)
            worst(
                "replicate_shard_roundtrip", out.redistribute(mesh, [Shard(0)]).redistribute(mesh, [Replicate()]), out
            )
            w1_rep = model.w1.redistribute(mesh, [Replicate()])
            checks["shard_to_replicate"] = max(
                checks["shard_to_replicate"], (w1_rep.to_local() - model.w1.full_tensor()).abs().max().item()
            )
        loss = ((out - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.full_tensor().item())
    return {"params": full_params(model), "losses": losses, "checks": checks}


def fsdp_tp_2d(rank: int, world_size: int, device: torch.device) -> dict:
    """2-D parallelism on a ``(dp=2, tp=2)`` DeviceMesh: TP (Colwise/Rowwise) inside, FSDP2 across dp."""
    from torch.distributed.fsdp import fully_shard  # deferred: start-up cost
    from torch.distributed.tensor.parallel import parallelize_module  # deferred: start-up cost

    if world_size != 4:
        raise ValueError(f"fsdp_tp_2d needs world size 4, got {world_size}")
    mesh = _mesh(device, (2, 2), ("dp", "tp"))
    model = make_tinynet().to(device)
    for block in model.blocks:
        parallelize_module(block, mesh["tp"], _tp_plan(False))
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    dp_rank = mesh["dp"].get_local_rank()
    losses = _train_data_parallel(model, model, device, dp_rank, 2, make_optimizer(model.parameters()))
    return {"params": full_params(model), "losses": losses}


def hsdp(rank: int, world_size: int, device: torch.device) -> dict:
    """HSDP: FSDP2 on a ``(replicate=2, shard=2)`` DeviceMesh; every rank trains on a quarter of the batch."""
    from torch.distributed.fsdp import fully_shard  # deferred: start-up cost

    if world_size != 4:
        raise ValueError(f"hsdp needs world size 4, got {world_size}")
    mesh = _mesh(device, (2, 2), ("replicate", "shard"))
    model = make_tinynet().to(device)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    losses = _train_data_parallel(model, model, device, rank, world_size, make_optimizer(model.parameters()))
    return {"params": full_params(model), "losses": losses}


PIPELINE_MICROBATCHES = 4


def pipeline(rank: int, world_size: int, device: torch.device, variant: str = "gpipe") -> dict:
    """Pipeline parallel with ``torch.distributed.pipelining``: stage ``r`` holds block ``r``.

    ``variant``: ``gpipe`` (``ScheduleGPipe``) or ``1f1b`` (``Schedule1F1B``); :data:`PIPELINE_MICROBATCHES`
    microbatches, ``scale_grads=True`` (gradients divided by the microbatch count, matching a mean loss).
    """
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe  # deferred: start-up cost

    schedules = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}
    if variant not in schedules:
        raise ValueError(f"unknown pipeline variant {variant!r}; accepted: {sorted(schedules)}")
    if world_size != N_BLOCKS:
        raise ValueError(f"pipeline needs one rank per block: world size {N_BLOCKS}, got {world_size}")
    model = make_tinynet()
    for index in range(N_BLOCKS):
        if index != rank:
            model.blocks[index] = nn.Identity()
    model.to(device)
    stage = PipelineStage(model, rank, world_size, device)
    schedule = schedules[variant](stage, PIPELINE_MICROBATCHES, loss_fn=F.mse_loss)
    opt = make_optimizer(model.parameters())
    losses = []
    for step in range(STEPS):
        x, y = (t.to(device) for t in batch(step))
        opt.zero_grad()
        if rank == 0:
            schedule.step(x)
        else:
            micro_losses: list = []
            schedule.step(target=y, losses=micro_losses)
            losses.append(float(torch.stack([m.detach().float().cpu() for m in micro_losses]).mean()))
        opt.step()
    return {"params": full_params(model), "losses": losses}


def functional_collectives(rank: int, world_size: int, device: torch.device) -> dict:
    """Data parallel written with functional collectives (``torch.distributed._functional_collectives``).

    Per step: ``all_reduce`` of the loss (for the log); gradients flattened, ``reduce_scatter_tensor``
    (sum) and divided by the world size; SGD with momentum on this rank's shard of the flat parameters;
    ``all_gather_tensor`` rebuilds the parameters. The update matches ``torch.optim.SGD``
    (``buf = momentum * buf + grad``, first step ``buf = grad``; ``p -= lr * buf``).
    """
    import torch.distributed._functional_collectives as funcol  # deferred: needs c10d, absent without distributed

    group = dist.group.WORLD
    model = make_tinynet().to(device)
    params = list(model.parameters())
    total = sum(p.numel() for p in params)
    padded = -(-total // world_size) * world_size
    shard_len = padded // world_size
    momentum_buf = None
    losses = []
    for step in range(STEPS):
        x, y = batch(step)
        x = chunk(x, rank, world_size).to(device)
        y = chunk(y, rank, world_size).to(device)
        for p in params:
            p.grad = None
        loss = F.mse_loss(model(x), y)
        loss.backward()
        losses.append(funcol.all_reduce(loss.detach(), "sum", group).wait().item() / world_size)
        with torch.no_grad():
            flat_grad = torch.zeros(padded, device=device)
            flat_grad[:total] = torch.cat([p.grad.reshape(-1) for p in params])
            grad_shard = funcol.reduce_scatter_tensor(flat_grad, "sum", 0, group).wait() / world_size
            flat_param = torch.zeros(padded, device=device)
            flat_param[:total] = torch.cat([p.reshape(-1) for p in params])
            param_shard = flat_param[rank * shard_len : (rank + 1) * shard_len].clone()
            if momentum_buf is None:
                momentum_buf = grad_shard.clone()
            else:
                momentum_buf.mul_(MOMENTUM).add_(grad_shard)
            param_shard.add_(momentum_buf, alpha=-LR)
            new_flat = funcol.all_gather_tensor(param_shard, 0, group).wait()
            offset = 0
            for p in params:
                p.copy_(new_flat[offset : offset + p.numel()].view_as(p))
                offset += p.numel()
    return {"params": full_params(model), "losses": losses}


def hf_llama_fsdp2(rank: int, world_size: int, device: torch.device) -> dict:
    """A tiny Hugging Face ``LlamaForCausalLM`` under FSDP2 (each decoder layer and the root sharded)."""
    from torch.distributed.fsdp import fully_shard  # deferred: start-up cost

    mesh = _mesh(device, (world_size,))
    model = make_llama().to(device)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = make_optimizer(model.parameters())
    losses = []
    for step in range(STEPS):
        ids = chunk(token_batch(step), rank, world_size).to(device)
        opt.zero_grad()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"params": full_params(model), "losses": losses}


# ------------------------------------------------------------------------------------------------
# registry


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One distributed scenario as the test suite runs it.

    Attributes:
        name: scenario name (the record's ``op``).
        variant: ``fp32``, ``bf16-mp``, ``gpipe``, ``1f1b`` (the record's ``variant``).
        world_size: ranks to spawn (2, or 4 for 2-D meshes).
        target: ``"module:function"`` run on every rank.
        kwargs: extra keyword arguments for the function.
        reference: name of the reference run in :mod:`neuron_conformance.model_zoo.distributed.reference`.
        dtype: compute dtype (``float32`` or ``bfloat16``).
        needs: optional packages the scenario imports (skipped when missing).
    """

    name: str
    variant: str
    world_size: int
    target: str
    kwargs: dict = dataclasses.field(default_factory=dict)
    reference: str = "tinynet"
    dtype: str = "float32"
    needs: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        """Test id: ``name-variant``."""
        return f"{self.name}-{self.variant}"


def _s(name, fn: Callable, world=2, variant="fp32", **extra) -> Scenario:
    kwargs = extra.pop("kwargs", {})
    return Scenario(name, variant, world, f"{__name__}:{fn.__name__}", kwargs, **extra)


# fmt: off
SCENARIOS: tuple[Scenario, ...] = (
    _s("ddp", ddp),
    _s("zero_redundancy_optimizer", zero),
    _s("fsdp2", fsdp2, kwargs={"variant": "fp32"}),
    _s("fsdp2", fsdp2, variant="bf16-mp", kwargs={"variant": "bf16-mp"}, reference="tinynet_bf16_mp", dtype="bfloat16"),
    _s("simple_fsdp", simple_fsdp, kwargs={"variant": "fp32"}),
    _s("simple_fsdp", simple_fsdp, variant="bf16-mp", kwargs={"variant": "bf16-mp"}, reference="tinynet_bf16_mp",
       dtype="bfloat16"),
    _s("tensor_parallel", tensor_parallel),
    _s("sequence_parallel", sequence_parallel),
    _s("dtensor_redistribute", dtensor_redistribute, reference="matmlp"),
    _s("fsdp_tp_2d", fsdp_tp_2d, world=4),
    _s("hsdp", hsdp, world=4),
    _s("pipeline", pipeline, variant="gpipe", kwargs={"variant": "gpipe"}),
    _s("pipeline", pipeline, variant="1f1b", kwargs={"variant": "1f1b"}),
    _s("functional_collectives", functional_collectives),
    _s("hf_llama_fsdp2", hf_llama_fsdp2, reference="llama", needs=("transformers",)),
)
# fmt: on
"""Every scenario, in the order the suite runs them."""


def by_id(scenario_id: str) -> Scenario:
    """The scenario whose :attr:`Scenario.id` is ``scenario_id``.

    Raises:
        KeyError: no such scenario; the message lists the known ids.
    """
    for scenario in SCENARIOS:
        if scenario.id == scenario_id:
            return scenario
    raise KeyError(f"unknown scenario {scenario_id!r}; known: {', '.join(s.id for s in SCENARIOS)}")
