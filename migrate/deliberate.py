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

Public API: :func:`cuda_branch_of_vendor_chain`, :func:`cuda_requirement`, :func:`cuda_predicate`,
:func:`sanity_check_nodes`,
:func:`listed_with_other_vendors`, :func:`onnx_runtime_nodes`. Used by :mod:`neuron_conformance.migrate.rule_pass`.
"""
from __future__ import annotations

import re
from typing import List

import libcst as cst

from neuron_conformance.migrate.args import string_value

#: Another vendor named in a test: a torch submodule, a helper such as is_torch_npu_available(),
#: or a device-type literal.
_OTHER_VENDOR = re.compile(r"(^|[._])(xpu|npu|mps|mlu|hpu|musa|neuron|xla|mtia|sdaa|gcu)($|[._])", re.I)
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


def _tests_cuda(ctx, test: cst.CSTNode) -> bool:
    stack = [test]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Call) and ctx.qname(cur.func) in _CUDA_PROBES:
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


_NAMES_CUDA = re.compile(r"\b(cuda|gpu|nvidia)\b", re.I)
_PREDICATE = re.compile(r"^_?(is|has|require|requires)_\w*cuda", re.I)


def cuda_requirement(ctx, node: cst.If) -> bool:
    """``if not torch.cuda.is_available(): raise X("... CUDA ...")`` (the test may be ``or``-ed
    with other conditions): the body is one ``raise`` whose message names CUDA or a GPU."""
    test = node.test
    operands = [test]
    while isinstance(operands[0], cst.BooleanOperation) and isinstance(operands[0].operator, cst.Or):
        first = operands.pop(0)
        operands[:0] = [first.left, first.right]
    if not any(isinstance(o, cst.UnaryOperation) and isinstance(o.operator, cst.Not) and isinstance(o.expression, cst.Call)
               and ctx.qname(o.expression.func) == "torch.cuda.is_available" for o in operands):
        return False
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else []
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or not isinstance(body[0].body[0], cst.Raise):
        return False
    return any(_NAMES_CUDA.search(n) for n in _names_in(body[0]))


def cuda_predicate(node: cst.FunctionDef) -> bool:
    """A function whose name asks about CUDA (``is_torch_cuda_available``, ``require_torch_cuda``)."""
    return bool(_PREDICATE.match(node.name.value))
