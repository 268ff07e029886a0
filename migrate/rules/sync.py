"""NM2xx: synchronisation, streams and events (``torch/accelerator/__init__.py``, torch.Stream, torch.Event)."""

from __future__ import annotations

import re

import libcst as cst

from neuron_conformance.migrate.args import bind
from neuron_conformance.migrate.hooks import on_call, on_node, on_reference, rule
from neuron_conformance.migrate.rules._common import SAFE, UNSAFE, Finding, new_call, rename_reference

rule(
    "NM201",
    "cuda-synchronize",
    "`torch.cuda.synchronize()` waits for CUDA only",
    "Replace with `torch.accelerator.synchronize()`",
    SAFE,
    what="Finds `torch.cuda.synchronize(d)` calls and references (`sync = torch.cuda.synchronize`).",
    why="Timing loops and host reads that synchronise only CUDA are wrong (or crash) on Trainium/XPU/MPS.",
    example="torch.cuda.synchronize(device=rank)",
    use_instead="torch.accelerator.synchronize(rank)",
    fix_safety="Safe for calls: both raise on CPU-only hosts. The device is positional-only in the new "
    "function, so `device=` becomes positional. A bare reference is rewritten as an unsafe fix "
    "because its callers may pass `device=` by keyword.",
    references="`torch/accelerator/__init__.py` (`synchronize`, `current_stream`, `set_stream`); PyTorch docs: torch.Stream, torch.Event; `torch/accelerator/memory.py` (positional-only device arguments).",
)

rule(
    "NM202",
    "cuda-stream",
    "`torch.cuda.Stream` is CUDA-specific",
    "Replace with `torch.Stream`",
    SAFE,
    what="Finds `torch.cuda.Stream(...)`.",
    why="`torch.Stream` is the device-generic stream type.",
    example="s = torch.cuda.Stream(None, -1)",
    use_instead="s = torch.Stream(None, priority=-1)",
    fix_safety="Safe after normalising: `priority` is keyword-only in `torch.Stream` "
    '(`torch.Stream("cpu", -1)` raises TypeError). External streams (`stream_id=`, '
    "`stream_ptr=`, `torch.cuda.ExternalStream`) are report-only.",
    references="`torch/accelerator/__init__.py` (`synchronize`, `current_stream`, `set_stream`); PyTorch docs: torch.Stream, torch.Event (keyword-only arguments).",
)

rule(
    "NM203",
    "cuda-current-stream",
    "`torch.cuda.current_stream()` is CUDA-specific",
    "Replace with `torch.accelerator.current_stream()`",
    SAFE,
    what="Finds `torch.cuda.current_stream(d)` (including `t.record_stream(torch.cuda.current_stream())`).",
    why="It fails on other accelerators.",
    example="t.record_stream(torch.cuda.current_stream())",
    use_instead="t.record_stream(torch.accelerator.current_stream())",
    fix_safety="Safe: `device=` becomes positional (positional-only in the new function).",
    references="`torch/accelerator/__init__.py` (`synchronize`, `current_stream`, `set_stream`); PyTorch docs: torch.Stream, torch.Event.",
)

rule(
    "NM204",
    "cuda-default-stream",
    "`torch.cuda.default_stream()` has no device-generic equivalent",
    "",
    "report",
    what="Finds `torch.cuda.default_stream(...)`.",
    why="`torch.accelerator` has no `default_stream`; only the CUDA and MTIA modules do.",
    example="torch.cuda.default_stream().synchronize()",
    use_instead="torch.accelerator.current_stream().synchronize()  # if the current stream is what is meant",
    fix_safety="No fix: the default and the current stream differ inside stream contexts.",
    references="`torch/accelerator/__init__.py` (`synchronize`, `current_stream`, `set_stream`); PyTorch docs: torch.Stream, torch.Event; `torch/__init__.py` (`get_device_module`; the per-device modules' attributes).",
)

