"""Device choices: ``if``/``elif``/``else`` chains whose every branch only assigns a device of one vendor to the
same name, with the CPU last (read by rule NM117, :mod:`neuron_conformance.migrate.rules.device_choice`, and by
the per-vendor exemptions, :mod:`neuron_conformance.migrate.exemptions.vendor_dispatch`, which leave the flags
such a chain tests to the rules). Pure functions of nodes and the
:class:`~neuron_conformance.migrate.context.Context`; nothing is registered here.
"""

from __future__ import annotations

import dataclasses
import re
from typing import List, Optional

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.context import dotted_parts

VENDOR_PROBES = {
    "cuda": frozenset({"torch.cuda.is_available"}),
    "mps": frozenset({"torch.backends.mps.is_available", "torch.mps.is_available"}),
    "xpu": frozenset({"torch.xpu.is_available"}),
    # a flag NM101 widened earlier in the same pass
    "accelerator": frozenset({"torch.accelerator.is_available"}),
}
DEVICE_KINDS = ("cuda", "mps", "xpu", "cpu")


@dataclasses.dataclass
class Choice:
    """A recognised device choice.

    Attributes:
        node: the ``if`` statement (the whole chain).
        target: source text of the assigned name.
        cuda_test: the test of the CUDA branch.
        cuda_body: the body of the CUDA branch.
        cuda_value: ``(form, index)`` of the CUDA branch's value: form ``"str"`` or ``"device"``; the index
            an expression or None.
        others: ``(test, vendor)`` of the other vendors' branches.
        cpu_body: the body of the final ``else`` (the CPU).
    """

    node: cst.If
    target: str
    cuda_test: cst.BaseExpression
    cuda_body: cst.BaseSuite
    cuda_value: tuple
    others: list
    cpu_body: cst.BaseSuite


def _qname(ctx, node) -> Optional[str]:
    """The qualified name of a dotted expression, resolved without :meth:`Context.qname`'s cache: the fix reads
    nodes of the tree being rebuilt, whose ids may be those of freed nodes the cache still holds."""
    parts = dotted_parts(node)
    head = ctx.aliases.get(parts[0]) if parts else None
    return None if head is None else ".".join([head] + parts[1:])


def device_value(ctx, node) -> Optional[tuple]:
    """``(kind, form, index)`` of a literal device: ``"cuda"``, ``"cuda:0"``, ``torch.device("mps")``,
    ``torch.device("cuda", i)``; None for anything else."""
    v = string_value(node)
    form, index = "str", None
    built = _built_index(node)
    if built is not None:
        return "cuda", "str", built
    if v is None:
        if not (isinstance(node, cst.Call) and _qname(ctx, node.func) == "torch.device"):
            return None
        args = node.args
        if not 1 <= len(args) <= 2 or any(a.keyword is not None or a.star for a in args):
            return None
        v = string_value(args[0].value)
        form = "device"
        built = _built_index(args[0].value) if len(args) == 1 else None
        if built is not None:
            return "cuda", form, built
        if len(args) == 2:
            if v is None or ":" in v:
                return None
            index = args[1].value
    if v is None:
        return None
    kind, _, num = v.partition(":")
    if kind not in DEVICE_KINDS or (num and not num.isdigit()):
        return None
    if num:
        index = cst.Integer(num)
    return kind, form, index


def _built_index(node):
    """The index expression of a CUDA device name built from one: ``"cuda:{}".format(i)``, ``f"cuda:{i}"``;
    else None."""
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "format"
        and string_value(node.func.value) == "cuda:{}"
        and len(node.args) == 1
        and node.args[0].keyword is None
        and not node.args[0].star
    ):
        return node.args[0].value
    if isinstance(node, cst.FormattedString) and len(node.parts) == 2:
        text, field = node.parts
        if (
            isinstance(text, cst.FormattedStringText)
            and text.value == "cuda:"
            and isinstance(field, cst.FormattedStringExpression)
            and field.format_spec is None
            and field.conversion is None
        ):
            return field.expression
    return None


def _cuda_leaves(ctx, body) -> Optional[list]:
    """The assignments of a CUDA branch: its single assignment, or every leaf of a nested ``if``/``else`` (``if
    args.gpu: device = torch.device(f"cuda:{args.gpu}") else: device = torch.device("cuda")``), each of a CUDA
    device; None when the branch does anything else."""
    assign = _assignment(body)
    if assign is not None:
        value = device_value(ctx, assign.value)
        return [assign] if value and value[0] == "cuda" else None
    if not (isinstance(body, cst.IndentedBlock) and len(body.body) == 1 and isinstance(body.body[0], cst.If)):
        return None
    out, cur = [], body.body[0]
    while isinstance(cur, cst.If):
        leaves = _cuda_leaves(ctx, cur.body)
        if leaves is None:
            return None
        out += leaves
        cur = cur.orelse
    if not isinstance(cur, cst.Else):
        return None
    leaves = _cuda_leaves(ctx, cur.body)
    return None if leaves is None else out + leaves


