"""CUDA code that is deliberately CUDA-specific, and so is not reported (issue 17, precision).

Two shapes, both read in real code (transformers, accelerate, diffusers):

* **the CUDA branch of an explicit per-vendor chain**: ``if torch.cuda.is_available(): ...
  elif torch.xpu.is_available(): ... elif is_torch_npu_available(): ...``. The author already
  handles each accelerator by name; rewriting the CUDA branch to ``torch.accelerator`` would make
  it catch every accelerator before the other branches are reached. The test and the body of the
  CUDA branch are skipped (the other branches are checked as usual).
* **a CUDA sanity check**: ``device == "cuda" and not torch.cuda.is_available()`` (usually
  followed by ``raise``). It asks whether CUDA itself was requested and is missing; on another
  accelerator the request is not "cuda" and the check is correctly false.

* **a test that names another accelerator too**: ``not torch.cuda.is_available() and not
  is_torch_xpu_available()``, ``x.device.type in ("cuda", "xpu")``: the author lists the
  accelerators a code path supports; widening the CUDA part would claim support for the others.
* **an ONNX Runtime device**: a test that also mentions an execution provider
  (``"cuda" if torch.cuda.is_available() and "CUDAExecutionProvider" in available else "cpu"``)
  picks the device for ONNX Runtime's CUDA provider, which has no torch.accelerator counterpart.

* **a CUDA requirement**: ``if not torch.cuda.is_available(): raise ...("... requires CUDA")``,
  where the message names CUDA or a GPU: the code after it needs CUDA itself (a CUDA-only
  kernel library or quantisation format); and the body of a predicate named for CUDA
  (``def is_torch_cuda_available():``, ``require_torch_cuda``).

* **per-vendor statements**: a statement naming CUDA next to statements naming other accelerators
  (:func:`vendor_siblings`); **an old-torch fallback**: the CUDA branch of a conditional whose other
  branch already uses a device-generic API (:func:`generic_alternative`); **ONNX Runtime modules**
  (:func:`onnx_runtime_module`); capability requirements that raise naming a GPU or compute
  capability (:func:`cuda_requirement`); predicates named for CUDA or GPUs (``require_torch_gpu``).

Public API: :func:`cuda_branch_of_vendor_chain`, :func:`cuda_requirement`, :func:`cuda_predicate`,
:func:`sanity_check_nodes`, :func:`listed_with_other_vendors`, :func:`onnx_runtime_nodes`,
:func:`vendor_siblings`, :func:`generic_alternative`, :func:`onnx_runtime_module`. Used by :mod:`neuron_conformance.migrate.rule_pass`.
"""
from __future__ import annotations

import re
from typing import List

import libcst as cst

from neuron_conformance.migrate.args import string_value

#: Another vendor named in a test: a torch submodule, a helper such as is_torch_npu_available(),
#: or a device-type literal.
_OTHER_VENDOR = re.compile(r"(^|[._])(xpu|npu|ascend|mps|mlu|hpu|musa|neuron|xla|mtia|sdaa|gcu)($|[._])", re.I)
_CUDA_PROBES = {"torch.cuda.is_available", "torch.cuda.device_count"}


def _names_in(node: cst.CSTNode) -> List[str]:
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
        stack.extend(cur.children)
    return out


#: A library's own CUDA probe (``is_torch_cuda_available()`` in transformers, accelerate, diffusers).
_CUDA_PROBE_NAME = re.compile(r"^is_\w*cuda\w*_available$")


def _callee(call: cst.Call) -> str:
    """The last name of a call's function (``x.y.f(...)`` -> ``f``), else ``""``."""
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else ""


def _tests_cuda(ctx, test: cst.CSTNode) -> bool:
    stack = [test]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Call) and (ctx.qname(cur.func) in _CUDA_PROBES or _CUDA_PROBE_NAME.match(_callee(cur))):
            return True
        if isinstance(cur, cst.SimpleString) and string_value(cur) == "cuda":
            return True
        stack.extend(cur.children)
    return False


def _tests_other_vendor(test: cst.CSTNode) -> bool:
    return any(_OTHER_VENDOR.search(n) for n in _names_in(test))


