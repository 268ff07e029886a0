"""CUDA requirements: code that states the code after it needs CUDA itself, and raises (or refuses) without it.

The code after such a check needs CUDA itself (a CUDA-only kernel library or quantisation format);
widening the check would let every accelerator into code that only runs on CUDA.

* **a CUDA requirement** (:func:`cuda_requirement`): ``if not torch.cuda.is_available(): raise ...("...
  requires CUDA")``, a capability test that raises naming a compute capability, or a tensor test
  (``if key.device.type != "cuda": raise ValueError("the CUDA kernel requires CUDA tensors")``), where the
  message names CUDA, a GPU or a compute capability; also written as an assertion
  (:func:`cuda_assert`: ``assert torch.cuda.is_available(), "Megatron requires CUDA."``).
* **a predicate named for CUDA** (:func:`cuda_predicate`: ``def is_torch_cuda_available():``,
  ``require_torch_gpu``, a property ``on_gpu``).
* **a CUDA requirement of several statements** (:func:`requirement_block`, :func:`stored_for_requirement`):
  ``if not (torch.cuda.is_available() and valid): <log, build a hint>; raise ValueError("Invalid CUDA
  ...")``: the test and the body only build the error; also a value stored in a name that only such a
  requirement reads. A body that does anything after the check, or a name read elsewhere too, is still
  reported.
* **a CUDA-only library's requirement** (:func:`library_requirement`): ``if not is_<lib>_available():
  raise ... elif not torch.cuda.is_available(): raise ValueError("<lib> ... only available for GPU") else:
  <CUDA code>``: the message names the library probed in the same chain, so the ``else`` is reached only
  on CUDA. Also a CUDA probe stored in a variable used only by a CUDA requirement
  (:func:`stored_requirement`). A requirement whose message names no library of the chain, or a variable
  that also picks a device, is still reported.
"""

from __future__ import annotations

import re

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.exemptions.blocks import assigned, chain_tests, later_reads, reads_name
from neuron_conformance.migrate.exemptions.names import (
    CUDA_PROBE_NAME,
    NAMES_CUDA,
    OTHER_VENDOR,
    bool_operands,
    names_in,
)
from neuron_conformance.migrate.exemptions.registry import ANCESTOR, STEP, exemption
from neuron_conformance.migrate.traversal import and_operands, walk_in_scope

_PREDICATE = re.compile(r"^_?(is|has|on|require|requires|check)_\w*(cuda|gpu)", re.I)
_CAPABILITY = {"torch.cuda.get_device_capability", "torch.cuda.is_bf16_supported", "torch.cuda.get_arch_list"}
_LIBRARY_PROBE = re.compile(r"^is_(?:torch_)?(\w+?)_available$")


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
    compute capability >= 9.0")``), or a tensor test (``if key.device.type != "cuda": raise ValueError("the CUDA
    kernel requires CUDA tensors")``); the test may be ``and``/``or``-ed with other conditions, and
    the body is one ``raise`` (or ``return`` of an error-building call, ``return
    maybe_import_error("... requires CUDA")``) whose message names CUDA, a GPU or a compute capability."""
    operands = bool_operands(node.test)
    if not any(
        isinstance(o, cst.UnaryOperation)
        and isinstance(o.operator, cst.Not)
        and isinstance(o.expression, cst.Call)
        and ctx.qname(o.expression.func) == "torch.cuda.is_available"
        for o in operands
    ) and not any(_calls_capability(ctx, o) or _off_cuda_test(o) for o in operands):
        return False
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else []
    if (
        len(body) != 1
        or not isinstance(body[0], cst.SimpleStatementLine)
        or not isinstance(body[0].body[0], (cst.Raise, cst.Return))
        or isinstance(body[0].body[0], cst.Return)
        and not isinstance(body[0].body[0].value, cst.Call)
    ):
        return False
    return any(NAMES_CUDA.search(n) for n in names_in(body[0]))


def _off_cuda_test(node) -> bool:
    """``x.device.type != "cuda"`` or ``not x.is_cuda``: a tensor is not on CUDA."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return isinstance(node.expression, cst.Attribute) and node.expression.attr.value == "is_cuda"
    return (
        isinstance(node, cst.Comparison)
        and len(node.comparisons) == 1
        and isinstance(node.comparisons[0].operator, cst.NotEqual)
        and "cuda" in (string_value(node.left), string_value(node.comparisons[0].comparator))
    )


def cuda_predicate(node: cst.FunctionDef) -> bool:
    """A function whose name asks about CUDA (``is_torch_cuda_available``, ``require_torch_cuda``,
    ``check_cuda_fp8_capability``, a property ``on_gpu``)."""
    return bool(_PREDICATE.match(node.name.value))


def cuda_assert(ctx, node: cst.Assert) -> bool:
    """``assert torch.cuda.is_available(), "Megatron requires CUDA."``: a CUDA requirement written as
    an assertion whose message names CUDA or a GPU (as :func:`cuda_requirement`)."""
    if node.msg is None or not any(
        isinstance(o, cst.Call) and ctx.qname(o.func) == "torch.cuda.is_available" for o in bool_operands(node.test)
    ):
        return False
    return any(NAMES_CUDA.search(n) for n in names_in(node.msg))


