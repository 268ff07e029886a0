"""NM101-NM107: device discovery and selection (``torch/accelerator/__init__.py``): availability, counts, the current
device, device contexts and the device-selection ternary.

Placement (``.cuda()``, device strings and ints, comparisons with ``"cuda"``, legacy tensor types,
device properties: NM108-NM116) is :mod:`neuron_conformance.migrate.rules.placement`. The predicates both
use are in :mod:`neuron_conformance.migrate.rules._device_exprs`.
"""

from __future__ import annotations

import dataclasses
import re

import libcst as cst

from neuron_conformance.migrate.args import bind, build_args, string_value
from neuron_conformance.migrate.hooks import on_call, on_node, rule
from neuron_conformance.migrate.reach import guard_region, value_region
from neuron_conformance.migrate.rules._common import SAFE, UNSAFE, Finding, int_like, new_call
from neuron_conformance.migrate.rules._device_exprs import index_expr, ternary_kind


@dataclasses.dataclass
class _DeviceState:
    """Per-file state of these rules, filled by the ``visit:`` node hooks below.

    Attributes:
        device_ternaries: ids of ``torch.device(<device-selection ternary>)`` calls (NM102 as a whole).
        with_items: ids of the expressions of ``with`` items (``torch.cuda.device(i)`` there is NM106's fix).
    """

    device_ternaries: set = dataclasses.field(default_factory=set)
    with_items: set = dataclasses.field(default_factory=set)


def _state(ctx) -> _DeviceState:
    return ctx.rule_state(__name__, _DeviceState)


rule(
    "NM101",
    "cuda-is-available",
    "`torch.cuda.is_available()` is CUDA-specific",
    "Replace with `torch.accelerator.is_available()`",
    SAFE,
    what="Finds `torch.cuda.is_available()` calls.",
    why="It is False on Trainium, XPU and MPS, so code guarded by it silently runs on the CPU there. "
    "`torch.accelerator.is_available()` answers for whatever accelerator torch was built or "
    "extended with.",
    example="if torch.cuda.is_available():\n    model.cuda()",
    use_instead="if torch.accelerator.is_available():\n    model.to(DEVICE_TYPE)",
    fix_safety="The fix widens the check: what it guards now also runs on other accelerators. In a "
    "test (`if`/`elif`/`while`, a conditional expression, `and`/`or`) it is applied only when "
    "everything the test decides is fixed in the same tier or already device-generic: safe "
    "when that code needs only safe fixes, unsafe when some of it needs an unsafe fix "
    "(`x.cuda(args.gpu)`), report-only while CUDA-only code stays there (nvtx, cuDNN flags, "
    '`torch.cuda.get_device_capability()`, a `"cuda"` literal no rule rewrites); the '
    "message then names that code. Unsafe elsewhere (`use_cuda = torch.cuda.is_available()`), "
    "because the code that reads the flag cannot be checked. Note that `is_available()` initialises CUDA and poisons `fork`; the fix keeps the "
    "call where it was and never adds one at module level.",
    references="`torch/accelerator/__init__.py` (`current_accelerator`; the docstring of `is_available`).",
)

rule(
    "NM102",
    "device-selection-ternary",
    'Device chosen with `"cuda" if torch.cuda.is_available() else ...`',
    'Replace with `torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")`',
    SAFE,
    min_torch=(2, 7),
    what='Finds the idiom `"cuda" if torch.cuda.is_available() else "cpu"` (also the `torch.device(...)` '
    "form and chains through `mps`/`xpu`).",
    why="It never selects Trainium's `neuron` (or XPU, unless chained) device.",
    example='device = "cuda" if torch.cuda.is_available() else "cpu"',
    use_instead='device = (torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type',
    fix_safety="Safe: on a CUDA host it gives the same value; the result keeps the original's type "
    "(`str` stays `str`, `torch.device` stays `torch.device`). `check_available=True` is needed "
    "because without it a CUDA build on a GPU-less host answers `cuda`. String comparisons with "
    '`"cuda"` further down are reported by NM111.',
    references="`torch/accelerator/__init__.py`; pytorch/tutorials#3263 (no `torch.accelerator` before 2.6; the 2.6 "
    "`current_accelerator` raised instead of returning None).",
)