def cuda_branch_of_vendor_chain(ctx, node: cst.If) -> bool:
    """True when ``node`` tests for CUDA and another ``if``/``elif`` of the same chain tests for
    another named accelerator (the chain is followed through ``orelse`` both ways)."""
    if not _tests_cuda(ctx, node.test):
        return False
    cur = node.orelse
    while isinstance(cur, cst.If):
        if _tests_other_vendor(cur.test):
            return True
        cur = cur.orelse
    child, parent = node, ctx.parent(node)
    while isinstance(parent, cst.If) and parent.orelse is child:
        if _tests_other_vendor(parent.test):
            return True
        child, parent = parent, ctx.parent(parent)
    return False


def _and_operands(node: cst.CSTNode) -> List[cst.CSTNode]:
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And) and not node.lpar:
        return _and_operands(node.left) + _and_operands(node.right)
    return [node]


def sanity_check_nodes(ctx, node: cst.BooleanOperation) -> List[cst.CSTNode]:
    """For ``<x> == "cuda" and not torch.cuda.is_available()`` (either order, within a longer
    ``and``): the comparison and the call, whose findings are not reported; else ``[]``."""
    if not isinstance(node.operator, cst.And):
        return []
    operands = _and_operands(node)
    comparisons = [o for o in operands if isinstance(o, cst.Comparison) and len(o.comparisons) == 1
                   and isinstance(o.comparisons[0].operator, cst.Equal)
                   and "cuda" in (string_value(o.left), string_value(o.comparisons[0].comparator))]
    probes = [o.expression for o in operands if isinstance(o, cst.UnaryOperation) and isinstance(o.operator, cst.Not)
              and isinstance(o.expression, cst.Call) and ctx.qname(o.expression.func) == "torch.cuda.is_available"]
    if comparisons and probes:
        return comparisons + probes
    return []


def _cuda_parts(ctx, node: cst.CSTNode) -> List[cst.CSTNode]:
    """The CUDA probes (``torch.cuda.is_available()`` calls) and ``"cuda"`` comparisons in ``node``."""
    out, stack = [], [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Call) and ctx.qname(cur.func) in _CUDA_PROBES:
            out.append(cur)
        elif isinstance(cur, cst.Comparison) and any(string_value(o) == "cuda" for o in
                                                     [cur.left] + [c.comparator for c in cur.comparisons]):
            out.append(cur)
        stack.extend(cur.children)
    return out


def listed_with_other_vendors(ctx, node: cst.BooleanOperation) -> List[cst.CSTNode]:
    """For a boolean test that probes CUDA and names another accelerator (an operand such as
    ``is_torch_xpu_available()`` or ``device == "xpu"``): its CUDA parts, which are not
    reported; else ``[]``."""
    operands = _and_operands(node) if isinstance(node.operator, cst.And) else [node.left, node.right]
    if not any(_tests_other_vendor(o) for o in operands if not _cuda_parts(ctx, o)):
        return []
    return _cuda_parts(ctx, node)


def vendor_list(node: cst.CSTNode) -> bool:
    """``("cuda", "xpu")``: a literal tuple/list/set of strings naming CUDA and another accelerator."""
    if not isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return False
    values = [string_value(e.value) for e in node.elements]
    return "cuda" in values and any(v is not None and v != "cuda" and _OTHER_VENDOR.search(v) for v in values)


def onnx_runtime_nodes(ctx, test: cst.CSTNode) -> List[cst.CSTNode]:
    """When ``test`` mentions an ONNX Runtime execution provider (``"CUDAExecutionProvider"``):
    its CUDA parts, which are not reported; else ``[]``."""
    if not any(n.endswith("ExecutionProvider") for n in _names_in(test)):
        return []
    return _cuda_parts(ctx, test)


_NAMES_CUDA = re.compile(r"\b(cuda|gpu|nvidia|compute capability)\b", re.I)
_PREDICATE = re.compile(r"^_?(is|has|require|requires)_\w*(cuda|gpu)", re.I)
_CAPABILITY = {"torch.cuda.get_device_capability", "torch.cuda.is_bf16_supported", "torch.cuda.get_arch_list"}


def _bool_operands(node: cst.CSTNode) -> List[cst.CSTNode]:
    """The operands of a chain of ``and``/``or`` (not through parentheses)."""
    if isinstance(node, cst.BooleanOperation) and not node.lpar:
        return _bool_operands(node.left) + _bool_operands(node.right)
    return [node]


def _calls_capability(ctx, node: cst.CSTNode) -> bool:
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Call) and ctx.qname(cur.func) in _CAPABILITY:
            return True
        stack.extend(cur.children)
    return False