rule(
    "NM205",
    "cuda-set-stream",
    "`torch.cuda.set_stream()` is CUDA-specific",
    "Replace with `torch.accelerator.set_stream()`",
    SAFE,
    what="Finds `torch.cuda.set_stream(s)`.",
    why="It fails on other accelerators.",
    example="torch.cuda.set_stream(s)",
    use_instead="torch.accelerator.set_stream(s)",
    fix_safety="Safe.",
    references="`torch/accelerator/__init__.py` (`synchronize`, `current_stream`, `set_stream`); PyTorch docs: torch.Stream, torch.Event.",
)

rule(
    "NM206",
    "cuda-stream-context",
    "`with torch.cuda.stream(s)` is CUDA-specific",
    "Replace with `with s:`",
    SAFE,
    what="Finds `torch.cuda.stream(s)` context managers.",
    why="`torch.Stream` is itself a context manager on every accelerator.",
    example="with torch.cuda.stream(side):\n    y = f(x)",
    use_instead="with side:\n    y = f(x)",
    fix_safety="`torch.cuda.stream(None)` is a documented no-op while `with None:` raises. Safe when the "
    "argument is a stream constructor call; unsafe for names (they may hold None); "
    "report-only for a literal None and outside `with`.",
    references="`torch/accelerator/__init__.py` (`synchronize`, `current_stream`, `set_stream`); PyTorch docs: torch.Stream, torch.Event.",
)

rule(
    "NM207",
    "cuda-event",
    "`torch.cuda.Event` is CUDA-specific",
    "Replace with `torch.Event`",
    SAFE,
    what="Finds `torch.cuda.Event(...)`, also imported as `from torch.cuda import Event`.",
    why="`torch.Event` is the device-generic event type (`record`, `synchronize`, `elapsed_time` in ms).",
    example="start = torch.cuda.Event(True)",
    use_instead="start = torch.Event(enable_timing=True)",
    fix_safety="Safe when only `enable_timing` is given: positional arguments become keywords "
    "(`torch.Event(True)` would pass True as the device and raise). Report-only with "
    "`blocking`, `interprocess` or `external` (no-ops or missing in `torch.Event`). "
    "References such as `partial(Event, enable_timing=True)` are an unsafe fix. Note "
    "`torch.Event(...).record()` raises on the CPU backend.",
    references="`torch/accelerator/__init__.py` (`synchronize`, `current_stream`, `set_stream`); PyTorch docs: torch.Stream, torch.Event (keyword-only arguments).",
)


def _posonly(ctx, call, code, new):
    fix = new_call(ctx, call, new, old_params=["device"], new_positional=["device"])
    return Finding(code, call, fix=fix, applicability=SAFE if fix else "report")


@on_call("torch.cuda.synchronize")
def _sync(ctx, call, q):
    return _posonly(ctx, call, "NM201", "accelerator.synchronize")


#: Attributes only the CUDA classes have (``torch.Stream``/``torch.Event`` do not): the generic stream's handle
#: is ``native_handle``.
CUDA_ONLY_ATTRS = ("cuda_stream", "cuda_event")


def cuda_only_attribute(ctx, call) -> str:
    """The CUDA-only attribute (:data:`CUDA_ONLY_ATTRS`) read on ``call``'s result, directly
    (``torch.cuda.current_stream().cuda_stream``) or through the name or attribute it is assigned to (``s =
    torch.cuda.Stream()`` ... ``s.cuda_stream``, anywhere in the file); "" when none is."""
    parent = ctx.parent(call)
    if isinstance(parent, cst.Attribute) and parent.attr.value in CUDA_ONLY_ATTRS:
        return parent.attr.value
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        name = ctx.code(parent.targets[0].target)
        for attr in CUDA_ONLY_ATTRS:
            if re.search(rf"(?<![\w.]){re.escape(name)}\.{attr}\b", ctx.source):
                return attr
    return ""


