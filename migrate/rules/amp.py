"""NM5xx: automatic mixed precision (``torch/amp/``)."""

from __future__ import annotations

import libcst as cst

from neuron_conformance.migrate.args import bind, build_args, string_value
from neuron_conformance.migrate.hooks import on_call, on_reference, rule
from neuron_conformance.migrate.rules._common import SAFE, UNSAFE, Finding, is_cuda_string, new_call

_CPU_ONLY = (
    "Unsafe: on a CUDA host the result is identical "
    "and on other accelerators it is what was meant. On a host with no accelerator the device "
    'type resolves to `"cpu"`; where the call left `enabled` out or gave `True`, the fix passes '
    "`enabled=torch.accelerator.is_available()`, so {what} stays off there as the CUDA version "
    "(which warned and disabled itself); an explicit other `enabled=` is kept and may switch it on. "
    "Positional arguments are bound to the old signature and passed by keyword first."
)

rule(
    "NM501",
    "cuda-amp-autocast",
    "`{name}` is deprecated and CUDA-specific",
    "Replace with `torch.autocast(DEVICE_TYPE, ...)`",
    UNSAFE,
    what="Finds `torch.cuda.amp.autocast(...)` (also imported as `from torch.cuda.amp import autocast`).",
    why="The namespace is deprecated (FutureWarning) and autocasts CUDA only.",
    example="with torch.cuda.amp.autocast(False):",
    use_instead="with torch.autocast(DEVICE_TYPE, enabled=False):",
    fix_safety=_CPU_ONLY.format(what="autocast") + " The positional trap is real: "
    '`torch.autocast("cuda", False)` raises (False lands in `dtype`). `dtype=` is emitted only '
    "when the original gave it.",
    references="`torch/amp/autocast_mode.py`, `torch/amp/grad_scaler.py`; physicsnemo#1946.",
)

rule(
    "NM502",
    "autocast-cuda-device-type",
    '`autocast` with device type `"cuda"`',
    "Use the current accelerator's device type",
    UNSAFE,
    what='Finds `torch.autocast("cuda", ...)`, `torch.amp.autocast(device_type="cuda")` and friends.',
    why="Autocast is enabled for CUDA only; on Trainium/XPU the model runs in full precision.",
    example='with torch.autocast("cuda", dtype=torch.bfloat16):',
    use_instead="with torch.autocast(DEVICE_TYPE, dtype=torch.bfloat16):",
    fix_safety=_CPU_ONLY.format(what="autocast"),
    references="`torch/amp/autocast_mode.py`, `torch/amp/grad_scaler.py`.",
)

rule(
    "NM503",
    "cuda-amp-grad-scaler",
    "`{name}` is deprecated and CUDA-specific",
    "Replace with `torch.amp.GradScaler(DEVICE_TYPE, ...)`",
    UNSAFE,
    what="Finds `torch.cuda.amp.GradScaler(...)` (also imported by name).",
    why="Deprecated; it scales for CUDA only.",
    example="scaler = torch.cuda.amp.GradScaler(2.0**16)",
    use_instead="scaler = torch.amp.GradScaler(DEVICE_TYPE, init_scale=2.0**16)",
    fix_safety=_CPU_ONLY.format(what="loss scaling") + " Positional shift: `torch.amp.GradScaler(2.**16)` "
    "would pass the scale as the device.",
    references="`torch/amp/grad_scaler.py` (the `GradScaler(device='cuda', init_scale, ...)` signature and "
    "default); pytorch#147731 (FP64 needed on XPU Arc).",
)

rule(
    "NM504",
    "grad-scaler-default-device",
    "`torch.amp.GradScaler` without a device is still a CUDA scaler",
    "Pass `DEVICE_TYPE` as the device",
    UNSAFE,
    what='Finds `torch.amp.GradScaler()` / `torch.GradScaler()` with no `device` or with `"cuda"`.',
    why="The `device` parameter defaults to `'cuda'`, so the 'modern' spelling is still CUDA-only.",
    example="scaler = torch.amp.GradScaler()",
    use_instead="scaler = torch.amp.GradScaler(DEVICE_TYPE)",
    fix_safety=_CPU_ONLY.format(what="loss scaling"),
    references="`torch/amp/grad_scaler.py` (`GradScaler(device='cuda')` default).",
)

rule(
    "NM505",
    "cuda-amp-custom-fwd",
    "`{name}` is deprecated and CUDA-specific",
    "Replace with `torch.amp.{attr}(device_type=DEVICE_TYPE, ...)`",
    SAFE,
    what="Finds `@torch.cuda.amp.custom_fwd`, `custom_fwd(cast_inputs=...)` and `custom_bwd`.",
    why="Deprecated; the generic decorators need an explicit `device_type`.",
    example="@torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)",
    use_instead="@torch.amp.custom_fwd(device_type=DEVICE_TYPE, cast_inputs=torch.float32)",
    fix_safety="Safe: the decorator argument is evaluated at import, so the non-poisoning "
    "`current_accelerator()` constant is used, never `is_available()`.",
    references="`torch/amp/autocast_mode.py`, `torch/amp/grad_scaler.py`.",
)

