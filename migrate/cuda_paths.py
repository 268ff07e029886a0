"""Paths that only CUDA, or only an older torch, takes: not reported (issue 17, precision).

Read on the session-11 held-out judgement of diffusers 0.42.1 and timm 1.0.31
(``benchmarks/results/migrate_precision.md``, "Session 12"). Each class is told by the code's
structure; each has a quiet example and a near miss that is still reported in
``tests/migrate/test_migrate_heldout_classes.py``.

1. **An old-torch fallback in an exception handler** (:func:`api_fallback_handler`): ``try:
   <a torch call naming no CUDA> except (AttributeError, TypeError): <CUDA code>``, as in
   ``try: scaler = torch.amp.GradScaler(device=d) except (AttributeError, TypeError): scaler =
   torch.cuda.amp.GradScaler()``. Only those exceptions (and ``ImportError``/``NameError``) mean
   "this torch lacks the API or the argument"; the device-generic path is the ``try`` body, and
   the handler serves a torch older than it (the standard: "a fallback for an older torch beside a
   device-generic path"). A handler for ``RuntimeError``/``Exception`` (a failure at run time, an
   out-of-memory retry), or a ``try`` body that names CUDA itself or calls no torch API, is still
   reported.
2. **An old-torch fallback after an optional import** (:func:`optional_import_fallback`): a name
   imported from ``torch`` in a module-level ``try`` whose ``except ImportError`` sets it to
   ``None``; the code under ``if <name> is None:``, the ``else`` of ``if <name> is not None:``, and
   the rest of the block after ``if <name> is not None: return ...``. The same shape around a name
   imported from another library is still reported.
3. **The default branch of a closed vendor chain** (:func:`closed_chain_default`): the ``else`` of
   ``if torch.xpu.is_available(): ... elif torch.mps.is_available(): ... else: <CUDA>`` (or of a
   conditional expression) where the scope admits only CUDA and the vendors the chain names: an
   early exit before the chain in the same function (``if not (torch.cuda.is_available() or
   torch.xpu.is_available()): return skip(...)``), or a check that raises in a method of the same
   class (``def validate_environment(self): if not (torch.cuda.is_available() or
   torch.xpu.is_available()): raise RuntimeError(...)``). There the default branch is reached only
   on CUDA: it is the CUDA branch of a per-vendor chain. The ``else`` of a chain with no such check,
   or with a check that admits a vendor the chain does not name, serves every other accelerator and
   is still reported (accelerate's and peft's chain defaults, judged true positives in session 11).
4. **A CUDA-only library's requirement** (:func:`library_requirement`): ``if not
   is_<lib>_available(): raise ... elif not torch.cuda.is_available(): raise ValueError("<lib> ...
   only available for GPU") else: <CUDA code>``: the CUDA requirement's message names the library
   probed in the same chain, so its author states that the library needs CUDA, and the ``else``
   (the library's own check, e.g. a test tensor on ``"cuda"``) is reached only there. Also a CUDA
   probe stored in a variable used only by a CUDA requirement (``ok = torch.cuda.is_available()``
   then ``if not ok: raise ValueError("... requires a CUDA GPU")``), the same requirement as
   :func:`neuron_conformance.migrate.deliberate.cuda_requirement` written in two statements. A
   requirement whose message names no library of the chain, or a variable that also picks a device,
   is still reported.
5. **A CUDA capability probe** (:func:`capability_function`, :func:`exits_before_capability`): a
   function named for a CUDA capability (``get_cuda_compute_capability``, words ``cuda``/``gpu``
   and ``capability``/``arch``/``properties``/``sm``), whose body asks what only CUDA can answer;
   and the test of an early exit ``if device.type != "cuda": return None`` followed in its block by
   a capability query (``torch.cuda.get_device_properties(d).L2_cache_size``), the early-exit form of
   session 9's "guard of a capability query". A function merely named for CUDA (``to_cuda``), or an
   early exit followed by other CUDA code, is still reported.

Public API: :func:`quiet` and the class predicates above. Used by
:mod:`neuron_conformance.migrate.rule_pass`.
"""
from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from neuron_conformance.migrate.cuda_reach import CAPABILITY, early_exit
from neuron_conformance.migrate.deliberate import (_CUDA_PROBE_NAME, _NAMES_CUDA, _OTHER_VENDOR, _names_cuda,
                                                   _names_in, _tests_cuda, cuda_requirement)
from neuron_conformance.migrate.traversal import walk_in_scope

_API_ERRORS = frozenset({"AttributeError", "TypeError", "ImportError", "ModuleNotFoundError", "NameError"})
_LIBRARY_PROBE = re.compile(r"^is_(?:torch_)?(\w+?)_available$")
_CAPABILITY_WORDS = frozenset({"capability", "capabilities", "arch", "archs", "properties", "props", "sm"})