def _requires_cuda(ctx, test) -> bool:
    """``not torch.cuda.is_available()`` or ``not (torch.cuda.is_available() and ...)`` among the ``or`` operands."""
    ops = [test]
    while ops and isinstance(ops[-1], cst.BooleanOperation) and isinstance(ops[-1].operator, cst.Or):
        last = ops.pop()
        ops += [last.left, last.right]
    for o in ops:
        if isinstance(o, cst.UnaryOperation) and isinstance(o.operator, cst.Not):
            for inner in and_operands(o.expression):
                if isinstance(inner, cst.Call) and ctx.qname(inner.func) == "torch.cuda.is_available":
                    return True
    return False


def requirement_block(ctx, node: cst.If) -> bool:
    """``if not (torch.cuda.is_available() and ...): <simple statements>; raise X("... CUDA ...")``."""
    if node.orelse is not None or not isinstance(node.body, cst.IndentedBlock) or not _requires_cuda(ctx, node.test):
        return False
    body = node.body.body
    if not body or not all(isinstance(s, cst.SimpleStatementLine) for s in body):
        return False
    last = body[-1].body[-1]
    return isinstance(last, cst.Raise) and any(NAMES_CUDA.search(n) for n in names_in(last))


def stored_for_requirement(ctx, block, stmt) -> bool:
    """``stmt`` is ``name = <value>`` and every later read of ``name`` is the test of a :func:`requirement_block`."""
    hit = assigned(stmt)
    if hit is None:
        return False
    reads = later_reads(block, stmt, hit[0])
    return bool(reads) and all(
        isinstance(r, cst.If) and requirement_block(ctx, r) and not any(reads_name(s, hit[0]) for s in r.body.body)
        for r in reads
    )


def _raise_text(block) -> str:
    body = block.body if isinstance(block, cst.IndentedBlock) else ()
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or not isinstance(body[0].body[0], cst.Raise):
        return ""
    return " ".join(names_in(body[0])).lower()


def library_requirement(ctx, a: cst.If) -> bool:
    """``a`` is a CUDA requirement (:func:`cuda_requirement`) of an ``if``/``elif`` chain
    that also probes a library (``is_xformers_available()``), and its message names that library."""
    if not cuda_requirement(ctx, a):
        return False
    text = _raise_text(a.body)
    for t in chain_tests(ctx, a):
        for n in walk_in_scope(t):
            if isinstance(n, cst.Call) and isinstance(n.func, (cst.Name, cst.Attribute)):
                name = n.func.value if isinstance(n.func, cst.Name) else n.func.attr.value
                m = _LIBRARY_PROBE.match(name)
                if m and not OTHER_VENDOR.search(m.group(1)) and "cuda" not in m.group(1) and m.group(1) in text:
                    return True
    return False


