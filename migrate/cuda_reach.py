"""Code that only ever runs on CUDA, and CUDA-only components: not reported (issue 17, precision).

Read on transformers' findings (``benchmarks/results/migrate_precision.md``), each a shape a
migration must leave alone because the code asks a question only CUDA can answer:

1. **A capability query under a CUDA guard.** ``torch.cuda.get_device_capability()`` (and
   ``get_device_properties``, ``is_bf16_supported``, ``get_arch_list``, ``is_tf32_supported``) reached only
   when CUDA was established: in the body of ``if torch.cuda.is_available():`` / ``if x.device.type ==
   "cuda":`` / ``if is_torch_cuda_available():``, after ``torch.cuda.is_available() and``, or after an
   early exit ``if not torch.cuda.is_available(): return ...`` in the same block. The question is about
   NVIDIA architectures (SM numbers); no accelerator-generic answer exists, and off CUDA the code is
   never reached. The same query *not* under a guard still is reported (it raises off CUDA).
2. **The guard of such a query or of a CUDA-only import.** ``if torch.cuda.is_available():`` whose
   body calls a capability query, or imports a module whose dotted path has a ``cuda`` part outside
   torch (``from executorch.backends.cuda.cuda_backend import CudaBackend``): widening it would run
   the CUDA-only body on every accelerator.
3. **A probe answering False without CUDA.** ``if not torch.cuda.is_available(): return False``
   opens a predicate about CUDA (can torch's flash kernel dispatch here?): the test and the rest of
   its block are CUDA's own question. ``return`` without a value, or ``return None``, is not this
   shape (a set-up function, still reported).
4. **A module that loads compiled kernels.** A call of a kernel loader (``get_kernel(...)``,
   ``lazy_load_kernel(...)``, ``load_*kernel*(...)``, ``torch.utils.cpp_extension.load``/``load_inline``)
   or an import of a non-torch module with a ``cuda`` path part: there the device tests (NM111,
   NM112), device contexts (NM106) and capability queries gate or launch the kernel. Everything
   else in such a module (``.cuda()``, ``torch.cuda.synchronize()``) is still reported.
5. **A kernel-object gate.** ``self._kernel_cuda is not None and x.is_cuda``: a CUDA device test
   ``and``-ed with a test that an object named for CUDA or a kernel exists, or with a call of a
   CUDA check (``self.device.type == "cuda" and not check_cuda_p2p_ib_support()``).
6. **A CUDA feature of a torch version.** ``x.is_cuda and ... and is_torch_greater_or_equal("2.8")``:
   the path uses what that torch release added for CUDA (``torch.mm(out_dtype=...)``).

Known problems: a module that calls an unrelated ``get_kernel(...)`` (a convolution kernel) is taken
for a kernel module and loses its device-test findings (NM106, NM111, NM112) and capability findings.

Sources: the judged transformers findings (seeds 3 and 4 of the precision file); torch 2.13's
``torch.cuda.get_device_capability`` docstring ("the major and minor cuda capability"); the
``kernels`` hub loaders (``get_kernel``) named in transformers' ``integrations/hub_kernels.py``.

7. **A CUDA-only option.** ``torch.linalg.svd(a, driver="gesvd" if a.is_cuda else None)``: a keyword
   given a value only on CUDA and its default (None) everywhere else; the keyword is not a device,
   location, pinning or backend argument (those are placement and still reported).

8. **A CUDA-only component's scope** (session 11, read on accelerate, lightning and peft):
   :func:`cuda_only_scopes`. A module that imports a library which, by its own documentation,
   runs on NVIDIA GPUs only (:data:`CUDA_ONLY_LIBRARIES`: Megatron, Transformer Engine,
   Torch-TensorRT, EETQ) at module level, or a function that imports one; a module that implements
   an accelerator interface for CUDA (``class CUDAAccelerator(Accelerator):``, ``class
   CudaPlatform(Platform):``); a method named ``cuda`` (an override of ``nn.Module.cuda``, whose
   contract is "move to CUDA"). Everything in the scope serves CUDA. A module or function that
   also names another accelerator (``"xpu"``, ``torch_npu``) is not such a scope (it dispatches
   among vendors, and its generic paths are still reported); neither is a class named for CUDA
   whose base is not an accelerator interface, nor a plain function named for CUDA (``def
   to_cuda(batch)`` in a training script is exactly what a migration fixes).

   Session 13 (the held-out judgement of DeepSpeed 0.19.8: ``class CUDA_Accelerator
   (DeepSpeedAccelerator)``, 49 findings, and ``class CUDAOpBuilder(OpBuilder)``): a ROCm/HIP name
   (``torch.version.hip``) does not disqualify a CUDA interface implementation, since ROCm presents
   itself as CUDA and runs through it (another vendor's name still does). A **CUDA
   specialization**, a module-level class whose name's words are its base's words plus ``cuda``
   (``CUDAOpBuilder(OpBuilder)``, ``CudaPlatform(Platform)``), serves CUDA: its body is a scope.
   When the module also defines the base (generic base and CUDA specialization in one file), only
   the CUDA class's body is the scope, for an interface class too; the base class and module-level
   code are still reported. ``CUDAFusedOpBuilder(OpBuilder)`` (another word) is no specialization.

9. **A CUDA-specific sanity check** (session 13, DeepSpeed: ``inference/engine.py``'s CUDA-graph
   torch-version assert, ``aio_config.py``'s GPUDirect Storage assert): :func:`_sanity_checks`. An
   ``assert`` whose message names CUDA (``"GDS only supported for CUDA"``, ``"cuda graph needs
   torch 1.10"``) is a check about CUDA: its CUDA test (``assert name == "cuda", "... CUDA ..."``,
   as :func:`neuron_conformance.migrate.deliberate.cuda_assert` for ``torch.cuda.is_available()``)
   and the CUDA test of an ``if`` whose body is that one assert (``if name == "cuda" and
   graphs: assert new_torch, "cuda graph ..."``) are not reported: widening either would apply a
   CUDA check, or admit a CUDA-only feature, elsewhere. An assert whose message does not name CUDA,
   an assert without message, and an ``if`` whose body does anything else are still reported.

Public API: :func:`cuda_reached`, :func:`capability_node`, :func:`guards_cuda_only_body`,
:func:`kernel_module`, :func:`kernel_gate_nodes`, :func:`cuda_only_option`, :func:`cuda_only_scopes`.
Used by :mod:`neuron_conformance.migrate.rule_pass`.
"""
from __future__ import annotations

