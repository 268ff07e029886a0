"""Fix builders and string-use classification shared by the rule families, and the one
cross-rule policy: a value stored under a ``"cuda"`` key of a per-device table is reported by no
rule (node hooks at the end of this module, loaded with every rule module)."""

from __future__ import annotations

import re
from typing import Callable, Optional, Sequence

import libcst as cst

from neuron_conformance.migrate.args import bind, build_args, rebuild, string_value
from neuron_conformance.migrate.hooks import on_node
from neuron_conformance.migrate.rule import REPORT, SAFE, UNSAFE, Finding

#: Names of arguments that almost always hold a device ordinal (an ``int``), used to decide
#: whether ``x.cuda(<name>)`` can become ``x.to(torch.device(<type>, <name>))``.
INT_LIKE = re.compile(
    r"(^|_)(rank|gpu|gpus|gpu_id|gpu_idx|idx|index|ordinal|device_id|dev_id|local_rank|"
    r"i|d|n|id|num)$|(rank|idx|index|gpu|ordinal)$",
    re.I,
)


def int_like(ctx, node) -> bool:
    """True for an int literal, ``int(...)``, or a name/attribute that reads like an ordinal."""
    if isinstance(node, cst.Integer):
        return True
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "int":
        return True
    if isinstance(node, cst.Name):
        return bool(INT_LIKE.search(node.value))
    if isinstance(node, cst.Attribute):
        return bool(INT_LIKE.search(node.attr.value))
    return False


def new_call(
    ctx,
    call: cst.Call,
    new_dotted: str,
    old_params: Optional[Sequence[str]] = None,
    new_positional: Sequence[str] = (),
    new_keywords: Sequence[str] = (),
    rename=None,
    leading: Callable = None,
    extra_kw: Callable = None,
) -> Optional[Callable]:
    """A fix that calls ``torch.<new_dotted>`` instead, with arguments normalised.

    With ``old_params`` the call's arguments are bound to the old signature first (None is
    returned when that is impossible: ``*args``, unknown keywords) and re-emitted: the
    parameters in ``new_positional`` positionally, those in ``new_keywords`` as keywords.
    ``leading``/``extra_kw`` are callables evaluated at fix time returning extra positional
    values / ``(name, value)`` keywords (so the device constant is only added when used).
    """
    bound = None
    if old_params is not None:
        bound = bind(call, old_params)
        if bound is None:
            return None
    head = ctx.head_name(call.func)

    def fix(updated: cst.Call):
        if head:
            ctx.rewritten_heads.add(head)
        func = ctx.torch_attr(new_dotted)
        if bound is None and leading is None and extra_kw is None:
            return updated.with_changes(func=func)
        if bound is None:
            lead = list(leading()) if leading else []
            extra = list(extra_kw()) if extra_kw else []
            args = build_args(lead, extra) if lead or extra else []
            if updated.args:
                old = list(updated.args)
                if args:
                    args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                args = args + old
            return updated.with_changes(func=func, args=args)
        args = rebuild(
            updated,
            bound,
            new_positional,
            new_keywords,
            rename,
            leading() if leading else (),
            extra_kw() if extra_kw else (),
        )
        return updated.with_changes(func=func, args=args)

    return fix


def rename_reference(ctx, node, new_dotted: str) -> Callable:
    """A fix replacing a dotted reference (``torch.cuda.Event``) with ``torch.<new_dotted>``."""
    head = ctx.head_name(node)

    def fix(updated):
        if head:
            ctx.rewritten_heads.add(head)
        new = ctx.torch_attr(new_dotted)
        return new.with_changes(lpar=updated.lpar, rpar=updated.rpar) if hasattr(updated, "lpar") else new

    return fix


def device_string_expr(ctx, value: str) -> Optional[cst.BaseExpression]:
    """Replacement for a CUDA device string: ``"cuda"`` -> the device-type constant,
    ``"cuda:N"`` -> ``f"{DEVICE_TYPE}:N"``; None for anything else."""
    if value == "cuda":
        return ctx.device_type()
    m = re.fullmatch(r"cuda:(\d+)", value)
    if m:
        name = ctx.device_type_code('"')
        return cst.parse_expression(f'f"{{{name}}}:{m.group(1)}"')
    return None


def is_cuda_string(value: Optional[str]) -> bool:
    return value is not None and (value == "cuda" or re.fullmatch(r"cuda:\d+", value) is not None)


def cuda_fstring(node) -> bool:
    """``f"cuda:{rank}"``: a formatted string whose literal head is ``cuda:``."""
    if isinstance(node, cst.FormattedString) and "b" not in node.prefix.lower() and node.parts:
        first = node.parts[0]
        return isinstance(first, cst.FormattedStringText) and first.value == "cuda:" and len(node.parts) == 2
    return False


def fstring_fix(ctx):
    def fix(updated: cst.FormattedString):
        parts = list(updated.parts)
        code = ctx.device_type_code(updated.start)
        parts[0] = cst.FormattedStringExpression(expression=cst.parse_expression(code))
        parts.insert(1, cst.FormattedStringText(":"))
        return updated.with_changes(parts=parts)

    return fix


