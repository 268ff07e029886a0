"""Training-runtime checks, part 2: the loop around the optimizer, against CPU.

Each check measures on the MLP of :mod:`neuron_conformance.model_zoo.runtime_case` and is judged by
:func:`neuron_conformance.model_zoo.runtime_case.compare_runs` (device vs CPU, float64 arbitrating; ``#`` values exactly):

``grad_scaler-<impl>``  ``torch.amp.GradScaler(<device type>)`` (init scale 2**12, growth interval 2)
                        over :data:`SCALER_PATTERN`, poisoning one gradient element with inf or NaN on
                        the overflow steps, with SGD (``foreach``) or AdamW (``fused``, which receives the
                        scaler's ``grad_scale``/``found_inf``). Compared: the scale after each update and
                        whether each step left the parameters unchanged (exactly), the final parameters.
                        Also held to GradScaler's documented rule: an overflow step is skipped and halves
                        the scale, ``growth_interval`` clean steps double it (:func:`scaler_rule`).
``clip-<impl>``         ``clip_grad_norm_`` (``foreach`` False/True) with the 2-norm and the inf-norm: the
                        returned total norm and the clipped gradients; with a NaN gradient and
                        ``error_if_nonfinite=True`` it must raise on the device as on CPU.
``accumulate``          gradients accumulated over 3 micro-batches of 4 rows, then one SGD step.
``sched-<name>``        StepLR, OneCycleLR or CosineAnnealingLR driving SGD for :data:`SCHED_STEPS` steps:
                        the learning rate after each step and the final parameters.
``hooks``               a forward pre-hook (doubles the input), a forward hook, a full backward hook,
                        a gradient hook (halves a weight's gradient) and a post-accumulate-grad hook:
                        what they saw, how often they ran, and the resulting gradients.
``checkpoint-<where>``  2 AdamW steps, ``torch.save`` of model and optimizer ``state_dict`` (in memory),
                        ``torch.load(map_location=<device> or "cpu")`` into a fresh model and optimizer on
                        the device, 2 more steps; the loaded tensors must sit where ``map_location`` says.
``dataloader-pin``      ``DataLoader(pin_memory=True)``: batches are pinned and equal to an unpinned
                        loader's, and a forward pass on the copied batches (``non_blocking=True``). Needs
                        the ``pinned_memory`` capability (the emulated device does not claim it).
"""

from __future__ import annotations

import io

import torch

from neuron_conformance.model_zoo.measure import to_cpu
from neuron_conformance.model_zoo.results import CheckResult
from neuron_conformance.model_zoo.runtime_case import build_mlp, compare_runs, mse, parameters_cpu, sample_batch

#: Overflow pattern of the GradScaler check: None a clean step, else the value poisoning a gradient.
SCALER_PATTERN = (None, None, float("inf"), None, None, None, float("nan"), None)
SCALER_INIT, SCALER_INTERVAL = 2.0**12, 2
SCHED_STEPS = 6


def scaler_rule(
    pattern=SCALER_PATTERN, init: float = SCALER_INIT, interval: int = SCALER_INTERVAL
) -> tuple[list[float], list[bool]]:
    """``(scale after each update, step skipped)`` by ``torch.amp.GradScaler``'s documented rule
    (backoff 0.5 on an overflow, growth 2.0 after ``interval`` consecutive clean steps)."""
    scale, clean, scales, skipped = init, 0, [], []
    for poison in pattern:
        if poison is not None:
            scale, clean = scale * 0.5, 0
        else:
            clean += 1
            if clean == interval:
                scale, clean = scale * 2.0, 0
        scales.append(scale)
        skipped.append(poison is not None)
    return scales, skipped


def _scaler_measure(impl: str):
    def measure(device, dtype, fp64):
        place = torch.device("cpu" if fp64 else device)
        model = build_mlp(dtype, place, fp64=fp64)
        x, y = sample_batch(dtype, place, fp64=fp64)
        if impl == "fused":
            opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1, fused=True)
        else:
            opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, foreach=True)
        scaler = torch.amp.GradScaler(place.type, init_scale=SCALER_INIT, growth_interval=SCALER_INTERVAL)
        scales, unchanged = [], []
        for poison in SCALER_PATTERN:
            opt.zero_grad(set_to_none=True)
            scaler.scale(mse(model, x, y)).backward()
            if poison is not None:
                model[0].weight.grad.view(-1)[3] = poison
            before = [to_cpu(p) for p in model.parameters()]
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
            unchanged.append(all(torch.equal(b, to_cpu(p)) for b, p in zip(before, model.parameters())))
        out = parameters_cpu(model)
        out["#scale after each update"] = torch.tensor(scales, dtype=torch.float64)
        out["#step left the parameters unchanged"] = torch.tensor(unchanged)
        return out

    return measure