def cuda_requirement(ctx, node: cst.If) -> bool:
    """``if not torch.cuda.is_available(): raise X("... CUDA ...")``, or a capability test
    (``... and torch.cuda.get_device_capability()[0] < 9: raise ValueError("... requires a GPU with
    compute capability >= 9.0")``); the test may be ``and``/``or``-ed with other conditions, and
    the body is one ``raise`` (or ``return`` of an error-building call, ``return
    maybe_import_error("... requires CUDA")``) whose message names CUDA, a GPU or a compute capability."""
    operands = _bool_operands(node.test)
    if not any(isinstance(o, cst.UnaryOperation) and isinstance(o.operator, cst.Not) and isinstance(o.expression, cst.Call)
               and ctx.qname(o.expression.func) == "torch.cuda.is_available" for o in operands) \
            and not any(_calls_capability(ctx, o) for o in operands):
        return False
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else []
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) \
            or not isinstance(body[0].body[0], (cst.Raise, cst.Return)) \
            or isinstance(body[0].body[0], cst.Return) and not isinstance(body[0].body[0].value, cst.Call):
        return False
    return any(_NAMES_CUDA.search(n) for n in _names_in(body[0]))


def cuda_predicate(node: cst.FunctionDef) -> bool:
    """A function whose name asks about CUDA (``is_torch_cuda_available``, ``require_torch_cuda``)."""
    return bool(_PREDICATE.match(node.name.value))


_GENERIC = ("torch.accelerator.", "torch.Stream", "torch.Event", "torch.get_device_module", "torch.amp.")


def _qnames_in(ctx, node: cst.CSTNode) -> List[str]:
    out, stack = [], [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, (cst.Attribute, cst.Name)):
            q = ctx.qname(cur)
            if q is not None:
                out.append(q)
        stack.extend(cur.children)
    return out


_VERSION_TEST = re.compile(r"version|greater|_than_|torch_\d", re.I)


def generic_alternative(ctx, node: cst.CSTNode, branch: cst.CSTNode) -> bool:
    """For an ``if``/conditional expression ``node`` that tests the torch version and one of its
    branches: True when the other branch already uses a device-generic API (``torch.Stream() if
    _is_torch_greater_or_equal_than_2_7 else torch.cuda.Stream()``): the CUDA branch is a fallback
    for an older torch, not code to migrate."""
    if not any(_VERSION_TEST.search(n) for n in _names_in(node.test)):
        return False
    others = [b for b in (node.body, node.orelse) if b is not None and b is not branch]
    return any(q.startswith(_GENERIC) for b in others for q in _qnames_in(ctx, b))


def _names_cuda(ctx, node: cst.CSTNode) -> bool:
    """A ``torch.cuda``/``torch.version.cuda``/``torch.version.hip`` name, a ``"cuda"`` device
    literal or a ``CUDA_...`` variable name in ``node``."""
    stack = [node]
    while stack:
        cur = stack.pop()
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


def vendor_siblings(ctx, stmt: cst.CSTNode, block) -> bool:
    """``stmt`` (a simple statement line or an ``if``, an element of ``block``) names CUDA, and one
    of the statements next to it (three either way) names another accelerator and not CUDA (a
    statement naming both, such as a device-selection chain, is no evidence): a list of
    per-vendor statements (``pt_cuda = torch.cuda.is_available()`` / ``pt_xpu =
    is_torch_xpu_available()``; ``os.environ["CUDA_LAUNCH_BLOCKING"]`` next to
    ``os.environ["ASCEND_LAUNCH_BLOCKING"]``; ``if device == "cuda": return ...`` then ``if device ==
    "hpu": ...``), whose CUDA entry is deliberate."""
    head = stmt.test if isinstance(stmt, cst.If) else stmt
    if not _names_cuda(ctx, head):
        return False
    try:
        i = next(k for k, s in enumerate(block) if s is stmt)
    except StopIteration:
        return False
    for sib in block[max(0, i - 3):i + 4]:
        sib_head = sib.test if isinstance(sib, cst.If) else sib if isinstance(sib, cst.SimpleStatementLine) else None
        if sib is not stmt and sib_head is not None and _tests_other_vendor(sib_head) \
                and not _names_cuda(ctx, sib_head):
            return True
    return False


def onnx_runtime_module(ctx) -> bool:
    """A module that imports ``onnxruntime`` and names an execution provider: its torch CUDA calls
    (streams, devices) serve ONNX Runtime's CUDA provider, which has no torch.accelerator counterpart."""
    return "ExecutionProvider" in ctx.source and any(v.split(".")[0] == "onnxruntime" for v in ctx.aliases.values())