import re
from typing import List, Optional

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.deliberate import names_other_vendor
from neuron_conformance.migrate.traversal import walk_in_scope

#: Queries of NVIDIA architecture or device properties without a device-generic counterpart.
CAPABILITY = frozenset({"torch.cuda.get_device_capability", "torch.cuda.get_device_properties",
                        "torch.cuda.is_bf16_supported", "torch.cuda.get_arch_list",
                        "torch.cuda.is_tf32_supported"})
_PROBES = frozenset({"torch.cuda.is_available", "torch.cuda.device_count", "torch.cuda.is_initialized"})
_PROBE_NAME = re.compile(r"^is_\w*cuda\w*_available$")
_NEGATING = frozenset({"no", "not", "non", "without", "disable", "disabled", "skip"})
_KERNEL_LOADER = re.compile(
    r"^[^#\n]*\b(get_kernel|lazy_load_kernel|load_\w*kernels?\w*|cpp_extension\.load|cpp_extension\.load_inline|"
    r"load_inline|kernelize)\s*\(", re.M)
_KERNEL_WORD = frozenset({"cuda", "kernel", "kernels"})
_VERSION = re.compile(r"version|greater|_than_|torch_\d", re.I)
#: Codes that gate or launch a kernel in a kernel module (device tests, device contexts).
KERNEL_GATE_CODES = frozenset({"NM106", "NM111", "NM112"})


def _words(name: str) -> set:
    return {w for w in name.lower().split("_") if w}


def _identifier(node: cst.CSTNode) -> Optional[str]:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def _callee(node: cst.Call) -> str:
    return _identifier(node.func) or ""