def _qnames(ctx, node):
    return [q for n in walk_in_scope(node) if isinstance(n, (cst.Attribute, cst.Name)) for q in [ctx.qname(n)] if q]


# ------------------------------------------------------------------ 1. exception handlers
def _handler_names(handler: cst.ExceptHandler) -> set:
    t = handler.type
    elements = [e.value for e in t.elements] if isinstance(t, cst.Tuple) else [t]
    return {e.value if isinstance(e, cst.Name) else "" for e in elements}


def api_fallback_handler(ctx, handler: cst.ExceptHandler, try_node: cst.Try) -> bool:
    """``handler`` catches only missing-API errors after a ``try`` body that calls a torch API and
    names no CUDA (class 1)."""
    if handler.type is None or not _handler_names(handler) <= _API_ERRORS:
        return False
    if _names_cuda(ctx, try_node.body) or any("cuda" in q.split(".") for q in _qnames(ctx, try_node.body)):
        return False
    return any(q.startswith("torch.") for q in _qnames(ctx, try_node.body))


# ------------------------------------------------------------------ 2. optional imports
def _smalls(block) -> list:
    """The small statements of the simple statement lines of ``block``."""
    return [small for s in block.body if isinstance(s, cst.SimpleStatementLine) for small in s.body]


def _optional_torch_names(ctx) -> set:
    """Names a module-level ``try: from torch... import N / except ImportError: N = None`` binds."""
    out = set()
    for stmt in ctx.module.body:
        if not isinstance(stmt, cst.Try):
            continue
        imported = set()
        for small in _smalls(stmt.body):
            if isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative \
                    and ctx.code(small.module).split(".")[0] == "torch" and not isinstance(small.names, cst.ImportStar):
                imported.update((a.asname.name.value if a.asname else ctx.code(a.name)) for a in small.names)
        for h in stmt.handlers:
            for small in _smalls(h.body):
                if isinstance(small, cst.Assign) and isinstance(small.value, cst.Name) and small.value.value == "None":
                    out.update(t.target.value for t in small.targets
                               if isinstance(t.target, cst.Name) and t.target.value in imported)
    return out


def _none_test(test, names: set) -> Optional[str]:
    """``"is"`` for ``<name> is None``, ``"is not"`` for ``<name> is not None`` (a name of ``names``)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 or not isinstance(test.left, cst.Name) \
            or test.left.value not in names:
        return None
    c = test.comparisons[0]
    if not (isinstance(c.comparator, cst.Name) and c.comparator.value == "None"):
        return None
    return "is" if isinstance(c.operator, cst.Is) else "is not" if isinstance(c.operator, cst.IsNot) else None


def _exits(block) -> bool:
    body = block.body if isinstance(block, cst.IndentedBlock) else ()
    return bool(body) and isinstance(body[-1], cst.SimpleStatementLine) \
        and isinstance(body[-1].body[-1], (cst.Return, cst.Raise))


def optional_import_fallback(a, child, names: set) -> bool:
    """``child`` (a child of ``a``) is the old-torch side of a test of an optional torch name (class 2)."""
    if isinstance(a, (cst.If, cst.IfExp)):
        kind = _none_test(a.test, names)
        return kind == "is" and child is a.body or kind == "is not" and child is a.orelse
    if isinstance(a, (cst.IndentedBlock, cst.Module)):
        for s in a.body:
            if s is child:
                return False
            if isinstance(s, cst.If) and s.orelse is None and _none_test(s.test, names) == "is not" and _exits(s.body):
                return True
    return False


# ------------------------------------------------------------------ 3. closed vendor chains
def _vendors(ctx, node) -> set:
    """The vendors a probe names: ``{"cuda"}`` for a CUDA probe, ``{"xpu"}`` for ``torch.xpu.is_available()``."""
    out = {m.group(2).lower() for n in _names_in(node) for m in [_OTHER_VENDOR.search(n)] if m}
    if _tests_cuda(ctx, node):
        out.add("cuda")
    return out


def _or_operands(node):
    if isinstance(node, cst.BooleanOperation):
        return _or_operands(node.left) + _or_operands(node.right) if isinstance(node.operator, cst.Or) else [None]
    return [node]


def _admitted(ctx, stmt) -> Optional[set]:
    """For ``if not (P or Q ...): return/raise`` or ``if not P and not Q ...: ...`` (an ``if`` without
    ``else`` whose body exits), each operand a vendor probe: the vendors admitted past it."""
    if not isinstance(stmt, cst.If) or stmt.orelse is not None or not _exits(stmt.body):
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


def _chain_tests(ctx, a) -> list:
    """The tests of the ``if``/``elif`` chain ending at ``a`` (head first)."""
    tests, cur = [a.test], a
    parent = ctx.parent(cur)
    while isinstance(parent, cst.If) and parent.orelse is cur:
        tests.insert(0, parent.test)
        cur, parent = parent, ctx.parent(parent)
    if isinstance(a, cst.IfExp):
        while isinstance(parent, cst.IfExp) and parent.orelse is cur:
            tests.insert(0, parent.test)
            cur, parent = parent, ctx.parent(parent)
    return tests


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
    the vendors the chain names (class 3)."""
    a = path[i]
    tests = _chain_tests(ctx, a)
    named = set()
    for t in tests:
        v = _vendors(ctx, t)
        if not v or "cuda" in v:
            return False
        named |= v
    return any(adm - {"cuda"} <= named for adm in _admitted_in_scope(ctx, path, i))


