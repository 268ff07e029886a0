"""Capability probes: code that asks a question only CUDA can answer, or is reached only once CUDA was
established.

* **a capability query under a CUDA guard** (:func:`cuda_reached`): ``torch.cuda.get_device_capability()``
  (and ``get_device_properties``, ``is_bf16_supported``, ``get_arch_list``, ``is_tf32_supported``) reached
  only when CUDA was established: in the body of ``if torch.cuda.is_available():`` / ``if x.device.type ==
  "cuda":``, after ``torch.cuda.is_available() and``, or after an early exit ``if not
  torch.cuda.is_available(): return ...`` in the same block. The question is about NVIDIA architectures
  (SM numbers); no accelerator-generic answer exists. The same query not under a guard is still reported
  (it raises off CUDA). The CUDA operands of an ``and`` chain before such a query are left alone too
  (:func:`capability_guard_nodes`).
* **a probe answering False without CUDA**: ``if not torch.cuda.is_available(): return False`` opens a
  predicate about CUDA: its test and the rest of its block are CUDA's own question. ``return`` without a
  value is a set-up function, still reported.
* **a capability query under a stored CUDA flag** (:func:`capability_under_flag`,
  :func:`stored_capability_guard`): ``ok = device == "cuda" and ...`` then ``if ok: ok =
  torch.cuda.is_bf16_supported()``; and the stored test itself. The same query under a flag that is not a
  CUDA test is still reported.
* **a CUDA-only API reached only on CUDA**: a function with no device-generic equivalent
  (``torch.cuda.memory._record_memory_history``, ``memory_summary``, ...:
  :func:`~neuron_conformance.migrate.exemptions.cuda_tests.no_generic_equivalent`) under a CUDA guard:
  recording CUDA's memory history only when the device is CUDA is already right for every device (the
  guard's own test is left alone by :mod:`.cuda_components`, "guard of a CUDA-only body"). The same call
  not under a guard is still reported.
* **a CUDA capability function** (:func:`capability_function`): a function named for a CUDA capability
  (``get_cuda_compute_capability``: words ``cuda``/``gpu`` and ``capability``/``arch``/``properties``/``sm``);
  and the test of an early exit ``if device.type != "cuda": return None`` followed in its block by a
  capability query (:func:`exits_before_capability`). A function merely named for CUDA (``to_cuda``), or
  an early exit followed by other CUDA code, is still reported.
"""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from neuron_conformance.migrate.exemptions.blocks import assigned, later_reads, value_in
from neuron_conformance.migrate.exemptions.cuda_tests import (
    CAPABILITY,
    capability_node,
    cuda_operand,
    device_test,
    early_exit,
    negative,
    no_generic_equivalent,
    positive,
)
from neuron_conformance.migrate.exemptions.names import NAMES_CUDA, names_in, operands
from neuron_conformance.migrate.exemptions.registry import ANCESTOR, FINDING, STEP, exemption
from neuron_conformance.migrate.traversal import walk_in_scope

_CAPABILITY_Q = CAPABILITY | {"torch.cuda.is_bf16_supported"}
_CAPABILITY_WORDS = frozenset({"capability", "capabilities", "arch", "archs", "properties", "props", "sm"})


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
        if (
            isinstance(a.operator, cst.And)
            and positive(ctx, a.left)
            or isinstance(a.operator, cst.Or)
            and negative(ctx, a.left)
        ):
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
    ops = operands(node, cst.And)
    last = max((i for i, o in enumerate(ops) if _calls_capability(ctx, o)), default=-1)
    out = []
    for o in ops[: max(last, 0)]:
        if cuda_operand(ctx, o) or device_test(ctx, o):
            out.append(o)
            if isinstance(o, cst.Comparison):
                out.append(o.left)
    return out


def capability_under_flag(ctx, node, path: list) -> bool:
    """``node`` is a capability query in the body of ``if <name>:`` where ``name`` was assigned a CUDA test."""
    target = node.func if isinstance(node, cst.Call) else node
    if ctx.qname(target) not in _CAPABILITY_Q:
        return False
    for i, a in enumerate(path[:-1]):
        if isinstance(a, cst.If) and path[i + 1] is a.body and isinstance(a.test, cst.Name) and i > 0:
            value = value_in(ctx, path[i - 1], a.test, a.test.value)
            if value is not None and positive(ctx, value):
                return True
    return False


