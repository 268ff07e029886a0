"""NM8xx: backend flags, profiling, environment variables and the catch-all (PyTorch docs: torch.backends)."""

from __future__ import annotations

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.hooks import fallback, on_call, on_reference, on_string, rule
from neuron_conformance.migrate.rules._common import (
    UNSAFE,
    Finding,
    comparison_others,
    container_use,
    contains,
    name_tokens,
)

rule(
    "NM801",
    "cudnn-flag",
    "`{name}` is a cuDNN-only setting",
    "",
    "report",
    what="Finds `torch.backends.cudnn.*` (`benchmark`, `deterministic`, `enabled`, `allow_tf32`).",
    why="No effect on other accelerators; `deterministic` in particular does not make them deterministic.",
    example="torch.backends.cudnn.deterministic = True",
    use_instead="torch.use_deterministic_algorithms(True)  # global, raises on non-deterministic ops",
    fix_safety="No fix: keep the flag for CUDA/ROCm and decide what the other devices need.",
    references="PyTorch docs: torch.backends.",
)

rule(
    "NM802",
    "cuda-backend-flag",
    "`{name}` is a CUDA-only setting",
    "",
    "report",
    what="Finds `torch.backends.cuda.*` (`matmul.allow_tf32`, `matmul.fp32_precision`, SDPA toggles).",
    why="No effect on other accelerators.",
    example="torch.backends.cuda.matmul.allow_tf32 = True",
    use_instead='torch.set_float32_matmul_precision("high")',
    fix_safety="No fix: per-backend meaning differs.",
    references="PyTorch docs: torch.backends.",
)

rule(
    "NM803",
    "sdp-kernel",
    "`torch.backends.cuda.sdp_kernel` is deprecated and CUDA-specific",
    "",
    "report",
    what="Finds `torch.backends.cuda.sdp_kernel(...)`.",
    why="Replaced by the device-generic `torch.nn.attention.sdpa_kernel(backends)`.",
    example="with torch.backends.cuda.sdp_kernel(enable_flash=False):",
    use_instead="with torch.nn.attention.sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):",
    fix_safety="No fix: the boolean flags must be translated into a backend list by hand.",
    references="PyTorch docs: torch.backends.",
)

rule(
    "NM804",
    "cuda-nvtx",
    "`{name}` is NVIDIA-only profiling",
    "",
    "report",
    what="Finds `torch.cuda.nvtx.*` and `torch.autograd.profiler.emit_nvtx`.",
    why="Without CUDA the NVTX functions raise; after an `is_available()` migration, "
    "`if ...is_available(): nvtx.range_push(...)` crashes on Trainium/XPU.",
    example='torch.cuda.nvtx.range_push("step")',
    use_instead='with torch.profiler.record_function("step"):',
    fix_safety="No fix: not the same sink (Nsight vs the torch profiler).",
    references="PyTorch docs: torch.backends.",
)

rule(
    "NM805",
    "profiler-use-cuda",
    "`use_cuda=` is deprecated and CUDA-specific",
    "Replace with `use_device=DEVICE_TYPE`",
    UNSAFE,
    what="Finds `torch.autograd.profiler.profile(use_cuda=...)`.",
    why="Deprecated; it profiles CUDA only.",
    example="with torch.autograd.profiler.profile(use_cuda=True):",
    use_instead="with torch.autograd.profiler.profile(use_device=DEVICE_TYPE):",
    fix_safety="Unsafe: `use_cuda=False` cannot be mapped and is left alone; on CPU-only hosts the "
    'device type is `"cpu"`.',
    references="PyTorch docs: torch.backends; lightning-thunder#435.",
)

rule(
    "NM806",
    "profiler-activity-cuda",
    "`ProfilerActivity.CUDA` traces CUDA only",
    "",
    "report",
    what="Finds `torch.profiler.ProfilerActivity.CUDA`.",
    why="Other devices have their own activity (`XPU`, `MTIA`, `HPU`, `PrivateUse1`).",
    example="activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]",
    use_instead="activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]  # for neuron",
    fix_safety="No fix: the member depends on the device.",
    references="PyTorch docs: torch.backends.",
)