def _assignment(body) -> Optional[cst.Assign]:
    """The single ``name = value`` statement a branch body consists of, else None."""
    line = body
    if isinstance(body, cst.IndentedBlock):
        if len(body.body) != 1:
            return None
        line = body.body[0]
    if not isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) or len(line.body) != 1:
        return None
    stmt = line.body[0]
    if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1:
        return stmt
    return None


def _target_code(node) -> Optional[str]:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = _target_code(node.value)
        return None if head is None else f"{head}.{node.attr.value}"
    return None


def device_choice(ctx, node) -> Optional[Choice]:
    """The device choice ``node`` is (see the module docstring), or None: an ``if`` chain with a final
    ``else``, every branch one assignment of a literal device to the same name, exactly one tested branch
    for CUDA, the ``else`` the CPU, and every other branch MPS or XPU."""
    if not isinstance(node, cst.If):
        return None
    target, cuda, others = None, None, []
    cur = node
    while isinstance(cur, cst.If):
        leaves = _cuda_leaves(ctx, cur.body)
        assign = leaves[0] if leaves else _assignment(cur.body)
        value = assign and device_value(ctx, assign.value)
        names = {_target_code(a.targets[0].target) for a in (leaves or [assign] if assign else [])}
        name = names.pop() if len(names) == 1 else None
        if not value or name is None or target not in (None, name):
            return None
        target = name
        kind, form, index = value
        if kind == "cuda":
            if cuda is not None:
                return None
            cuda = (cur.test, cur.body, (form, index))
        elif kind == "cpu":
            return None
        else:
            others.append((cur.test, kind))
        cur = cur.orelse
    if not isinstance(cur, cst.Else) or cuda is None:
        return None
    assign = _assignment(cur.body)
    value = assign and device_value(ctx, assign.value)
    if not value or value[0] != "cpu" or _target_code(assign.targets[0].target) != target:
        return None
    return Choice(node, target, cuda[0], cuda[1], cuda[2], others, cur.body)


def _calls(ctx, node, qnames) -> bool:
    """Whether ``node`` contains a call of one of ``qnames``."""
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Call) and _qname(ctx, cur.func) in qnames:
            return True
        stack.extend(cur.children)
    return False


def _read_names(node) -> List[str]:
    """Source text of the names and dotted attributes ``node`` reads (``use_cuda``, ``args.cuda``)."""
    out, stack = [], [node]
    while stack:
        cur = stack.pop()
        code = _target_code(cur) if isinstance(cur, (cst.Name, cst.Attribute)) else None
        if code is not None:
            out.append(code)
        elif not isinstance(cur, cst.Call):
            stack.extend(cur.children)
    return out


def flag_assignments(ctx, block: list, before: int) -> dict:
    """name -> (index, value) of the single-target assignments among the first ``before`` statements of
    ``block`` (the last one wins)."""
    found = {}
    for i, stmt in enumerate(block[:before]):
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
            small = stmt.body[0]
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                name = _target_code(small.targets[0].target)
                if name is not None:
                    found[name] = (i, small.value)
    return found


def probes(ctx, test, flags: dict, vendor: str) -> bool:
    """Whether ``test`` probes ``vendor``'s availability, itself or through a flag assigned in ``flags``."""
    qnames = VENDOR_PROBES[vendor]
    if _calls(ctx, test, qnames):
        return True
    return any(name in flags and _calls(ctx, flags[name][1], qnames) for name in _read_names(test))


def choices_in(ctx, block: list) -> list:
    """``(index, Choice)`` of the device choices among the statements of ``block``."""
    return [(i, c) for i, s in enumerate(block) if isinstance(s, cst.If) for c in [device_choice(ctx, s)] if c]


def cuda_flags(ctx, block: list) -> set:
    """Ids of the statements of ``block`` that assign a flag a device choice of the block tests for CUDA
    (``use_cuda = not args.no_cuda and torch.cuda.is_available()`` before ``if use_cuda:``)."""
    out = set()
    for i, choice in choices_in(ctx, block):
        flags = flag_assignments(ctx, block, i)
        for name in _read_names(choice.cuda_test):
            if name in flags:
                out.add(id(block[flags[name][0]]))
    return out


