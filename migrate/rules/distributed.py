"""NM6xx: torch.distributed (``torch/distributed/distributed_c10d.py``)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_conformance.migrate.args import build_args, string_value
from neuron_conformance.migrate.hooks import on_any_call, on_call, on_method, on_node, on_reference, rule
from neuron_conformance.migrate.rules._common import SAFE, UNSAFE, Finding
from neuron_conformance.migrate.traversal import walk_in_scope

rule(
    "NM601",
    "hardcoded-nccl",
    'Process group backend hard-coded to `"nccl"`',
    "Use `get_default_backend_for_device(DEVICE_TYPE)`",
    SAFE,
    min_torch=(2, 6),
    what='Finds `init_process_group("nccl")`, `backend="nccl"` and `new_group(backend="nccl")`, '
    'and `"nccl"` (or `"nccl" if torch.cuda.is_available() else "gloo"`, replaced whole) reaching them through a variable named like a backend (or passed as one in '
    'the file), a parameter default (`def setup(backend="nccl")`) or an argparse default '
    '(`add_argument("--dist-backend", default="nccl")`).',
    why="NCCL exists only for CUDA; Trainium, XPU and others register their own collective backend.",
    example='dist.init_process_group("nccl", rank=rank, world_size=world_size)',
    use_instead="dist.init_process_group(backend=dist.get_default_backend_for_device(DEVICE_TYPE), "
    "rank=rank, world_size=world_size)",
    fix_safety="Safe: `nccl` on CUDA, the plugin's backend elsewhere (it must have registered one with "
    "`Backend.register_backend(..., devices=[...])`, else ValueError), `gloo` on CPU-only "
    "hosts where `nccl` failed. The argument is not dropped: `backend=None` would register "
    'only the accelerator backend and CPU collectives would fail. Explicit `"gloo"` is left alone. '
    "Unsafe for a variable, parameter or argparse default: the value may also be compared "
    'with `"nccl"` where the rule cannot see; report-only when the argparse option has '
    "`choices=`, and for a parameter default or a module- or class-level variable: those are "
    "evaluated at import, where the ValueError would make the import fail (a module-level variable is "
    "still fixed in a script that creates its process group at module level).",
    references="`torch/distributed/distributed_c10d.py` (`Backend.default_device_backend_map`, `get_default_backend_for_device`).",
)

rule(
    "NM602",
    "is-nccl-available",
    "`is_nccl_available()` asks about CUDA's backend only",
    "Replace with `is_backend_available(get_default_backend_for_device(DEVICE_TYPE))`",
    UNSAFE,
    what="Finds `torch.distributed.is_nccl_available()`.",
    why="It answers False on every non-CUDA accelerator.",
    example="if dist.is_nccl_available():",
    use_instead="if dist.is_backend_available(dist.get_default_backend_for_device(DEVICE_TYPE)):",
    fix_safety="Unsafe: on CPU-only hosts it now asks about `gloo` (True) where it answered False.",
    references="`torch/distributed/distributed_c10d.py`.",
)

rule(
    "NM603",
    "cuda-nccl-module",
    "`torch.cuda.nccl` is CUDA-specific",
    "",
    "report",
    what="Finds uses of `torch.cuda.nccl` (`version()`, raw collectives).",
    why="No device-generic equivalent.",
    example="print(torch.cuda.nccl.version())",
    use_instead="print(dist.get_backend())",
    fix_safety="No fix.",
    references="`torch/distributed/distributed_c10d.py`.",
)

rule(
    "NM604",
    "data-parallel",
    "`torch.nn.DataParallel` does not replicate on most accelerators",
    "",
    "report",
    what="Finds `torch.nn.DataParallel(...)`.",
    why="On MPS or with no device it returns early with `device_ids = []` (no replication); it is "
    "single-process and discouraged everywhere.",
    example="model = torch.nn.DataParallel(model).cuda()",
    use_instead="model = DistributedDataParallel(model.to(DEVICE_TYPE), device_ids=[local_rank])",
    fix_safety="No fix: moving to DDP changes the launcher.",
    references="`torch/distributed/distributed_c10d.py`.",
)

rule(
    "NM605",
    "cuda-backend-spec",
    "Backend string `{value}` maps CUDA to NCCL explicitly",
    "",
    "report",
    what='Finds backend specification strings such as `"cpu:gloo,cuda:nccl"` where they are used as '
    "a process-group backend: the `backend` argument of `init_process_group`/`new_group`/"
    "`new_subgroups`, any `backend=` keyword, a parameter default or assignment whose name "
    "contains `backend`, or a variable passed as a backend in the same file. Docstrings, "
    "messages and other strings are not reported.",
    why="The accelerator half names CUDA.",
    example='dist.init_process_group("cpu:gloo,cuda:nccl")',
    use_instead='dist.init_process_group(f"cpu:gloo,{DEVICE_TYPE}:{dist.get_default_backend_for_device(DEVICE_TYPE)}")',
    fix_safety="No fix.",
    references="`torch/distributed/distributed_c10d.py`.",
)

_GROUP_FNS = {
    "torch.distributed.init_process_group": ["backend"],
    "torch.distributed.distributed_c10d.init_process_group": ["backend"],
    "torch.distributed.new_group": ["ranks", "timeout", "backend"],
    "torch.distributed.new_subgroups": ["group_size", "group", "timeout", "backend"],
}


@on_call(*_GROUP_FNS)
def _nccl(ctx, call, q):
    params = _GROUP_FNS[q]
    backend = None
    positional = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            if positional < len(params) and params[positional] == "backend":
                backend = arg
            positional += 1
        elif arg.keyword.value == "backend":
            backend = arg
    if backend is None or not (string_value(backend.value) == "nccl" or _nccl_if_cuda(ctx, backend.value)):
        return None
    func = call.func

    def fix(updated):
        getter = ctx.module_attr(func, "get_default_backend_for_device")
        return cst.Call(func=getter, args=build_args([ctx.device_type()], []))

    return Finding("NM601", backend.value, fix=fix, applicability=SAFE)


@on_call("torch.distributed.is_nccl_available")
def _is_nccl(ctx, call, q):
    func = call.func

    def fix(updated):
        getter = cst.Call(
            func=ctx.module_attr(func, "get_default_backend_for_device"), args=build_args([ctx.device_type()], [])
        )
        return updated.with_changes(func=ctx.module_attr(func, "is_backend_available"), args=build_args([getter], []))

    return Finding("NM602", call, fix=fix, applicability=UNSAFE)


@on_call("torch.cuda.nccl.*")
def _nccl_module(ctx, call, q):
    return Finding("NM603", call)


@on_reference("torch.cuda.nccl*")
def _nccl_ref(ctx, node, q):
    return Finding("NM603", node)


@on_call("torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel")
def _dp(ctx, call, q):
    return Finding("NM604", call)


def _is_backend_spec(value) -> bool:
    return bool(value) and "cuda:nccl" in value.replace(" ", "")


def _backend_position(ctx, call, q) -> Optional[cst.Arg]:
    """The argument of ``call`` that is a process-group backend: ``backend=`` of any call, or
    the positional ``backend`` parameter of the :data:`_GROUP_FNS` functions."""
    params = _GROUP_FNS.get(q)
    positional = 0
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value == "backend":
                return arg
            continue
        if arg.star:
            return None
        if params is not None and positional < len(params) and params[positional] == "backend":
            return arg
        positional += 1
    return None


def _backend_names(ctx) -> set:
    """Names passed as a backend anywhere in the file (``init_process_group(spec)``,
    ``backend=spec``), computed once per file and only when a candidate string is assigned."""
    if "backend_names" not in ctx._lazy:
        names = set()

        class _V(cst.CSTVisitor):
            def visit_Call(self, call):
                arg = _backend_position(ctx, call, ctx.qname(call.func))
                if arg is not None and isinstance(arg.value, cst.Name):
                    names.add(arg.value.value)

        ctx.module.visit(_V())
        ctx._lazy["backend_names"] = names
    return ctx._lazy["backend_names"]


@on_any_call
def _backend_spec_arg(ctx, call, q):
    """``init_process_group("cpu:gloo,cuda:nccl")``, ``backend="cpu:gloo,cuda:nccl"``."""
    arg = _backend_position(ctx, call, q)
    if arg is not None:
        v = string_value(arg.value)
        if _is_backend_spec(v):
            return Finding("NM605", arg.value, {"value": v})
    return None


def _names_a_backend(ctx, node) -> bool:
    """True when an ``Assign`` target (a name or an attribute) says ``backend`` or is passed as a process
    group backend elsewhere in the file (``_backend_names``)."""
    for t in node.targets:
        target = t.target
        name = (
            target.value
            if isinstance(target, cst.Name)
            else (target.attr.value if isinstance(target, cst.Attribute) else None)
        )
        if name is not None and ("backend" in name.lower() or name in _backend_names(ctx)):
            return True
    return False


@on_node("Assign")
def _backend_spec_assign(ctx, node):
    """``backend = "cpu:gloo,cuda:nccl"`` (a name that says so), or a variable that is later
    passed as a backend in the same file."""
    v = string_value(node.value)
    if not _is_backend_spec(v):
        return None
    if _names_a_backend(ctx, node):
        return Finding("NM605", node.value, {"value": v})
    return None


@on_node("Param")
def _backend_spec_param(ctx, param):
    """``def setup(backend="cpu:gloo,cuda:nccl")``."""
    if param.default is None or "backend" not in param.name.value.lower():
        return None
    v = string_value(param.default)
    if _is_backend_spec(v):
        return Finding("NM605", param.default, {"value": v})
    return None


#: Why a ``"nccl"`` evaluated at import is not rewritten (as in mmengine 0.10.7):
#: ``get_default_backend_for_device`` raises ``ValueError`` for a device type with no registered default backend
#: (torch 2.13 ``torch/distributed/distributed_c10d.py``; a PrivateUse1 backend that registers none), so the
#: rewritten default would make importing the module fail where the literal never did.
_AT_IMPORT = (
    "not fixed: a default backend computed {where} raises for an accelerator with no registered "
    "default backend; pass `backend=None` or look the backend up where the process group is created"
)


def _groups_at_module_level(ctx) -> bool:
    """The module creates a process group in its own top-level code (a script: ``dist.init_process_group(
    backend, ...)`` outside any function or class, ``if __name__ == "__main__":`` blocks included). Its
    module-level variables are evaluated when the group is created anyway, so a default backend computed
    there fails no earlier than ``"nccl"`` would."""
    state = ctx.rule_state("NM601 groups at module level", dict)
    if "v" not in state:
        state["v"] = any(
            isinstance(n, cst.Call) and (ctx.qname(n.func) or "") in _GROUP_FNS for n in walk_in_scope(ctx.module)
        )
    return state["v"]


def _default_backend(ctx):
    """A fix replacing a ``"nccl"`` literal with ``torch.distributed.get_default_backend_for_device(DEVICE_TYPE)``."""

    def fix(updated):
        return cst.Call(
            func=ctx.torch_attr("distributed.get_default_backend_for_device"), args=build_args([ctx.device_type()], [])
        )

    return fix


def _nccl_if_cuda(ctx, node) -> bool:
    """True for ``"nccl" if torch.cuda.is_available() else "gloo"``: the whole conditional is the device's
    default backend (``nccl`` on CUDA, ``gloo`` on a CPU-only host, as before), so it is replaced whole;
    widening only its test would pick ``nccl`` on every other accelerator."""
    return (
        isinstance(node, cst.IfExp)
        and string_value(node.body) == "nccl"
        and string_value(node.orelse) == "gloo"
        and isinstance(node.test, cst.Call)
        and not node.test.args
        and ctx.qname(node.test.func) == "torch.cuda.is_available"
    )


@on_node("Assign")
def _nccl_variable(ctx, node):
    """``BACKEND = "nccl"`` (or ``"nccl" if torch.cuda.is_available() else "gloo"``) where the name says
    backend or is passed as one in this file. Unsafe: the variable may also be compared with "nccl" elsewhere;
    report-only at module or class level (:data:`_AT_IMPORT`)."""
    if string_value(node.value) != "nccl" and not _nccl_if_cuda(ctx, node.value):
        return None
    if _names_a_backend(ctx, node):
        if not any(isinstance(a, (cst.FunctionDef, cst.Lambda)) for a in ctx.ancestors) and (
            any(isinstance(a, cst.ClassDef) for a in ctx.ancestors) or not _groups_at_module_level(ctx)
        ):
            return Finding("NM601", node.value, reason=_AT_IMPORT.format(where="at import"))
        return Finding("NM601", node.value, fix=_default_backend(ctx), applicability=UNSAFE)
    return None


@on_node("Param")
def _nccl_param(ctx, param):
    """``def setup(backend="nccl")``: report-only (:data:`_AT_IMPORT`: a default is evaluated when the ``def``
    runs)."""
    if param.default is None or "backend" not in param.name.value.lower() or string_value(param.default) != "nccl":
        return None
    return Finding("NM601", param.default, reason=_AT_IMPORT.format(where="when the `def` runs, at import"))


@on_method("add_argument")
def _nccl_argparse(ctx, call):
    """``parser.add_argument("--dist-backend", default="nccl")``: unsafe (the value reaches code
    this rule cannot see); report-only with ``choices=`` (the new default may not be one)."""
    if not call.args or "backend" not in (string_value(call.args[0].value) or ""):
        return None
    default = next((a for a in call.args if a.keyword is not None and a.keyword.value == "default"), None)
    if default is None or string_value(default.value) != "nccl":
        return None
    if any(a.keyword is not None and a.keyword.value == "choices" for a in call.args):
        return Finding("NM601", default.value)
    return Finding("NM601", default.value, fix=_default_backend(ctx), applicability=UNSAFE)
