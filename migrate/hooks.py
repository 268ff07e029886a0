"""Rule declaration, handler registration and dispatch: the API rule modules import.

Rule modules (``migrate/rules/<family>.py``) declare :class:`~neuron_conformance.migrate.rule.Rule` objects with
:func:`rule` and handlers with the decorators below. Dispatch is keyed by qualified name
(calls and references) or by method name (``x.cuda()``), so a file costs one traversal whatever
the number of rules. Loading the rule modules and selecting codes is :mod:`neuron_conformance.migrate.registry`
(which re-exports this module), so that rule modules never import the module that imports them.
"""

from __future__ import annotations

from typing import Callable, Dict, List

import libcst as cst

from neuron_conformance.migrate.rule import APPLICABILITIES, DOC_SECTIONS, Rule

RULES: Dict[str, Rule] = {}
CALLS: Dict[str, List[Callable]] = {}
CALL_PREFIXES: List[tuple] = []
METHODS: Dict[str, List[Callable]] = {}
ANY_CALL: List[Callable] = []
REFERENCES: Dict[str, List[Callable]] = {}
REFERENCE_PREFIXES: List[tuple] = []
STRINGS: List[Callable] = []
ATTR_NAMES: Dict[str, List[Callable]] = {}
NODES: Dict[str, List[Callable]] = {}
#: Fallback handlers for ``torch.cuda.*`` names no specific handler claims.
FALLBACK: List[Callable] = []


def rule(code: str, name: str, message: str, fix_title: str, applicability: str, min_torch=(2, 6), **doc) -> Rule:
    """Declare a rule. ``doc`` keywords are the sections of :data:`neuron_conformance.migrate.rule.DOC_SECTIONS`.

    Raises:
        ValueError: duplicate code, bad code format, unknown applicability or missing section.
    """
    if code in RULES:
        raise ValueError(f"duplicate rule code {code!r}")
    if not (len(code) == 5 and code.startswith("NM") and code[2:].isdigit()):
        raise ValueError(f"rule code {code!r} must be 'NM' + three digits")
    if applicability not in APPLICABILITIES:
        raise ValueError(f"{code}: applicability {applicability!r} not in {APPLICABILITIES}")
    missing = [s for s in DOC_SECTIONS if not doc.get(s, "").strip()]
    if missing:
        raise ValueError(f"{code}: documentation sections missing: {missing}")
    r = Rule(
        code=code,
        name=name,
        message=message,
        fix_title=fix_title,
        applicability=applicability,
        doc=dict(doc),
        min_torch=tuple(min_torch),
    )
    RULES[code] = r
    return r


def _by_qualified_name(qnames, exact: dict, prefixes: list):
    """A decorator registering its function under each of ``qnames`` in ``exact``, or in ``prefixes`` for a
    name ending in ``*`` (matched as a prefix)."""

    def deco(fn):
        for q in qnames:
            if q.endswith("*"):
                prefixes.append((q[:-1], fn))
            else:
                exact.setdefault(q, []).append(fn)
        return fn

    return deco


def on_call(*qnames: str):
    """Register a handler ``(ctx, call) -> Finding | list | None`` for calls to ``qnames``
    (a trailing ``*`` matches a prefix)."""
    return _by_qualified_name(qnames, CALLS, CALL_PREFIXES)


def on_method(*names: str):
    """Register a handler for method calls ``<expr>.<name>(...)`` whatever the receiver."""

    def deco(fn):
        for n in names:
            METHODS.setdefault(n, []).append(fn)
        return fn

    return deco


def on_any_call(fn):
    ANY_CALL.append(fn)
    return fn


def on_reference(*qnames: str):
    """Register a handler for non-call references (``x = torch.cuda.Event``; a decorator)."""
    return _by_qualified_name(qnames, REFERENCES, REFERENCE_PREFIXES)


def on_attr_name(*names: str):
    """Register a handler for attribute reads ``<expr>.<name>`` whose receiver is not a known
    module (``x.is_cuda``)."""

    def deco(fn):
        for n in names:
            ATTR_NAMES.setdefault(n, []).append(fn)
        return fn

    return deco


def on_string(fn):
    STRINGS.append(fn)
    return fn


