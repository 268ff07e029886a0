"""Sanity checks and requests for CUDA itself: tests that ask whether CUDA was requested, and check or
complete that request.

On another accelerator the request is not ``"cuda"`` and the check is correctly false; widening it would
apply a CUDA check, or admit a CUDA-only feature, elsewhere.

* **a CUDA sanity check** (:func:`sanity_check_nodes`): ``device == "cuda" and not
  torch.cuda.is_available()`` (usually followed by ``raise``): CUDA itself was requested and is missing.
* **a CUDA-specific assertion** (:func:`sanity_check_tests`): an ``assert`` whose message names CUDA
  (``"GDS only supported for CUDA"``, ``"cuda graph needs torch 1.10"``): its CUDA test (``assert name ==
  "cuda", "... CUDA ..."``) and the CUDA test of an ``if`` whose body is that one assert. An assert whose
  message does not name CUDA, an assert without message, and an ``if`` whose body does anything else are
  still reported.
* **a CUDA request completed with an index** (:func:`normalised_request`): ``if device_map == "cuda":
  device_map = f"cuda:{local_rank}"``; ``if device == "gpu": device = "cuda"`` in the default branch of a
  chain that names the other accelerators.
"""

from __future__ import annotations

import re
from typing import List

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.exemptions.cuda_tests import positive
from neuron_conformance.migrate.exemptions.names import bare_and_operands, callee, names_other_vendor, path_pairs
from neuron_conformance.migrate.exemptions.registry import ANCESTOR, FINDING, MODULE, exemption

#: Text without which :func:`sanity_check_tests` finds no check (an ``assert`` statement): a pre-check only,
#: it never changes the answer, it skips the walk.
_CHECK_HINT = re.compile(r"\bassert\b")
_CUDA_WORD = re.compile(r"\bcuda\b", re.I)


def sanity_check_nodes(ctx, node: cst.BooleanOperation) -> List[cst.CSTNode]:
    """For ``<x> == "cuda" and not torch.cuda.is_available()`` (either order, within a longer
    ``and``): the comparison and the call, whose findings are not reported; else ``[]``."""
    if not isinstance(node.operator, cst.And):
        return []
    operands = bare_and_operands(node)
    comparisons = [
        o
        for o in operands
        if isinstance(o, cst.Comparison)
        and len(o.comparisons) == 1
        and isinstance(o.comparisons[0].operator, cst.Equal)
        and "cuda" in (string_value(o.left), string_value(o.comparisons[0].comparator))
    ]
    probes = [
        o.expression
        for o in operands
        if isinstance(o, cst.UnaryOperation)
        and isinstance(o.operator, cst.Not)
        and isinstance(o.expression, cst.Call)
        and ctx.qname(o.expression.func) == "torch.cuda.is_available"
    ]
    if comparisons and probes:
        return comparisons + probes
    return []


def _message_names_cuda(msg) -> bool:
    """The text of ``msg`` (string literals, an f-string's text) has the word ``cuda``."""
    stack = [msg]
    while stack:
        cur = stack.pop()
        text = (
            string_value(cur)
            if isinstance(cur, cst.SimpleString)
            else cur.value
            if isinstance(cur, cst.FormattedStringText)
            else None
        )
        if text and _CUDA_WORD.search(text):
            return True
        stack.extend(cur.children)
    return False


def _cuda_assert(small) -> bool:
    """``assert <cond>, "<text naming CUDA>"``."""
    return isinstance(small, cst.Assert) and small.msg is not None and _message_names_cuda(small.msg)


def _sanity_checks(ctx) -> set:
    """The ids of the tests of CUDA-specific sanity checks (module docstring): the test of
    ``if <CUDA test>:`` whose body is one CUDA check, and the CUDA test of a CUDA check."""
    out, stack = set(), [ctx.module]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.SimpleStatementLine):
            out.update(id(s.test) for s in node.body if _cuda_assert(s) and positive(ctx, s.test))
            continue
        if (
            isinstance(node, cst.If)
            and node.orelse is None
            and isinstance(node.body, cst.IndentedBlock)
            and len(node.body.body) == 1
            and isinstance(node.body.body[0], cst.SimpleStatementLine)
            and len(node.body.body[0].body) == 1
            and _cuda_assert(node.body.body[0].body[0])
            and positive(ctx, node.test)
        ):
            out.add(id(node.test))
        stack.extend(c for c in node.children if not isinstance(c, cst.BaseExpression))
    return out


def sanity_check_tests(ctx) -> set:
    """The ids of the tests of CUDA-specific sanity checks (:func:`_sanity_checks`) in the module."""
    return _sanity_checks(ctx) if _CHECK_HINT.search(ctx.source) else set()


def _cuda_comparison_name(node, value: str = "cuda") -> str:
    """For ``<name> == "cuda"`` (or ``value``), possibly one operand of an ``and`` chain: the name's
    source key (``device_map``, ``self.dev``; ``device`` for ``device.type == "cuda"``), else ``""``."""
    for o in bare_and_operands(node):
        if (
            not isinstance(o, cst.Comparison)
            or len(o.comparisons) != 1
            or not isinstance(o.comparisons[0].operator, cst.Equal)
        ):
            continue
        left, right = o.left, o.comparisons[0].comparator
        if string_value(left) == value:
            left, right = right, left
        if string_value(right) == value and isinstance(left, (cst.Name, cst.Attribute)):
            name = _dotted(left)
            return name[: -len(".type")] if name.endswith(".type") else name
    return ""


def _dotted(node) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr.value}" if head else ""
    return ""