rule(
    "NM506",
    "autocast-gpu-query",
    "`{name}` asks about CUDA autocast only",
    "Pass the device type explicitly",
    UNSAFE,
    what="Finds `torch.get_autocast_gpu_dtype()` and `torch.is_autocast_enabled()` without argument.",
    why="Deprecated forms that answer for CUDA only.",
    example="dtype = torch.get_autocast_gpu_dtype()",
    use_instead="dtype = torch.get_autocast_dtype(DEVICE_TYPE)",
    fix_safety=_CPU_ONLY.format(what="the query") + " (here: it answers for CPU autocast on CPU-only hosts).",
    references="`torch/amp/autocast_mode.py`, `torch/amp/grad_scaler.py`.",
)

rule(
    "NM507",
    "autocast-without-device",
    "`autocast` without `device_type` raises TypeError",
    "",
    "report",
    what="Finds `torch.amp.autocast()` / `torch.autocast()` with no device type (often left behind by an "
    "import swap from `torch.cuda.amp`).",
    why="`device_type` is required.",
    example="with torch.amp.autocast():",
    use_instead="with torch.amp.autocast(DEVICE_TYPE):",
    fix_safety="No fix: the intended device is unknown.",
    references="`torch/amp/autocast_mode.py` (`autocast(device_type, ...)`); physicsnemo#1946.",
)


rule(
    "NM508",
    "cpu-amp-autocast",
    "`torch.cpu.amp.autocast` is deprecated",
    'Replace with `torch.autocast("cpu", ...)`',
    SAFE,
    what="Finds `torch.cpu.amp.autocast(...)`.",
    why='The namespace is deprecated (FutureWarning); `torch.autocast("cpu", ...)` is the same context.',
    example="with torch.cpu.amp.autocast(dtype=torch.bfloat16):",
    use_instead='with torch.autocast("cpu", dtype=torch.bfloat16):',
    fix_safety="Safe: positional arguments are bound to the old signature `(enabled, dtype, cache_enabled)` "
    'and passed by keyword; the device stays `"cpu"`.',
    references="`torch/amp/autocast_mode.py`, `torch/amp/grad_scaler.py`.",
)


def _gated(ctx, fix):
    """``fix`` (a call fix), then ``enabled=`` made ``torch.accelerator.is_available()`` where the call left it
    out or gave the literal ``True``: the CUDA version switches itself off on a host without CUDA (a warning),
    and the rewritten one must not switch CPU autocast or CPU loss scaling on there (ignite 0.5.5, composer 0.32.1, a training
    script's bare ``torch.cuda.amp.autocast()``). An explicit
    other value (``enabled=use_amp``) is the caller's and is kept."""
    if fix is None:
        return None

    def gated(updated):
        new = fix(updated)
        avail = cst.Call(func=ctx.torch_attr("accelerator.is_available"))
        args = list(new.args)
        for i, a in enumerate(args):
            if a.keyword is not None and a.keyword.value == "enabled":
                if isinstance(a.value, cst.Name) and a.value.value == "True":
                    args[i] = a.with_changes(value=avail)
                    return new.with_changes(args=args)
                return new
        if args:
            args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.append(
            cst.Arg(
                keyword=cst.Name("enabled"),
                value=avail,
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
                ),
            )
        )
        return new.with_changes(args=args)

    return gated


@on_call("torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast")
def _cuda_autocast(ctx, call, q):
    fix = _gated(
        ctx,
        new_call(
            ctx,
            call,
            "autocast",
            old_params=["enabled", "dtype", "cache_enabled"],
            new_keywords=["dtype", "enabled", "cache_enabled"],
            leading=lambda: [ctx.device_type()],
        ),
    )
    return Finding(
        "NM501", call, {"name": "torch.cuda.amp.autocast"}, fix=fix, applicability=UNSAFE if fix else "report"
    )


@on_call("torch.cpu.amp.autocast")
def _cpu_autocast(ctx, call, q):
    fix = new_call(
        ctx,
        call,
        "autocast",
        old_params=["enabled", "dtype", "cache_enabled"],
        new_keywords=["dtype", "enabled", "cache_enabled"],
        leading=lambda: [cst.SimpleString('"cpu"')],
    )
    return Finding("NM508", call, fix=fix, applicability=SAFE if fix else "report")