def device_arg_finding(ctx, code: str, node, fmt=None, applicability=SAFE) -> Optional[Finding]:
    """Finding for a device-argument value node that is ``"cuda"``, ``"cuda:N"`` or ``f"cuda:{x}"``."""
    value = string_value(node)
    if is_cuda_string(value):
        return Finding(
            code,
            node,
            fmt or {"value": value},
            fix=lambda updated: device_string_expr(ctx, value),
            applicability=applicability,
        )
    if cuda_fstring(node):
        return Finding(code, node, fmt or {"value": ctx.code(node)}, fix=fstring_fix(ctx), applicability=applicability)
    return None


def contains(root: cst.CSTNode, target: cst.CSTNode) -> bool:
    """Whether ``target`` is ``root`` or one of its descendants (identity)."""
    if root is target:
        return True
    return any(contains(c, target) for c in root.children)


class _QNames(cst.CSTVisitor):
    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx
        self.names = []

    def visit_Attribute(self, node):
        q = self.ctx.qname(node)
        if q:
            self.names.append(q)
            return False
        return True

    def visit_Name(self, node):
        q = self.ctx.qname(node)
        if q:
            self.names.append(q)


def qualified_names_in(ctx, node) -> list:
    v = _QNames(ctx)
    node.visit(v)
    return v.names


def report(code: str, node, **fmt) -> Finding:
    return Finding(code, node, fmt)


__all__ = ["REPORT", "SAFE", "UNSAFE", "Finding"]


def string_use(ctx, node):
    """Where a string literal is used, as ``(kind, node)``:

    * ``("subscript", Subscript)``: an index, ``os.environ["X"]``;
    * ``("key", Dict)`` / ``("dict-value", Dict)``: a dict display's key or value;
    * ``("arg", Arg)``: an argument of a call (the ``Call`` is ``ctx.parent(Arg)``);
    * ``("compare", Comparison)``: an operand of a comparison;
    * ``("assign", Assign)``: the value assigned (also ``AnnAssign``);
    * ``("element", List|Tuple|Set)``: an element of a display (see :func:`container_use`);
    * ``("other", parent)``: anything else (a ``return`` value, a default, an f-string part...).

    Implicit concatenation (``"a" "b"``) is looked through.
    """
    parent, child = ctx.value_parent(node)
    if isinstance(parent, cst.SubscriptElement):
        return "subscript", ctx.parent(parent)
    if isinstance(parent, cst.DictElement):
        return ("key" if parent.key is child else "dict-value"), ctx.parent(parent)
    if isinstance(parent, cst.Arg):
        return "arg", parent
    if isinstance(parent, cst.ComparisonTarget):
        return "compare", ctx.parent(parent)
    if isinstance(parent, cst.Comparison):
        return "compare", parent
    if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is child:
        return "assign", parent
    if isinstance(parent, (cst.Element, cst.StarredElement)):
        return "element", ctx.parent(parent)
    return "other", parent


def container_use(ctx, node):
    """:func:`string_use` of the outermost list/tuple/set display holding ``node``."""
    kind, where = string_use(ctx, node)
    depth = 0
    while kind == "element" and depth < 8:
        kind, where = string_use(ctx, where)
        depth += 1
    return kind, where


def comparison_others(comparison, node) -> list:
    """The operands of ``comparison`` next to ``node`` (an operand, possibly via a display)."""
    operands = [comparison.left] + [t.comparator for t in comparison.comparisons]
    out = []
    for i, op in enumerate(operands):
        if op is node or contains(op, node):
            if i > 0:
                out.append(operands[i - 1])
            if i + 1 < len(operands):
                out.append(operands[i + 1])
    return out


def name_tokens(node) -> set:
    """Lower-case ``_``-separated words of the last name in a dotted expression, subscript or
    call (``os.environ`` -> {"environ"}, ``e.args[0]`` -> {"args"}, ``str(exc)`` -> {"exc"})."""
    for _ in range(6):
        if isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Call):
            if isinstance(node.func, cst.Name) and node.func.value in ("str", "repr") and node.args:
                node = node.args[0].value
            else:
                node = node.func
        else:
            break
    if isinstance(node, cst.Attribute):
        name = node.attr.value
    elif isinstance(node, cst.Name):
        name = node.value
    else:
        return set()
    return {t for t in name.lower().split("_") if t}


# ------------------------------------------------------------------ per-device tables
def _is_cuda_key(node) -> bool:
    """A ``"cuda"`` string literal (the key of a per-device table)."""
    return (
        isinstance(node, cst.SimpleString)
        and node.value[-6:] in ('"cuda"', "'cuda'")
        and node.prefix.lower() in ("", "u", "r")
    )


@on_node("visit:Assign")
def _cuda_keyed_assignment(ctx, node):
    """``TABLE["cuda"] = torch.cuda.fn``: the CUDA entry of a per-device table is correct where
    it is; no rule reports the value."""
    for t in node.targets:
        target = t.target
        if (
            isinstance(target, cst.Subscript)
            and len(target.slice) == 1
            and isinstance(target.slice[0].slice, cst.Index)
            and _is_cuda_key(target.slice[0].slice.value)
        ):
            ctx.unreported.add(id(node.value))


@on_node("visit:DictElement")
def _cuda_keyed_entry(ctx, node):
    """``{"cuda": torch.cuda.device_count, "cpu": ...}``: as :func:`_cuda_keyed_assignment`."""
    if _is_cuda_key(node.key):
        ctx.unreported.add(id(node.value))
