"""CUDA-only components: code that serves a library, class, tool or option that exists for NVIDIA GPUs only.

* **a CUDA-only component's scope** (:func:`cuda_only_scopes`): a module that imports a library which,
  by its own documentation, runs on NVIDIA GPUs only (:data:`CUDA_ONLY_LIBRARIES`: Megatron, Transformer
  Engine, Torch-TensorRT, EETQ) at module level, or a function that imports one; a module that
  implements an accelerator interface for CUDA (``class CUDAAccelerator(Accelerator):``, ``class
  CudaPlatform(Platform):``); a method named ``cuda`` (an override of ``nn.Module.cuda``, whose contract is
  "move to CUDA"). A module or function that also names another accelerator is not such a scope; neither
  is a class named for CUDA whose base is not an accelerator interface, nor a plain function named for
  CUDA (``def to_cuda(batch)`` in a training script is exactly what a migration fixes). A ROCm/HIP name
  does not disqualify a CUDA interface implementation (ROCm presents itself as CUDA and runs through it).
  A **CUDA specialization**, a module-level class whose name's words are its base's words plus ``cuda``
  (``CUDAOpBuilder(OpBuilder)``), serves CUDA: its body is a scope; when the module also defines the base,
  only the CUDA class's body is. ``CUDAFusedOpBuilder(OpBuilder)`` (another word) is no specialization.
* **a CUDA type's branch** (:func:`cuda_type_branch`): the body of ``if isinstance(self, CUDAOpBuilder)``:
  only an object of the CUDA implementation takes it. An ``isinstance`` test against any other class is
  still reported.
* **the guard of a CUDA-only body** (:func:`guards_cuda_only_body`): ``if torch.cuda.is_available():``
  whose body calls a capability query, or calls nothing but CUDA functions with no device-generic equivalent
  (``torch.cuda.memory._record_memory_history()``), uses torch's private CUDA bindings or imports a module whose dotted
  path has a ``cuda`` part outside torch (``from cuda import cudart``): widening it would run the
  CUDA-only body on every accelerator.
* **a CUDA-only option** (:func:`cuda_only_option`): ``torch.linalg.svd(a, driver="gesvd" if a.is_cuda
  else None)``: a keyword given a value only on CUDA and its default everywhere else; a device,
  location, pinning or backend argument is placement and still reported.
* **a CUDA-only component named in a branch or a value** (:func:`component_branch`,
  :func:`component_value`, :func:`nvidia_tool_scope`, :func:`cuda_keyed_version`): the CUDA branch of a
  test that only names a CUDA build of a package (``"paddlepaddle-gpu>=3"``) or NVML, nvidia-smi,
  TensorRT; a value read only by statements naming such a component; a function named for CUDA or GPUs
  that runs ``nvidia-smi``; ``torch.version.cuda`` stored under a key naming CUDA. A branch that does
  anything else, a name read elsewhere, or the version under another key is still reported.
"""

from __future__ import annotations

import re
from typing import List

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.exemptions.blocks import assigned, later_reads
from neuron_conformance.migrate.exemptions.cuda_tests import (
    capability_node,
    device_test,
    no_generic_equivalent,
    positive,
)
from neuron_conformance.migrate.exemptions.names import (
    cuda_only_module,
    identifier,
    name_words,
    names_in,
    names_other_vendor,
    word_set,
)
from neuron_conformance.migrate.exemptions.registry import ANCESTOR, FINDING, MODULE, STEP, exemption
from neuron_conformance.migrate.traversal import and_operands, walk_in_scope

