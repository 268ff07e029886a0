"""NM108-NM116: device placement (PyTorch docs: torch.Tensor.to, torch.nn.Module.to): ``.cuda()``, int and ``"cuda"`` device
arguments, comparisons with ``"cuda"``, ``.is_cuda``, legacy CUDA tensor types, pinning for an explicit
device, device properties and capability checks.

Discovery and selection (NM101-NM107) is :mod:`neuron_conformance.migrate.rules.device`; the predicates
both use are in :mod:`neuron_conformance.migrate.rules._device_exprs`.
"""

from __future__ import annotations

import libcst as cst

from neuron_conformance.migrate.args import bind, build_args, int_literal, rebind, string_value
from neuron_conformance.migrate.choice import derived_type_operand
from neuron_conformance.migrate.exemptions.vendor_tables import vendor_list
from neuron_conformance.migrate.hooks import on_any_call, on_attr_name, on_method, on_node, rule
from neuron_conformance.migrate.rules._common import SAFE, UNSAFE, Finding, device_string_expr, int_like, is_cuda_string
from neuron_conformance.migrate.rules._device_exprs import (
    CUDA_METHOD_KEYWORDS,
    cuda_literal,
    device_evidence,
    device_named,
    enclosing_function,
    provably_torch,
    self_with_own_to,
)
from neuron_conformance.migrate.rules._device_strings import device_value_finding
from neuron_conformance.migrate.traversal import walk_in_scope

rule(
    "NM108",
    "cuda-method",
    "`.cuda()` moves to CUDA only",
    "Replace with `.to(...)` on the current accelerator",
    SAFE,
    what="Finds `x.cuda()` and `x.cuda(i, non_blocking=...)` method calls.",
    why="`.cuda()` fails on Trainium/XPU/MPS.",
    example="model.cuda()\nbatch = batch.cuda(args.gpu, non_blocking=True)",
    use_instead="model.to(DEVICE_TYPE)\nbatch = batch.to(torch.device(DEVICE_TYPE, args.gpu), non_blocking=True)",
    fix_safety="Safe when the receiver is provably a tensor or module (a `torch.*` factory or constructor "
    "call); unsafe otherwise, because other objects (PackedSequence, user containers, wrappers) "
    "have their own `.cuda()`. An index argument that is not an int literal or ordinal-like "
    "name is report-only (it may be a `torch.device`). `DEVICE_TYPE` is one module-level "
    'constant, `(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type`, '
    "which does not poison fork.",
    references="PyTorch docs: torch.Tensor.to, torch.nn.Module.to.",
)

rule(
    "NM109",
    "integer-device",
    "A bare int device does not say which device type it means",
    "Replace with `torch.device(DEVICE_TYPE, N)`",
    SAFE,
    what="Finds `.to(<int literal>)` and `device=<int literal>` keyword arguments.",
    why="On torch 2.13 a bare int device already means that ordinal of the current accelerator "
    "(verified: `torch.device(0)` is `neuron:0` with the emulated device, and raises 'Cannot "
    "access accelerator device when none is available' on a CPU-only host), so this is a "
    "portability finding: older releases read it as a CUDA ordinal (`torch.ones(2).to(3)` "
    "failed on NPU with 'Torch not compiled with CUDA enabled', Ascend/pytorch#16), and the "
    "explicit form also runs on a CPU-only host.",
    example="x = x.to(0)",
    use_instead="x = x.to(torch.device(DEVICE_TYPE, 0))",
    fix_safety="Safe: the same device wherever an accelerator is present; on a CPU-only host "
    "`cpu:0` where the int raised. DDP `device_ids=[int]` are fine and not reported.",
    references="PyTorch docs: torch.Tensor.to, torch.nn.Module.to; Ascend/pytorch#16; `torch.device(0)` run on torch 2.13.",
)