rule(
    "NM103",
    "cuda-device-count",
    "`torch.cuda.device_count()` counts CUDA devices only",
    "Replace with `torch.accelerator.device_count()`",
    SAFE,
    what="Finds `torch.cuda.device_count()`.",
    why="It answers 0 on Trainium/XPU/MPS hosts, so world sizes and device loops come out wrong.",
    example="world_size = torch.cuda.device_count()",
    use_instead="world_size = torch.accelerator.device_count()",
    fix_safety="Safe: the same number on CUDA hosts; 0 on CPU-only hosts in both cases. In a test "
    "(`if torch.cuda.device_count() > 1:`) the fix widens what the test guards, so it is "
    "limited like NM101's: unsafe or report-only while code there needs an unsafe fix or "
    "stays CUDA-specific (the message names it).",
    references="`torch/accelerator/__init__.py`.",
)

rule(
    "NM104",
    "cuda-current-device",
    "`torch.cuda.current_device()` is CUDA-specific",
    "Replace with `torch.accelerator.current_device_index()`",
    SAFE,
    min_torch=(2, 7),
    what="Finds `torch.cuda.current_device()`.",
    why="It fails on other accelerators. `current_accelerator()` is not the replacement: it returns a "
    "device type, not an index.",
    example="idx = torch.cuda.current_device()",
    use_instead="idx = torch.accelerator.current_device_index()",
    fix_safety="Safe: both raise on CPU-only hosts and return the same index on CUDA.",
    references="`torch/accelerator/__init__.py` (do not emit the deprecated `current_device_idx`).",
)

rule(
    "NM105",
    "cuda-set-device",
    "`torch.cuda.set_device()` is CUDA-specific",
    "Replace with `torch.accelerator.set_device_index()`",
    SAFE,
    min_torch=(2, 7),
    what="Finds `torch.cuda.set_device(d)`.",
    why="It fails on Trainium/XPU/MPS; DDP launchers call it with `LOCAL_RANK` first thing.",
    example='torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))',
    use_instead='torch.accelerator.set_device_index(int(os.environ["LOCAL_RANK"]))',
    fix_safety="Safe. The device is positional-only in the new function, so `device=` becomes "
    'positional; a literal `"cuda:N"` becomes `N`.',
    references="`torch/accelerator/__init__.py`; `torch/accelerator/memory.py` (positional-only device arguments).",
)

rule(
    "NM106",
    "cuda-device-context",
    "`with torch.cuda.device(...)` switches CUDA devices only",
    "Replace with `torch.accelerator.device_index(...)`",
    SAFE,
    min_torch=(2, 8),
    what="Finds `torch.cuda.device(i)` used as a context manager.",
    why="It does nothing useful on other accelerators.",
    example="with torch.cuda.device(rank):\n    ...",
    use_instead="with torch.accelerator.device_index(rank):\n    ...",
    fix_safety='`device_index` accepts only `int | None` (a `torch.device` or `"cuda:0"` raises '
    "TypeError). Safe when the argument is an int literal or reads like an ordinal "
    "(`rank`, `local_rank`, `idx`, `int(...)`); unsafe for other names; report-only for "
    "strings and `torch.device(...)` arguments.",
    references="`torch/accelerator/__init__.py` (class `device_index`).",
)

rule(
    "NM107",
    "cuda-device-of",
    "`torch.cuda.device_of()` has no device-generic equivalent",
    "",
    "report",
    what="Finds `torch.cuda.device_of(t)`.",
    why="There is no `torch.accelerator.device_of`.",
    example="with torch.cuda.device_of(t):\n    ...",
    use_instead="with torch.accelerator.device_index(t.device.index):\n    ...",
    fix_safety="No fix: `t` may be a CPU tensor (index None: a no-op, as with CUDA), a human should check.",
    references="`torch/accelerator/__init__.py`.",
)

_SIMPLE = {
    "torch.cuda.device_count": ("NM103", "accelerator.device_count", None),
    "torch.cuda.current_device": ("NM104", "accelerator.current_device_index", None),
}


@on_call(*_SIMPLE)
def _simple(ctx, call, q):
    code, new, _ = _SIMPLE[q]
    # `if torch.cuda.device_count() > 1:` widens like an availability check (migrate/reach.py)
    region = guard_region(ctx, call) if code == "NM103" else None
    # a value: limited by what its statement combines it with and where it is stored (migrate/reach.py)
    return Finding(
        code,
        call,
        fix=new_call(ctx, call, new),
        applicability=SAFE,
        guard=region if region is not None else value_region(ctx, call),
    )


# ------------------------------------------------------------------ NM101/NM102
@on_node("visit:IfExp")
def _mark_ternary(ctx, node):
    if ternary_kind(ctx, node):
        cur = node
        while isinstance(cur, cst.IfExp):
            ctx.skip.add(id(cur.test))
            _skip_leaf(ctx, cur.body)
            cur = cur.orelse


