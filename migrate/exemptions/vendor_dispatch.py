"""Per-vendor dispatch: code that handles each accelerator by name, whose CUDA arm is deliberate.

The author already handles each accelerator by name; rewriting the CUDA arm to ``torch.accelerator``
would make it catch every accelerator before the other arms are reached, or claim support for
accelerators the author did not list.

* **the CUDA branch of a per-vendor chain**: ``if torch.cuda.is_available(): ... elif
  torch.xpu.is_available(): ... elif is_torch_npu_available(): ...`` (:func:`cuda_branch_of_vendor_chain`).
  The test and the body of the CUDA branch are left alone; the other branches are checked as usual.
* **a test that names another accelerator too**: ``not torch.cuda.is_available() and not
  is_torch_xpu_available()`` (:func:`listed_with_other_vendors`). ROCm/HIP counts as another vendor
  (``dev.type == "cuda" and not IS_HIP_BUILD``), and so does TPU.
* **per-vendor statements**: a statement naming CUDA next to statements naming other accelerators
  (:func:`vendor_siblings`: ``pt_cuda = torch.cuda.is_available()`` / ``pt_xpu = is_torch_xpu_available()``).
* **a CUDA fallback where no accelerator exists**: ``get_current_accelerator() or torch.device("cuda")``
  (:func:`accelerator_fallback`).
* **the default branch of a closed vendor chain** (:func:`closed_chain_default`): the ``else`` of
  ``if torch.xpu.is_available(): ... elif torch.mps.is_available(): ... else: <CUDA>`` (or of a
  conditional expression) where the scope admits only CUDA and the vendors the chain names: an
  early exit before the chain in the same function (``if not (torch.cuda.is_available() or
  torch.xpu.is_available()): return skip(...)``), or a check that raises in a method of the same
  class. There the default branch is reached only on CUDA. The ``else`` of a chain with no such check,
  or with a check that admits a vendor the chain does not name, serves every other accelerator and
  is still reported.
"""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.choice import cuda_flags, device_choice
from neuron_conformance.migrate.exemptions.blocks import block_exits, chain_tests
from neuron_conformance.migrate.exemptions.names import (
    OTHER_VENDOR,
    bare_and_operands,
    callee,
    cuda_parts,
    names_cuda,
    names_in,
    names_other_vendor,
    path_pairs,
    tests_cuda,
)
from neuron_conformance.migrate.exemptions.registry import ANCESTOR, FINDING, STEP, exemption

_PLACING_CALLS = frozenset({"to", "device"})
_CUDA_PLACING_CALLS = frozenset({"to", "device", "cuda", "set_device"})


def places_only(node, cuda: bool = False) -> bool:
    """``node`` (a body or statement) only moves values onto a device: every statement is an assignment or
    call whose calls are ``.to(...)``/``torch.device(...)`` (with ``cuda``, also ``.cuda(...)`` and
    ``torch.cuda.set_device(...)``) and whose strings are device names of another vendor (with ``cuda``, of
    CUDA): ``images = images.to("mps")``; ``device = torch.device("mps"); model = model.to(device)``. A chain
    or a run of statements whose every vendor part only places data chooses a device, which the accelerator
    answers; it is no per-vendor dispatch."""
    stmts = node.body if isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite)) else [node]
    allowed = _CUDA_PLACING_CALLS if cuda else _PLACING_CALLS
    placed = False
    for stmt in stmts:
        smalls = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else [stmt]
        for small in smalls:
            if not isinstance(small, (cst.Assign, cst.Expr)):
                return False
            stack = [small]
            while stack:
                cur = stack.pop()
                if isinstance(cur, cst.Call):
                    func = cur.func
                    name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
                    if name not in allowed:
                        return False
                    placed = True
                elif isinstance(cur, (cst.SimpleString, cst.FormattedString)):
                    value = string_value(cur) if isinstance(cur, cst.SimpleString) else None
                    kind = (value or "").split(":")[0]
                    if not (kind == "cuda" if cuda else OTHER_VENDOR.search(kind) is not None and kind != ""):
                        return False
                stack.extend(cur.children)
    return placed


def _no_accelerator_test(ctx, test) -> bool:
    """``not torch.cuda.is_available() and not torch.backends.mps.is_available()``: every operand a negated
    probe, CUDA's among them; the test asks whether there is any accelerator, not which vendor's."""
    operands = bare_and_operands(test) if isinstance(test, cst.BooleanOperation) else [test]
    negated = [o.expression for o in operands if isinstance(o, cst.UnaryOperation) and isinstance(o.operator, cst.Not)]
    return (
        len(negated) == len(operands) > 1
        and all(isinstance(n, cst.Call) and callee(n).endswith("is_available") for n in negated)
        and any(tests_cuda(ctx, n) for n in negated)
    )