rule(
    "NM110",
    "cuda-device-string",
    "Device string `{value}` names CUDA",
    "Replace with the current accelerator's device type",
    SAFE,
    what='Finds `"cuda"`, `"cuda:N"` and `f"cuda:{i}"` in device-argument positions: `device=`, '
    "`map_location=`, `torch.device(...)`, `.to(...)`, `torch.set_default_device(...)`, "
    "`init_device_mesh(...)`, `torch.get_device_module(...)`, defaults of parameters named like "
    '`device`, assignments to such names (also annotated: a dataclass field `device: str = "cuda"`), '
    'dict entries with such a key (`{"device": "cuda"}`) and the `default=` of an argparse option '
    'named like one (`add_argument("--device", default="cuda")`).',
    why="The code only ever runs on CUDA.",
    example='x = torch.zeros(3, device="cuda")\nckpt = torch.load(p, map_location=f"cuda:{rank}")',
    use_instead='x = torch.zeros(3, device=DEVICE_TYPE)\nckpt = torch.load(p, map_location=f"{DEVICE_TYPE}:{rank}")',
    fix_safety='Safe in these positions only. `"cuda"` elsewhere (comparisons, dict keys, logs) is '
    "never rewritten; comparisons are reported by NM111. An argparse default is unsafe (the value "
    "reaches code the rule cannot see) and report-only with `choices=` (they must list the "
    "accelerator too).",
    references="PyTorch docs: torch.Tensor.to, torch.nn.Module.to.",
)

rule(
    "NM111",
    "cuda-string-comparison",
    'Comparison with `"cuda"` gates behaviour on the device type',
    "",
    "report",
    what='Finds comparisons that gate behaviour on the device type, such as `device == "cuda"`, '
    '`"cuda" in str(device)`, `x.device.type != "cuda"`, `str(device).startswith("cuda")` '
    'and `self.assertEqual(x.device.type, "cuda")`. '
    "The other operand must evidently be a device: a `.type`/`.device_type` attribute, a name "
    'or attribute containing `device`/`dev`/`accelerator`, `str()` of one, `kwargs["device"]`, '
    'or a call to a function whose name mentions devices. `rule_name == "cuda"` is not reported.',
    why="After migration these silently turn off autocast, pinning or compilation on Trainium/XPU.",
    example='use_amp = device.type == "cuda"',
    use_instead='use_amp = device.type != "cpu"  # or a capability check that fits the intent',
    fix_safety="No fix: the intent (any accelerator? NVIDIA only?) needs a human.",
    references="`torch/accelerator/__init__.py`.",
)

rule(
    "NM112",
    "is-cuda-attribute",
    "`.is_cuda` is False on every other accelerator",
    "",
    "report",
    what="Finds reads of `x.is_cuda`.",
    why="There is no generic `is_accelerator` attribute; `is_cuda` is False on Trainium/XPU/MPS.",
    example="if x.is_cuda:\n    ...",
    use_instead='if x.device.type != "cpu":\n    ...',
    fix_safety="No fix: decide whether the test means 'on an accelerator' or 'on NVIDIA'.",
    references="PyTorch docs: torch.Tensor.to, torch.nn.Module.to.",
)

rule(
    "NM113",
    "legacy-cuda-tensor-type",
    "Legacy type `{name}` is CUDA-only",
    "Replace with a factory call with `dtype=` and `device=`",
    SAFE,
    what="Finds `torch.cuda.FloatTensor` and the other legacy CUDA tensor types.",
    why="The types exist only for CUDA and are deprecated.",
    example="buf = torch.cuda.FloatTensor(3, 4)\ny = x.type(torch.cuda.HalfTensor)",
    use_instead="buf = torch.empty(3, 4, dtype=torch.float32, device=DEVICE_TYPE)\n"
    "y = x.to(DEVICE_TYPE, torch.float16)",
    fix_safety="Safe for constructor calls whose arguments are int literals (sizes) or one list/tuple "
    "literal (data), and for `x.type(<type>)`. Report-only for other uses (`isinstance`, "
    "`set_default_tensor_type`, overloaded constructor calls).",
    references="PyTorch docs: torch.Tensor.to, torch.nn.Module.to.",
)

