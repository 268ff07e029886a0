"""Training-runtime checks, part 1: optimizers and the raw fused/AMP kernels they call, against CPU.

Optimizer checks (``<optimizer>-<implementation>``): :data:`OPTIMIZER_STEPS` steps of SGD (momentum 0.9,
Nesterov, weight decay 0.01), Adam (L2 weight decay 0.01, AMSGrad) or AdamW (decoupled weight decay 0.1)
on the MLP of :mod:`neuron_conformance.model_zoo.runtime_case`, with ``foreach=False`` (``loop``), ``foreach=True``
(``foreach``) or ``fused=True`` (``fused``). The loss curve, every final parameter and every optimizer
state tensor are compared; the float64 reference always runs the per-tensor loop (the algorithm's
definition in ``torch.optim``'s documentation), so the fused and foreach code paths are measured against
it. ``fused=True`` is run only where ``torch.utils._foreach_utils._get_fused_kernels_supported_devices()``
lists the device type (torch 2.13 lists the PrivateUse1 backend's name); elsewhere the check is skipped
as unsupported (:func:`fused_supported`).

Raw kernel checks (``kernel-<aten op>``) call the kernels directly on lists of tensors of three shapes:
``_fused_adam_``, ``_fused_adamw_`` and ``_fused_sgd_`` for three steps with a ``grad_scale`` and a zero
``found_inf``, then once with ``found_inf = 1`` (the step must change nothing);
``_amp_foreach_non_finite_check_and_unscale_`` on finite and on non-finite gradients; and
``_amp_update_scale_`` over a fixed overflow pattern (the rule: ``torch.amp.GradScaler``'s documentation,
back off by ``backoff_factor`` on an overflow and reset the tracker, grow by ``growth_factor`` after
``growth_interval`` clean steps).
"""

from __future__ import annotations

import torch

from neuron_conformance.model_zoo.checks import DRIFT_BUDGET
from neuron_conformance.model_zoo.measure import TRAIN_EPS, to_cpu
from neuron_conformance.model_zoo.results import CheckResult
from neuron_conformance.model_zoo.runtime_case import build_mlp, compare_runs, mse, parameters_cpu, sample_batch

