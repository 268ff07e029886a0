"""Name and text helpers shared by the exemptions (:mod:`neuron_conformance.migrate.exemptions`): the
names, strings and operands a test or a statement holds, and whether they name CUDA or another
accelerator.

Public: :data:`OTHER_VENDOR`, :data:`NON_ROCM_VENDOR`, :data:`CUDA_PROBES`, :data:`CUDA_PROBE_NAME`,
:data:`NAMES_CUDA`, :data:`GPU_ONLY_PACKAGES`, :func:`names_in`, :func:`callee`, :func:`identifier`,
:func:`word_set`, :func:`name_words`, :func:`tests_cuda`, :func:`names_cuda`, :func:`names_other_vendor`,
:func:`bare_and_operands`, :func:`bool_operands`, :func:`operands`, :func:`cuda_parts`, :func:`path_pairs`,
:func:`key_vendor`, :func:`cuda_only_module`.
"""

from __future__ import annotations

import re
from typing import List, Optional

import libcst as cst

from neuron_conformance.migrate.args import string_value

#: Another vendor named in a test: a torch submodule, a helper such as is_torch_npu_available(),
#: or a device-type literal.
#: ROCm (``IS_ROCM_SYSTEM``, ``is_rocm_platform()``, ``torch.version.hip``) counts as another vendor: ROCm
#: presents itself as ``"cuda"``, so a test naming it distinguishes AMD from NVIDIA on purpose.
#: TPU (``os.environ["PJRT_DEVICE"] == "TPU"``, ``TPU_NAME``) is named as torch_xla's accelerator.
OTHER_VENDOR = re.compile(
    r"(^|[._])(xpu|npu|ascend|mps|mlu|hpu|musa|neuron|xla|tpu|mtia|sdaa|gcu|rocm|hip)($|[._])", re.I
)
#: :data:`OTHER_VENDOR` without ROCm/HIP: for a CUDA implementation, which ROCm runs through.
NON_ROCM_VENDOR = re.compile(OTHER_VENDOR.pattern.replace("|rocm|hip", ""), re.I)
CUDA_PROBES = {"torch.cuda.is_available", "torch.cuda.device_count"}
#: A name asking about CUDA (``pt_cuda_available``, ``IS_CUDA_SYSTEM``, ``is_cuda``), not ``no_cuda``;
#: in a chain that also tests another vendor, a GPU name means CUDA (``DistributedType.MULTI_GPU``
#: next to ``MULTI_XPU``).
_CUDA_NAME = re.compile(r"^(?!(no|not|non|without|disable)_)(\w+_)?(is_)?(cuda|gpu)(_\w+)?$", re.I)
NAMES_CUDA = re.compile(r"\b(cuda|gpu|nvidia|compute capability)\b", re.I)
#: Top-level packages that exist for NVIDIA or AMD GPUs only (CUDA bindings, GPU management).
GPU_ONLY_PACKAGES = frozenset({"pycuda", "cupy", "pynvml", "amdsmi"})
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def names_in(node: cst.CSTNode) -> List[str]:
    """Dotted names and string literals in ``node`` (iterative walk)."""
    out, stack = [], [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Name):
            out.append(cur.value)
        elif isinstance(cur, cst.Attribute):
            out.append(cur.attr.value)
        elif isinstance(cur, cst.SimpleString):
            v = string_value(cur)
            if v is not None:
                out.append(v)
        elif isinstance(cur, cst.FormattedString):  # the text of an f-string message (its fields are walked)
            out.append("".join(p.value for p in cur.parts if isinstance(p, cst.FormattedStringText)))
        stack.extend(cur.children)
    return out


#: A library's own CUDA probe (``is_torch_cuda_available()`` in transformers, accelerate, diffusers).
CUDA_PROBE_NAME = re.compile(r"^is_\w*cuda\w*_available$")


def callee(call: cst.Call) -> str:
    """The last name of a call's function (``x.y.f(...)`` -> ``f``), else ``""``."""
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else ""


def identifier(node: cst.CSTNode) -> Optional[str]:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def word_set(name: str) -> set:
    return {w for w in name.lower().split("_") if w}


def name_words(name: str) -> set:
    """``CUDAAccelerator`` -> {cuda, accelerator}; ``CUDA_Accelerator`` the same; ``get_gpu_info`` -> {get, gpu,
    info}. Used by :mod:`neuron_conformance.migrate.reach` too."""
    return {w.lower() for part in name.split("_") for w in _CAMEL.findall(part)}