def _dispatching_vendor_branch(ctx, branch: cst.If, placing: bool) -> bool:
    """A branch of a chain that handles another vendor by name: its test names one and, unless the CUDA branch
    only places values (``placing``) and so does this one (:func:`places_only`), or the test asks whether any
    accelerator exists, the chain dispatches per vendor."""
    if not names_other_vendor(branch.test) or _no_accelerator_test(ctx, branch.test):
        return False
    return not (placing and places_only(branch.body))


def cuda_branch_of_vendor_chain(ctx, node: cst.If) -> bool:
    """True when ``node`` tests for CUDA and another ``if``/``elif`` of the same chain tests for
    another named accelerator (the chain is followed through ``orelse`` both ways), unless that branch only
    places values on its vendor's device (:func:`places_only`: the chain then chooses a device)."""
    if not tests_cuda(ctx, node.test):
        return False
    placing = places_only(node.body, cuda=True)
    cur = node.orelse
    while isinstance(cur, cst.If):
        if _dispatching_vendor_branch(ctx, cur, placing):
            return True
        cur = cur.orelse
    child, parent = node, ctx.parent(node)
    while isinstance(parent, cst.If) and parent.orelse is child:
        if _dispatching_vendor_branch(ctx, parent, placing):
            return True
        child, parent = parent, ctx.parent(parent)
    return False


def _in_device_choice(ctx, node: cst.If) -> bool:
    """``node`` is the CUDA branch of a device choice (:func:`neuron_conformance.migrate.choice.device_choice`):
    NM117 rewrites the whole chain, so its parts are not reported on their own."""
    head, parent = node, ctx.parent(node)
    while isinstance(parent, cst.If) and parent.orelse is head:
        head, parent = parent, ctx.parent(parent)
    choice = device_choice(ctx, head)
    return choice is not None and tests_cuda(ctx, node.test) or (choice is not None and node is head)


def listed_with_other_vendors(ctx, node: cst.BooleanOperation) -> List[cst.CSTNode]:
    """For a boolean test that probes CUDA and names another accelerator (an operand such as
    ``is_torch_xpu_available()`` or ``device == "xpu"``): its CUDA parts, which are not
    reported; else ``[]``."""
    operands = bare_and_operands(node) if isinstance(node.operator, cst.And) else [node.left, node.right]
    if not any(names_other_vendor(o) for o in operands if not cuda_parts(ctx, o)):
        return []
    return cuda_parts(ctx, node)


def vendor_siblings(ctx, stmt: cst.CSTNode, block) -> bool:
    """``stmt`` (a simple statement line or an ``if``, an element of ``block``) names CUDA, and one
    of the statements next to it (three either way) names another accelerator and not CUDA (a
    statement naming both, such as a device-selection chain, is no evidence): a list of
    per-vendor statements (``pt_cuda = torch.cuda.is_available()`` / ``pt_xpu =
    is_torch_xpu_available()``; ``os.environ["CUDA_LAUNCH_BLOCKING"]`` next to
    ``os.environ["ASCEND_LAUNCH_BLOCKING"]``; ``if device == "cuda": return ...`` then ``if device ==
    "hpu": ...``), whose CUDA entry is deliberate. Not the flag a device choice of the block tests for CUDA
    (``use_cuda = ... torch.cuda.is_available()`` before ``if use_cuda: device = torch.device("cuda") elif
    use_mps: ...``, :func:`neuron_conformance.migrate.choice.cuda_flags`): that flag is the script's choice of
    an accelerator, and its neighbour ``use_mps = ...`` feeds the same choice."""
    head = stmt.test if isinstance(stmt, cst.If) else stmt
    if not names_cuda(ctx, head) or id(stmt) in cuda_flags(ctx, block):
        return False
    try:
        i = next(k for k, s in enumerate(block) if s is stmt)
    except StopIteration:
        return False
    for sib in block[max(0, i - 3) : i + 4]:
        sib_head = (
            sib.test
            if isinstance(sib, cst.If)
            else sib
            if isinstance(sib, cst.SimpleStatementLine)
            else sib.iter
            if isinstance(sib, cst.For)
            else None
        )  # `for backend in ("npu", "xpu"):`
        if (
            sib is not stmt
            and sib_head is not None
            and names_other_vendor(sib_head)
            and not names_cuda(ctx, sib_head)
            and not (
                isinstance(sib, cst.If)
                and sib.orelse is None
                and places_only(sib.body)
                and isinstance(stmt, cst.If)
                and places_only(stmt.body, cuda=True)
            )
        ):
            return True
    return False


