"""CUDA device strings that are built rather than written out, in device-value positions.

:func:`device_value_finding` extends :func:`neuron_conformance.migrate.rules._common.device_arg_finding` (a literal
``"cuda"``/``"cuda:N"`` or ``f"cuda:{i}"``) to the constructions real scripts use, resolved when
the CUDA part is a literal:

* ``"cuda:{}".format(gpu)`` -> ``"{}:{}".format(DEVICE_TYPE, gpu)`` (automatic and named fields
  only: a numbered field such as ``{0}`` would shift);
* ``"cuda:%d" % gpu`` -> ``"%s:%d" % (DEVICE_TYPE, gpu)`` (a tuple on the right gets the device
  type first; a mapping on the right, ``%(name)s``, is left alone);
* ``"cuda:" + str(gpu)`` -> ``f"{DEVICE_TYPE}:" + str(gpu)``, ``"cuda" + suffix`` ->
  ``DEVICE_TYPE + suffix`` (the leftmost operand of the sum);
* ``"cuda" if args.cuda else "cpu"`` -> ``DEVICE_TYPE if args.cuda else "cpu"``: each CUDA
  literal branch of a conditional value (nested conditionals too) is its own finding.

Each result is a string naming the same device on CUDA and the current accelerator elsewhere.
"""

from __future__ import annotations

import re
import string
from typing import List, Optional

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.rules._common import SAFE, Finding, device_arg_finding

_HEAD = re.compile(r"cuda(?=:|$)")


def _format_fields_ok(template: str) -> bool:
    """True when every replacement field of ``template`` is automatic (``{}``, ``{:d}``) or named."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError:
        return False
    return all(not f.split(".")[0].split("[")[0].isdigit() for f in fields)


def _with_value(node: cst.SimpleString, value: str) -> cst.SimpleString:
    """``node`` with its text replaced by ``value`` (same prefix and quote)."""
    quote = node.quote
    body = value.replace("\\", "\\\\").replace(quote[0], "\\" + quote[0]) if len(quote) == 1 else value
    return node.with_changes(value=f"{node.prefix}{quote}{body}{quote}")


def _format_finding(ctx, code: str, call: cst.Call) -> Optional[Finding]:
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "format"):
        return None
    value = string_value(func.value)
    if value is None or not value.startswith("cuda:") or not _format_fields_ok(value):
        return None
    if any(a.star for a in call.args):
        return None

    def fix(updated: cst.Call):
        literal = _with_value(updated.func.value, "{}" + value[len("cuda") :])
        args = [cst.Arg(ctx.device_type())] + list(updated.args)
        return updated.with_changes(func=updated.func.with_changes(value=literal), args=args)

    return Finding(code, call, {"value": ctx.code(call)}, fix=fix, applicability=SAFE)


def _percent_finding(ctx, code: str, node: cst.BinaryOperation) -> Optional[Finding]:
    value = string_value(node.left)
    if value is None or not value.startswith("cuda:") or "%(" in value or isinstance(node.right, cst.Dict):
        return None

    def fix(updated: cst.BinaryOperation):
        literal = _with_value(updated.left, "%s" + value[len("cuda") :])
        right = updated.right
        if isinstance(right, cst.Tuple) and right.elements:
            elements = [cst.Element(ctx.device_type())] + list(right.elements)
            right = right.with_changes(elements=elements)
        else:
            right = cst.Tuple(
                [
                    cst.Element(ctx.device_type()),
                    cst.Element(right.with_changes(lpar=[], rpar=[]) if hasattr(right, "lpar") else right),
                ]
            )
        return updated.with_changes(left=literal, right=right)

    return Finding(code, node, {"value": ctx.code(node)}, fix=fix, applicability=SAFE)


def _sum_finding(ctx, code: str, node: cst.BinaryOperation) -> Optional[Finding]:
    leftmost = node
    while isinstance(leftmost, cst.BinaryOperation) and isinstance(leftmost.operator, cst.Add):
        leftmost = leftmost.left
    value = string_value(leftmost)
    if value not in ("cuda", "cuda:"):
        return None

    def fix(updated: cst.SimpleString):
        if value == "cuda":
            return ctx.device_type()
        name = ctx.device_type_code('"')
        return cst.parse_expression(f'f"{{{name}}}:"')

    return Finding(code, leftmost, {"value": ctx.code(node)}, fix=fix, applicability=SAFE)


def _conditional_findings(ctx, code: str, node: cst.IfExp) -> List[Finding]:
    out: List[Finding] = []
    cur = node
    while isinstance(cur, cst.IfExp):
        f = device_value_finding(ctx, code, cur.body)
        if f:
            out.append(f)
        cur = cur.orelse
    f = device_value_finding(ctx, code, cur)
    if f:
        out.append(f)
    return out


def device_value_finding(ctx, code: str, node):
    """Finding(s) for a device-value node: a literal (:func:`device_arg_finding`), a string
    built by ``.format``/``%``/``+`` from a CUDA literal, or a conditional whose branches are.

    Returns a :class:`Finding`, a list of them (a conditional), or None. Nodes in ``ctx.skip``
    (the device-selection ternary, handled whole by NM102) are not looked into.
    """
    if id(node) in ctx.skip:
        return None
    f = device_arg_finding(ctx, code, node)
    if f is not None:
        return f
    if isinstance(node, cst.Call):
        return _format_finding(ctx, code, node)
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.Modulo):
            return _percent_finding(ctx, code, node)
        if isinstance(node.operator, cst.Add):
            return _sum_finding(ctx, code, node)
    if isinstance(node, cst.IfExp):
        return _conditional_findings(ctx, code, node) or None
    return None
