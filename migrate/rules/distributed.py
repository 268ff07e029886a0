"""NM6xx: torch.distributed (fact sheet §1.9)."""
from __future__ import annotations

import libcst as cst

from migrate.args import build_args, string_value
from migrate.registry import on_call, on_reference, on_string, rule
from migrate.rules._common import SAFE, UNSAFE, Finding

REF = "Fact sheet `shared/migrate/torch-accelerator-map.md`"

rule("NM601", "hardcoded-nccl", "Process group backend hard-coded to `\"nccl\"`",
     "Use `get_default_backend_for_device(DEVICE_TYPE)`", SAFE, min_torch=(2, 6),
     what="Finds `init_process_group(\"nccl\")`, `backend=\"nccl\"` and `new_group(backend=\"nccl\")`.",
     why="NCCL exists only for CUDA; Trainium, XPU and others register their own collective backend.",
     example='dist.init_process_group("nccl", rank=rank, world_size=world_size)',
     use_instead="dist.init_process_group(backend=dist.get_default_backend_for_device(DEVICE_TYPE), "
                 "rank=rank, world_size=world_size)",
     fix_safety="Safe: `nccl` on CUDA, the plugin's backend elsewhere (it must have registered one with "
                "`Backend.register_backend(..., devices=[...])`, else ValueError), `gloo` on CPU-only "
                "hosts where `nccl` failed. The argument is not dropped: `backend=None` would register "
                "only the accelerator backend and CPU collectives would fail. Explicit `\"gloo\"` is left alone.",
     references=f"{REF} §1.9, §0.8; `torch/distributed/distributed_c10d.py`.")

rule("NM602", "is-nccl-available", "`is_nccl_available()` asks about CUDA's backend only",
     "Replace with `is_backend_available(get_default_backend_for_device(DEVICE_TYPE))`", UNSAFE,
     what="Finds `torch.distributed.is_nccl_available()`.",
     why="It answers False on every non-CUDA accelerator.",
     example="if dist.is_nccl_available():",
     use_instead="if dist.is_backend_available(dist.get_default_backend_for_device(DEVICE_TYPE)):",
     fix_safety="Unsafe: on CPU-only hosts it now asks about `gloo` (True) where it answered False.",
     references=f"{REF} §1.9.")

rule("NM603", "cuda-nccl-module", "`torch.cuda.nccl` is CUDA-specific", "", "report",
     what="Finds uses of `torch.cuda.nccl` (`version()`, raw collectives).",
     why="No device-generic equivalent.",
     example="print(torch.cuda.nccl.version())",
     use_instead="print(dist.get_backend())",
     fix_safety="No fix.",
     references=f"{REF} §1.9.")

rule("NM604", "data-parallel", "`torch.nn.DataParallel` does not replicate on most accelerators", "", "report",
     what="Finds `torch.nn.DataParallel(...)`.",
     why="On MPS or with no device it returns early with `device_ids = []` (no replication); it is "
         "single-process and discouraged everywhere.",
     example="model = torch.nn.DataParallel(model).cuda()",
     use_instead="model = DistributedDataParallel(model.to(DEVICE_TYPE), device_ids=[local_rank])",
     fix_safety="No fix: moving to DDP changes the launcher.",
     references=f"{REF} §1.9.")

rule("NM605", "cuda-backend-spec", "Backend string `{value}` maps CUDA to NCCL explicitly", "", "report",
     what="Finds backend specification strings such as `\"cpu:gloo,cuda:nccl\"`.",
     why="The accelerator half names CUDA.",
     example='dist.init_process_group("cpu:gloo,cuda:nccl")',
     use_instead='dist.init_process_group(f"cpu:gloo,{DEVICE_TYPE}:{dist.get_default_backend_for_device(DEVICE_TYPE)}")',
     fix_safety="No fix.",
     references=f"{REF} §1.9.")

_GROUP_FNS = {"torch.distributed.init_process_group": ["backend"],
              "torch.distributed.distributed_c10d.init_process_group": ["backend"],
              "torch.distributed.new_group": ["ranks", "timeout", "backend"],
              "torch.distributed.new_subgroups": ["group_size", "group", "timeout", "backend"]}


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
    if backend is None or string_value(backend.value) != "nccl":
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
        getter = cst.Call(func=ctx.module_attr(func, "get_default_backend_for_device"),
                          args=build_args([ctx.device_type()], []))
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


@on_string
def _backend_spec(ctx, node):
    if "nccl" in node.value and ":" in node.value:
        v = string_value(node)
        if v and "cuda:nccl" in v.replace(" ", ""):
            return Finding("NM605", node, {"value": v})
    return None