def _stream_finding(ctx, call, code, fix):
    attr = cuda_only_attribute(ctx, call)
    if attr:
        return Finding(
            code,
            call,
            reason=f"not fixed: its `.{attr}` is read, which only the CUDA class has "
            "(a `torch.Stream`'s handle is `native_handle`); rewrite both together",
        )
    return Finding(code, call, fix=fix, applicability=SAFE if fix else "report")


@on_call("torch.cuda.current_stream")
def _current_stream(ctx, call, q):
    fix = new_call(ctx, call, "accelerator.current_stream", old_params=["device"], new_positional=["device"])
    return _stream_finding(ctx, call, "NM203", fix)


@on_reference("torch.cuda.synchronize")
def _sync_ref(ctx, node, q):
    return Finding("NM201", node, fix=rename_reference(ctx, node, "accelerator.synchronize"), applicability=UNSAFE)


@on_call("torch.cuda.set_stream")
def _set_stream(ctx, call, q):
    fix = new_call(ctx, call, "accelerator.set_stream", old_params=["stream"], new_positional=["stream"])
    return Finding("NM205", call, fix=fix, applicability=SAFE if fix else "report")


@on_call("torch.cuda.default_stream")
def _default_stream(ctx, call, q):
    return Finding("NM204", call)


@on_call("torch.cuda.Stream")
def _stream(ctx, call, q):
    fix = new_call(
        ctx, call, "Stream", old_params=["device", "priority"], new_positional=["device"], new_keywords=["priority"]
    )
    return _stream_finding(ctx, call, "NM202", fix)


@on_call("torch.cuda.ExternalStream")
def _external(ctx, call, q):
    return Finding("NM202", call)


@on_node("visit:WithItem")
def _mark_stream_context(ctx, item):
    """A with-item ``torch.cuda.stream(s)`` is reported once, by :func:`_stream_context` when it is left;
    the call inside it is left first and must not be reported again as a bare call."""
    call = item.item
    if isinstance(call, cst.Call) and ctx.qname(call.func) == "torch.cuda.stream":
        ctx.skip.add(id(call))


@on_node("WithItem")
def _stream_context(ctx, item):
    call = item.item
    if not isinstance(call, cst.Call) or ctx.qname(call.func) != "torch.cuda.stream":
        return None
    ctx.skip.add(id(call))
    bound = bind(call, ["stream"])
    if not bound or "stream" not in bound:
        return Finding("NM206", item)
    arg = bound["stream"].value
    if isinstance(arg, cst.Name) and arg.value == "None":
        return Finding("NM206", item)
    if isinstance(arg, cst.Call) and (ctx.qname(arg.func) or "") in ("torch.cuda.Stream", "torch.Stream"):
        appl = SAFE
    else:
        appl = UNSAFE
    head = ctx.head_name(call.func)

    def fix(updated):
        ctx.rewritten_heads.add(head)
        return updated.with_changes(item=updated.item.args[0].value)

    return Finding("NM206", item, fix=fix, applicability=appl)


@on_call("torch.cuda.stream")
def _stream_call(ctx, call, q):
    return Finding("NM206", call)


@on_call("torch.cuda.Event")
def _event(ctx, call, q):
    bound = bind(call, ["enable_timing", "blocking", "interprocess", "external"])
    if bound is None:
        return Finding("NM207", call)
    for name in ("blocking", "interprocess", "external"):
        if name in bound and not (isinstance(bound[name].value, cst.Name) and bound[name].value.value == "False"):
            return Finding("NM207", call)
    fix = new_call(
        ctx,
        call,
        "Event",
        old_params=["enable_timing", "blocking", "interprocess", "external"],
        new_keywords=["enable_timing"],
    )
    return _stream_finding(ctx, call, "NM207", fix)


@on_reference("torch.cuda.Event")
def _event_ref(ctx, node, q):
    return Finding("NM207", node, fix=rename_reference(ctx, node, "Event"), applicability=UNSAFE)


@on_reference("torch.cuda.Stream")
def _stream_ref(ctx, node, q):
    return Finding("NM202", node, fix=rename_reference(ctx, node, "Stream"), applicability=UNSAFE)