def _operands(node: cst.CSTNode, op) -> List[cst.CSTNode]:
    """The operands of a chain of ``and`` (``op=cst.And``) or ``or``; parentheses do not change
    such a chain (``(a and b) and c``), so they are looked through."""
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, op):
        return _operands(node.left, op) + _operands(node.right, op)
    return [node]


def _is_cuda_literal(node) -> bool:
    return string_value(node) == "cuda"


def cuda_operand(ctx, node: cst.CSTNode) -> bool:
    """True when ``node`` alone is true only on CUDA: a CUDA probe call (``torch.cuda.is_available()``,
    ``is_torch_cuda_available()``), ``x.is_cuda``, ``<x> == "cuda"``, ``torch.version.cuda``, or a
    name with a ``cuda`` word that is not negated (``pt_cuda_available``, ``IS_CUDA_SYSTEM``; not
    ``no_cuda``)."""
    if isinstance(node, cst.Call):
        return ctx.qname(node.func) in _PROBES or bool(_PROBE_NAME.match(_callee(node)))
    if isinstance(node, cst.Comparison):
        if len(node.comparisons) != 1 or not isinstance(node.comparisons[0].operator, cst.Equal):
            return False
        return _is_cuda_literal(node.left) or _is_cuda_literal(node.comparisons[0].comparator)
    if isinstance(node, cst.Attribute) and ctx.qname(node) == "torch.version.cuda":
        return True
    ident = _identifier(node)
    if ident is None:
        return False
    words = _words(ident)
    return ident == "is_cuda" or ("cuda" in words and not words & _NEGATING)