def check_grad_scaler(impl: str, dtype: torch.dtype, device) -> CheckResult:
    """GradScaler check ``grad_scaler-<impl>`` (``foreach`` SGD or ``fused`` AdamW), also held to :func:`scaler_rule`."""

    def rule(actual):
        scales, skipped = scaler_rule()
        got_scales = [float(v) for v in actual["#scale after each update"]]
        got_skipped = [bool(u) for u in actual["#step left the parameters unchanged"]]
        if got_scales == scales and got_skipped == skipped:
            return None
        return (
            f"GradScaler on the device gave scales {got_scales} and skipped steps {got_skipped}; its "
            f"documented rule gives {scales} and {skipped}"
        )

    return compare_runs(f"grad_scaler-{impl}", dtype, device, _scaler_measure(impl), rule=rule)


def _clip_measure(impl: str):
    def measure(device, dtype, fp64):
        model = build_mlp(dtype, device, fp64=fp64)
        x, y = sample_batch(dtype, device, fp64=fp64)
        out = {}
        for norm in (2.0, float("inf")):
            model.zero_grad(set_to_none=True)
            mse(model, x, y).backward()
            total = torch.nn.utils.clip_grad_norm_(
                model.parameters(), max_norm=0.05, norm_type=norm, foreach=impl == "foreach", error_if_nonfinite=True
            )
            out[f"total {norm}-norm"] = to_cpu(total).reshape(1)
            out.update({f"grad of {n} clipped by the {norm}-norm": to_cpu(p.grad) for n, p in model.named_parameters()})
        model[3].bias.grad.view(-1)[0] = float("nan")
        try:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=impl == "foreach", error_if_nonfinite=True)
            raised = False
        except RuntimeError:
            raised = True
        out["#error_if_nonfinite raised on a NaN gradient"] = torch.tensor([raised])
        return out

    return measure


def _accumulate_measure(device, dtype, fp64):
    model = build_mlp(dtype, device, fp64=fp64)
    x, y = sample_batch(dtype, device, fp64=fp64)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=False)
    opt.zero_grad(set_to_none=True)
    for i in range(3):
        (mse(model, x[4 * i : 4 * i + 4], y[4 * i : 4 * i + 4]) / 3).backward()
    out = {f"accumulated grad of {n}": to_cpu(p.grad) for n, p in model.named_parameters()}
    opt.step()
    out.update(parameters_cpu(model))
    return out


SCHEDULERS = {
    "steplr": lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5),
    "onecycle": lambda opt: torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=SCHED_STEPS),
    "cosine": lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=SCHED_STEPS, eta_min=1e-3),
}


def _sched_measure(name: str):
    def measure(device, dtype, fp64):
        model = build_mlp(dtype, device, fp64=fp64)
        x, y = sample_batch(dtype, device, fp64=fp64)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        sched = SCHEDULERS[name](opt)
        lrs, losses = [], []
        for _ in range(SCHED_STEPS):
            opt.zero_grad(set_to_none=True)
            loss = mse(model, x, y)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(to_cpu(loss.detach()))
            lrs.append(float(opt.param_groups[0]["lr"]))
        out = parameters_cpu(model)
        out["loss curve"] = torch.stack(losses)
        out["#learning rate after each step"] = torch.tensor(lrs, dtype=torch.float64)
        return out

    return measure


def _hooks_measure(device, dtype, fp64):
    model = build_mlp(dtype, device, fp64=fp64)
    x, y = sample_batch(dtype, device, fp64=fp64)
    seen: dict[str, torch.Tensor] = {}
    calls = {"pre": 0, "fwd": 0, "bwd": 0, "grad": 0, "post": 0}

    def pre(mod, args):
        calls["pre"] += 1
        return (args[0] * 2,)

    def fwd(mod, args, output):
        calls["fwd"] += 1
        seen["forward hook: LayerNorm output"] = to_cpu(output)

    def bwd(mod, grad_input, grad_output):
        calls["bwd"] += 1
        seen["backward hook: grad_output of the last Linear"] = to_cpu(grad_output[0])
        seen["backward hook: grad_input of the last Linear"] = to_cpu(grad_input[0])

    def grad_hook(g):
        calls["grad"] += 1
        return g * 0.5

    def post(p):
        calls["post"] += 1
        seen["post-accumulate: grad of 0.bias"] = to_cpu(p.grad)

    handles = [
        model[0].register_forward_pre_hook(pre),
        model[1].register_forward_hook(fwd),
        model[3].register_full_backward_hook(bwd),
        model[3].weight.register_hook(grad_hook),
        model[0].bias.register_post_accumulate_grad_hook(post),
    ]
    for _ in range(2):
        mse(model, x, y).backward()
    for h in handles:
        h.remove()
    seen.update({f"grad of {n} (accumulated twice)": to_cpu(p.grad) for n, p in model.named_parameters()})
    seen["#hook calls (pre, forward, backward, grad, post-accumulate)"] = torch.tensor(list(calls.values()))
    return seen