rule(
    "NM114",
    "pin-memory-device",
    "Pinning for an explicit device is deprecated",
    "Remove the device argument",
    SAFE,
    what='Finds `pin_memory_device="cuda"` (DataLoader) and `t.pin_memory("cuda")`.',
    why="Pinning already targets the current accelerator; the argument is deprecated.",
    example='loader = DataLoader(ds, pin_memory=True, pin_memory_device="cuda")',
    use_instead="loader = DataLoader(ds, pin_memory=True)",
    fix_safety="Safe: the current accelerator is used (DataLoader source says so).",
    references="PyTorch docs: torch.Tensor.to, torch.nn.Module.to; `torch/utils/data/dataloader.py`.",
)

rule(
    "NM115",
    "cuda-device-properties",
    "`{name}` is CUDA-specific",
    "Replace with `torch.get_device_module().{attr}`",
    UNSAFE,
    what="Finds `torch.cuda.get_device_name`, `get_device_properties`, `is_initialized` and `init`.",
    why="No `torch.accelerator` equivalent exists; these fail on other accelerators.",
    example="name = torch.cuda.get_device_name(0)",
    use_instead="name = torch.get_device_module().get_device_name(0)",
    fix_safety="Unsafe: `torch.get_device_module()` returns the current accelerator's module, which "
    "may lack the function (MPS lacks `get_device_name`). `get_device_properties` is "
    "report-only because property objects differ per backend (use "
    "`torch.accelerator.get_memory_info()[1]` for total memory).",
    references="`torch/accelerator/__init__.py`; `torch/__init__.py` (`get_device_module`; the per-device modules' attributes).",
)

rule(
    "NM116",
    "cuda-capability-check",
    "`{name}` gates on NVIDIA/ROCm capability",
    "",
    "report",
    what="Finds `torch.cuda.get_device_capability`, `torch.cuda.is_bf16_supported`, "
    "`torch.cuda.get_arch_list` and `torch.cuda.is_tf32_supported`.",
    why="Capabilities mean different things per backend (ROCm returns gfx numbers; "
    "`torch.accelerator.get_device_capability` returns a dict with `supported_dtypes`).",
    example="if torch.cuda.get_device_capability()[0] >= 8:\n    dtype = torch.bfloat16",
    use_instead='if torch.bfloat16 in torch.accelerator.get_device_capability()["supported_dtypes"]:\n'
    "    dtype = torch.bfloat16",
    fix_safety="No fix: 'allocatable' is not 'fast', a human decides.",
    references="`torch/accelerator/__init__.py`; torchtitan#3738, trl#5917.",
)