def _skip_leaf(ctx, node):
    ctx.skip.add(id(node))
    if isinstance(node, cst.Call) and node.args:
        ctx.skip.add(id(node.args[0].value))
        ctx.skip.add(id(node))


@on_node("IfExp")
def _ternary(ctx, node):
    kind = ternary_kind(ctx, node)
    if kind is None:
        return None

    def fix(updated):
        t = ctx.torch_name
        ctx.torch_attr("accelerator")  # records the torch import if needed
        text = f'{t}.accelerator.current_accelerator(check_available=True) or {t}.device("cpu")'
        if kind == "str":
            text = f"({text}).type"
        else:
            text = f"({text})"
        expr = cst.parse_expression(text)
        if kind == "device":
            if updated.lpar:  # already parenthesised by the user
                expr = cst.parse_expression(text[1:-1]).with_changes(lpar=updated.lpar, rpar=updated.rpar)
            else:
                ctx.generated_parens.add(id(expr))
        return expr

    return Finding("NM102", node, fix=fix, applicability=SAFE)


@on_node("visit:Call")
def _mark_device_of_ternary(ctx, call):
    if (
        len(call.args) == 1
        and isinstance(call.args[0].value, cst.IfExp)
        and call.args[0].keyword is None
        and ctx.qname(call.func) == "torch.device"
        and ternary_kind(ctx, call.args[0].value) == "str"
    ):
        ctx.skip.add(id(call.args[0].value))
        _state(ctx).device_ternaries.add(id(call))


@on_call("torch.device")
def _device_of_ternary(ctx, call, q):
    """``torch.device("cuda" if torch.cuda.is_available() else "cpu")`` as a whole."""
    if id(call) not in _state(ctx).device_ternaries:
        return None

    def fix(updated):
        t = ctx.torch_name
        ctx.torch_attr("accelerator")
        expr = cst.parse_expression(f'({t}.accelerator.current_accelerator(check_available=True) or {t}.device("cpu"))')
        ctx.generated_parens.add(id(expr))
        return expr

    return Finding("NM102", call, fix=fix, applicability=SAFE)


_OPTION_WORDS = re.compile(r"(^|_)(cuda|gpu|gpus|nvidia)(_|$)", re.I)
_LOCATION = re.compile(r"map_location|location$", re.I)


def _cuda_only_use(ctx, call) -> str:
    """Why widening ``call`` would be a wrong fix, or "": its answer is passed as another library's own CUDA
    option (``build(cuda=torch.cuda.is_available())``: the library means NVIDIA's CUDA, which other
    accelerators do not provide to it), or it picks a ``map_location`` that is ``None`` on CUDA (``None if
    torch.cuda.is_available() else "cpu"``: ``None`` keeps the checkpoint's saved CUDA location, which another
    accelerator's host cannot load)."""
    child, cur = call, ctx.parent(call)
    while isinstance(cur, (cst.UnaryOperation, cst.BooleanOperation)):
        child, cur = cur, ctx.parent(cur)
    if isinstance(cur, cst.Arg) and cur.keyword is not None and _OPTION_WORDS.search(cur.keyword.value):
        owner = ctx.parent(cur)
        q = ctx.qname(owner.func) if isinstance(owner, cst.Call) else None
        if not (q or "").startswith("torch."):
            return (
                f"its answer is passed as `{cur.keyword.value}=`, an option of `{ctx.code(owner.func)}` that names CUDA"
            )
    if (
        isinstance(cur, cst.IfExp)
        and cur.test is child
        and any(isinstance(v, cst.Name) and v.value == "None" for v in (cur.body, cur.orelse))
    ):
        target = ctx.parent(cur)
        name = ""
        if isinstance(target, cst.Assign) and len(target.targets) == 1:
            name = ctx.code(target.targets[0].target)
        elif isinstance(target, cst.Arg) and target.keyword is not None:
            name = target.keyword.value
        if _LOCATION.search(name.split(".")[-1]):
            return (
                f"`None` as `{name}` keeps a checkpoint's saved CUDA location, which a host of another "
                "accelerator cannot load; choose the location explicitly"
            )
    return ""


@on_call("torch.cuda.is_available")
def _is_available(ctx, call, q):
    """Safe in a test (``if``/``while``/conditional expression/boolean operation), limited by
    what the test decides (:mod:`neuron_conformance.migrate.reach`); unsafe for a flag read elsewhere."""
    if call.args:
        return None
    why = _cuda_only_use(ctx, call)
    if why:
        return Finding("NM101", call, reason=f"not fixed: {why}")
    fix = new_call(ctx, call, "accelerator.is_available")
    region = guard_region(ctx, call)
    if region is not None:
        return Finding("NM101", call, fix=fix, applicability=SAFE, guard=region)
    # a flag: unsafe at best, and limited by the later reads of the name it is stored in (migrate/reach.py)
    return Finding("NM101", call, fix=fix, applicability=UNSAFE, guard=value_region(ctx, call))