def _checkpoint_measure(where: str):
    def measure(device, dtype, fp64):
        place = torch.device("cpu" if fp64 else device)
        x, y = sample_batch(dtype, place, fp64=fp64)

        def make():
            model = build_mlp(dtype, place, fp64=fp64)
            return model, torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)

        def steps(model, opt, n):
            for _ in range(n):
                opt.zero_grad(set_to_none=True)
                mse(model, x, y).backward()
                opt.step()

        model, opt = make()
        steps(model, opt, 2)
        buffer = io.BytesIO()
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, buffer)
        buffer.seek(0)
        target = place if where == "device" else torch.device("cpu")
        loaded = torch.load(buffer, map_location=target, weights_only=True)
        tensors = list(loaded["model"].values()) + [
            v for s in loaded["optimizer"]["state"].values() for k, v in s.items() if k != "step"
        ]
        placed = all(t.device.type == target.type for t in tensors)
        model2, opt2 = make()
        model2.load_state_dict(loaded["model"])
        opt2.load_state_dict(loaded["optimizer"])
        steps(model2, opt2, 2)
        out = parameters_cpu(model2)
        out.update(
            {
                f"state {k} of {n}": to_cpu(v)
                for n, p in model2.named_parameters()
                for k, v in opt2.state[p].items()
                if k != "step"
            }
        )
        out["#loaded tensors on map_location's device"] = torch.tensor([placed])
        return out

    return measure


def _dataloader_measure(device, dtype, fp64):
    from torch.utils.data import DataLoader, TensorDataset  # deferred: only this check uses it

    x, y = sample_batch(dtype, "cpu", fp64=fp64)
    data = TensorDataset(x, y)
    pinned = list(DataLoader(data, batch_size=4, pin_memory=not fp64))
    plain = list(DataLoader(data, batch_size=4))
    model = build_mlp(dtype, device, fp64=fp64)
    out = {
        "#pinned batches equal the unpinned ones": torch.tensor(
            [torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(pinned, plain)]
        )
    }
    # the CPU run pins through the same accelerator, so these two are also held to _pinned_rule
    out["#batches pinned"] = torch.tensor([bool(b[0].is_pinned()) or fp64 for b in pinned])
    with torch.no_grad():
        for i, (bx, _) in enumerate(pinned):
            out[f"output of batch {i}"] = to_cpu(model(bx.to(device, non_blocking=True)))
    return out


LOOP_MEASURES = {
    "clip-loop": _clip_measure("loop"),
    "clip-foreach": _clip_measure("foreach"),
    "accumulate": _accumulate_measure,
    **{f"sched-{n}": _sched_measure(n) for n in SCHEDULERS},
    "hooks": _hooks_measure,
    "checkpoint-device": _checkpoint_measure("device"),
    "checkpoint-cpu": _checkpoint_measure("cpu"),
    "dataloader-pin": _dataloader_measure,
}


def check_loop(name: str, dtype: torch.dtype, device) -> CheckResult | None:
    """Loop check ``name`` (a key of :data:`LOOP_MEASURES`, or ``grad_scaler-foreach``/``grad_scaler-fused``);
    ``None`` for ``dataloader-pin`` on CPU (pinned memory belongs to an accelerator).

    Raises:
        KeyError: unknown check name.
    """
    if name.startswith("grad_scaler-"):
        return check_grad_scaler(name.split("-", 1)[1], dtype, device)
    if name == "dataloader-pin":
        if torch.device(device).type == "cpu":  # DataLoader pins only through an accelerator
            return None
        return compare_runs(name, dtype, device, _dataloader_measure, rule=_pinned_rule)
    return compare_runs(name, dtype, device, LOOP_MEASURES[name])


def _pinned_rule(actual: dict[str, torch.Tensor]) -> str | None:
    """DataLoader's documented rule: ``pin_memory=True`` returns the same batches, in pinned host memory."""
    pinned = actual["#batches pinned"].tolist()
    same = actual["#pinned batches equal the unpinned ones"].tolist()
    if not all(pinned):
        return f"DataLoader(pin_memory=True) returned unpinned batches: {pinned}"
    return None if all(same) else f"pinned batches differ from the unpinned loader's: {same}"