# ------------------------------------------------------------------ 4. library requirements
def _raise_text(block) -> str:
    body = block.body if isinstance(block, cst.IndentedBlock) else ()
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or not isinstance(body[0].body[0], cst.Raise):
        return ""
    return " ".join(_names_in(body[0])).lower()


def library_requirement(ctx, a: cst.If) -> bool:
    """``a`` is a CUDA requirement (:func:`deliberate.cuda_requirement`) of an ``if``/``elif`` chain
    that also probes a library (``is_xformers_available()``), and its message names that library."""
    if not cuda_requirement(ctx, a):
        return False
    text = _raise_text(a.body)
    for t in _chain_tests(ctx, a):
        for n in walk_in_scope(t):
            if isinstance(n, cst.Call) and isinstance(n.func, (cst.Name, cst.Attribute)):
                name = n.func.value if isinstance(n.func, cst.Name) else n.func.attr.value
                m = _LIBRARY_PROBE.match(name)
                if m and not _OTHER_VENDOR.search(m.group(1)) and "cuda" not in m.group(1) and m.group(1) in text:
                    return True
    return False


def stored_requirement(ctx, block, stmt) -> bool:
    """``stmt`` is ``<name> = <CUDA probe>`` and ``<name>`` is used in ``block`` only by a later
    ``if not <name>: raise ...`` whose message names CUDA or a GPU (class 4)."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Assign):
        return False
    assign = stmt.body[0]
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name) \
            or not isinstance(assign.value, cst.Call):
        return False
    func = assign.value.func
    callee = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
    if ctx.qname(func) != "torch.cuda.is_available" and not _CUDA_PROBE_NAME.match(callee):
        return False
    name, found, after = assign.targets[0].target.value, False, False
    for s in block.body:
        if s is stmt:
            after = True
            continue
        if not after:
            continue
        test = s.test if isinstance(s, cst.If) else None
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) \
                and isinstance(test.expression, cst.Name) and test.expression.value == name and s.orelse is None \
                and _NAMES_CUDA.search(_raise_text(s.body)):
            found = True
            continue
        if any(isinstance(n, cst.Name) and n.value == name for n in walk_in_scope(s, skip_scopes=False)):
            return False
    return found


# ------------------------------------------------------------------ 5. capability probes
def capability_function(node: cst.FunctionDef) -> bool:
    """A function named for a CUDA capability (class 5)."""
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


# ------------------------------------------------------------------ entry point
def quiet(ctx, path: list, cache: dict) -> bool:
    """The finding whose node ends ``path`` (module first) is on a path of classes 1-5 (``cache``
    keeps the answers per node)."""
    optional = cache.get("optional torch names")
    if optional is None:
        optional = cache["optional torch names"] = _optional_torch_names(ctx)
    if isinstance(path[-1], cst.IfExp) and closed_chain_default(ctx, path, len(path) - 1):
        return True  # a device string built by the whole conditional (NM110 on `f"xpu:..." if ... else f"cuda:..."`)
    for i in range(len(path) - 1):
        a, child = path[i], path[i + 1]
        key = ("paths", id(a), id(child))
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = _quiet_step(ctx, path, i, optional)
        if hit:
            return True
    return False


def _quiet_step(ctx, path: list, i: int, optional: set) -> bool:
    a, child = path[i], path[i + 1]
    if isinstance(a, cst.Try):
        return False
    if isinstance(a, cst.ExceptHandler) and child is a.body:
        parent = ctx.parent(a)
        return isinstance(parent, cst.Try) and api_fallback_handler(ctx, a, parent)
    if optional and optional_import_fallback(a, child, optional):
        return True
    if isinstance(a, cst.FunctionDef):
        return capability_function(a)
    if isinstance(a, (cst.If, cst.IfExp)) and child is a.orelse and not isinstance(child, (cst.If, cst.IfExp)):
        if closed_chain_default(ctx, path, i):
            return True
    if isinstance(a, cst.If) and child is a.orelse and library_requirement(ctx, a):
        return True
    if isinstance(a, (cst.IndentedBlock, cst.Module)) and i + 2 < len(path):
        stmt = child
        if stored_requirement(ctx, a, stmt):
            return True
        if isinstance(stmt, cst.If) and path[i + 2] is stmt.test and exits_before_capability(ctx, a, stmt):
            return True
    return False