def stored_capability_guard(ctx, block, stmt) -> bool:
    """``stmt`` is ``name = <CUDA test>`` and every later read of ``name`` is ``if name:`` whose body
    asks a capability query (the test guarding it, stored first)."""
    hit = assigned(stmt)
    if hit is None or not positive(ctx, hit[1]):
        return False
    name = hit[0]

    def guards(r):
        return (
            isinstance(r, cst.If)
            and isinstance(r.test, cst.Name)
            and r.test.value == name
            and any(isinstance(n, cst.Call) and ctx.qname(n.func) in _CAPABILITY_Q for n in walk_in_scope(r.body))
        )

    def requires(r):  # `if not ok: raise RuntimeError("... requires CUDA ...")`
        return (
            isinstance(r, cst.If)
            and isinstance(r.test, cst.UnaryOperation)
            and isinstance(r.test.operator, cst.Not)
            and isinstance(r.test.expression, cst.Name)
            and r.test.expression.value == name
            and isinstance(r.body, cst.IndentedBlock)
            and len(r.body.body) == 1
            and isinstance(r.body.body[0], cst.SimpleStatementLine)
            and isinstance(r.body.body[0].body[0], cst.Raise)
            and any(NAMES_CUDA.search(n) for n in names_in(r.body))
        )

    reads = later_reads(block, stmt, name)
    return bool(reads) and guards(reads[0]) and all(guards(r) or requires(r) for r in reads)


def capability_function(node: cst.FunctionDef) -> bool:
    """A function named for a CUDA capability."""
    words = {w for w in node.name.value.lower().split("_") if w}
    return bool(words & {"cuda", "gpu"}) and bool(words & _CAPABILITY_WORDS)


def exits_before_capability(ctx, block, stmt) -> bool:
    """``stmt`` is an early exit taken off CUDA and a later statement of ``block`` queries a capability."""
    if early_exit(ctx, stmt) is None:
        return False
    after = False
    for s in block.body:
        if after and any(isinstance(n, cst.Call) and ctx.qname(n.func) in CAPABILITY for n in walk_in_scope(s)):
            return True
        after = after or s is stmt
    return False


# ----------------------------------------------------------------------------- registered exemptions
@exemption(
    "capability function",
    scope=STEP,
    group="paths",
    code="NM116",
    quiet="import torch\ndef get_cuda_compute_capability():\n    return torch.cuda.get_device_capability()\n",
    near_miss="import torch\ndef to_cuda():\n    return torch.cuda.get_device_capability()\n",
)
def _capability_function(view, i: int) -> bool:
    """The body of a function named for a CUDA capability (:func:`capability_function`)."""
    a = view.full[i]
    return isinstance(a, cst.FunctionDef) and capability_function(a)


@exemption(
    "early exit before a capability query",
    scope=STEP,
    group="paths",
    code="NM111",
    quiet=(
        "import torch\ndef l2(device):\n    if device.type != 'cuda':\n        return None\n"
        "    return torch.cuda.get_device_properties(device).L2_cache_size\n"
    ),
    near_miss=(
        "import torch\ndef l2(device):\n    if device.type != 'cuda':\n        return None\n"
        "    return torch.cuda.memory_allocated(device)\n"
    ),
)
def _exits_before_capability(view, i: int) -> bool:
    """The test of an early exit taken off CUDA followed in its block by a capability query
    (:func:`exits_before_capability`)."""
    full = view.full
    a, stmt = full[i], full[i + 1]
    return (
        isinstance(a, (cst.IndentedBlock, cst.Module))
        and i + 2 < len(full)
        and isinstance(stmt, cst.If)
        and full[i + 2] is stmt.test
        and exits_before_capability(view.ctx, a, stmt)
    )


@exemption(
    "capability query under a stored CUDA flag",
    scope=FINDING,
    code="NM116",
    quiet=(
        "import torch\ndef bf16_ok(device):\n    ok = device == 'cuda'\n    if ok:\n"
        "        ok = torch.cuda.is_bf16_supported()\n    return ok\n"
    ),
    near_miss=(
        "import torch\ndef bf16_ok(fast):\n    ok = fast\n    if ok:\n"
        "        ok = torch.cuda.is_bf16_supported()\n    return ok\n"
    ),
)
def _capability_under_flag(view) -> bool:
    """A capability query in the body of ``if <name>:`` where the name was assigned a CUDA test
    (:func:`capability_under_flag`)."""
    return capability_under_flag(view.ctx, view.full[-1], view.full)


