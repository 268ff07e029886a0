"""A small SimpleFSDP frontend: fully sharded data parallel out of DTensor, a parametrization and autograd.

Design (Zhang et al., "SimpleFSDP: Simpler Fully Sharded Data Parallel with torch.compile",
arXiv 2411.00284): no wrapper module, no flat buffers and no hand-written hooks. Every parameter is
stored as a DTensor placed ``Shard(0)`` on the data-parallel mesh (each rank keeps ``1/world`` of
dimension 0). A parametrization gathers it whenever the module reads the attribute:

* forward: ``sharded.redistribute(mesh, [Replicate()])``, an all-gather, then ``to_local`` hands the
  module a plain full tensor;
* backward, for free from autograd: ``to_local(grad_placements=[Partial("avg")])`` declares the
  replicated gradient (each rank's, from its own part of the batch) a pending average over the ranks,
  and the adjoint of ``Shard(0) -> Replicate`` turns ``Partial -> Shard(0)``: a reduce-scatter that
  averages, which leaves each rank the mean gradient of its own shard, as FSDP does;
* mixed precision: ``redistribute(forward_dtype=param_dtype, backward_dtype=reduce_dtype)`` casts the
  shard before the all-gather (compute in ``param_dtype``) and the gradient before the reduce-scatter;
  the sharded fp32 parameters stay the optimizer's master weights;
* re-gather in backward (the paper's "reshard after forward"): the blocks named in ``regather`` are
  checkpointed with ``torch.distributed._composable.checkpoint`` and a selective policy (collectives,
  views and casts recomputed, compute ops saved), so the full parameters are dropped after the forward
  and all-gathered again when the backward needs them. The paper puts its policy around the gather
  alone and lets ``torch.compile``'s partitioner decide what to keep; in eager a gathered tensor saved by
  its consumer (a matmul) outside the checkpointed region lives until that consumer's backward, hence
  whole blocks here.

What torch 2.13 has and lacks: it ships no SimpleFSDP frontend (that lives in torchtitan's
``experiments/simple_fsdp``, not installed and not copied here). It has every piece used:
``DTensor.redistribute`` with ``forward_dtype``/``backward_dtype``, ``to_local(grad_placements=...)``,
``torch.nn.utils.parametrize.register_parametrization``, ``torch.distributed._composable.checkpoint``
with ``context_fn`` and ``torch.utils.checkpoint.create_selective_checkpoint_contexts``, plus inductor's
bucketing passes for SimpleFSDP's collectives (``torch/_inductor/fx_passes/fsdp.py``), unused here
since the scenarios run eagerly.

Use::

    mesh = init_device_mesh(device.type, (world_size,))
    model = make_model().to(device)
    simple_fsdp(model, mesh, param_dtype=torch.bfloat16, reduce_dtype=torch.float32, regather=model.blocks)
    opt = torch.optim.SGD(model.parameters(), ...)    # steps the Shard(0) DTensors
    full = full_params(model)                         # names as in the unsharded model

Source: arXiv 2411.00284 (the parametrization with redistribute and its backward; the selective
recomputation of the all-gather).
"""

from __future__ import annotations

import functools
from typing import Iterable

import torch
import torch.nn as nn
from torch.nn.utils import parametrize

_PARAM_PREFIX = "parametrizations."
_PARAM_SUFFIX = ".original"


class GatherShards(nn.Module):
    """Parametrization: a ``Shard(0)`` DTensor parameter in, its full local tensor out (all-gather).

    Args:
        mesh: the 1-D data-parallel ``DeviceMesh``.
        param_dtype: dtype the shard is cast to before the all-gather (compute dtype); ``None`` keeps it.
        reduce_dtype: dtype of the gradient's reduce-scatter; ``None`` uses the parameter's dtype.

    The gradient of the output is declared ``Partial("avg")``: backward reduce-scatters the mean of the
    ranks' gradients into the ``Shard(0)`` gradient of the parameter.
    """

    def __init__(self, mesh, param_dtype: torch.dtype | None = None, reduce_dtype: torch.dtype | None = None):
        super().__init__()
        self.mesh = mesh
        self.param_dtype = param_dtype
        self.reduce_dtype = reduce_dtype

    def forward(self, sharded) -> torch.Tensor:
        from torch.distributed.tensor import Partial, Replicate  # deferred: start-up cost

        full = sharded.redistribute(
            self.mesh, [Replicate()], forward_dtype=self.param_dtype, backward_dtype=self.reduce_dtype
        )
        return full.to_local(grad_placements=[Partial("avg")])


def _regather_policy(ctx, op, *args, **kwargs):
    """Selective-checkpoint policy: recompute collectives, views and casts; save every other op's output."""
    from torch.utils.checkpoint import CheckpointPolicy  # deferred: start-up cost

    if op.namespace == "_c10d_functional" or getattr(op, "is_view", False) or op is torch.ops.aten._to_copy.default:
        return CheckpointPolicy.MUST_RECOMPUTE
    return CheckpointPolicy.PREFER_SAVE