def accelerator_fallback(ctx, path: list) -> bool:
    """``path`` (module first, the finding's node last) ends inside the right operand of ``<an
    accelerator query> or <...>`` (``get_current_accelerator() or torch.device("cuda")``): the CUDA
    fallback is used only where no accelerator exists, so it never reaches another accelerator."""
    for a, child in path_pairs(path):
        if (
            isinstance(a, cst.BooleanOperation)
            and isinstance(a.operator, cst.Or)
            and child is a.right
            and isinstance(a.left, cst.Call)
            and "accelerator" in callee(a.left)
        ):
            return True
    return False


def _vendors(ctx, node) -> set:
    """The vendors a probe names: ``{"cuda"}`` for a CUDA probe, ``{"xpu"}`` for ``torch.xpu.is_available()``."""
    out = {m.group(2).lower() for n in names_in(node) for m in [OTHER_VENDOR.search(n)] if m}
    if tests_cuda(ctx, node):
        out.add("cuda")
    return out


def _or_operands(node):
    if isinstance(node, cst.BooleanOperation):
        return _or_operands(node.left) + _or_operands(node.right) if isinstance(node.operator, cst.Or) else [None]
    return [node]


def _admitted(ctx, stmt) -> Optional[set]:
    """For ``if not (P or Q ...): return/raise`` or ``if not P and not Q ...: ...`` (an ``if`` without
    ``else`` whose body exits), each operand a vendor probe: the vendors admitted past it."""
    if not isinstance(stmt, cst.If) or stmt.orelse is not None or not block_exits(stmt.body):
        return None
    test = stmt.test
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        probes = _or_operands(test.expression)
    elif isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        parts, stack = [], [test]
        while stack:
            cur = stack.pop()
            if isinstance(cur, cst.BooleanOperation) and isinstance(cur.operator, cst.And):
                stack.extend((cur.right, cur.left))
            else:
                parts.append(cur)
        if not all(isinstance(p, cst.UnaryOperation) and isinstance(p.operator, cst.Not) for p in parts):
            return None
        probes = [p.expression for p in parts]
    else:
        return None
    out = set()
    for p in probes:
        v = _vendors(ctx, p) if p is not None else set()
        if len(v) != 1:
            return None
        out |= v
    return out if "cuda" in out and len(out) > 1 else None


def _admitted_in_scope(ctx, path: list, i: int) -> list:
    """The vendor sets admitted by early exits before ``path[i]`` in its function, and by raising
    checks in the methods of its class."""
    sets = []
    for k in range(i - 1, -1, -1):
        block, stmt = path[k], path[k + 1]
        if isinstance(block, (cst.IndentedBlock, cst.Module)):
            for s in block.body:
                if s is stmt:
                    break
                adm = _admitted(ctx, s)
                if adm:
                    sets.append(adm)
        if isinstance(block, cst.ClassDef):
            for m in block.body.body:
                if isinstance(m, cst.FunctionDef) and isinstance(m.body, cst.IndentedBlock):
                    for s in m.body.body:
                        adm = _admitted(ctx, s)
                        if adm and isinstance(s.body.body[-1].body[-1], cst.Raise):
                            sets.append(adm)
            break
    return sets


def closed_chain_default(ctx, path: list, i: int) -> bool:
    """``path[i + 1]`` is the ``else`` of a vendor chain ``path[i]`` whose scope admits only CUDA and
    the vendors the chain names."""
    a = path[i]
    tests = chain_tests(ctx, a)
    named = set()
    for t in tests:
        v = _vendors(ctx, t)
        if not v or "cuda" in v:
            return False
        named |= v
    return any(adm - {"cuda"} <= named for adm in _admitted_in_scope(ctx, path, i))


# ----------------------------------------------------------------------------- registered exemptions
@exemption(
    "closed vendor chain expression",
    scope=FINDING,
    code="NM110",
    quiet=(
        "import torch\ndef dev(i):\n    if not (torch.cuda.is_available() or torch.xpu.is_available()):\n"
        "        return None\n    return torch.device(f'xpu:{i}' if torch.xpu.is_available() else f'cuda:{i}')\n"
    ),
    near_miss="import torch\ndef dev(i):\n    return torch.device(f'xpu:{i}' if torch.xpu.is_available() else f'cuda:{i}')\n",
)
def _closed_chain_expression(view) -> bool:
    """A device string built by a whole conditional expression over a closed vendor chain
    (:func:`closed_chain_default`): ``f"xpu:{i}" if torch.xpu.is_available() else f"cuda:{i}"`` after
    ``if not (torch.cuda.is_available() or torch.xpu.is_available()): return``."""
    full = view.full
    return isinstance(full[-1], cst.IfExp) and closed_chain_default(view.ctx, full, len(full) - 1)