# ------------------------------------------------------------------ NM108 .cuda()
@on_method("cuda")
def _cuda_method(ctx, call):
    """``x.cuda(...)``. Not reported: a call with a keyword that ``Tensor.cuda``/``Module.cuda``
    do not take (``quantizer.cuda(q, meta=m)`` is another API), and calls inside a method that
    itself overrides ``cuda`` (``super().cuda(*args, **kwargs)`` forwards the caller's request). Not fixed:
    ``self.cuda()`` in a class with its own ``to`` method (``self.to(...)`` would call it: :data:`_OWN_TO`)."""
    if any(a.keyword is not None and a.keyword.value not in CUDA_METHOD_KEYWORDS for a in call.args):
        return None
    func = enclosing_function(ctx, call)
    if func is not None and func.name.value == "cuda":
        return None
    if self_with_own_to(ctx, call):
        return Finding("NM108", call, reason=_OWN_TO)
    bound = bind(call, ["device", "non_blocking", "memory_format"])
    if bound is None:
        return Finding("NM108", call)
    appl = SAFE if provably_torch(ctx, call.func.value) else UNSAFE
    if appl == UNSAFE and _own_cuda_method(ctx):
        return Finding("NM108", call, reason=_OWN_CUDA)
    storage = _map_location_storage(ctx, call.func.value)
    dev = bound.get("device")
    if dev is not None:
        dv = dev.value
        sv = string_value(dv)
        if sv is not None and not is_cuda_string(sv):
            return Finding("NM108", call)
        if sv is None and not int_like(ctx, dv) and not (isinstance(dv, cst.Name) and dv.value == "None"):
            return Finding("NM108", call)

    def fix(updated):
        values = rebind(updated, bound)
        if dev is None:
            target = ctx.device_type()
        else:
            sv = string_value(dev.value)
            if sv is not None:
                target = device_string_expr(ctx, sv)
            else:
                target = cst.Call(
                    func=ctx.torch_attr("device"), args=build_args([ctx.device_type(), values["device"]], [])
                )
        kws = [(k, values[k]) for k in ("non_blocking", "memory_format") if k in values]
        if storage:  # `UntypedStorage.to(*, device, non_blocking)`: the device is keyword-only
            return updated.with_changes(
                func=updated.func.with_changes(attr=cst.Name("to")), args=build_args([], [("device", target)] + kws)
            )
        return updated.with_changes(func=updated.func.with_changes(attr=cst.Name("to")), args=build_args([target], kws))

    return Finding("NM108", call, fix=fix, applicability=appl)


#: Why ``.cuda()`` is not rewritten in a file whose own class defines ``cuda`` (a script with its own
#: wrapper class): the receiver may be that class, which need not have ``.to``.
_OWN_CUDA = (
    "not fixed: this file defines its own `cuda()` method on a class that is not an `nn.Module` and has "
    "no `to()`, so the receiver may not have `.to`"
)


_OWN_TO = "not fixed: this class defines its own `to()`, which `self.to(...)` would call instead of torch's"


def _own_cuda_method(ctx) -> bool:
    """A class of this module (not named like an ``nn.Module``) defines ``cuda`` but not ``to``."""
    state = ctx.rule_state("NM108 own cuda", dict)
    if "v" not in state:
        state["v"] = False
        if "def cuda(" in ctx.source:
            for node in walk_in_scope(ctx.module, skip_scopes=False):
                if isinstance(node, cst.ClassDef):
                    methods = {st.name.value for st in node.body.body if isinstance(st, cst.FunctionDef)}
                    bases = [ctx.code(b.value) for b in node.bases]
                    if "cuda" in methods and "to" not in methods and not any(b.endswith("Module") for b in bases):
                        state["v"] = True
                        break
    return state["v"]


def _map_location_storage(ctx, receiver) -> bool:
    """``receiver`` is a parameter of a lambda given as ``map_location=`` (``torch.load(f, map_location=
    lambda storage, loc: storage.cuda())``): a storage, whose ``to`` takes the device as a keyword only."""
    if not isinstance(receiver, cst.Name):
        return False
    anc = ctx.ancestors
    for i in range(len(anc) - 1, 0, -1):
        if isinstance(anc[i], cst.Lambda):
            params = {p.name.value for p in anc[i].params.params}
            arg = anc[i - 1]
            return (
                receiver.value in params
                and isinstance(arg, cst.Arg)
                and arg.keyword is not None
                and arg.keyword.value == "map_location"
            )
    return False


# ------------------------------------------------------------------ NM109 int device
def _int_device_fix(ctx, n):
    def fix(updated):
        return cst.Call(func=ctx.torch_attr("device"), args=build_args([ctx.device_type(), cst.Integer(str(n))], []))

    return fix


@on_method("to")
def _to_method(ctx, call):
    out = []
    if call.args and call.args[0].keyword is None and not call.args[0].star:
        first = call.args[0].value
        n = int_literal(first)
        if n is not None and n >= 0:
            out.append(Finding("NM109", first, fix=_int_device_fix(ctx, n), applicability=SAFE))
        else:
            f = device_value_finding(ctx, "NM110", first)
            if f:
                out += f if isinstance(f, list) else [f]
    return out


