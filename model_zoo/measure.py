"""Measurements of the model checks: run a case's model and return plain CPU tensors.

Each ``measure_*(case, device, fp64)`` builds the case's model and inputs for ``device`` (or, with
``fp64``, the float64 reference on CPU), runs it and returns detached CPU copies of what the check
compares; the same function measures the device and the two references (:func:`neuron_conformance.model_zoo.case.reference`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from neuron_conformance.model_zoo.case import Case
from neuron_conformance.model_zoo.registry import ModelSpec

#: AdamW settings of the ``train`` check. ``eps`` is larger than AdamW's 1e-8 so that Adam's
#: ``m / sqrt(v)`` normalisation does not blow rounding noise in near-zero gradients (for example
#: attention key biases, whose true gradient is zero) up to full ``±lr`` steps, which differ between
#: any two correct kernels. float16 needs more: the second moment ``v = (1 - beta2) * g² = 1e-3 * g²``
#: underflows to zero for ``|g| < 7.7e-3`` (float16's smallest normal is 6.1e-5), turning the update
#: into ``lr * g / eps``; with ``eps = 1e-2`` that stays below ``lr``.
TRAIN_STEPS = 3
TRAIN_LR = 1e-3
TRAIN_EPS = {torch.float32: 1e-5, torch.bfloat16: 1e-5, torch.float16: 1e-2}
TRAIN_WEIGHT_DECAY = 0.01

#: Parameter drift budget of the ``train`` and ``compile_train`` checks, as a fraction of the largest
#: distance AdamW can move an element (about ``lr * steps``): a final parameter passes the tolerance rule
#: when it is within ``DRIFT_BUDGET[dtype] * lr * steps`` of CPU's (or within the tensor's own tolerance).
#: Parameters whose true gradient is zero (attention key biases) move by rounding noise alone, which
#: Adam normalises to a sizeable fraction of ``lr`` and which differs between two correct kernels
#: (``foreach`` vs per-tensor AdamW) in bfloat16/float16. A broken optimizer kernel moves elements
#: by whole ``lr`` steps, far beyond the budget; a wrong gradient is the ``backward`` check's job
#: (Adam's normalisation hides gradient scale). This project's choice.
DRIFT_BUDGET = {torch.float32: 1e-3, torch.bfloat16: 0.1, torch.float16: 0.1}


def primary_output(spec: ModelSpec, output: Any) -> torch.Tensor:
    """The tensor named by ``spec.output`` in a model output.

    Raises:
        KeyError: the output has no such field.
    """
    value = getattr(output, spec.output, None)
    if value is None and isinstance(output, Mapping):
        value = output.get(spec.output)
    if not isinstance(value, torch.Tensor):
        raise KeyError(f"model {spec.id!r}: output has no tensor field {spec.output!r}")
    return value


def to_cpu(t: torch.Tensor) -> torch.Tensor:
    """A detached CPU copy of ``t`` (always a copy, also for a CPU tensor)."""
    return t.detach().to("cpu", copy=True)


def _loss(spec: ModelSpec, y: torch.Tensor, fp64: bool) -> torch.Tensor:
    """Fixed MSE loss of the compared output against a seeded target (float32, float64 for the reference)."""
    gen = torch.Generator().manual_seed(1234)
    target = torch.randn(tuple(y.shape), generator=gen).to(y.device)
    acc = torch.float64 if fp64 else torch.float32
    return (y.to(acc) - target.to(acc)).square().mean()


def measure_forward(case: Case, device, fp64: bool) -> torch.Tensor:
    """The compared output (``spec.output``) of one forward pass without grad."""
    model, inputs = case.model_and_inputs(device, fp64=fp64)
    with torch.no_grad():
        return to_cpu(primary_output(case.spec, model(**inputs)))


def measure_backward(case: Case, device, fp64: bool) -> dict[str, torch.Tensor | None]:
    """``{parameter name: gradient or None}`` of the fixed loss, plus ``"<loss>"``: the loss, shape ``(1,)``."""
    model, inputs = case.model_and_inputs(device, fp64=fp64)
    loss = _loss(case.spec, primary_output(case.spec, model(**inputs)), fp64)
    loss.backward()
    grads = {name: (None if p.grad is None else to_cpu(p.grad)) for name, p in model.named_parameters()}
    grads["<loss>"] = to_cpu(loss.detach().reshape(1))
    return grads


def measure_train(
    case: Case,
    device,
    fp64: bool,
    steps: int = TRAIN_STEPS,
    *,
    prepare: Callable[[torch.nn.Module], Callable[[Callable[[], Any]], Any]] | None = None,
) -> dict[str, torch.Tensor]:
    """``{parameter name: value}`` after ``steps`` AdamW steps on the fixed loss, plus ``"<losses>"``:
    the loss before each step, shape ``(steps,)``.

    ``prepare(model)``, when given, runs once on the built model before the optimizer is made (the compiled
    train step compiles it there) and returns the runner each step's forward goes through:
    ``runner(lambda: model(**inputs))``.
    """
    model, inputs = case.model_and_inputs(device, fp64=fp64)
    run = prepare(model) if prepare is not None else (lambda forward: forward())
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=TRAIN_LR, eps=TRAIN_EPS[case.dtype], weight_decay=TRAIN_WEIGHT_DECAY)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = _loss(case.spec, primary_output(case.spec, run(lambda: model(**inputs))), fp64)
        loss.backward()
        opt.step()
        losses.append(to_cpu(loss.detach()))
    out = {name: to_cpu(p) for name, p in model.named_parameters()}
    out["<losses>"] = torch.stack(losses)
    return out


def _is_router(module: torch.nn.Module) -> bool:
    name = type(module).__name__
    return name.endswith("TopKRouter") or name.endswith("TopkRouter")


def measure_router(case: Case, device, fp64: bool) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Router logits ``(tokens, experts)`` and chosen expert indices ``(tokens, top_k)`` per router module.

    Routers are found by class name (``*TopKRouter``/``*TopkRouter``, transformers 5.x), which
    return ``(router_logits, routing_weights, expert_indices)``.

    Raises:
        ValueError: the model has no router module.
    """
    model, inputs = case.model_and_inputs(device, fp64=fp64)
    found: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    handles = []
    for name, module in model.named_modules():
        if _is_router(module):

            def hook(mod, args, output, name=name):
                found[name] = (to_cpu(output[0]), to_cpu(output[2]))

            handles.append(module.register_forward_hook(hook))
    if not handles:
        raise ValueError(f"model {case.spec.id!r} is marked is_moe but has no *TopKRouter module")
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        for h in handles:
            h.remove()
    return found