def tests_cuda(ctx, test: cst.CSTNode) -> bool:
    stack = [test]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Call) and (ctx.qname(cur.func) in CUDA_PROBES or CUDA_PROBE_NAME.match(callee(cur))):
            return True
        if isinstance(cur, cst.SimpleString) and string_value(cur) == "cuda":
            return True
        if isinstance(cur, (cst.Name, cst.Attribute)) and _CUDA_NAME.search(_ident(cur)):
            return True  # `elif pt_cuda_available:`, `if x.is_cuda:`
        stack.extend(cur.children)
    return False


def _ident(node) -> str:
    return node.value if isinstance(node, cst.Name) else node.attr.value


def names_other_vendor(test: cst.CSTNode, rocm: bool = True) -> bool:
    """``test`` names an accelerator other than CUDA (:data:`OTHER_VENDOR`) in a name or string;
    with ``rocm=False`` a ROCm/HIP name does not count (:data:`NON_ROCM_VENDOR`)."""
    pattern = OTHER_VENDOR if rocm else NON_ROCM_VENDOR
    return any(pattern.search(n) for n in names_in(test))


def names_cuda(ctx, node: cst.CSTNode) -> bool:
    """A ``torch.cuda``/``torch.version.cuda``/``torch.version.hip`` name, a library's CUDA probe
    (``is_cuda_available()``), a ``"cuda"`` device literal or a ``CUDA_...`` variable name in ``node``."""
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Call) and CUDA_PROBE_NAME.match(callee(cur)):
            return True  # `if is_cuda_available():` among `if is_hpu_available():` ...
        if isinstance(cur, cst.Attribute):
            q = ctx.qname(cur)
            if q is not None and (q.startswith("torch.cuda.") or q in ("torch.version.cuda", "torch.version.hip")):
                return True
        elif isinstance(cur, cst.SimpleString):
            v = string_value(cur)
            if v is not None and (v == "cuda" or v.startswith(("cuda:", "CUDA_"))):
                return True
        stack.extend(cur.children)
    return False


def bare_and_operands(node: cst.CSTNode) -> List[cst.CSTNode]:
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And) and not node.lpar:
        return bare_and_operands(node.left) + bare_and_operands(node.right)
    return [node]


def bool_operands(node: cst.CSTNode) -> List[cst.CSTNode]:
    """The operands of a chain of ``and``/``or`` (not through parentheses)."""
    if isinstance(node, cst.BooleanOperation) and not node.lpar:
        return bool_operands(node.left) + bool_operands(node.right)
    return [node]


def operands(node: cst.CSTNode, op) -> List[cst.CSTNode]:
    """The operands of a chain of ``and`` (``op=cst.And``) or ``or``; parentheses do not change
    such a chain (``(a and b) and c``), so they are looked through."""
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, op):
        return operands(node.left, op) + operands(node.right, op)
    return [node]


def cuda_parts(ctx, node: cst.CSTNode) -> List[cst.CSTNode]:
    """The CUDA probes (``torch.cuda.is_available()`` calls) and ``"cuda"`` comparisons in ``node``."""
    out, stack = [], [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Call) and ctx.qname(cur.func) in CUDA_PROBES:
            out.append(cur)
        elif isinstance(cur, cst.Comparison) and any(
            string_value(o) == "cuda" for o in [cur.left] + [c.comparator for c in cur.comparisons]
        ):
            out.append(cur)
        stack.extend(cur.children)
    return out


def path_pairs(path: list):
    return zip(path, path[1:])


def key_vendor(target) -> str:
    """For ``TABLE["xla"]``: the key's text when it names an accelerator (another vendor), else ``""``."""
    if (
        not isinstance(target, cst.Subscript)
        or len(target.slice) != 1
        or not isinstance(target.slice[0].slice, cst.Index)
    ):
        return ""
    v = string_value(target.slice[0].slice.value)
    return v if v is not None and v != "cuda" and OTHER_VENDOR.search(v) else ""


def cuda_only_module(name: str) -> bool:
    parts = name.split(".")
    return parts[0] != "torch" and ("cuda" in parts or parts[0] in GPU_ONLY_PACKAGES)