_DEVICE_KEYWORDS = {"device", "map_location"}
_MESH = {
    "torch.distributed.device_mesh.init_device_mesh",
    "torch.distributed.init_device_mesh",
    "torch.distributed._tensor.init_device_mesh",
    "torch.distributed._tensor.device_mesh.init_device_mesh",
    "torch.distributed.tensor.init_device_mesh",
}
_DEVICE_FIRST_ARG = {"torch.device", "torch.set_default_device", "torch.get_device_module", "torch.Generator"} | _MESH


@on_any_call
def _device_keywords(ctx, call, q):
    out = []
    for arg in call.args:
        if arg.keyword is not None and (
            arg.keyword.value in _DEVICE_KEYWORDS or arg.keyword.value == "device_type" and q in _MESH
        ):
            n = int_literal(arg.value)
            if (
                n is not None
                and n >= 0
                and arg.keyword.value == "device"
                and not (q or "").startswith(("torch.cuda.", "torch.accelerator."))
            ):
                out.append(Finding("NM109", arg.value, fix=_int_device_fix(ctx, n), applicability=SAFE))
                continue
            f = device_value_finding(ctx, "NM110", arg.value)
            if f:
                out += f if isinstance(f, list) else [f]
    if q in _DEVICE_FIRST_ARG and call.args and call.args[0].keyword is None:
        first = call.args[0].value
        if q == "torch.device":
            sv = string_value(first)
            if sv and sv.startswith("cuda:") and sv[5:].isdigit() and len(call.args) == 1:
                idx = sv[5:]
                return out + [
                    Finding(
                        "NM110",
                        call,
                        {"value": sv},
                        applicability=SAFE,
                        fix=lambda updated: updated.with_changes(
                            args=build_args([ctx.device_type(), cst.Integer(idx)], [])
                        ),
                    )
                ]
        f = device_value_finding(ctx, "NM110", first)
        if f:
            out += f if isinstance(f, list) else [f]
    func_name = (
        call.func.attr.value
        if isinstance(call.func, cst.Attribute)
        else (call.func.value if isinstance(call.func, cst.Name) else "")
    )
    if func_name.endswith("DataLoader"):
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "pin_memory_device":
                out.append(
                    Finding(
                        "NM114", arg, fix=_drop_keyword("pin_memory_device"), applicability=SAFE, fix_on_parent=True
                    )
                )
    return out


def _drop_keyword(name):
    def fix(updated: cst.Call):
        args = [a for a in updated.args if not (a.keyword is not None and a.keyword.value == name)]
        if args:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(args=args)

    return fix


@on_node("Param")
def _param_default(ctx, param):
    if param.default is None or not device_named(param.name.value):
        return None
    return _checked_default(ctx, param.name.value, device_value_finding(ctx, "NM110", param.default))


def _names_compared_with_cuda(ctx) -> set:
    """The names (last part: ``device`` for ``cfg.device``) compared with a ``"cuda"`` literal anywhere in
    this file, with ``==``/``!=``/``in`` or ``.startswith("cuda")`` (computed once per file, when a default
    is first seen)."""
    state = ctx.rule_state("NM110 compared names", dict)
    if "v" not in state:
        out = set()
        if "cuda" in ctx.source:
            derived = set()  # `"cuda" if "cuda" in device else "cpu"` is NM119's, rewritten whole
            for n in walk_in_scope(ctx.module, skip_scopes=False):
                if derived_type_operand(n) is not None:
                    derived.add(id(n.test))
                if id(n) in derived:
                    continue
                if isinstance(n, cst.Comparison):
                    ops = [n.left] + [t.comparator for t in n.comparisons]
                    if any(cuda_literal(o) for o in ops):
                        out.update(_last_name(o) for o in ops)
                elif (
                    isinstance(n, cst.Call)
                    and isinstance(n.func, cst.Attribute)
                    and n.func.attr.value == "startswith"
                    and n.args
                    and string_value(n.args[0].value) == "cuda"
                ):
                    out.add(_last_name(n.func.value))
        out.discard(None)
        state["v"] = out
    return state["v"]


