"""NM9xx: CUDA extensions and kernels (fact sheet §1.10)."""
from __future__ import annotations

from migrate.args import string_value
from migrate.registry import on_call, on_reference, on_string, rule
from migrate.rules._common import Finding

REF = "Fact sheet `shared/migrate/torch-accelerator-map.md`"

rule("NM901", "cuda-extension", "`{name}` builds a CUDA extension", "", "report",
     what="Finds `torch.utils.cpp_extension.CUDAExtension`, and `load`/`load_inline` with "
          "`extra_cuda_cflags=` or `cuda_sources=`.",
     why="There is no device-generic extension type: ROCm hipifies CUDA sources, XPU needs "
         "`SyclExtension` and SYCL sources, Trainium uses NKI kernels.",
     example='CUDAExtension("fused_op", ["fused_op.cpp", "fused_op_kernel.cu"])',
     use_instead="Keep a pure-PyTorch fallback path and select it when the extension is unavailable.",
     fix_safety="No fix.",
     references=f"{REF} §1.10.")

rule("NM902", "cuda-source-file", "CUDA source file `{value}`", "", "report",
     what="Finds string literals naming `.cu`/`.cuh` files (extension source lists).",
     why="CUDA sources build only for CUDA (and ROCm through hipify).",
     example='sources=["op.cpp", "op_kernel.cu"]',
     use_instead="A Python fallback, or a kernel for the target device.",
     fix_safety="No fix.",
     references=f"{REF} §1.10.")

rule("NM903", "cuda-kernel-api", "`{name}` runs CUDA kernels directly", "", "report",
     what="Finds `torch.cuda.jiterator`, `torch.cuda.tunable`, `torch.cuda._sleep` and `triton` uses.",
     why="These generate or tune CUDA/ROCm kernels; no equivalent on other accelerators.",
     example="fn = torch.cuda.jiterator._create_jit_fn(code)",
     use_instead="A PyTorch-op implementation (possibly `torch.compile`d) as a fallback.",
     fix_safety="No fix.",
     references=f"{REF} §1.10.")


@on_call("torch.utils.cpp_extension.CUDAExtension")
def _ext(ctx, call, q):
    return Finding("NM901", call, {"name": q})


@on_call("torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline")
def _load(ctx, call, q):
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in ("extra_cuda_cflags", "cuda_sources", "with_cuda"):
            return Finding("NM901", call, {"name": q})
    return None


@on_string
def _cu(ctx, node):
    raw = node.value
    if ".cu" not in raw:
        return None
    v = string_value(node)
    if v and (v.endswith(".cu") or v.endswith(".cuh")) and "\n" not in v and " " not in v:
        return Finding("NM902", node, {"value": v})
    return None


@on_call("torch.cuda.jiterator.*", "torch.cuda.tunable.*", "torch.cuda._sleep", "triton.*")
def _kernel(ctx, call, q):
    return Finding("NM903", call, {"name": ".".join(q.split(".")[:3])})


@on_reference("torch.cuda.jiterator*", "torch.cuda.tunable*", "triton.jit", "triton.autotune")
def _kernel_ref(ctx, node, q):
    return Finding("NM903", node, {"name": q})
