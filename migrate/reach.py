"""What a widened availability guard makes reachable, and how far that code is fixed.

Rewriting ``torch.cuda.is_available()`` to ``torch.accelerator.is_available()`` makes the code it
guards run on every accelerator, not only on CUDA. Such a fix is allowed only when everything it
makes reachable is fixed in the same applicability tier or is already device-generic (issue 17):
``if args.gpu is not None and torch.cuda.is_available(): x = x.cuda(args.gpu)`` may be widened
under ``--fix --unsafe-fixes`` (where the ``.cuda(args.gpu)`` call is rewritten too), not under
``--fix`` alone, and never while a CUDA-only call or a ``"cuda"`` literal no rule rewrites stays.

The *region* of a guard call is the smallest construct whose behaviour its value decides: the
``if``/``elif``/``while`` statement or the conditional expression whose test contains the call
(through ``and``/``or``/``not``, comparisons such as ``torch.cuda.device_count() > 1``, and
parentheses), else the outermost boolean operation around it
(``ok = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0)``). A call
used on its own (``use_cuda = torch.cuda.is_available()``) has no region: the code that reads
the flag cannot be seen, and NM101 says so with its own (unsafe) applicability.

Public API: :func:`guard_region`, :func:`region_limit`, :func:`worst`. Used by
:mod:`neuron_conformance.migrate.rule_pass`, which collects the applicability of every finding in a read-only pass
before deciding any guard.
"""
from __future__ import annotations

import re
from typing import Dict, Optional, Set, Tuple

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.rule import REPORT, SAFE, UNSAFE

_RANK = {SAFE: 0, UNSAFE: 1, REPORT: 2}

#: Qualified-name prefixes that are CUDA-specific whether or not a rule reports them.
_CUDA_NAMES = ("torch.cuda.", "torch.backends.cudnn", "torch.backends.cuda", "torch.version.cuda",
               "torch.utils.cpp_extension")
_CUDA_LITERAL = re.compile(r"cuda(:\d+)?|nccl")  # a device string, or the CUDA-only collective backend


def worst(a: str, b: str) -> str:
    """The less applicable of two applicabilities (``safe`` < ``unsafe`` < ``report``)."""
    return a if _RANK[a] >= _RANK[b] else b


def guard_region(ctx, call: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The region (see the module docstring) of the availability call ``call``, or None.

    Args:
        ctx: the pass's :class:`neuron_conformance.migrate.context.Context` (for :meth:`~Context.parent`).
        call: the ``torch.cuda.is_available()`` call node.
    Returns:
        an ``If``, ``While``, ``IfExp`` or ``BooleanOperation`` node containing ``call``, or None.
    """
    child, cur = call, ctx.parent(call)
    outer_bool = None
    while isinstance(cur, (cst.BooleanOperation, cst.UnaryOperation, cst.Comparison, cst.ComparisonTarget)):
        if isinstance(cur, cst.BooleanOperation):
            outer_bool = cur
        child, cur = cur, ctx.parent(cur)
    if isinstance(cur, (cst.If, cst.While, cst.IfExp)) and cur.test is child:
        return cur
    return outer_bool


def _marker(ctx, node: cst.CSTNode) -> bool:
    """True for code that is CUDA-specific even when no rule reports it: a ``torch.cuda.*`` or
    cuDNN/``torch.version.cuda``/extension name, a ``.cuda(...)`` method call, a ``"cuda"``,
    ``"cuda:N"`` or ``"nccl"`` literal."""
    if isinstance(node, cst.SimpleString):
        value = string_value(node)  # None for bytes and odd literals: not a device string
        return value is not None and _CUDA_LITERAL.fullmatch(value) is not None
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "cuda":
        return ctx.qname(node.func) is None
    if isinstance(node, cst.Attribute):
        q = ctx.qname(node)
        return q is not None and q.startswith(_CUDA_NAMES)
    return False


def region_limit(ctx, region: cst.CSTNode, applicability: Dict[int, str],
                 guards: Set[int]) -> Tuple[str, str]:
    """The best applicability a guard over ``region`` may have, and why when it is not ``safe``.

    Args:
        ctx: the pass's context (qualified names, source text of nodes).
        region: a node returned by :func:`guard_region`.
        applicability: id(node) -> applicability of every finding of the read-only pass
            (``report`` for findings that are suppressed or have no fix).
        guards: ids of the guard calls themselves (neither counted nor treated as CUDA code).
    Returns:
        ``(applicability, reason)``: the worst applicability of the findings inside ``region``,
        ``report`` when CUDA-specific code no finding covers is there; ``reason`` names the first
        node that limits it ("" when ``safe``).
    """
    limit, culprit = SAFE, None
    stack = [(region, False)]
    while stack:
        node, covered = stack.pop()
        if id(node) in guards:
            covered = True
        elif id(node) in applicability:
            appl = applicability[id(node)]
            if _RANK[appl] > _RANK[limit]:
                limit, culprit = appl, node
            covered = True
        elif not covered and _marker(ctx, node) and limit != REPORT:
            limit, culprit = REPORT, node
        stack.extend((c, covered) for c in reversed(node.children))
    if culprit is None:
        return SAFE, ""
    snippet = " ".join(ctx.code(culprit).split())
    if len(snippet) > 60:
        snippet = snippet[:57] + "..."
    if limit == UNSAFE:
        return limit, f"fixed only with --unsafe-fixes: widening this check reaches `{snippet}`, whose fix is unsafe"
    return limit, f"not fixed: widening this check reaches `{snippet}`, which stays CUDA-specific"