def _last_name(node):
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return node.value if isinstance(node, cst.Name) else None


_COMPARED = (
    'not fixed: `{name}` is compared with "cuda" in this file (a CUDA sanity check such as '
    '`{name} == "cuda" and not torch.cuda.is_available()`); a rewritten default would skip that branch '
    "on a CPU-only host"
)


def _checked_default(ctx, name: str, found):
    """``found`` (NM110 on a default stored in ``name``), reported without a fix when ``name`` is compared with
    ``"cuda"`` in this file: the comparison then decides what the CPU-only host does, and the rewritten default
    would change it (a dataclass config with a `startswith("cuda")` fallback)."""
    if found is None or name.lstrip("-").replace("-", "_") not in _names_compared_with_cuda(ctx):
        return found
    name = name.lstrip("-").replace("-", "_")
    return [
        Finding(f.code, f.node, f.fmt, reason=_COMPARED.format(name=name))
        for f in (found if isinstance(found, list) else [found])
    ]


@on_node("Assign")
def _assign(ctx, node):
    if len(node.targets) != 1:
        return None
    if isinstance(node.value, cst.Dict):
        return _dict_entries(ctx, node.value)
    return _named_value(ctx, node.targets[0].target, node.value)


@on_node("AnnAssign")
def _ann_assign(ctx, node):
    """``device: str = "cuda"`` (a dataclass field, a typed module variable)."""
    return None if node.value is None else _named_value(ctx, node.target, node.value)


def _named_value(ctx, target, value):
    name = (
        target.value
        if isinstance(target, cst.Name)
        else (target.attr.value if isinstance(target, cst.Attribute) else None)
    )
    if name is None or not (device_named(name) or _cuda_template(value)):
        return None
    return _checked_default(ctx, name, device_value_finding(ctx, "NM110", value))


