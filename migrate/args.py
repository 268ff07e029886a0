"""Argument normalisation: bind a call's arguments to the *old* signature, then rebuild them
for the *new* one.

Why: several device-generic replacements reorder or restrict parameters (``torch/accelerator/memory.py``, torch.Stream, torch.Event, ``torch/amp/``):
``torch.cuda.amp.autocast(enabled, dtype, cache_enabled)`` vs ``torch.autocast(device_type,
dtype, enabled, cache_enabled)``; ``torch.cuda.amp.GradScaler(init_scale, ...)`` vs
``torch.amp.GradScaler(device, init_scale, ...)``; ``torch.cuda.Event(enable_timing, ...)`` vs
``torch.Event(device, *, enable_timing, ...)``; and the ``torch.accelerator`` memory and sync
functions take their device positional-only (``memory_allocated(device_index=None, /)``).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import libcst as cst


def bind(call: cst.Call, params: Sequence[str]) -> Optional[Dict[str, cst.Arg]]:
    """Map each argument of ``call`` to a parameter name of the old signature ``params``.

    Returns None when the call cannot be bound statically: ``*args``/``**kwargs``, more
    positional arguments than parameters, an unknown keyword, or a parameter given twice.
    """
    bound: Dict[str, cst.Arg] = {}
    pos = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            if pos >= len(params):
                return None
            bound[params[pos]] = arg
            pos += 1
        else:
            name = arg.keyword.value
            if name not in params or name in bound:
                return None
            bound[name] = arg
    return bound


def kw(name: str, value: cst.BaseExpression) -> cst.Arg:
    """A ``name=value`` argument with PEP 8 spacing."""
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )


def pos(value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(value=value)


def value_of(arg: cst.Arg) -> cst.BaseExpression:
    return arg.value


def build_args(positional: List[cst.BaseExpression], keywords: List[tuple]) -> List[cst.Arg]:
    """Arguments list with ``, `` separators: positionals, then ``(name, value)`` keywords."""
    args = [pos(v) for v in positional] + [kw(n, v) for n, v in keywords]
    out = []
    for i, a in enumerate(args):
        if i < len(args) - 1:
            a = a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        out.append(a)
    return out


def rebuild(
    updated: cst.Call,
    original_bound: Dict[str, cst.Arg],
    new_positional: Sequence[str],
    new_keywords: Sequence[str],
    rename: Optional[Dict[str, str]] = None,
    leading: Sequence[cst.BaseExpression] = (),
    extra_kw: Sequence[tuple] = (),
) -> List[cst.Arg]:
    """New argument list for ``updated`` (same arguments as the original, already transformed).

    ``original_bound`` is :func:`bind` applied to the *original* call; the values are taken from
    the *updated* call at the same argument index so nested fixes are kept. Parameters named in
    ``new_positional`` are emitted positionally (in that order, stopping at the first missing
    one; later ones become keywords unless positional-only), the rest as keywords in
    ``new_keywords`` order.
    """
    return _assemble(updated, original_bound, new_positional, new_keywords, rename or {}, leading, extra_kw)


def rebind(updated: cst.Call, original_bound: Dict[str, cst.Arg]) -> Dict[str, cst.BaseExpression]:
    """Parameter name -> value expression of ``updated``, the call :func:`bind` bound as
    ``original_bound`` after fixes of its arguments (same arguments in the same order).

    Positional arguments take the names of the positionally bound parameters, in order;
    keywords keep their names. Raises IndexError when ``updated`` has more positional arguments
    than ``original_bound``.
    """
    values: Dict[str, cst.BaseExpression] = {}
    pos_index = 0
    # Rebind on the updated call using the same parameter list order as the original binding.
    posnames = [n for n, a in original_bound.items() if a.keyword is None]
    for arg in updated.args:
        if arg.keyword is None:
            values[posnames[pos_index]] = arg.value
            pos_index += 1
        else:
            values[arg.keyword.value] = arg.value
    return values


def _assemble(updated, original_bound, new_positional, new_keywords, rename, leading, extra_kw):
    # Values from the updated call, matched by keyword or position.
    values = {rename.get(k, k): v for k, v in rebind(updated, original_bound).items()}
    positional = list(leading)
    for name in new_positional:
        if name in values:
            positional.append(values.pop(name))
        else:
            break
    keywords = list(extra_kw)
    for name in new_keywords:
        if name in values:
            keywords.append((name, values.pop(name)))
    for name, v in values.items():  # anything not placed keeps its keyword
        keywords.append((name, v))
    return build_args(positional, keywords)


def int_literal(node: cst.CSTNode) -> Optional[int]:
    """The value of an integer literal (``3``, ``-1``), else None."""
    if isinstance(node, cst.Integer):
        try:
            return int(node.value, 0)
        except ValueError:
            return None
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        v = int_literal(node.expression)
        return -v if v is not None else None
    return None


def string_value(node: cst.CSTNode) -> Optional[str]:
    """The value of a plain (non f-, non bytes) string literal, else None.

    A literal without backslashes or carriage returns is its text between the quotes (no
    evaluation: LibCST's ``evaluated_value`` compiles the literal, the costliest part of string
    rules on large files); any other goes through ``evaluated_value``."""
    if isinstance(node, cst.SimpleString):
        prefix = node.prefix.lower()
        if "b" in prefix or "f" in prefix:
            return None
        body = node.value[len(prefix) :]
        q = 3 if body[:3] in ('"""', "'''") else 1
        inner = body[q:-q]
        if "\\" not in inner and "\r" not in inner:
            return inner
        try:
            return node.evaluated_value if isinstance(node.evaluated_value, str) else None
        except Exception:
            return None
    return None