def simple_fsdp(
    model: nn.Module,
    mesh,
    *,
    param_dtype: torch.dtype | None = None,
    reduce_dtype: torch.dtype | None = None,
    regather: Iterable[nn.Module] = (),
) -> nn.Module:
    """Shard every parameter of ``model`` ``Shard(0)`` over ``mesh`` and gather it on use; returns ``model``.

    Args:
        model: a module already on the mesh's device; every rank passes the same initial values.
        mesh: 1-D data-parallel ``DeviceMesh``. Dimension 0 of every parameter must divide by its size.
        param_dtype: compute dtype (bf16 for mixed precision); the sharded parameters keep their dtype.
        reduce_dtype: dtype of the gradient reduce-scatter (fp32 under bf16 mixed precision).
        regather: submodules whose forward is checkpointed so that their parameters are all-gathered again
            in backward instead of being kept from the forward.

    Raises:
        ValueError: ``mesh`` is not 1-D, or a parameter's dimension 0 does not divide by the mesh size
            (the message names the parameter and its shape).
    """
    from torch.distributed.tensor import Shard, distribute_tensor  # deferred: start-up cost

    if mesh.ndim != 1:
        raise ValueError(f"simple_fsdp takes a 1-D data-parallel mesh, got {mesh.ndim}-D {mesh}")
    world = mesh.size()
    for module_name, module in list(model.named_modules()):
        for name, param in list(module.named_parameters(recurse=False)):
            if param.dim() == 0 or param.shape[0] % world:
                raise ValueError(
                    f"simple_fsdp: parameter {module_name}.{name} of shape {tuple(param.shape)} "
                    f"cannot be split into {world} equal Shard(0) parts; pad dimension 0"
                )
            sharded = distribute_tensor(param.detach(), mesh, [Shard(0)])  # scatter from rank 0
            setattr(module, name, nn.Parameter(sharded, requires_grad=param.requires_grad))
            gather = GatherShards(mesh, param_dtype, reduce_dtype)
            # unsafe: the gathered tensor may have another dtype (param_dtype) than the fp32 shard
            parametrize.register_parametrization(module, name, gather, unsafe=param_dtype is not None)
    for block in regather:
        _checkpoint_block(block)
    return model


def _checkpoint_block(block: nn.Module) -> None:
    from torch.distributed._composable import checkpoint  # deferred: start-up cost
    from torch.utils.checkpoint import create_selective_checkpoint_contexts  # deferred: start-up cost

    checkpoint(block, context_fn=functools.partial(create_selective_checkpoint_contexts, _regather_policy))


def plain_name(name: str) -> str:
    """The unsharded model's name of a parametrized parameter: ``a.parametrizations.w.original`` -> ``a.w``.

    Example: ``plain_name("blocks.0.fc1.parametrizations.weight.original") == "blocks.0.fc1.weight"``.
    """
    if name.endswith(_PARAM_SUFFIX):
        name = name[: -len(_PARAM_SUFFIX)].replace(_PARAM_PREFIX, "")
    return name


def sharded_params(model: nn.Module) -> dict:
    """``{plain name: Shard(0) DTensor}`` of every parameter :func:`simple_fsdp` sharded."""
    return {plain_name(name): p for name, p in model.named_parameters()}


def full_params(model: nn.Module) -> dict[str, torch.Tensor]:
    """``{plain name: full fp32 CPU tensor}``; gathers each DTensor (a collective: call on every rank)."""
    return {
        name: p.detach().full_tensor().to("cpu", torch.float32).clone() for name, p in sharded_params(model).items()
    }


def backward_collectives(loss: torch.Tensor) -> dict[str, int]:
    """Run ``loss.backward()`` and count its functional collectives by op name (``all_gather_into_tensor``, ...).

    Under :func:`simple_fsdp` each parameter costs one ``reduce_scatter_tensor``, plus one
    ``all_gather_into_tensor`` if its block re-gathers in backward. (``CommDebugMode`` cannot count here: its
    module tracker fails on the parametrization modules that the recomputation enters.)
    """
    from torch.distributed.tensor import DTensor  # deferred: start-up cost
    from torch.utils._python_dispatch import TorchDispatchMode  # deferred: start-up cost

    counts: dict[str, int] = {}

    class _Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if any(issubclass(t, DTensor) for t in types):
                return NotImplemented  # let DTensor lower the op; its collectives come back through this mode
            if func.namespace == "_c10d_functional":
                name = func._opname
                counts[name] = counts.get(name, 0) + 1
            return func(*args, **(kwargs or {}))

    with _Count():
        loss.backward()
    return counts


def shard_layout_error(model: nn.Module, world: int) -> float:
    """Largest ``|local rows - global rows / world|`` over the parameters; 0 when every one is ``Shard(0)``.

    A parameter that is not a DTensor, or is placed otherwise than ``[Shard(0)]``, counts as its whole
    dimension 0 (a replica is the opposite of sharded).
    """
    from torch.distributed.tensor import DTensor, Shard  # deferred: start-up cost

    worst = 0.0
    for p in sharded_params(model).values():
        rows = p.shape[0]
        if not isinstance(p, DTensor) or tuple(p.placements) != (Shard(0),):
            worst = max(worst, float(rows))
            continue
        worst = max(worst, abs(p.to_local().shape[0] - rows / world))
    return worst