#: Libraries that run on NVIDIA GPUs only, by their own documentation (top-level import names).
CUDA_ONLY_LIBRARIES = frozenset(
    {
        # Megatron Core's install guide (docs.nvidia.com/megatron-core/developer-guide/latest/get-started/
        # install.html): "Software Requirements: CUDA/cuDNN/NCCL", hardware "NVIDIA Turing architecture or later".
        "megatron",
        # Transformer Engine's documentation (docs.nvidia.com/deeplearning/transformer-engine): "a library for
        # accelerating Transformer models on NVIDIA GPUs".
        "transformer_engine",
        # Torch-TensorRT's documentation (docs.pytorch.org/TensorRT): "an inference compiler for PyTorch,
        # targeting NVIDIA GPUs via NVIDIA's TensorRT Deep Learning Optimizer and Runtime".
        "torch_tensorrt",
        "tensorrt",
        # EETQ, as documented by transformers (docs/source/en/quantization/eetq.md): "int8 weight-only
        # per-channel quantization for NVIDIA GPUs ... CUDA 11.4+ is required for EETQ".
        "eetq",
    }
)
#: Words of a base class that make a class an implementation of an accelerator interface.
_INTERFACE_WORDS = frozenset({"accelerator", "platform", "backend", "device"})
#: Keyword words that make an argument a placement, not an option (still reported).
_PLACEMENT_WORDS = frozenset({"device", "devices", "map", "location", "pin", "memory", "backend", "dev"})
#: Text naming a CUDA-only component, or a requirement on a CUDA build of a package.
_COMPONENT = re.compile(r"\b(tensorrt|nvml|pynvml|nvidia-smi)|^[A-Za-z0-9_.]+-(gpu|cuda\w*|cu\d+\w*)(?![\w-])", re.I)


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
    return any(identifier(b.value) and name_words(identifier(b.value)) & _INTERFACE_WORDS for b in node.bases)


def _base_names(node: cst.ClassDef) -> List[str]:
    return [n for n in (identifier(b.value) for b in node.bases if b.keyword is None) if n]


def _cuda_specialization(node) -> bool:
    """``class CUDAOpBuilder(OpBuilder):``, ``class CudaPlatform(Platform):``: a class whose name's
    words are a base's words plus ``cuda`` (the CUDA specialization of that base)."""
    if not isinstance(node, cst.ClassDef):
        return False
    words = name_words(node.name.value)
    if "gpu" in words and "cuda" not in words:  # `DeviceGPU(Device)` whose body is CUDA code (composer 0.32.1)
        return any(
            (base := name_words(b)) and "gpu" not in base and words == base | {"gpu"} for b in _base_names(node)
        ) and _uses_torch_cuda(node)
    return "cuda" in words and any(
        (base := name_words(b)) and "cuda" not in base and words == base | {"cuda"} for b in _base_names(node)
    )


def _uses_torch_cuda(node) -> bool:
    """``node``'s code names ``torch.cuda`` (a GPU class that is CUDA's: composer 0.32.1's ``DeviceGPU``
    next to ``DeviceMPS``/``DeviceNeuron``; a GPU class that uses no ``torch.cuda`` is not taken for CUDA's)."""
    for n in walk_in_scope(node, skip_scopes=False):
        if (
            isinstance(n, cst.Attribute)
            and n.attr.value == "cuda"
            and isinstance(n.value, cst.Name)
            and n.value.value == "torch"
        ):
            return True
    return False


#: Text without which :func:`cuda_only_scopes` finds no component scope: a library name, a class
#: named for CUDA, a method ``cuda`` (a pre-check only: it never changes the answer, it skips the walk).
_SCOPE_HINT = re.compile(
    r"\b(" + "|".join(sorted(CUDA_ONLY_LIBRARIES)) + r")\b|\bdef\s+cuda\b|\bclass\s+\w*(cuda|gpu)", re.I
)


def cuda_only_scopes(ctx) -> set:
    """The ids of the scopes (the module, a class body, functions) that serve a CUDA-only component
    (module docstring): a finding below one of them is not reported."""
    out = set()
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
            if (
                cls is not None
                and func is None
                and node.name.value == "cuda"
                and node.params.params
                and node.params.params[0].name.value == "self"
            ):
                scopes.add(node)  # an override of `nn.Module.cuda`: its contract is CUDA
                continue
            stack.extend((c, node, cls) for c in node.children)
            continue
        stack.extend((c, func, cls) for c in node.children)
    out.update(id(f) for f in scopes if f.name.value == "cuda" or not names_other_vendor(f))
    # ROCm runs through a CUDA implementation (it presents itself as CUDA): a ROCm/HIP name there
    # (``torch.version.hip``) does not make it per-vendor code; another vendor's name still does.
    out.update(id(c.body) for c in classes if not names_other_vendor(c, rocm=False))
    if (
        module_level
        and not names_other_vendor(ctx.module)
        or interface
        and not names_other_vendor(ctx.module, rocm=False)
    ):
        out.add(id(ctx.module))
    return out