@exemption(
    "closed vendor chain default",
    scope=STEP,
    group="paths",
    code="NM201",
    quiet=(
        "import torch\ndef sync():\n    if not (torch.cuda.is_available() or torch.xpu.is_available()):\n"
        "        return\n    if torch.xpu.is_available():\n        torch.xpu.synchronize()\n"
        "    else:\n        torch.cuda.synchronize()\n"
    ),
    near_miss=(
        "import torch\ndef sync():\n    if torch.xpu.is_available():\n        torch.xpu.synchronize()\n"
        "    else:\n        torch.cuda.synchronize()\n"
    ),
)
def _closed_chain_step(view, i: int) -> bool:
    """The ``else`` of a per-vendor chain whose scope admits only CUDA and the vendors the chain names
    (:func:`closed_chain_default`): reached only on CUDA."""
    full = view.full
    a, child = full[i], full[i + 1]
    return (
        isinstance(a, (cst.If, cst.IfExp))
        and child is a.orelse
        and not isinstance(child, (cst.If, cst.IfExp))
        and closed_chain_default(view.ctx, full, i)
    )


@exemption(
    "CUDA fallback where no accelerator exists",
    scope=FINDING,
    code="NM110",
    quiet="import torch\nkind = (torch.accelerator.current_accelerator() or torch.device('cuda')).type\n",
    near_miss="import torch\ndef f(args):\n    return (args.device or torch.device('cuda')).type\n",
)
def _accelerator_fallback(view) -> bool:
    """The right operand of ``<an accelerator query> or <...>`` (:func:`accelerator_fallback`): the CUDA
    fallback is used only where no accelerator exists, so it never reaches another accelerator."""
    return accelerator_fallback(view.ctx, view.path)


@exemption(
    "per-vendor statements",
    scope=ANCESTOR,
    code="NM101",
    quiet=(
        "import torch\ndef report(is_torch_npu_available):\n    has_cuda = torch.cuda.is_available()\n"
        "    has_npu = is_torch_npu_available()\n    return has_cuda, has_npu\n"
    ),
    near_miss="import torch\ndef report():\n    has_cuda = torch.cuda.is_available()\n    return has_cuda\n",
)
def _vendor_siblings(view, i: int) -> bool:
    """A statement naming CUDA next to statements naming other accelerators (:func:`vendor_siblings`):
    one entry of a list of per-vendor statements."""
    a, child = view.ancestors[i], view.child(i)
    if (
        isinstance(a, (cst.SimpleStatementLine, cst.If))
        and i > 0
        and child is not getattr(a, "orelse", None)
        and isinstance(view.ancestors[i - 1], (cst.IndentedBlock, cst.Module))
    ):
        return view.memo(("siblings", id(a)), lambda: vendor_siblings(view.ctx, a, view.ancestors[i - 1].body))
    return False


@exemption(
    "the CUDA branch of a per-vendor chain",
    scope=ANCESTOR,
    code="NM201",
    quiet=(
        "import torch\ndef pick():\n    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n"
        "    elif torch.xpu.is_available():\n        torch.xpu.synchronize()\n"
    ),
    near_miss="import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\nelse:\n    pass\n",
)
def _vendor_chain(view, i: int) -> bool:
    """The test and body of the CUDA branch of an ``if``/``elif`` chain that tests another named
    accelerator (:func:`cuda_branch_of_vendor_chain`); not its ``else``."""
    a = view.ancestors[i]
    if not isinstance(a, cst.If):
        return False
    hit = view.memo(
        ("vendor chain", id(a)), lambda: cuda_branch_of_vendor_chain(view.ctx, a) or _in_device_choice(view.ctx, a)
    )
    child = view.child(i)
    return bool(hit) and not (child is not None and child is a.orelse)


@exemption(
    "test naming other accelerators",
    scope=ANCESTOR,
    code="NM101",
    quiet=(
        "import torch\ndef f(is_torch_xpu_available):\n"
        "    if not torch.cuda.is_available() and not is_torch_xpu_available():\n        raise RuntimeError\n"
    ),
    near_miss=(
        "import torch\ndef f(ready):\n"
        "    if not torch.cuda.is_available() and not ready():\n        raise RuntimeError\n"
    ),
)
def _listed_with_other_vendors(view, i: int) -> bool:
    """The CUDA parts of a boolean test that also names another accelerator
    (:func:`listed_with_other_vendors`): the author lists the accelerators a path supports."""
    a = view.ancestors[i]
    if not isinstance(a, cst.BooleanOperation):
        return False
    parts = view.memo(
        ("listed with other vendors", id(a)), lambda: {id(n) for n in listed_with_other_vendors(view.ctx, a)}
    )
    return id(view.node) in parts