OPTIMIZER_STEPS = 4
OPTIMIZERS = {
    "sgd": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    "adam": (torch.optim.Adam, dict(lr=1e-2, weight_decay=0.01, amsgrad=True)),
    "adamw": (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
}
IMPLEMENTATIONS = {"loop": dict(foreach=False), "foreach": dict(foreach=True), "fused": dict(fused=True)}

#: Shapes of the tensor lists the raw kernels are called on.
KERNEL_SHAPES = ((5,), (3, 4), (7,))
#: lr and weight decay of the raw Adam/AdamW kernel calls: decoupled decay shrinks a parameter by
#: ``lr * weight_decay`` = 2.5% a step, above bfloat16's relative resolution (2**-8 = 0.39%) and its
#: tolerance (1.6%), so a kernel that drops the decay is visible in every dtype after one step.
KERNEL_LR, KERNEL_WEIGHT_DECAY = 0.05, 0.5
#: ``_amp_update_scale_``'s found_inf sequence (1: overflow) and its factors.
UPDATE_PATTERN = (0, 0, 1, 0, 0, 0, 1, 1, 0, 0)
GROWTH, BACKOFF, INTERVAL = 2.0, 0.5, 2


def fused_supported(device: torch.device | str) -> bool:
    """Whether torch offers ``fused=True`` optimizers for ``device``'s type (torch's own device list)."""
    from torch.utils._foreach_utils import _get_fused_kernels_supported_devices  # deferred: private torch API

    return torch.device(device).type in _get_fused_kernels_supported_devices()


def _eps_kwargs(name: str, dtype: torch.dtype) -> dict:
    # Adam's eps: the zoo's train-check values (neuron_conformance.model_zoo.measure.TRAIN_EPS, float16's v underflow)
    return {"eps": TRAIN_EPS[dtype]} if name != "sgd" else {}


def optimizer_measure(name: str, impl: str):
    """The measurement of optimizer check ``<name>-<impl>`` (see the module docstring)."""
    cls, kwargs = OPTIMIZERS[name]

    def measure(device, dtype, fp64):
        model = build_mlp(dtype, device, fp64=fp64)
        x, y = sample_batch(dtype, device, fp64=fp64)
        variant = IMPLEMENTATIONS["loop" if fp64 else impl]
        opt = cls(model.parameters(), **kwargs, **_eps_kwargs(name, dtype), **variant)
        losses = []
        for _ in range(OPTIMIZER_STEPS):
            opt.zero_grad(set_to_none=True)
            loss = mse(model, x, y)
            loss.backward()
            opt.step()
            losses.append(to_cpu(loss.detach()))
        out = parameters_cpu(model)
        out["loss curve"] = torch.stack(losses)
        names = {id(p): n for n, p in model.named_parameters()}
        for p, state in opt.state.items():
            for key, value in state.items():
                if isinstance(value, torch.Tensor) and key != "step":
                    out[f"state {key} of {names[id(p)]}"] = to_cpu(value)
        return out

    return measure


def check_optimizer(name: str, impl: str, dtype: torch.dtype, device) -> CheckResult | None:
    """Optimizer check ``<name>-<impl>``: final parameters get the zoo ``train`` check's drift budget
    (:data:`neuron_conformance.model_zoo.measure.DRIFT_BUDGET` x lr x steps: Adam normalises a gradient's rounding noise near
    zero to a sizeable fraction of lr, so two correct kernels move such elements differently), and for
    ``foreach``/``fused`` CPU's result must agree with CPU's per-tensor loop (else ``NoReference``).
    ``None`` when ``impl`` is ``fused`` and the device type has no
    fused optimizers in torch (:func:`fused_supported`)."""
    if impl == "fused" and not fused_supported(device):
        return None
    lr = OPTIMIZERS[name][1]["lr"]
    budget = DRIFT_BUDGET[dtype] * lr * OPTIMIZER_STEPS
    baseline = optimizer_measure(name, "loop") if impl != "loop" else None
    return compare_runs(
        f"{name}-{impl}",
        dtype,
        device,
        optimizer_measure(name, impl),
        param_atol=budget,
        cpu_baseline=baseline,
        metrics={"steps": OPTIMIZER_STEPS, "drift_budget": budget},
    )


def _lists(dtype, device, fp64, count: int, seed: int) -> list[list[torch.Tensor]]:
    """``count`` seeded lists of tensors of :data:`KERNEL_SHAPES` in ``dtype`` (float64 copies with ``fp64``)."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(count):
        row = []
        for shape in KERNEL_SHAPES:
            t = torch.randn(shape, generator=gen).to(dtype)
            t = t.abs() if i == 2 else t  # the second moments (exp_avg_sq) are non-negative
            row.append(t.double() if fp64 else t.to(device))
        out.append(row)
    return out


def _fused_kernel_measure(op: str):
    def measure(device, dtype, fp64):
        place = "cpu" if fp64 else device
        if op == "_fused_sgd_":
            params, grads, bufs = _lists(dtype, device, fp64, 3, seed=7)
            state = {"momentum_buffer": bufs}
        else:
            params, grads, avg, avg_sq, max_sq = _lists(dtype, device, fp64, 5, seed=7)
            max_sq = [m.abs() for m in max_sq]
            state = {"exp_avg": avg, "exp_avg_sq": avg_sq, "max_exp_avg_sq": max_sq}
            steps = [torch.zeros((), device=place) for _ in params]
        scale = torch.full((), 4.0, device=place)
        for g in grads:
            g.mul_(4.0)
        for step in range(4):
            found = torch.full((), 1.0 if step == 3 else 0.0, device=place)
            if op == "_fused_sgd_":
                torch._fused_sgd_(
                    params,
                    grads,
                    bufs,
                    weight_decay=0.01,
                    momentum=0.9,
                    lr=0.05,
                    dampening=0.0,
                    nesterov=True,
                    maximize=False,
                    is_first_step=step == 0,
                    grad_scale=scale,
                    found_inf=found,
                )
            else:
                if step < 3:
                    torch._foreach_add_(steps, 1.0)
                getattr(torch, op)(
                    params,
                    grads,
                    avg,
                    avg_sq,
                    max_sq,
                    steps,
                    lr=KERNEL_LR,
                    beta1=0.9,
                    beta2=0.999,
                    weight_decay=KERNEL_WEIGHT_DECAY,
                    eps=1e-3,
                    amsgrad=True,
                    maximize=False,
                    grad_scale=scale,
                    found_inf=found,
                )
            if step == 2:
                before = [to_cpu(p) for p in params]
        out = {f"param {i}": to_cpu(p) for i, p in enumerate(params)}
        for key, tensors in state.items():
            out.update({f"{key} {i}": to_cpu(t) for i, t in enumerate(tensors)})
        # whatever the kernel leaves in the gradients (the CPU kernel's behaviour is the reference)
        out.update({f"grad {i} after the steps": to_cpu(g) for i, g in enumerate(grads)})
        out["#params unchanged by the found_inf step"] = torch.tensor(
            [bool(torch.equal(b, to_cpu(p))) for b, p in zip(before, params)]
        )
        return out

    return measure


def _unscale_measure(device, dtype, fp64):
    out = {}
    for case, poison in (("finite", None), ("inf", float("inf")), ("nan", float("nan"))):
        grads = _lists(dtype, device, fp64, 1, seed=11)[0]
        if poison is not None:
            grads[1].view(-1)[5] = poison
        found = torch.zeros((), device="cpu" if fp64 else device)
        inv = torch.full((), 1.0 / 1024, device="cpu" if fp64 else device)
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)
        out[f"#found_inf ({case} grads)"] = to_cpu(found).double()
        out.update({f"{case} grad {i} unscaled": to_cpu(g) for i, g in enumerate(grads)})
    return out


def _update_scale_measure(device, dtype, fp64):
    place = "cpu" if fp64 else device
    scale = torch.full((1,), 2.0**10, device=place)
    tracker = torch.zeros((1,), dtype=torch.int32, device=place)
    scales, trackers = [], []
    for overflow in UPDATE_PATTERN:
        found = torch.full((1,), float(overflow), device=place)
        torch._amp_update_scale_(scale, tracker, found, GROWTH, BACKOFF, INTERVAL)
        scales.append(float(to_cpu(scale)))
        trackers.append(int(to_cpu(tracker)))
    return {
        "#scale after each update": torch.tensor(scales, dtype=torch.float64),
        "#growth tracker after each update": torch.tensor(trackers),
    }


def expected_scales(pattern=UPDATE_PATTERN, init: float = 2.0**10) -> list[float]:
    """The scale after each ``_amp_update_scale_`` call by GradScaler's documented rule (pure Python)."""
    scale, tracker, out = init, 0, []
    for overflow in pattern:
        if overflow:
            scale, tracker = scale * BACKOFF, 0
        else:
            tracker += 1
            if tracker == INTERVAL:
                scale, tracker = scale * GROWTH, 0
        out.append(scale)
    return out


KERNEL_MEASURES = {
    "_fused_adam_": _fused_kernel_measure("_fused_adam_"),
    "_fused_adamw_": _fused_kernel_measure("_fused_adamw_"),
    "_fused_sgd_": _fused_kernel_measure("_fused_sgd_"),
    "_amp_foreach_non_finite_check_and_unscale_": _unscale_measure,
    "_amp_update_scale_": _update_scale_measure,
}
#: Kernels whose check runs in float32 only (AMP keeps the scale and its gradients' check in float32).
FLOAT32_KERNELS = ("_amp_update_scale_",)


def check_kernel(op: str, dtype: torch.dtype, device) -> CheckResult:
    """Raw kernel check ``kernel-<op>``; for ``_amp_update_scale_`` the scales must also follow
    :func:`expected_scales`.

    Raises:
        KeyError: ``op`` is not one of :data:`KERNEL_MEASURES`.
    """

    def scale_rule(actual):
        got = [float(v) for v in actual["#scale after each update"]]
        return None if got == expected_scales() else f"scales {got} differ from GradScaler's rule {expected_scales()}"

    return compare_runs(
        f"kernel-{op}", dtype, device, KERNEL_MEASURES[op], rule=scale_rule if op == "_amp_update_scale_" else None
    )