rule(
    "NM807",
    "cuda-env-var",
    "Environment variable `{value}` is read by CUDA only",
    "",
    "report",
    what="Finds the environment variables `CUDA_VISIBLE_DEVICES` and `CUDA_LAUNCH_BLOCKING` where "
    "they are used as such: `os.environ[...]`, a dict key, a call argument (`os.getenv`, "
    "`env.pop`), an assigned value, or `... in os.environ`. Docstrings and comparisons "
    "with other strings are not reported.",
    why="Each runtime has its own: `NEURON_RT_VISIBLE_CORES` (Neuron), `ZE_AFFINITY_MASK` (XPU), "
    "`ASCEND_RT_VISIBLE_DEVICES` (NPU), `HABANA_VISIBLE_MODULES`; ROCm: `AMD_SERIALIZE_KERNEL=3`.",
    example='os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"',
    use_instead='os.environ["NEURON_RT_VISIBLE_CORES"] = "0,1"  # set before the runtime starts',
    fix_safety="No fix: there is no generic variable.",
    references='CUDA C Programming Guide, "CUDA Environment Variables"; accelerate `utils/launch.py` (each '
    "runtime's visible-device variable).",
)

rule(
    "NM808",
    "torch-version-cuda",
    "`{name}` tests the CUDA toolkit version",
    "",
    "report",
    what="Finds `torch.version.cuda` and `torch.version.hip`. A ROCm check (`torch.version.hip` "
    "tested for truth or against None, not or-ed with `torch.version.cuda`: `elif "
    "torch.version.hip: raise ...`) tells AMD from NVIDIA on purpose and is not reported; "
    "neither is the CUDA branch of `if torch.version.hip: ... elif torch.version.cuda: ...`.",
    why="None on other builds (and on ROCm `torch.version.cuda` is None): version gates misfire.",
    example="if torch.version.cuda is not None:",
    use_instead="if torch.accelerator.is_available():",
    fix_safety="No fix.",
    references="`torch/version.py` (`cuda`, `hip`); `torch/accelerator/__init__.py`; transformers#37278.",
)

rule(
    "NM809",
    "cuda-only-api",
    "`{name}` has no device-generic equivalent",
    "",
    "report",
    what="Finds every other use of a `torch.cuda` name that no more specific rule covers.",
    why="It will fail or do nothing on Trainium/XPU/MPS.",
    example="torch.cuda.utilization()",
    use_instead="torch.get_device_module().utilization()  # where the backend has it",
    fix_safety="No fix. Note that on ROCm `torch.cuda` works as is: the tool does not call `torch.cuda` "
    "broken, it calls it CUDA-specific.",
    references="`torch/__init__.py` (`get_device_module`; the per-device modules' attributes).",
)


@on_reference("torch.backends.cudnn*")
def _cudnn(ctx, node, q):
    return Finding("NM801", node, {"name": q})


@on_call("torch.backends.cudnn.*")
def _cudnn_call(ctx, call, q):
    return Finding("NM801", call, {"name": q})


@on_reference("torch.backends.cuda*")
def _cuda_backend(ctx, node, q):
    if q.startswith("torch.backends.cuda.sdp_kernel"):
        return Finding("NM803", node)
    return Finding("NM802", node, {"name": q})


@on_call("torch.backends.cuda.*")
def _cuda_backend_call(ctx, call, q):
    if q == "torch.backends.cuda.sdp_kernel":
        return Finding("NM803", call)
    return Finding("NM802", call, {"name": q})


@on_call("torch.cuda.nvtx.*", "torch.autograd.profiler.emit_nvtx", "torch.autograd.emit_nvtx")
def _nvtx(ctx, call, q):
    return Finding("NM804", call, {"name": q})


@on_reference("torch.cuda.nvtx*")
def _nvtx_ref(ctx, node, q):
    return Finding("NM804", node, {"name": q})


@on_call("torch.autograd.profiler.profile", "torch.autograd.profile", "torch.autograd.profiler.record_function")
def _profile(ctx, call, q):
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "use_cuda":
            if isinstance(arg.value, cst.Name) and arg.value.value == "False":
                return Finding("NM805", arg)
            use_cuda_value = arg.value

            def fix(updated, _v=use_cuda_value):
                if isinstance(_v, cst.Name) and _v.value == "True":
                    return updated.with_changes(keyword=cst.Name("use_device"), value=ctx.device_type())
                expr = cst.IfExp(test=updated.value, body=ctx.device_type(), orelse=cst.Name("None"))
                return updated.with_changes(keyword=cst.Name("use_device"), value=expr)

            return Finding("NM805", arg, fix=fix, applicability=UNSAFE)
    return None