def _paren(node):
    if (
        isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.UnaryOperation, cst.Subscript, cst.Comparison))
        or node.lpar
    ):
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


class _Widen(cst.CSTTransformer):
    """``torch.cuda.is_available()`` -> ``torch.accelerator.is_available()`` in a test."""

    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx

    def leave_Call(self, original, updated):
        if _qname(self.ctx, original.func) == "torch.cuda.is_available":
            return updated.with_changes(func=self.ctx.torch_attr("accelerator.is_available"))
        return updated


class _Replace(cst.CSTTransformer):
    """Replace the nodes whose ids are keys of ``values`` (all at once: one replacement rebuilds the tree the
    others are found in)."""

    def __init__(self, values: dict):
        super().__init__()
        self.values = values

    def on_leave(self, original, updated):
        return self.values.get(id(original), updated)


def _accelerator_value(ctx, form: str, index):
    kind = ctx.device_type()
    if form == "device":
        args = [cst.Arg(kind)] + ([cst.Arg(index)] if index is not None else [])
        return cst.Call(ctx.torch_attr("device"), args)
    if index is None:
        return kind
    return cst.parse_expression(f'f"{{{ctx.device_type_code()}}}:{cst.Module([]).code_for_node(index)}"')


def rewrite(ctx, block: list, index: int, choice: Choice, source_text: str) -> list:
    """``block`` with the device choice at ``index`` replaced (see the module docstring); the flags only the
    dropped branches read are removed."""
    flags = flag_assignments(ctx, block, index)
    covered = probes(ctx, choice.cuda_test, flags, "cuda") or probes(ctx, choice.cuda_test, flags, "accelerator")
    operands = [choice.cuda_test.visit(_Widen(ctx))]
    drop = set()
    for other, vendor in choice.others:
        names = _read_names(other)
        if covered and probes(ctx, other, flags, vendor):
            for name in names:
                if name in flags and len(re.findall(rf"(?<![\w.]){re.escape(name)}\b", source_text)) == 2:
                    drop.add(flags[name][0])
            continue
        operands.append(other)
    test = operands[0]
    for other in operands[1:]:
        test = cst.BooleanOperation(test if test is not operands[0] else _paren(test), cst.Or(), _paren(other))
    values = {}
    for assign in _cuda_leaves(ctx, choice.cuda_body):
        _, form, device_index = device_value(ctx, assign.value)
        values[id(assign.value)] = _accelerator_value(ctx, form, device_index)
    body = choice.cuda_body.visit(_Replace(values))
    new_if = choice.node.with_changes(test=test, body=body, orelse=cst.Else(body=choice.cpu_body))
    return [new_if if i == index else s for i, s in enumerate(block) if i not in drop]


def _first_call(ctx, node, qnames):
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Call) and _qname(ctx, cur.func) in qnames:
            return cur
        stack.extend(reversed(cur.children))
    return None


def cuda_probe(ctx, block: list, index: int, choice: Choice):
    """The ``torch.cuda.is_available()`` call the choice's CUDA test makes, itself or through a flag assigned
    before it in ``block`` (``use_cuda = not args.no_cuda and torch.cuda.is_available()``); None when the test
    probes nothing (a switch of the user's own)."""
    call = _first_call(ctx, choice.cuda_test, VENDOR_PROBES["cuda"])
    if call is None:
        flags = flag_assignments(ctx, block, index)
        for name in _read_names(choice.cuda_test):
            if name in flags:
                call = _first_call(ctx, flags[name][1], VENDOR_PROBES["cuda"])
                if call is not None:
                    break
    return call


def derived_type_operand(node) -> Optional[cst.BaseExpression]:
    """``X`` when ``node`` is ``"cuda" if "cuda" in X else "cpu"`` (or ``... if X.startswith("cuda") ...``): the
    device type derived from a device name, written for CUDA only (nanoGPT's ``device_type``); else None."""
    if not isinstance(node, cst.IfExp) or string_value(node.body) != "cuda" or string_value(node.orelse) != "cpu":
        return None
    test = node.test
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if isinstance(target.operator, cst.In) and string_value(test.left) == "cuda":
            return target.comparator
    if (
        isinstance(test, cst.Call)
        and isinstance(test.func, cst.Attribute)
        and test.func.attr.value == "startswith"
        and len(test.args) == 1
        and string_value(test.args[0].value) == "cuda"
    ):
        return test.func.value
    return None
