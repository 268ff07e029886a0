"""The reference for every distributed scenario: the same training run in one CPU process.

One process sees the whole global batch of each step, computes the mean loss, and takes the same
:data:`~neuron_conformance.model_zoo.distributed.models.STEPS` SGD steps. For data parallelism (DDP, ZeRO, FSDP2, HSDP,
functional collectives) the mean of equal-sized per-rank mean losses is the global mean, so averaged
gradients equal the reference's; for TP/SP/DTensor the ranks compute parts of the same full-batch loss;
for pipelining the microbatch losses are averaged (``scale_grads=True``). Only the order of floating-point
reductions differs, hence a tolerance rather than bitwise equality (a gloo run matched to about 3e-8 in
fp32).

``tinynet_bf16_mp`` reproduces FSDP2's ``MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32)`` in one process: forward and backward on a bf16 copy of the fp32 parameters (inputs
cast to bf16), gradients cast to fp32 and applied to the fp32 parameters.
"""

from __future__ import annotations

import copy
import functools

import torch
import torch.nn.functional as F

from neuron_conformance.model_zoo.distributed import models as sc

REFERENCES = ("tinynet", "tinynet_bf16_mp", "matmlp", "llama")
"""Names a :class:`~neuron_conformance.model_zoo.distributed.scenarios.Scenario` may give as its ``reference``."""


def _params(model) -> dict[str, torch.Tensor]:
    return {name: p.detach().to(torch.float32).clone() for name, p in model.named_parameters()}


def _tinynet() -> dict:
    model = sc.make_tinynet()
    opt = sc.make_optimizer(model.parameters())
    losses = []
    for step in range(sc.STEPS):
        x, y = sc.batch(step)
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"params": _params(model), "losses": losses}


def _tinynet_bf16_mp() -> dict:
    master = sc.make_tinynet()
    opt = sc.make_optimizer(master.parameters())
    losses = []
    for step in range(sc.STEPS):
        x, y = sc.batch(step)
        low = copy.deepcopy(master).to(torch.bfloat16)
        loss = F.mse_loss(low(x.to(torch.bfloat16)).float(), y)
        loss.backward()
        for p_master, p_low in zip(master.parameters(), low.parameters()):
            p_master.grad = p_low.grad.to(torch.float32)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return {"params": _params(master), "losses": losses}


def _matmlp() -> dict:
    model = sc.make_matmlp()
    opt = sc.make_optimizer(model.parameters())
    losses = []
    for step in range(sc.STEPS):
        x, y = sc.batch(step)
        opt.zero_grad()
        loss = ((model(x.reshape(-1, sc.D)) - y.reshape(-1, sc.D)) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"params": _params(model), "losses": losses}


def _llama() -> dict:
    model = sc.make_llama()
    opt = sc.make_optimizer(model.parameters())
    losses = []
    for step in range(sc.STEPS):
        ids = sc.token_batch(step)
        opt.zero_grad()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"params": _params(model), "losses": losses}


@functools.lru_cache(maxsize=None)
def _cached(name: str) -> dict:
    runs = {"tinynet": _tinynet, "tinynet_bf16_mp": _tinynet_bf16_mp, "matmlp": _matmlp, "llama": _llama}
    prev = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the reference's reductions do not depend on the machine
    try:
        return runs[name]()
    finally:
        torch.set_num_threads(prev)


def reference_run(name: str) -> dict:
    """Train reference ``name`` on CPU; return ``{"params": {name: fp32 tensor}, "losses": [float]}``.

    Results are cached per process; callers get copies of the tensors.

    Raises:
        KeyError: ``name`` is not one of :data:`REFERENCES`.
    """
    if name not in REFERENCES:
        raise KeyError(f"unknown reference run {name!r}; known: {', '.join(REFERENCES)}")
    result = _cached(name)
    return {"params": {k: v.clone() for k, v in result["params"].items()}, "losses": list(result["losses"])}