def _cuda_text(value) -> bool:
    """A plain or f-string starting with ``cuda``."""
    if isinstance(value, cst.FormattedString):
        first = value.parts[0] if value.parts else None
        return isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda")
    v = string_value(value)
    return v is not None and v.startswith("cuda")


def _assigns_cuda_string(stmt, name: str) -> bool:
    """``stmt`` is ``<name> = "cuda..."`` (a plain or f-string starting with ``cuda``)."""
    if not isinstance(stmt, cst.SimpleStatementLine) or not isinstance(stmt.body[0], cst.Assign):
        return False
    assign = stmt.body[0]
    return any(_dotted(t.target) == name for t in assign.targets) and _cuda_text(assign.value)


def _returns_indexed_cuda_device(stmt) -> bool:
    """``stmt`` is ``return torch.device(f"cuda:{i}")`` or ``return torch.device("cuda", i)``: a CUDA
    device with its index filled in."""
    if not isinstance(stmt, cst.SimpleStatementLine) or not isinstance(stmt.body[0], cst.Return):
        return False
    value = stmt.body[0].value
    if not isinstance(value, cst.Call) or callee(value) != "device" or not value.args:
        return False
    first = value.args[0].value
    return (
        len(value.args) == 2
        and string_value(first) == "cuda"
        or isinstance(first, cst.FormattedString)
        and _cuda_text(first)
        and len(first.parts) > 1
    )


def _completes(stmt, name: str) -> bool:
    return _assigns_cuda_string(stmt, name) or _returns_indexed_cuda_device(stmt)


def _in_vendor_chain_default(path: list, a) -> bool:
    """``a`` lies in the ``else`` of an ``if`` whose test names another accelerator."""
    for b, child in path_pairs(path):
        if b is a:
            return False
        if isinstance(b, cst.If) and child is b.orelse and names_other_vendor(b.test):
            return True
    return False


def normalised_request(ctx, path: list) -> bool:
    """``if device_map == "cuda": device_map = f"cuda:{local_rank}"``: a user's ``"cuda"`` request
    completed with an index. The test asks whether CUDA itself was requested (on another accelerator
    the request is not ``"cuda"``) and the body rewrites that same variable, or returns the CUDA
    device with its index (``if device.type == "cuda" and device.index is None: return
    torch.device(f"cuda:{torch.cuda.current_device()}")``); both are quiet (the body's other
    statements are not). ``if device == "gpu": device = "cuda"`` is the same request spelled "gpu", in
    the default branch of a chain that names the other accelerators: elsewhere "gpu" may
    mean any GPU and it is still reported."""
    for a, child in path_pairs(path):
        if not isinstance(a, cst.If):
            continue
        name = _cuda_comparison_name(a.test)
        if not name and _in_vendor_chain_default(path, a):
            name = _cuda_comparison_name(a.test, "gpu")
        if not name or not any(_completes(s, name) for s in a.body.body):
            continue
        if child is a.test:
            return True
        if child is a.body:  # only the statement completing the request
            stmt = next((p for p in path if any(p is s for s in a.body.body)), None)
            return stmt is not None and _completes(stmt, name)
    return False


# ----------------------------------------------------------------------------- registered exemptions
@exemption(
    "CUDA-specific assertion",
    scope=MODULE,
    fact=sanity_check_tests,
    code="NM111",
    quiet=(
        "import torch\ndef check(cfg, accel):\n    if cfg.direct_storage:\n"
        "        assert accel.device_name() == 'cuda', 'direct storage is only supported on CUDA'\n"
    ),
    near_miss=(
        "import torch\ndef check(cfg, accel):\n    if cfg.direct_storage:\n"
        "        assert accel.device_name() == 'cuda', 'direct storage is not supported here'\n"
    ),
)
def _sanity_check_test(view, tests: set) -> bool:
    """Below the CUDA test of an ``assert`` whose message names CUDA, or of an ``if`` whose body is that
    one assert (:func:`sanity_check_tests`)."""
    return bool(tests) and any(id(a) in tests for a in view.ancestors)


@exemption(
    "CUDA request completed with an index",
    scope=FINDING,
    code="NM111",
    quiet=(
        "import torch\ndef f(opts):\n    if opts.device == 'cuda':\n"
        "        opts.device = f'cuda:{opts.local_rank}'\n    return torch.device(opts.device)\n"
    ),
    near_miss="import torch\ndef f(opts, model):\n    if opts.device == 'cuda':\n        model = model.cuda()\n",
)
def _normalised_request(view) -> bool:
    """The test and completing statement of ``if <name> == "cuda": <name> = f"cuda:{i}"``
    (:func:`normalised_request`): a request for CUDA itself."""
    return normalised_request(view.ctx, view.path)


@exemption(
    "CUDA sanity check",
    scope=ANCESTOR,
    code="NM111",
    quiet=(
        "import torch\ndef check(device):\n    if device == 'cuda' and not torch.cuda.is_available():\n"
        "        raise RuntimeError('the requested device is missing')\n"
    ),
    near_miss=(
        "import torch\ndef check(device, ready):\n    if device == 'cuda' and not ready:\n"
        "        raise RuntimeError('not ready')\n"
    ),
)
def _sanity_check_nodes(view, i: int) -> bool:
    """The comparison and probe of ``<x> == "cuda" and not torch.cuda.is_available()``
    (:func:`sanity_check_nodes`)."""
    a = view.ancestors[i]
    if not isinstance(a, cst.BooleanOperation):
        return False
    parts = view.memo(("sanity check", id(a)), lambda: {id(n) for n in sanity_check_nodes(view.ctx, a)})
    return id(view.node) in parts