def _not_cuda_operand(ctx, node: cst.CSTNode) -> bool:
    """True when ``node`` is true off CUDA: ``not <cuda operand>`` or ``<x> != "cuda"``."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return cuda_operand(ctx, node.expression)
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1 \
            and isinstance(node.comparisons[0].operator, cst.NotEqual):
        return _is_cuda_literal(node.left) or _is_cuda_literal(node.comparisons[0].comparator)
    return False


def positive(ctx, test: cst.CSTNode) -> bool:
    """``test`` is true only on CUDA (an ``and`` chain with a CUDA operand)."""
    return any(cuda_operand(ctx, o) for o in _operands(test, cst.And))


def negative(ctx, test: cst.CSTNode) -> bool:
    """``test`` is true whenever CUDA is missing (an ``or`` chain with a not-CUDA operand)."""
    return any(_not_cuda_operand(ctx, o) for o in _operands(test, cst.Or))


def _exit_value(stmt: cst.CSTNode) -> Optional[str]:
    """For ``if <test>: return/raise ...`` with no ``else``: ``"false"`` for ``return False``,
    ``"exit"`` for another ``return``/``raise``; else None."""
    if not isinstance(stmt, cst.If) or stmt.orelse is not None or not isinstance(stmt.body, cst.IndentedBlock):
        return None
    last = stmt.body.body[-1] if stmt.body.body else None
    if not isinstance(last, cst.SimpleStatementLine) or not isinstance(last.body[-1], (cst.Return, cst.Raise)):
        return None
    small = last.body[-1]
    if len(stmt.body.body) == 1 and isinstance(small, cst.Return) and isinstance(small.value, cst.Name) \
            and small.value.value == "False":
        return "false"
    return "exit"


def early_exit(ctx, stmt: cst.CSTNode) -> Optional[str]:
    """:func:`_exit_value` of ``stmt`` when its test is true whenever CUDA is missing, else None."""
    kind = _exit_value(stmt)
    return kind if kind is not None and negative(ctx, stmt.test) else None


def cuda_reached(ctx, ancestors: list, cache: dict) -> Optional[str]:
    """How the innermost of ``ancestors`` (module first) is reached only on CUDA: ``"probe"`` after
    ``if not <cuda>: return False`` in an enclosing block, ``"guard"`` in the body of a CUDA test
    (``if``, conditional expression, the right of ``and``/``or``) or after another early exit, else
    None. ``cache`` holds the answers per (ancestor, child) pair."""
    found = None
    for i in range(len(ancestors) - 1):
        a, child = ancestors[i], ancestors[i + 1]
        key = ("reach", id(a), id(child))
        hit = cache.get(key, False)
        if hit is False:
            hit = cache[key] = _reached_through(ctx, a, child)
        if hit == "probe":
            return hit
        found = found or hit
    return found


def _reached_through(ctx, a, child) -> Optional[str]:
    if isinstance(a, (cst.If, cst.IfExp)):
        if child is a.body and positive(ctx, a.test) or child is a.orelse and negative(ctx, a.test):
            return "guard"
    elif isinstance(a, cst.BooleanOperation) and child is a.right:
        if isinstance(a.operator, cst.And) and positive(ctx, a.left) \
                or isinstance(a.operator, cst.Or) and negative(ctx, a.left):
            return "guard"
    elif isinstance(a, (cst.IndentedBlock, cst.Module)):
        kind = None
        for stmt in a.body:
            if stmt is child:
                return kind
            exit_kind = early_exit(ctx, stmt)
            if exit_kind == "false":
                kind = "probe"
            elif exit_kind is not None and kind is None:
                kind = "guard"
    return None


def capability_node(ctx, node: cst.CSTNode) -> bool:
    """``node`` is a capability query (a call of, or a reference to, a :data:`CAPABILITY` name)."""
    target = node.func if isinstance(node, cst.Call) else node
    return ctx.qname(target) in CAPABILITY


#: Top-level packages that exist for NVIDIA or AMD GPUs only (CUDA bindings, GPU management).
_GPU_ONLY_PACKAGES = frozenset({"pycuda", "cupy", "pynvml", "amdsmi"})


def _cuda_module(name: str) -> bool:
    parts = name.split(".")
    return parts[0] != "torch" and ("cuda" in parts or parts[0] in _GPU_ONLY_PACKAGES)


def guards_cuda_only_body(ctx, node: cst.If) -> bool:
    """``node`` tests for CUDA (:func:`positive`) and its body (not nested functions or classes) calls
    a capability query, uses torch's private CUDA bindings (``torch._C._cuda*``) or imports a CUDA-only
    module (a dotted path with a ``cuda`` part outside torch, or :data:`_GPU_ONLY_PACKAGES`)."""
    if not positive(ctx, node.test):
        return False
    stack = [node.body]
    while stack:
        cur = stack.pop()
        if isinstance(cur, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(cur, cst.ImportFrom) and cur.module is not None and _cuda_module(ctx.code(cur.module)):
            return True
        if isinstance(cur, cst.Import) and any(_cuda_module(ctx.code(n.name)) for n in cur.names):
            return True
        if isinstance(cur, cst.Call) and capability_node(ctx, cur):
            return True
        if isinstance(cur, cst.Attribute) and (ctx.qname(cur) or "").startswith("torch._C._cuda"):
            return True  # torch's private CUDA bindings (`torch._C._cuda_isInBadFork()`)
        stack.extend(cur.children)
    return False


def kernel_module(ctx) -> bool:
    """The module loads compiled kernels: a kernel-loader call outside comments (``get_kernel(``,
    ``lazy_load_kernel(``, ``load_<...>kernel<...>(``, ``cpp_extension.load(``/``load_inline(``), or an
    import of a CUDA-only module (see :func:`guards_cuda_only_body`)."""
    if any(_cuda_module(v) for v in ctx.aliases.values()):
        return True
    return bool(_KERNEL_LOADER.search(ctx.source))


def _device_test(ctx, node) -> bool:
    """A CUDA device test: ``x.is_cuda``, ``<x> == "cuda"`` or ``<x> != "cuda"``."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        node = node.expression
    if isinstance(node, cst.Attribute):
        return node.attr.value == "is_cuda"
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1 \
            and isinstance(node.comparisons[0].operator, (cst.Equal, cst.NotEqual)):
        return _is_cuda_literal(node.left) or _is_cuda_literal(node.comparisons[0].comparator)
    return False


def _kernel_object_test(node) -> bool:
    """``<name> is not None`` / ``<name> is None`` where the name has a ``cuda`` or ``kernel`` word."""
    if not isinstance(node, cst.Comparison) or len(node.comparisons) != 1 \
            or not isinstance(node.comparisons[0].operator, (cst.Is, cst.IsNot)) \
            or not (isinstance(node.comparisons[0].comparator, cst.Name) and node.comparisons[0].comparator.value == "None"):
        return False
    ident = _identifier(node.left)
    return ident is not None and bool(_words(ident) & _KERNEL_WORD)


def _cuda_check_call(node) -> bool:
    """A call of a function named for a CUDA check (``check_cuda_p2p_ib_support()``), under ``not``
    or not; a library probe (``is_torch_cuda_available()``) is not one."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        node = node.expression
    if not isinstance(node, cst.Call):
        return False
    name = _callee(node)
    return "cuda" in _words(name) and not _PROBE_NAME.match(name)


def _version_test(node) -> bool:
    if isinstance(node, cst.UnaryOperation):
        node = node.expression
    target = node.func if isinstance(node, cst.Call) else node
    ident = _identifier(target)
    return ident is not None and bool(_VERSION.search(ident))


def _calls_capability(ctx, node) -> bool:
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Call) and capability_node(ctx, cur):
            return True
        stack.extend(cur.children)
    return False


def capability_guard_nodes(ctx, node: cst.BooleanOperation) -> List[cst.CSTNode]:
    """For an ``and`` chain whose CUDA operands come before a capability query (``x.device.type ==
    "cuda" and torch.cuda.get_device_capability(x.device) >= (8, 0)``): those CUDA operands (and the
    comparisons' left sides), which guard the query and are not reported; else ``[]``."""
    if not isinstance(node.operator, cst.And):
        return []
    ops = _operands(node, cst.And)
    last = max((i for i, o in enumerate(ops) if _calls_capability(ctx, o)), default=-1)
    out = []
    for o in ops[:max(last, 0)]:
        if cuda_operand(ctx, o) or _device_test(ctx, o):
            out.append(o)
            if isinstance(o, cst.Comparison):
                out.append(o.left)
    return out


def kernel_gate_nodes(ctx, node: cst.BooleanOperation) -> List[cst.CSTNode]:
    """For an ``and``/``or`` chain holding a CUDA device test and either a kernel-object test
    (:func:`_kernel_object_test`), a CUDA check (:func:`_cuda_check_call`) or, in an ``and`` chain, a
    torch-version test (a name or call with a
    ``version``/``greater``/``_than_`` word): the device tests (and ``.is_cuda`` attributes), which are
    not reported; else ``[]``."""
    ops = _operands(node, type(node.operator))
    tests = [o for o in ops if _device_test(ctx, o)]
    if not tests:
        return []
    if not any(_kernel_object_test(o) or _cuda_check_call(o) for o in ops) and not (
            isinstance(node.operator, cst.And) and any(_version_test(o) for o in ops)):
        return []
    out = []
    for t in tests:
        t = t.expression if isinstance(t, cst.UnaryOperation) else t
        out.append(t)
        if isinstance(t, cst.Comparison):
            out.append(t.left)
    return out


#: Keyword words that make an argument a placement, not an option (still reported).
_PLACEMENT_WORDS = frozenset({"device", "devices", "map", "location", "pin", "memory", "backend", "dev"})


def cuda_only_option(ctx, path: list) -> bool:
    """``path`` (module first) runs through the test of ``kw=<v> if <CUDA device test> else None``, a
    keyword argument that is not a placement (:data:`_PLACEMENT_WORDS`)."""
    for a, child, grandchild in zip(path, path[1:], path[2:]):
        if isinstance(a, cst.Arg) and a.keyword is not None and child is a.value and isinstance(child, cst.IfExp) \
                and grandchild is child.test and isinstance(child.orelse, cst.Name) and child.orelse.value == "None" \
                and _device_test(ctx, child.test) and not _words(a.keyword.value) & _PLACEMENT_WORDS:
            return True
    return False


#: Libraries that run on NVIDIA GPUs only, by their own documentation (top-level import names).
CUDA_ONLY_LIBRARIES = frozenset({
    # Megatron Core's install guide (docs.nvidia.com/megatron-core/developer-guide/latest/get-started/
    # install.html): "Software Requirements: CUDA/cuDNN/NCCL", hardware "NVIDIA Turing architecture or later".
    "megatron",
    # Transformer Engine's documentation (docs.nvidia.com/deeplearning/transformer-engine): "a library for
    # accelerating Transformer models on NVIDIA GPUs".
    "transformer_engine",
    # Torch-TensorRT's documentation (docs.pytorch.org/TensorRT): "an inference compiler for PyTorch,
    # targeting NVIDIA GPUs via NVIDIA's TensorRT Deep Learning Optimizer and Runtime".
    "torch_tensorrt", "tensorrt",
    # EETQ, as documented by transformers (docs/source/en/quantization/eetq.md): "int8 weight-only
    # per-channel quantization for NVIDIA GPUs ... CUDA 11.4+ is required for EETQ".
    "eetq",
})
#: Words of a base class that make a class an implementation of an accelerator interface.
_INTERFACE_WORDS = frozenset({"accelerator", "platform", "backend", "device"})
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def name_words(name: str) -> set:
    """``CUDAAccelerator`` -> {cuda, accelerator}; ``CUDA_Accelerator`` the same; ``get_gpu_info`` -> {get, gpu,
    info}. Used by :mod:`neuron_conformance.migrate.reach` and :mod:`neuron_conformance.migrate.cuda_arms` too."""
    return {w.lower() for part in name.split("_") for w in _CAMEL.findall(part)}


def _library_import(node) -> bool:
    if isinstance(node, cst.ImportFrom):
        if node.relative or node.module is None:
            return False
        names = [node.module]
    elif isinstance(node, cst.Import):
        names = [a.name for a in node.names]
    else:
        return False
    return any(_dotted_head(n) in CUDA_ONLY_LIBRARIES for n in names)


def _dotted_head(node) -> str:
    while isinstance(node, cst.Attribute):
        node = node.value
    return node.value if isinstance(node, cst.Name) else ""


def _cuda_interface_class(node) -> bool:
    """``class CUDAAccelerator(Accelerator):``: a class named for CUDA whose base is named for an
    accelerator interface."""
    if not isinstance(node, cst.ClassDef) or "cuda" not in name_words(node.name.value):
        return False
    return any(_identifier(b.value) and name_words(_identifier(b.value)) & _INTERFACE_WORDS for b in node.bases)


def _base_names(node: cst.ClassDef) -> List[str]:
    return [n for n in (_identifier(b.value) for b in node.bases if b.keyword is None) if n]


def _cuda_specialization(node) -> bool:
    """``class CUDAOpBuilder(OpBuilder):``, ``class CudaPlatform(Platform):``: a class whose name's
    words are a base's words plus ``cuda`` (the CUDA specialization of that base)."""
    if not isinstance(node, cst.ClassDef):
        return False
    words = name_words(node.name.value)
    if "gpu" in words and "cuda" not in words:  # `DeviceGPU(Device)` whose body is CUDA code (composer 0.32.1)
        return any((base := name_words(b)) and "gpu" not in base and words == base | {"gpu"}
                   for b in _base_names(node)) and _uses_torch_cuda(node)
    return "cuda" in words and any((base := name_words(b)) and "cuda" not in base and words == base | {"cuda"}
                                   for b in _base_names(node))


def _uses_torch_cuda(node) -> bool:
    """``node``'s code names ``torch.cuda`` (a GPU class that is CUDA's: session 13, composer's ``DeviceGPU``
    next to ``DeviceMPS``/``DeviceNeuron``; a GPU class that uses no ``torch.cuda`` is not taken for CUDA's)."""
    for n in walk_in_scope(node, skip_scopes=False):
        if isinstance(n, cst.Attribute) and n.attr.value == "cuda" and isinstance(n.value, cst.Name) \
                and n.value.value == "torch":
            return True
    return False


#: Text without which :func:`cuda_only_scopes` finds no component scope: a library name, a class
#: named for CUDA, a method ``cuda`` (a pre-check only: it never changes the answer, it skips the walk).
_SCOPE_HINT = re.compile(r"\b(" + "|".join(sorted(CUDA_ONLY_LIBRARIES)) + r")\b|\bdef\s+cuda\b|\bclass\s+\w*(cuda|gpu)",
                         re.I)
#: The same for :func:`_sanity_checks` (an ``assert`` statement).
_CHECK_HINT = re.compile(r"\bassert\b")
_CUDA_WORD = re.compile(r"\bcuda\b", re.I)


def _message_names_cuda(msg) -> bool:
    """The text of ``msg`` (string literals, an f-string's text) has the word ``cuda``."""
    stack = [msg]
    while stack:
        cur = stack.pop()
        text = string_value(cur) if isinstance(cur, cst.SimpleString) else \
            cur.value if isinstance(cur, cst.FormattedStringText) else None
        if text and _CUDA_WORD.search(text):
            return True
        stack.extend(cur.children)
    return False


def _cuda_assert(small) -> bool:
    """``assert <cond>, "<text naming CUDA>"``."""
    return isinstance(small, cst.Assert) and small.msg is not None and _message_names_cuda(small.msg)


def _sanity_checks(ctx) -> set:
    """The ids of the tests of CUDA-specific sanity checks (module docstring, class 9): the test of
    ``if <CUDA test>:`` whose body is one CUDA check, and the CUDA test of a CUDA check."""
    out, stack = set(), [ctx.module]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.SimpleStatementLine):
            out.update(id(s.test) for s in node.body if _cuda_assert(s) and positive(ctx, s.test))
            continue
        if isinstance(node, cst.If) and node.orelse is None and isinstance(node.body, cst.IndentedBlock) \
                and len(node.body.body) == 1 and isinstance(node.body.body[0], cst.SimpleStatementLine) \
                and len(node.body.body[0].body) == 1 and _cuda_assert(node.body.body[0].body[0]) \
                and positive(ctx, node.test):
            out.add(id(node.test))
        stack.extend(c for c in node.children if not isinstance(c, cst.BaseExpression))
    return out


def cuda_only_scopes(ctx) -> set:
    """The ids of the scopes (the module, a class body, functions) that serve a CUDA-only component
    (module docstring, class 8) and of the tests of CUDA-specific sanity checks (class 9): a finding
    below one of them is not reported."""
    out = _sanity_checks(ctx) if _CHECK_HINT.search(ctx.source) else set()
    if not _SCOPE_HINT.search(ctx.source):
        return out
    scopes, module_level, interface, classes = set(), False, False, []
    defined = {c.name.value for c in ctx.module.body if isinstance(c, cst.ClassDef)}
    stack = [(ctx.module, None, None)]  # (node, enclosing function, enclosing class)
    while stack:
        node, func, cls = stack.pop()
        if _library_import(node):
            if func is None:
                module_level = True
            else:
                scopes.add(func)
            continue
        if isinstance(node, cst.ClassDef):
            if func is None and cls is None and (_cuda_interface_class(node) or _cuda_specialization(node)):
                if _cuda_interface_class(node) and not defined.intersection(_base_names(node)):
                    interface = True  # the module implements an interface defined elsewhere
                else:
                    classes.append(node)  # the module also holds the generic base: the class alone
            stack.extend((c, func, node) for c in node.children)
            continue
        if isinstance(node, cst.FunctionDef):
            if cls is not None and func is None and node.name.value == "cuda" and node.params.params \
                    and node.params.params[0].name.value == "self":
                scopes.add(node)  # an override of `nn.Module.cuda`: its contract is CUDA
                continue
            stack.extend((c, node, cls) for c in node.children)
            continue
        stack.extend((c, func, cls) for c in node.children)
    out.update(id(f) for f in scopes if f.name.value == "cuda" or not names_other_vendor(f))
    # ROCm runs through a CUDA implementation (it presents itself as CUDA): a ROCm/HIP name there
    # (``torch.version.hip``) does not make it per-vendor code; another vendor's name still does.
    out.update(id(c.body) for c in classes if not names_other_vendor(c, rocm=False))
    if module_level and not names_other_vendor(ctx.module) \
            or interface and not names_other_vendor(ctx.module, rocm=False):
        out.add(id(ctx.module))
    return out