def _only_calls_without_generic_equivalent(ctx, node: cst.If) -> bool:
    """Every statement of ``node``'s body (no ``else``) calls a CUDA function with no device-generic
    equivalent (:func:`no_generic_equivalent`): nothing else in the block would be left on the CPU."""
    if node.orelse is not None:
        return False
    stmts = node.body.body if isinstance(node.body, cst.IndentedBlock) else [node.body]
    parts = [p for s in stmts for p in (s.body if isinstance(s, cst.SimpleStatementLine) else [s])]
    return bool(parts) and all(isinstance(p, cst.Expr) and no_generic_equivalent(ctx, p.value) for p in parts)


def guards_cuda_only_body(ctx, node: cst.If) -> bool:
    """``node`` tests for CUDA (:func:`positive`) and its body (not nested functions or classes) calls
    a capability query, uses torch's private CUDA bindings (``torch._C._cuda*``) or imports a CUDA-only
    module (a dotted path with a ``cuda`` part outside torch, or :data:`GPU_ONLY_PACKAGES`), or holds only
    calls of CUDA functions with no device-generic equivalent (``torch.cuda.memory._record_memory_history()``:
    :func:`_only_calls_without_generic_equivalent`; a body that also moves a model keeps its test reported)."""
    if not positive(ctx, node.test):
        return False
    if _only_calls_without_generic_equivalent(ctx, node):
        return True
    stack = [node.body]
    while stack:
        cur = stack.pop()
        if isinstance(cur, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(cur, cst.ImportFrom) and cur.module is not None and cuda_only_module(ctx.code(cur.module)):
            return True
        if isinstance(cur, cst.Import) and any(cuda_only_module(ctx.code(n.name)) for n in cur.names):
            return True
        if isinstance(cur, cst.Call) and capability_node(ctx, cur):
            return True
        if isinstance(cur, cst.Attribute) and (ctx.qname(cur) or "").startswith("torch._C._cuda"):
            return True  # torch's private CUDA bindings (`torch._C._cuda_isInBadFork()`)
        stack.extend(cur.children)
    return False


def cuda_only_option(ctx, path: list) -> bool:
    """``path`` (module first) runs through the test of ``kw=<v> if <CUDA device test> else None``, a
    keyword argument that is not a placement (:data:`_PLACEMENT_WORDS`)."""
    for a, child, grandchild in zip(path, path[1:], path[2:]):
        if (
            isinstance(a, cst.Arg)
            and a.keyword is not None
            and child is a.value
            and isinstance(child, cst.IfExp)
            and grandchild is child.test
            and isinstance(child.orelse, cst.Name)
            and child.orelse.value == "None"
            and device_test(ctx, child.test)
            and not word_set(a.keyword.value) & _PLACEMENT_WORDS
        ):
            return True
    return False


def cuda_type_branch(ctx, node: cst.If, child) -> bool:
    """``child`` is the body of ``node``, whose test (or one of its ``and`` operands) is
    ``isinstance(x, <class named for CUDA>)``."""
    if not isinstance(node, cst.If) or child is not node.body:
        return False
    for op in and_operands(node.test):
        if (
            isinstance(op, cst.Call)
            and isinstance(op.func, cst.Name)
            and op.func.value == "isinstance"
            and len(op.args) == 2
        ):
            cls = op.args[1].value
            name = cls.attr.value if isinstance(cls, cst.Attribute) else cls.value if isinstance(cls, cst.Name) else ""
            if "cuda" in name_words(name):
                return True
    return False


def _names_component(node) -> bool:
    return any(_COMPONENT.search(n) for n in names_in(node))


def _only_component(node) -> bool:
    """``node`` (a branch) names a CUDA-only component and has no statement that does not: every
    statement of a block (or the expression) names one."""
    if isinstance(node, cst.IndentedBlock):
        return bool(node.body) and all(_names_component(s) for s in node.body)
    return _names_component(node)


def component_branch(ctx, a, child) -> bool:
    """``child`` is the CUDA branch of ``a`` and only names a CUDA-only component."""
    return isinstance(a, (cst.If, cst.IfExp)) and child is a.test and positive(ctx, a.test) and _only_component(a.body)


def component_value(ctx, block, stmt) -> bool:
    """``stmt`` is ``name = <value>`` and every later read of ``name`` is in a statement naming a CUDA-only component."""
    hit = assigned(stmt)
    if hit is None:
        return False
    reads = later_reads(block, stmt, hit[0])
    return bool(reads) and all(_names_component(r.test if isinstance(r, cst.If) else r) for r in reads)


def nvidia_tool_scope(ctx, func: cst.FunctionDef) -> bool:
    """A function named for CUDA or GPUs (``cuda_device_count``) that runs NVIDIA's ``nvidia-smi`` (a
    string literal naming it) and names no other vendor. A function with another name that also runs
    it (an environment report) is still reported."""
    if "nvidia-smi" not in ctx.source or not {"cuda", "gpu", "gpus", "nvidia"} & set(
        func.name.value.lower().split("_")
    ):
        return False
    return any(
        isinstance(n, cst.SimpleString) and (string_value(n) or "").startswith("nvidia-smi")
        for n in walk_in_scope(func)
    ) and not names_other_vendor(func)


def cuda_keyed_version(ctx, path: list) -> bool:
    """``torch.version.cuda`` in the value of a dict entry or subscript assignment whose key names CUDA."""
    if ctx.qname(path[-1]) != "torch.version.cuda":
        return False
    for a in reversed(path[:-1]):
        key = None
        if isinstance(a, cst.DictElement):
            key = a.key
        elif isinstance(a, cst.Assign) and len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Subscript):
            sl = a.targets[0].target.slice
            key = sl[0].slice.value if sl and isinstance(sl[0].slice, cst.Index) else None
        if key is not None:
            text = string_value(key) or ""
            return bool(re.search(r"(^|[^a-z])cuda([^a-z]|$)", text, re.I))
        if isinstance(a, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return False
    return False


# ----------------------------------------------------------------------------- registered exemptions
@exemption(
    "CUDA-only component scope",
    scope=MODULE,
    fact=cuda_only_scopes,
    code="NM201",
    quiet=(
        "import torch\nimport transformer_engine.pytorch as te\n"
        "def step(layer, x):\n    out = layer(x)\n    torch.cuda.synchronize()\n    return out\n"
    ),
    near_miss=(
        "import torch\nimport apex\n"
        "def step(layer, x):\n    out = layer(x)\n    torch.cuda.synchronize()\n    return out\n"
    ),
)
def _component_scope(view, scopes: set) -> bool:
    """Everything in a scope that serves a CUDA-only component (:func:`cuda_only_scopes`): a module or
    function importing a CUDA-only library, a CUDA implementation of an accelerator interface, a CUDA
    specialization's body, a ``cuda`` method."""
    return bool(scopes) and any(id(a) in scopes for a in view.ancestors)


@exemption(
    "CUDA-only component named in a version",
    scope=FINDING,
    code="NM808",
    quiet="import torch\nINFO = {'CUDA': torch.version.cuda}\n",
    near_miss="import torch\nINFO = {'version': torch.version.cuda}\n",
)
def _cuda_keyed_version(view) -> bool:
    """``torch.version.cuda`` stored under a key naming CUDA (:func:`cuda_keyed_version`): CUDA's version
    under its own label."""
    return cuda_keyed_version(view.ctx, view.full)


@exemption(
    "CUDA-only option",
    scope=FINDING,
    code="NM112",
    quiet="import torch\ndef f(a):\n    return torch.linalg.svd(a, driver='gesvd' if a.is_cuda else None)\n",
    near_miss="import torch\ndef f(a):\n    return torch.ones(2, device='cuda' if a.is_cuda else None)\n",
)
def _cuda_only_option(view) -> bool:
    """The CUDA test of ``kw=<v> if <CUDA device test> else None`` for a keyword that is not a placement
    (:func:`cuda_only_option`)."""
    return cuda_only_option(view.ctx, view.path)


@exemption(
    "NVIDIA tool scope",
    scope=STEP,
    group="arms",
    code="NM103",
    quiet=(
        "import subprocess, torch\ndef gpu_count():\n"
        "    out = subprocess.run(['nvidia-smi', '-L'], capture_output=True)\n"
        "    return torch.cuda.device_count() or len(out.stdout.splitlines())\n"
    ),
    near_miss=(
        "import subprocess, torch\ndef env_report():\n"
        "    out = subprocess.run(['nvidia-smi', '-L'], capture_output=True)\n"
        "    return torch.cuda.device_count() or len(out.stdout.splitlines())\n"
    ),
)
def _nvidia_tool_scope(view, i: int) -> bool:
    """A function named for CUDA or GPUs that runs ``nvidia-smi`` (:func:`nvidia_tool_scope`): its CUDA
    calls serve NVIDIA's tool."""
    a = view.full[i]
    return isinstance(a, cst.FunctionDef) and nvidia_tool_scope(view.ctx, a)


@exemption(
    "CUDA type branch",
    scope=STEP,
    group="arms",
    code="NM201",
    quiet=(
        "import torch\ndef build(self):\n    if isinstance(self, CUDAOpBuilder):\n        torch.cuda.synchronize()\n"
    ),
    near_miss=(
        "import torch\ndef build(self):\n    if isinstance(self, OpBuilder):\n        torch.cuda.synchronize()\n"
    ),
)
def _cuda_type_branch(view, i: int) -> bool:
    """The body of ``if isinstance(x, <class named for CUDA>)`` (:func:`cuda_type_branch`): only an object
    of the CUDA implementation takes it."""
    return cuda_type_branch(view.ctx, view.full[i], view.full[i + 1])


@exemption(
    "CUDA-only component branch",
    scope=STEP,
    group="arms",
    code="NM101",
    quiet=(
        "import torch\ndef requirement():\n    if torch.cuda.is_available():\n"
        "        return 'paddlepaddle-gpu>=3'\n    return 'paddlepaddle>=3'\n"
    ),
    near_miss=(
        "import torch\ndef requirement():\n    if torch.cuda.is_available():\n"
        "        return 'paddlepaddle>=3'\n    return 'paddlepaddle-lite>=3'\n"
    ),
)
def _component_branch(view, i: int) -> bool:
    """The CUDA test of a branch that only names a CUDA-only component (:func:`component_branch`)."""
    return component_branch(view.ctx, view.full[i], view.full[i + 1])


@exemption(
    "value stored for a CUDA-only component",
    scope=STEP,
    group="arms",
    code="NM808",
    quiet=(
        "import torch\ndef trt_ok(check):\n    major = (torch.version.cuda or '12').split('.')[0]\n"
        "    return check(f'tensorrt-cu{major}')\n"
    ),
    near_miss=(
        "import torch\ndef trt_ok(check):\n    major = (torch.version.cuda or '12').split('.')[0]\n"
        "    return check(major)\n"
    ),
)
def _component_value(view, i: int) -> bool:
    """A value stored in a name read only by statements naming a CUDA-only component
    (:func:`component_value`)."""
    a = view.full[i]
    return isinstance(a, (cst.IndentedBlock, cst.Module)) and component_value(view.ctx, a, view.full[i + 1])


@exemption(
    "guard of a CUDA-only body",
    scope=ANCESTOR,
    code="NM101",
    quiet="import torch\nif torch.cuda.is_available():\n    from cuda import cudart\n",
    near_miss="import torch\nif torch.cuda.is_available():\n    import apex\n",
)
def _guards_cuda_only_body(view, i: int) -> bool:
    """The test of ``if <CUDA test>:`` whose body asks a capability query, uses torch's private CUDA
    bindings or imports a CUDA-only module (:func:`guards_cuda_only_body`)."""
    a = view.ancestors[i]
    if not isinstance(a, cst.If):
        return False
    hit = view.memo(("cuda-only body", id(a)), lambda: guards_cuda_only_body(view.ctx, a))
    child = view.child(i)
    return bool(hit) and child is not None and child is a.test