def on_node(kind: str):
    """Register a node hook (the pass, :mod:`neuron_conformance.migrate.rule_pass`, lists the kinds it serves).

    ``"visit:<Kind>"``: ``(ctx, node) -> None``, run when a node of that kind is entered; rule
    modules keep their per-file state with it (``ctx.rule_state``); exceptions propagate (the
    file is reported as an internal error). ``"<Kind>"``: ``(ctx, node) -> Finding | list |
    None``, run when the node is left (returning None is fine for a hook that only pops state).
    """

    def deco(fn):
        NODES.setdefault(kind, []).append(fn)
        return fn

    return deco


def fallback(fn):
    FALLBACK.append(fn)
    return fn


def handler_codes(handler) -> str:
    """The rule codes a handler can report, read from the ``"NMxxx"`` string constants of its
    code object and of the functions nested in it (``"NM105"``; ``"NM101/NM102"``); the
    handler's qualified name when it has none (a hook that only keeps state)."""
    found = set()
    stack = [getattr(handler, "__code__", None)]
    while stack:
        code = stack.pop()
        if code is None:
            continue
        for const in code.co_consts:
            if isinstance(const, str) and len(const) == 5 and const.startswith("NM") and const[2:].isdigit():
                found.add(const)
            elif hasattr(const, "co_consts"):
                stack.append(const)
    if found:
        return "/".join(sorted(found))
    return f"{getattr(handler, '__module__', '?')}.{getattr(handler, '__name__', '?')}"


def _safe(handler, *args):
    """Run one handler; a handler that raises is recorded on the context (as ``"<codes>:
    <exception type>: <message>"``, codes from :func:`handler_codes`) and skipped, so one faulty
    rule cannot stop the others; the engine then reports the file as a tool error."""
    try:
        return handler(*args)
    except Exception as exc:  # noqa: BLE001 - isolate rule bugs
        args[0].errors.append(f"{handler_codes(handler)}: {type(exc).__name__}: {exc}")
        return None


def _as_list(result) -> list:
    if result is None:
        return []
    if isinstance(result, list):
        return result
    return [result]


def dispatch_call(ctx, call: cst.Call) -> list:
    out: list = []
    q = ctx.qname(call.func)
    if q is not None:
        handlers = CALLS.get(q)
        if handlers:
            for h in handlers:
                out += _as_list(_safe(h, ctx, call, q))
        else:
            for prefix, h in CALL_PREFIXES:
                if q.startswith(prefix):
                    out += _as_list(_safe(h, ctx, call, q))
            if not out:
                for h in FALLBACK:
                    out += _as_list(_safe(h, ctx, call, q))
    elif isinstance(call.func, cst.Attribute):
        for h in METHODS.get(call.func.attr.value, ()):
            out += _as_list(_safe(h, ctx, call))
    for h in ANY_CALL:
        out += _as_list(_safe(h, ctx, call, q))
    return out


def dispatch_reference(ctx, node) -> list:
    q = ctx.qname(node)
    if q is None:
        return []
    out: list = []
    handlers = REFERENCES.get(q)
    if handlers:
        for h in handlers:
            out += _as_list(_safe(h, ctx, node, q))
        return out
    for prefix, h in REFERENCE_PREFIXES:
        if q.startswith(prefix):
            out += _as_list(_safe(h, ctx, node, q))
    if not out:
        for h in FALLBACK:
            out += _as_list(_safe(h, ctx, node, q))
    return out


def dispatch_string(ctx, node) -> list:
    out: list = []
    for h in STRINGS:
        out += _as_list(_safe(h, ctx, node))
    return out


def dispatch_attr_name(ctx, node: cst.Attribute) -> list:
    """Results of the :func:`on_attr_name` handlers for ``node.attr`` (one per handler, None
    included; a handler's list is not flattened)."""
    return [_safe(h, ctx, node) for h in ATTR_NAMES.get(node.attr.value, ())]


def dispatch_node(kind: str, ctx, node) -> list:
    out: list = []
    for h in NODES.get(kind, ()):
        out += _as_list(_safe(h, ctx, node))
    return out


_AVAILABILITY = {
    "torch.cuda.is_available",
    "torch.accelerator.is_available",
    "torch.xpu.is_available",
    "torch.backends.mps.is_available",
}


def is_availability_test(ctx, test: cst.CSTNode) -> bool:
    """True when an ``if`` test calls an availability probe (possibly inside ``and``/``not``)."""
    if isinstance(test, cst.Call):
        return ctx.qname(test.func) in _AVAILABILITY
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return is_availability_test(ctx, test.left) or is_availability_test(ctx, test.right)
    return False
