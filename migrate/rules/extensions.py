"""NM9xx: CUDA extensions and kernels (``torch/utils/cpp_extension.py``).

Triton is not reported by NM903 (in DeepSpeed 0.19.8 all 53 Triton findings were false positives): Triton's documentation lists NVIDIA and AMD GPUs as supported and
Intel ships a Triton backend for XPU, so a Triton kernel is not a CUDA idiom.
"""

from __future__ import annotations

import re

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.hooks import on_call, on_reference, on_string, rule
from neuron_conformance.migrate.rules._common import Finding

rule(
    "NM901",
    "cuda-extension",
    "`{name}` builds a CUDA extension",
    "",
    "report",
    what="Finds `torch.utils.cpp_extension.CUDAExtension`, and `load`/`load_inline` with "
    "`extra_cuda_cflags=` or `cuda_sources=`.",
    why="There is no device-generic extension type: ROCm hipifies CUDA sources, XPU needs "
    "`SyclExtension` and SYCL sources, Trainium uses NKI kernels.",
    example='CUDAExtension("fused_op", ["fused_op.cpp", "fused_op_kernel.cu"])',
    use_instead="Keep a pure-PyTorch fallback path and select it when the extension is unavailable.",
    fix_safety="No fix.",
    references="`torch/utils/cpp_extension.py`.",
)

rule(
    "NM902",
    "cuda-source-file",
    "CUDA source file `{value}`",
    "",
    "report",
    what="Finds `.cu`/`.cuh` file names used to build an extension: inside the arguments of a "
    "`torch.utils.cpp_extension` call, a `*Extension(...)` constructor or a `sources=` keyword, "
    "or assigned (a source list) in a file that imports `torch.utils.cpp_extension`. Bare "
    'suffixes (`".cu"`), docstrings, comparisons and other strings are not reported.',
    why="CUDA sources build only for CUDA (and ROCm through hipify).",
    example='sources=["op.cpp", "op_kernel.cu"]',
    use_instead="A Python fallback, or a kernel for the target device.",
    fix_safety="No fix.",
    references="`torch/utils/cpp_extension.py`.",
)

rule(
    "NM903",
    "cuda-kernel-api",
    "`{name}` runs CUDA kernels directly",
    "",
    "report",
    what="Finds `torch.cuda.jiterator`, `torch.cuda.tunable` and `torch.cuda._sleep`. Triton "
    "(`@triton.jit`, `@triton.autotune`, `triton.Config`, `triton.cdiv`, ...) is not reported.",
    why="These generate, tune or spin CUDA/ROCm kernels through torch's CUDA module; no equivalent on "
    "other accelerators. Triton is not a CUDA idiom: its documentation lists NVIDIA and AMD GPUs as "
    "supported and Intel ships a Triton backend for XPU, so a Triton kernel compiles for more than "
    "one vendor, and `triton.cdiv`/`triton.next_power_of_2` are integer arithmetic, not device code.",
    example="fn = torch.cuda.jiterator._create_jit_fn(code)",
    use_instead="A PyTorch-op implementation (possibly `torch.compile`d) as a fallback.",
    fix_safety="No fix.",
    references="`torch/utils/cpp_extension.py`; Triton's documentation (supported platforms: NVIDIA GPUs, AMD GPUs); "
    "Intel's Triton backend for XPU (intel-xpu-backend-for-triton).",
)


@on_call("torch.utils.cpp_extension.CUDAExtension")
def _ext(ctx, call, q):
    return Finding("NM901", call, {"name": q})


@on_call("torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline")
def _load(ctx, call, q):
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in ("extra_cuda_cflags", "cuda_sources", "with_cuda"):
            return Finding("NM901", call, {"name": q})
    return None


_CUDA_FILE = re.compile(r"[^\s]*[A-Za-z0-9_*]\.cuh?")
_PATH_BUILDERS = frozenset(
    {
        "os.path.join",
        "os.path.abspath",
        "os.path.realpath",
        "os.fspath",
        "pathlib.Path",
        "pathlib.PurePath",
        "glob.glob",
    }
)
_EXT_KEYWORDS = frozenset({"sources", "cuda_sources", "depends", "headers"})


def _callee(call, q) -> str:
    if q:
        return q
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else ""


def _extension_call(call, q, keyword) -> bool:
    """An argument of a call that builds an extension: anything in ``torch.utils.cpp_extension``,
    a ``*Extension(...)`` constructor (setuptools, CUDAExtension), or a ``sources=`` keyword."""
    name = _callee(call, q)
    return (
        name.startswith("torch.utils.cpp_extension.")
        or name.rsplit(".", 1)[-1].endswith("Extension")
        or keyword in _EXT_KEYWORDS
    )


def _builds_extensions(ctx) -> bool:
    """The file imports ``torch.utils.cpp_extension`` (or something from it)."""
    return any(v.startswith("torch.utils.cpp_extension") for v in ctx.aliases.values())


@on_string
def _cu(ctx, node):
    """A ``.cu``/``.cuh`` file name (not a bare suffix such as ``".cu"``) used where an extension is
    built: inside the arguments of an extension-building call, or assigned in a file that imports
    ``torch.utils.cpp_extension``. Mapping tables, messages and suffix checks are not reported."""
    raw = node.value
    if ".cu" not in raw:
        return None
    v = string_value(node)
    if not v or not _CUDA_FILE.fullmatch(v):
        return None
    if ctx.comparison_depth:
        return None
    if any(_extension_call(call, q, kw) for (call, q, kw, _), _arg in ctx.arg_stack):
        return Finding("NM902", node, {"value": v})
    if (
        _builds_extensions(ctx)
        and ctx.assign_stack
        and not isinstance(ctx.assign_stack[-1].value, cst.Dict)
        and all((q or "") in _PATH_BUILDERS for (call, q, kw, _), _arg in ctx.arg_stack)
    ):
        return Finding("NM902", node, {"value": v})
    return None


# Triton is not matched (in DeepSpeed 0.19.8: 53 of 174 findings, every one a false positive): it compiles for NVIDIA, AMD and Intel GPUs, and its helpers
# (`triton.cdiv`, `triton.next_power_of_2`) are integer arithmetic.
@on_call("torch.cuda.jiterator.*", "torch.cuda.tunable.*", "torch.cuda._sleep")
def _kernel(ctx, call, q):
    return Finding("NM903", call, {"name": ".".join(q.split(".")[:3])})


@on_reference("torch.cuda.jiterator*", "torch.cuda.tunable*")
def _kernel_ref(ctx, node, q):
    return Finding("NM903", node, {"name": q})