def stored_requirement(ctx, block, stmt) -> bool:
    """``stmt`` is ``<name> = <CUDA probe>`` and ``<name>`` is used in ``block`` only by a later
    ``if not <name>: raise ...`` whose message names CUDA or a GPU."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Assign):
        return False
    assign = stmt.body[0]
    if (
        len(assign.targets) != 1
        or not isinstance(assign.targets[0].target, cst.Name)
        or not isinstance(assign.value, cst.Call)
    ):
        return False
    func = assign.value.func
    callee = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
    if ctx.qname(func) != "torch.cuda.is_available" and not CUDA_PROBE_NAME.match(callee):
        return False
    name, found, after = assign.targets[0].target.value, False, False
    for s in block.body:
        if s is stmt:
            after = True
            continue
        if not after:
            continue
        test = s.test if isinstance(s, cst.If) else None
        if (
            isinstance(test, cst.UnaryOperation)
            and isinstance(test.operator, cst.Not)
            and isinstance(test.expression, cst.Name)
            and test.expression.value == name
            and s.orelse is None
            and NAMES_CUDA.search(_raise_text(s.body))
        ):
            found = True
            continue
        if any(isinstance(n, cst.Name) and n.value == name for n in walk_in_scope(s, skip_scopes=False)):
            return False
    return found


# ----------------------------------------------------------------------------- registered exemptions
@exemption(
    "CUDA-only library's requirement",
    scope=STEP,
    group="paths",
    code="NM110",
    quiet=(
        "import torch\ndef check(x):\n    if not is_xformers_available():\n        raise ImportError('x')\n"
        "    elif not torch.cuda.is_available():\n"
        "        raise ValueError('xformers is only available for GPU')\n"
        "    else:\n        x = x.to('cuda')\n    return x\n"
    ),
    near_miss=(
        "import torch\ndef check(x):\n    if not is_xformers_available():\n        raise ImportError('x')\n"
        "    elif not torch.cuda.is_available():\n        raise ValueError('no GPU')\n"
        "    else:\n        x = x.to('cuda')\n    return x\n"
    ),
)
def _library_requirement(view, i: int) -> bool:
    """The ``else`` of a CUDA requirement whose message names a library probed in the same chain
    (:func:`library_requirement`): reached only on CUDA."""
    a, child = view.full[i], view.full[i + 1]
    return isinstance(a, cst.If) and child is a.orelse and library_requirement(view.ctx, a)


@exemption(
    "CUDA probe stored for a requirement",
    scope=STEP,
    group="paths",
    code="NM101",
    quiet=(
        "import torch\ndef check():\n    ok = torch.cuda.is_available()\n"
        "    if not ok:\n        raise ValueError('this kernel requires a CUDA GPU')\n"
    ),
    near_miss=(
        "import torch\ndef check():\n    ok = torch.cuda.is_available()\n"
        "    if not ok:\n        raise ValueError('this kernel requires a CUDA GPU')\n    return ok\n"
    ),
)
def _stored_requirement(view, i: int) -> bool:
    """``<name> = <CUDA probe>`` read only by ``if not <name>: raise ...`` naming CUDA or a GPU
    (:func:`stored_requirement`): a CUDA requirement written in two statements."""
    full = view.full
    return (
        isinstance(full[i], (cst.IndentedBlock, cst.Module))
        and i + 2 < len(full)
        and stored_requirement(view.ctx, full[i], full[i + 1])
    )


@exemption(
    "CUDA requirement of several statements",
    scope=STEP,
    group="arms",
    code="NM101",
    quiet=(
        "import torch\ndef check(valid):\n    if not (torch.cuda.is_available() and valid):\n"
        "        hint = 'install a CUDA build'\n        raise ValueError(f'Invalid CUDA request: {hint}')\n"
    ),
    near_miss=(
        "import torch\ndef check(valid):\n    if not (torch.cuda.is_available() and valid):\n"
        "        hint = 'install a CUDA build'\n        print(hint)\n"
    ),
)
def _requirement_block(view, i: int) -> bool:
    """The test and body of ``if not (torch.cuda.is_available() and ...): <simple statements>; raise
    X("... CUDA ...")`` (:func:`requirement_block`)."""
    a, child = view.full[i], view.full[i + 1]
    return isinstance(a, cst.If) and (child is a.test or child is a.body) and requirement_block(view.ctx, a)


@exemption(
    "value stored for a CUDA requirement",
    scope=STEP,
    group="arms",
    code="NM103",
    quiet=(
        "import torch\ndef check(ids):\n    valid = all(int(x) < torch.cuda.device_count() for x in ids)\n"
        "    if not (torch.cuda.is_available() and valid):\n"
        "        raise ValueError('Invalid CUDA device request')\n"
    ),
    near_miss=(
        "import torch\ndef check(ids):\n    valid = all(int(x) < torch.cuda.device_count() for x in ids)\n"
        "    return valid\n"
    ),
)
def _stored_for_requirement(view, i: int) -> bool:
    """A value stored in a name that only a CUDA requirement of several statements reads
    (:func:`stored_for_requirement`)."""
    a, child = view.full[i], view.full[i + 1]
    return isinstance(a, (cst.IndentedBlock, cst.Module)) and stored_for_requirement(view.ctx, a, child)


@exemption(
    "CUDA requirement",
    scope=ANCESTOR,
    code="NM111",
    quiet=(
        "import torch\ndef fused(a):\n    if a.device.type != 'cuda':\n"
        "        raise ValueError('the fused CUDA kernel needs CUDA tensors')\n"
    ),
    near_miss="import torch\ndef fused(a):\n    if a.device.type != 'cuda':\n        raise ValueError('bad input')\n",
)
def _cuda_requirement(view, i: int) -> bool:
    """The test of ``if <CUDA missing>: raise X("... CUDA ...")`` (:func:`cuda_requirement`): the code after
    it needs CUDA itself."""
    a = view.ancestors[i]
    if not isinstance(a, cst.If):
        return False
    hit = view.memo(("requirement", id(a)), lambda: cuda_requirement(view.ctx, a))
    child = view.child(i)
    return bool(hit) and child is not None and child is a.test


@exemption(
    "predicate named for CUDA",
    scope=ANCESTOR,
    code="NM101",
    quiet="import torch\ndef is_torch_cuda_available():\n    return torch.cuda.is_available()\n",
    near_miss="import torch\ndef to_cuda(x):\n    return torch.cuda.is_available()\n",
)
def _cuda_predicate(view, i: int) -> bool:
    """The body of a function whose name asks about CUDA (:func:`cuda_predicate`)."""
    a = view.ancestors[i]
    return isinstance(a, cst.FunctionDef) and cuda_predicate(a)


@exemption(
    "assertion that CUDA is required",
    scope=ANCESTOR,
    code="NM101",
    quiet="import torch\ndef init():\n    assert torch.cuda.is_available(), 'this trainer requires a GPU'\n",
    near_miss="import torch\ndef init():\n    assert torch.cuda.is_available(), 'no device'\n",
)
def _cuda_assert(view, i: int) -> bool:
    """The test of ``assert torch.cuda.is_available(), "... requires CUDA"`` (:func:`cuda_assert`)."""
    a = view.ancestors[i]
    return isinstance(a, cst.Assert) and view.child(i) is a.test and cuda_assert(view.ctx, a)