@exemption(
    "stored capability guard",
    scope=STEP,
    group="arms",
    code="NM111",
    quiet=(
        "import torch\ndef bf16_ok(device, new_torch):\n    ok = device == 'cuda' and new_torch\n    if ok:\n"
        "        ok = torch.cuda.is_bf16_supported()\n    if not ok:\n"
        "        raise RuntimeError('bfloat16 needs a CUDA GPU')\n"
    ),
    near_miss=(
        "import torch\ndef bf16_ok(device, new_torch):\n    ok = device == 'cuda' and new_torch\n"
        "    if ok:\n        ok = torch.cuda.is_bf16_supported()\n    return ok\n"
    ),
)
def _stored_capability_guard(view, i: int) -> bool:
    """``name = <CUDA test>`` read only by ``if name:`` guarding a capability query (or by a CUDA
    requirement) (:func:`stored_capability_guard`)."""
    a = view.full[i]
    return isinstance(a, (cst.IndentedBlock, cst.Module)) and stored_capability_guard(view.ctx, a, view.full[i + 1])


@exemption(
    "reached only on CUDA",
    scope=FINDING,
    code="NM115",
    quiet=(
        "import torch\ndef sm():\n    if torch.cuda.is_available():\n"
        "        return torch.cuda.get_device_properties(0).major\n"
    ),
    near_miss="import torch\ndef sm():\n    return torch.cuda.get_device_properties(0).major\n",
)
def _cuda_reached(view) -> bool:
    """Code after ``if not <CUDA>: return False`` in an enclosing block, or a capability query reached only
    on CUDA (:func:`cuda_reached`)."""
    reached = cuda_reached(view.ctx, view.path, view.cache)
    return reached == "probe" or reached == "guard" and capability_node(view.ctx, view.node)


@exemption(
    "CUDA-only API reached only on CUDA",
    scope=FINDING,
    code="NM305",
    quiet=(
        "import torch\ndef record(device):\n    if device.type == 'cuda':\n"
        "        torch.cuda.memory._record_memory_history()\n"
    ),
    near_miss="import torch\ndef record(device):\n    torch.cuda.memory._record_memory_history()\n",
)
def _cuda_only_api_reached(view) -> bool:
    """A call of a CUDA function with no device-generic equivalent reached only on CUDA
    (:func:`cuda_reached`, :func:`~neuron_conformance.migrate.exemptions.cuda_tests.no_generic_equivalent`)."""
    return no_generic_equivalent(view.ctx, view.node) and cuda_reached(view.ctx, view.path, view.cache) is not None


@exemption(
    "probe answering False without CUDA",
    scope=ANCESTOR,
    code="NM101",
    quiet=(
        "import torch\ndef tf32_ok():\n    if not torch.cuda.is_available():\n        return False\n    return True\n"
    ),
    near_miss=(
        "import torch\ndef setup(rank):\n    if not torch.cuda.is_available():\n        return\n    print(rank)\n"
    ),
)
def _probe_answering_false(view, i: int) -> bool:
    """The test of ``if not <CUDA>: return False`` (:func:`early_exit`): a predicate about CUDA."""
    a = view.ancestors[i]
    if not isinstance(a, cst.If):
        return False
    hit = view.memo(("probe answering false", id(a)), lambda: early_exit(view.ctx, a) == "false")
    child = view.child(i)
    return bool(hit) and child is not None and child is a.test


@exemption(
    "CUDA operands guarding a capability query",
    scope=ANCESTOR,
    code="NM111",
    quiet=(
        "import torch\ndef pick(t):\n"
        "    return t.device.type == 'cuda' and torch.cuda.get_device_capability(t.device)[0] >= 8\n"
    ),
    near_miss="import torch\ndef pick(t, fast):\n    return t.device.type == 'cuda' and fast\n",
)
def _capability_guard_nodes(view, i: int) -> bool:
    """The CUDA operands of an ``and`` chain before a capability query (:func:`capability_guard_nodes`)."""
    a = view.ancestors[i]
    if not isinstance(a, cst.BooleanOperation):
        return False
    parts = view.memo(("capability guard", id(a)), lambda: {id(n) for n in capability_guard_nodes(view.ctx, a)})
    return id(view.node) in parts