@on_call("torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast")
def _autocast(ctx, call, q):
    bound = bind(call, ["device_type", "dtype", "enabled", "cache_enabled"])
    if bound is None:
        return None
    if "device_type" not in bound:
        return Finding("NM507", call)
    arg = bound["device_type"]
    if is_cuda_string(string_value(arg.value)) and string_value(arg.value) == "cuda":

        def device(updated):
            return updated.with_changes(
                args=[
                    a.with_changes(value=ctx.device_type())
                    if a.value is arg.value
                    or (i == 0 and a.keyword is None)
                    or (a.keyword is not None and a.keyword.value == "device_type")
                    else a
                    for i, a in enumerate(updated.args)
                ]
            )

        return Finding("NM502", call, fix=_gated(ctx, device), applicability=UNSAFE)
    return None


@on_call("torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler")
def _cuda_scaler(ctx, call, q):
    params = ["init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled"]
    fix = _gated(
        ctx,
        new_call(
            ctx, call, "amp.GradScaler", old_params=params, new_keywords=params, leading=lambda: [ctx.device_type()]
        ),
    )
    return Finding(
        "NM503", call, {"name": "torch.cuda.amp.GradScaler"}, fix=fix, applicability=UNSAFE if fix else "report"
    )


def _explicit_device(call: cst.Call):
    """The device argument of a call that also unpacks ``*args``/``**kwargs``: the first positional argument
    before any ``*``, or ``device=``; None when neither is given."""
    first = call.args[0] if call.args else None
    if first is not None and first.keyword is None and not first.star:
        return first.value
    return next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"), None)


@on_call("torch.amp.GradScaler", "torch.GradScaler", "torch.amp.grad_scaler.GradScaler")
def _scaler(ctx, call, q):
    params = ["device", "init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled"]
    bound = bind(call, params)
    if bound is None:
        # ``GradScaler("cuda", **kwargs)``: the device is given, so the unpacked arguments cannot hold it; left
        # as it was, the scaler would stay on CUDA beside an autocast rewritten to the accelerator
        device = _explicit_device(call)
        if device is not None and string_value(device) == "cuda":
            return Finding("NM504", device, fix=lambda updated: ctx.device_type(), applicability=UNSAFE)
        return None
    if "device" in bound:
        v = string_value(bound["device"].value)
        if v == "cuda":
            return Finding("NM504", bound["device"].value, fix=lambda updated: ctx.device_type(), applicability=UNSAFE)
        return None
    fix = _gated(
        ctx,
        new_call(
            ctx,
            call,
            q[len("torch.") :],
            old_params=params,
            new_positional=[],
            new_keywords=params[1:],
            leading=lambda: [ctx.device_type()],
        ),
    )
    return Finding("NM504", call, fix=fix, applicability=UNSAFE)


def _custom_fix(ctx, node, attr, call=None):
    head = ctx.head_name(node if call is None else call.func)

    def fix(updated):
        ctx.rewritten_heads.add(head)
        func = ctx.torch_attr(f"amp.{attr}")
        if call is None:
            return cst.Call(func=func, args=build_args([], [("device_type", ctx.device_type())]))
        extra = build_args([], [("device_type", ctx.device_type())])
        args = list(updated.args)
        if args:
            extra[-1] = extra[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return updated.with_changes(func=func, args=extra + args)

    return fix


@on_reference("torch.cuda.amp.custom_fwd", "torch.cuda.amp.custom_bwd")
def _custom_ref(ctx, node, q):
    attr = q.rsplit(".", 1)[1]
    if id(node) not in ctx.decorators:
        return Finding("NM505", node, {"name": q, "attr": attr})
    return Finding("NM505", node, {"name": q, "attr": attr}, fix=_custom_fix(ctx, node, attr), applicability=SAFE)


@on_call("torch.cuda.amp.custom_fwd", "torch.cuda.amp.custom_bwd")
def _custom_call(ctx, call, q):
    attr = q.rsplit(".", 1)[1]
    if any(a.keyword is None or a.star for a in call.args):
        return Finding("NM505", call, {"name": q, "attr": attr})
    return Finding("NM505", call, {"name": q, "attr": attr}, fix=_custom_fix(ctx, call, attr, call), applicability=SAFE)


@on_call("torch.get_autocast_gpu_dtype")
def _gpu_dtype(ctx, call, q):
    if call.args:
        return None
    return Finding(
        "NM506",
        call,
        {"name": q},
        applicability=UNSAFE,
        fix=new_call(ctx, call, "get_autocast_dtype", leading=lambda: [ctx.device_type()]),
    )


@on_call("torch.is_autocast_enabled")
def _enabled(ctx, call, q):
    if call.args:
        return None
    return Finding(
        "NM506",
        call,
        {"name": q},
        applicability=UNSAFE,
        fix=new_call(ctx, call, "is_autocast_enabled", leading=lambda: [ctx.device_type()]),
    )


@on_reference("torch.cuda.amp.GradScaler", "torch.cuda.amp.autocast")
def _amp_ref(ctx, node, q):
    name = q.rsplit(".", 1)[1]
    return Finding("NM503" if name == "GradScaler" else "NM501", node, {"name": q})