# ------------------------------------------------------------------ NM105/NM106/NM107
@on_call("torch.cuda.set_device")
def _set_device(ctx, call, q):
    bound = bind(call, ["device"])
    if bound is None or "device" not in bound:
        return Finding("NM105", call)
    arg = bound["device"].value
    v = string_value(arg)
    if v is not None and index_expr(ctx, arg) is None:
        return Finding("NM105", call)
    # Only a ``torch.device("cuda", i)`` argument is unwrapped; any other expression (a call such
    # as ``int(os.environ["LOCAL_RANK"])``, a name) is passed on unchanged.
    ctor = isinstance(arg, cst.Call) and ctx.qname(arg.func) == "torch.device"
    if ctor:
        a = bind(arg, ["type", "index"])
        if not a or "index" not in a or string_value(a["type"].value) != "cuda":
            return Finding("NM105", call)
    head = ctx.head_name(call.func)

    def fix(updated):
        ctx.rewritten_heads.add(head)
        value = updated.args[0].value
        if v is not None:
            value = index_expr(ctx, arg)
        elif ctor:
            value = bind(value, ["type", "index"])["index"].value
        return updated.with_changes(func=ctx.torch_attr("accelerator.set_device_index"), args=build_args([value], []))

    return Finding("NM105", call, fix=fix, applicability=SAFE)


_DEVICE_INDEX_INT = (
    "not fixed: `torch.accelerator.device_index` takes an int or None, not a torch.device "
    "or string; pass `{arg}.index` if `{arg}` is a torch.device"
)


@on_node("WithItem")
def _device_context(ctx, item):
    call = item.item
    if not isinstance(call, cst.Call) or ctx.qname(call.func) != "torch.cuda.device":
        return None
    bound = bind(call, ["device"])
    if bound is None or "device" not in bound:
        return Finding("NM106", call)
    arg = bound["device"].value
    v = string_value(arg)
    if v is not None:
        idx = index_expr(ctx, arg)
        if idx is None:
            return Finding("NM106", call)
        appl = SAFE
    elif int_like(ctx, arg) or isinstance(arg, cst.Name) and arg.value == "None":
        idx, appl = None, SAFE
    elif isinstance(arg, cst.Call) and ctx.qname(arg.func) == "torch.device":
        a = bind(arg, ["type", "index"])
        if not a or "index" not in a or string_value(a["type"].value) != "cuda":
            return Finding("NM106", call, reason=_DEVICE_INDEX_INT.format(arg=ctx.code(arg)))
        idx, appl = a["index"].value, SAFE  # torch.device("cuda", i) selects ordinal i
    elif isinstance(arg, cst.Attribute) and arg.attr.value == "device":
        # `t.device`: torch.accelerator.device_index takes `int | None` only (torch 2.13
        # signature `(self, device: int | None, /)`; a torch.device is a TypeError), so pass
        # `.index`. Unsafe: the receiver is not proven a tensor, and a CPU tensor's device
        # (index None) is then a no-op where torch.cuda.device raised ValueError.
        idx, appl = None, UNSAFE
    else:
        return Finding("NM106", call, reason=_DEVICE_INDEX_INT.format(arg=ctx.code(arg)))
    head = ctx.head_name(call.func)
    dot_index = appl == UNSAFE

    def fix(updated):
        ctx.rewritten_heads.add(head)
        c = updated.item
        value = idx if idx is not None else c.args[0].value
        if dot_index:
            value = cst.Attribute(value=value, attr=cst.Name("index"))
        return updated.with_changes(
            item=c.with_changes(func=ctx.torch_attr("accelerator.device_index"), args=build_args([value], []))
        )

    return Finding("NM106", call, fix=fix, applicability=appl, fix_on_parent=True)


@on_node("visit:WithItem")
def _mark_with_item(ctx, item):
    _state(ctx).with_items.add(id(item.item))


@on_call("torch.cuda.device")
def _device_call(ctx, call, q):
    """A bare ``torch.cuda.device(i)`` (not a with-item) is report-only; with-items are handled above."""
    if id(call) in _state(ctx).with_items:
        return None
    return Finding("NM106", call)


@on_call("torch.cuda.device_of")
def _device_of(ctx, call, q):
    return Finding("NM107", call)