@on_reference("torch.profiler.ProfilerActivity.CUDA", "torch.autograd.ProfilerActivity.CUDA")
def _activity(ctx, node, q):
    return Finding("NM806", node)


_ENV_WORDS = frozenset({"environ", "env", "environment", "getenv"})


def env_var_use(ctx, node) -> bool:
    """Whether an environment-variable name is used as one: an index (``os.environ["X"]``), a
    dict key, a call argument (``os.getenv("X")``, ``env.pop("X")``, ``monkeypatch.setenv``), the
    value of an assignment, an element of a list/tuple used the same ways, or an operand of a
    comparison with an environment (``"X" in os.environ``). Other comparisons (a rule table
    testing ``v in ("CUDA_VISIBLE_DEVICES", ...)``) and docstrings are not uses."""
    kind, where = container_use(ctx, node)
    if kind in ("subscript", "key", "arg", "assign"):
        return True
    if kind == "compare":
        return any(name_tokens(o) & _ENV_WORDS for o in comparison_others(where, node) if not contains(o, node))
    return False


@on_string
def _env(ctx, node):
    if "CUDA_" in node.value:
        v = string_value(node)
        if v in ("CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING") and env_var_use(ctx, node):
            return Finding("NM807", node, {"value": v})
    return None


@on_reference("torch.version.cuda", "torch.version.hip")
def _version(ctx, node, q):
    if q == "torch.version.hip" and rocm_check(ctx, node):
        return None
    return Finding("NM808", node, {"name": q})


def _is_none(node) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def rocm_check(ctx, node) -> bool:
    """Whether ``torch.version.hip`` (``node``) is asked only whether this is a ROCm build: tested for
    truth or against None (``elif torch.version.hip: raise ...``, ``is_rocm = torch.version.hip is not
    None``), under ``not`` and ``and``/``or`` with anything but ``torch.version.cuda``. That tells AMD
    from NVIDIA on purpose and is correctly false on every other accelerator. Still reported (what
    NM808 is for): ``torch.version.cuda or torch.version.hip`` used as "a GPU build", and the value
    used as a version (``version.parse(torch.version.hip)``, ``torch.version.hip >= "6.0"``), which
    misfire where it is None."""
    cur, parent = node, ctx.parent(node)
    for _ in range(16):
        if isinstance(parent, cst.Comparison):
            if (
                len(parent.comparisons) != 1
                or not isinstance(parent.comparisons[0].operator, (cst.Is, cst.IsNot))
                or not (_is_none(parent.comparisons[0].comparator) or _is_none(parent.left))
            ):
                return False
        elif isinstance(parent, cst.ComparisonTarget):
            pass
        elif isinstance(parent, cst.BooleanOperation):
            other = parent.right if cur is parent.left else parent.left
            if any(ctx.qname(n) == "torch.version.cuda" for n in _dotted_nodes(other)):
                return False
        elif isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
            pass
        elif isinstance(parent, (cst.If, cst.IfExp, cst.While)):
            return cur is parent.test
        elif isinstance(parent, (cst.Assign, cst.Return)):
            return cur is parent.value and cur is not node
        elif (
            isinstance(parent, cst.Arg)
            and isinstance(ctx.parent(parent), cst.Call)
            and isinstance(ctx.parent(parent).func, cst.Name)
            and ctx.parent(parent).func.value == "bool"
        ):
            return True
        else:
            return False
        cur, parent = parent, ctx.parent(parent)
    return False


def _dotted_nodes(node) -> list:
    out, stack = [], [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Attribute):
            out.append(cur)
        stack.extend(cur.children)
    return out


#: ``torch.cuda`` modules that touch no device: ``_memory_viz`` renders a saved memory snapshot (pickle or dict)
#: as HTML or text in pure Python (torch 2.13 ``torch/cuda/_memory_viz.py``; composer 0.32.1's OOM callbacks).
_DEVICE_NEUTRAL = ("torch.cuda._memory_viz.",)


@fallback
def _cuda_only(ctx, node, q):
    if q.startswith(_DEVICE_NEUTRAL):
        return None
    if q.startswith("torch.cuda.") and q.count(".") >= 2:
        name = ".".join(q.split(".")[:3])
        return Finding("NM809", node, {"name": name})
    return None