def _cuda_template(value) -> bool:
    """``"cuda:{}".format(i)`` or ``"cuda:%d" % i``: a string built as a CUDA device name, whatever it is stored
    in (``loc = "cuda:{}".format(args.gpu)`` before ``torch.load(..., map_location=loc)``)."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "format":
        template = string_value(value.func.value)
    elif isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Modulo):
        template = string_value(value.left)
    else:
        return False
    return template is not None and template.startswith("cuda:")


def _dict_entries(ctx, d: cst.Dict) -> list:
    """``cfg = {"device": "cuda", ...}``: the values of the entries whose string key names a device."""
    out = []
    for el in d.elements:
        key = string_value(el.key) if isinstance(el, cst.DictElement) else None
        if key is not None and device_named(key):
            f = _checked_default(ctx, key, device_value_finding(ctx, "NM110", el.value))
            out += f if isinstance(f, list) else [f] if f is not None else []
    return out


_CHOICES = "not fixed: the option's `choices=` must list the accelerator's device type too"


@on_method("add_argument")
def _argparse_default(ctx, call):
    """``parser.add_argument("--device", default="cuda")``: unsafe, the value reaches code this rule cannot
    see (as NM601's argparse default); report-only with ``choices=``."""
    kw = {a.keyword.value: a for a in call.args if a.keyword is not None}
    names = [string_value(a.value) for a in call.args if a.keyword is None]
    if "dest" in kw:
        names.append(string_value(kw["dest"].value))
    if "default" not in kw or not any(n and device_named(n.lstrip("-").replace("-", "_")) for n in names):
        return None
    dest = next((n for n in reversed(names) if n and device_named(n.lstrip("-").replace("-", "_"))), "")
    found = device_value_finding(ctx, "NM110", kw["default"].value)
    out = []
    for f in found if isinstance(found, list) else [found] if found is not None else []:
        if f.fix is not None and _checked_default(ctx, dest, f) is not f:
            out += _checked_default(ctx, dest, f)
        elif "choices" in kw:
            out.append(Finding(f.code, f.node, f.fmt, reason=_CHOICES))
        else:
            out.append(Finding(f.code, f.node, f.fmt, fix=f.fix, applicability=UNSAFE))
    return out


# ------------------------------------------------------------------ NM111/NM112
@on_node("Comparison")
def _comparison(ctx, node):
    """Only comparisons whose other operand is evidently a device (see :func:`device_evidence`):
    ``rule_name == "cuda"`` or ``mode == "cuda"`` are string comparisons, not device gates."""
    operands = [node.left] + [t.comparator for t in node.comparisons]
    for a, b, op in zip(operands, operands[1:], node.comparisons):
        if isinstance(op.operator, (cst.In, cst.NotIn)) and vendor_list(b):
            return None  # ("cuda", "xpu"): the supported accelerators, listed by name (migrate/exemptions/vendor_tables.py)
        if isinstance(op.operator, (cst.In, cst.NotIn)) and _device_whitelist(b):
            return Finding("NM111", node, reason=_WHITELIST)
        if cuda_literal(a) and device_evidence(ctx, b) or cuda_literal(b) and device_evidence(ctx, a):
            return Finding("NM111", node, reason=_branch_reason(ctx, node))
    return None


_WHITELIST = (
    "a device whitelist: after migration it still rejects every other accelerator; accept "
    "`torch.accelerator.current_accelerator().type` too"
)
_DEVICE_NAMES = {"cpu", "mps", "xpu", "npu", "hpu", "neuron", "meta", "cuda"}


def _device_whitelist(node) -> bool:
    """``("cpu", "cuda")``: a tuple/list/set of string literals that are all device types, "cuda" one of them."""
    if not isinstance(node, (cst.Tuple, cst.List, cst.Set)) or not node.elements:
        return False
    values = [string_value(e.value) for e in node.elements]
    return "cuda" in values and all(v in _DEVICE_NAMES for v in values)


def _branch_reason(ctx, node) -> str:
    """What other accelerators get when the comparison is the test of a conditional."""
    parent = ctx.parent(node)
    if isinstance(parent, cst.IfExp) and parent.test is node:
        other = " ".join(ctx.code(parent.orelse).split())
        return f"every other accelerator gets `{other[:50]}` (the `else` value) even after its CUDA branch is migrated"
    if isinstance(parent, cst.If) and parent.test is node:
        return "every other accelerator skips this block even after it is migrated"
    return ""


@on_method("startswith")
def _startswith(ctx, call):
    if call.args and cuda_literal(call.args[0].value) and device_evidence(ctx, call.func.value):
        return Finding("NM111", call)
    return None


@on_method("assertEqual", "assertNotEqual")
def _assert_device_type(ctx, call):
    """``self.assertEqual(t.device.type, "cuda")``: a unittest comparison of a device with ``"cuda"``
    (pytorch#191879 rewrote such assertions to the device type under test)."""
    values = [a.value for a in call.args[:2] if a.keyword is None]
    if len(values) == 2 and (
        cuda_literal(values[0])
        and device_evidence(ctx, values[1])
        or cuda_literal(values[1])
        and device_evidence(ctx, values[0])
    ):
        return Finding("NM111", call, reason="an assertion that the device is CUDA fails on every other accelerator")
    return None


@on_attr_name("is_cuda")
def _is_cuda(ctx, node):
    if ctx.assign_stack and any(t.target is node for t in ctx.assign_stack[-1].targets):
        return None  # `self.is_cuda = ...` defines an attribute of the user's own class
    return Finding("NM112", node)
