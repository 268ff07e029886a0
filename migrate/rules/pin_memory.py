"""NM308: pinned memory decided by an availability check (``torch/accelerator/memory.py``).

``pin_memory=`` (and a ``.pin_memory()`` call) is reported when an availability check (:data:`GATES`)
decides it:

* directly, in the value: ``DataLoader(ds, pin_memory=torch.cuda.is_available())``;
* through a variable set from one earlier in the file: ``use_cuda = not args.no_cuda and
  torch.cuda.is_available()`` (a plain name or an attribute such as ``args.cuda``), then
  ``pin_memory=use_cuda``;
* by the branch it sits in: ``pin_memory=True`` (any value that is not ``False``/``None``) in the body
  of an ``if`` or a conditional expression whose test reads the check or such a variable, as a call
  keyword or a ``"pin_memory"`` dict entry (``cuda_kwargs = {"num_workers": 1, "pin_memory": True}``
  under ``if use_cuda:``, ``kwargs = {"pin_memory": True} if use_cuda else {}``).

A check under ``not`` does not gate (``if not use_cuda:`` pins on the CPU-only path). The finding
is *advisory* (:attr:`neuron_conformance.migrate.rule.Finding.advisory`): it does not stop NM101 from
widening the check over it, since pinned memory works on most accelerators; it tells the user what
the widening reaches on a backend without a pinned-memory allocator.
"""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.context import dotted_parts
from neuron_conformance.migrate.hooks import on_any_call, on_node, rule
from neuron_conformance.migrate.rules._common import Finding
from neuron_conformance.migrate.traversal import child_nodes

rule(
    "NM308",
    "pin-memory-availability-gate",
    "Pinned memory (`{what}`) follows `{gate}`",
    "",
    "report",
    what='Finds a `pin_memory=` argument, a `"pin_memory"` dict entry (DataLoader, tensor factories, '
    "keyword dicts) or a `.pin_memory()` call that `torch.cuda.is_available()` or `torch.accelerator.is_available()` decides: "
    "in its value (`DataLoader(ds, pin_memory=torch.cuda.is_available())`), through a variable set "
    "from the check (`use_cuda = torch.cuda.is_available()` then `pin_memory=use_cuda`), or as a "
    "true value inside `if use_cuda:` or `... if use_cuda else ...`. Reported before and after NM101 "
    "widens the check.",
    why="Once the check is device-generic, memory is pinned on every accelerator; a backend without a "
    "pinned-memory allocator raises there or pins nothing (torch 2.13 lets no Python PrivateUse1 backend "
    "provide one: the emulated neuron device copies into pageable memory).",
    example="use_cuda = torch.cuda.is_available()\nif use_cuda:\n"
    '    loader_kwargs = {"num_workers": 1, "pin_memory": True}',
    use_instead="loader = DataLoader(ds, batch_size=32, pin_memory=PIN_MEMORY)  # decided per backend",
    fix_safety="No fix: whether the backend can pin memory is known to the user, not to the source "
    "(`torch.accelerator` has no query for it in torch 2.13). The finding does not stop NM101 "
    "from widening the check over it.",
    references="`torch/accelerator/memory.py`; PyTorch docs: torch.Tensor.pin_memory; "
    "`torch/utils/data/dataloader.py` (pin_memory).",
)

#: The availability checks that gate pinning.
GATES = ("torch.cuda.is_available", "torch.accelerator.is_available")


def _gate_vars(ctx) -> dict:
    """Per-file map: dotted variable name (``use_cuda``, ``args.cuda``) -> the check it was set from."""
    return ctx.rule_state(__name__, dict)


def _mentions_pinning(ctx) -> bool:
    """Whether the file's text says ``pin_memory`` at all (asked once per file): without it no
    NM308 finding is possible, and no hook below walks anything."""
    return ctx.rule_state(__name__ + ":text", lambda: "pin_memory" in ctx.source)


def _dotted(node) -> Optional[str]:
    parts = dotted_parts(node)
    return ".".join(parts) if parts else None


def gate_of(ctx, node: cst.CSTNode) -> Optional[Tuple[str, str]]:
    """``(label, check)`` when ``node`` reads an availability check outside ``not``: the call itself
    (label ``torch.cuda.is_available()``) or a variable set from one (label ``use_cuda``); else None.
    Iterative walk; a dotted name is matched whole (``args.cuda``), never its parts."""
    gates = _gate_vars(ctx)
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.UnaryOperation) and isinstance(cur.operator, cst.Not):
            continue
        if isinstance(cur, cst.Call):
            q = ctx.qname(cur.func)
            if q in GATES:
                return f"{q}()", q
        elif isinstance(cur, (cst.Name, cst.Attribute)) and gates:
            name = _dotted(cur)
            if name in gates:
                return name, gates[name]
            if isinstance(cur, cst.Name):
                continue
        stack.extend(child_nodes(cur))
    return None


@on_node("visit:Assign")
def _record_gate_variable(ctx, node: cst.Assign):
    """``use_cuda = <expr reading a check>`` records ``use_cuda``; any other value forgets it. A file
    that never says ``pin_memory`` needs no such variable (the common case: no walk at all)."""
    if not _mentions_pinning(ctx):
        return
    gates = _gate_vars(ctx)
    found = gate_of(ctx, node.value)
    for target in node.targets:
        name = _dotted(target.target)
        if name is None:
            continue
        if found is not None:
            gates[name] = found[1]
        else:
            gates.pop(name, None)


def _enclosing_gate(ctx, chain) -> Optional[Tuple[str, str]]:
    """The check deciding the innermost node of ``chain`` (outermost first): the test of an ``if``
    or conditional expression whose body (not ``else``) holds it."""
    for i in range(len(chain) - 2, -1, -1):
        node, child = chain[i], chain[i + 1]
        if isinstance(node, (cst.If, cst.IfExp)) and node.body is child:
            found = gate_of(ctx, node.test)
            if found is not None:
                return found
    return None


def _pinned(value: cst.CSTNode) -> bool:
    """A value that pins: anything but the literals ``False``/``None``/``0``."""
    if isinstance(value, cst.Name):
        return value.value not in ("False", "None")
    if isinstance(value, cst.Integer):
        return value.value != "0"
    return True


def _finding(ctx, node, value, chain) -> Optional[Finding]:
    """NM308 on ``node`` (an Arg or DictElement whose value is ``value``) when a check decides it."""
    found = gate_of(ctx, value)
    if found is not None:
        label, check = found
        reason = "" if label.endswith("()") else f"`{label}` is set from `{check}()`"
    else:
        if not _pinned(value):
            return None
        found = _enclosing_gate(ctx, chain)
        if found is None:
            return None
        label, check = found
        reason = f"in a branch taken only when `{label}` is true"
        if not label.endswith("()"):
            reason += f", set from `{check}()`"
    what = ".pin_memory()" if isinstance(node, cst.Attribute) else "pin_memory="
    return Finding("NM308", node, {"gate": label, "what": what}, reason=reason, advisory=True)


def _pin_entries(expr, path):
    """``(DictElement, path to it)`` for the ``"pin_memory"`` entries of a dict literal ``expr``,
    also as the body of a conditional expression; ``path`` leads to ``expr``."""
    if isinstance(expr, cst.IfExp):
        return _pin_entries(expr.body, path + [expr.body])
    if not isinstance(expr, cst.Dict):
        return []
    return [
        (el, path + [el])
        for el in expr.elements
        if isinstance(el, cst.DictElement) and string_value(el.key) == "pin_memory"
    ]


def _findings(ctx, node, candidates) -> list:
    """NM308 findings for ``candidates`` (``(node, value, path below node)``); the chain of
    ancestors is built only when there is a candidate (most calls and assignments have none)."""
    if not candidates:
        return []
    chain = list(ctx.ancestors)
    if not chain or chain[-1] is not node:
        chain.append(node)
    out = []
    for target, value, path in candidates:
        f = _finding(ctx, target, value, chain + path)
        if f is not None:
            out.append(f)
    return out


@on_any_call
def _pin_memory_gate(ctx, call, q):
    """``pin_memory=`` keywords and ``"pin_memory"`` entries of dict-literal arguments
    (``kwargs.update({"pin_memory": True})``). Anchored on the Arg/DictElement, outside the region of
    the check in the value."""
    if not _mentions_pinning(ctx):
        return []
    candidates = []
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "pin_memory" and not call.args:
        # `x = x.pin_memory()` under `if torch.cuda.is_available():` (a training script's batch loop)
        candidates.append((call.func, cst.Name("True"), [call.func]))
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value == "pin_memory":
                candidates.append((arg, arg.value, [arg]))
        elif isinstance(arg.value, (cst.Dict, cst.IfExp)):
            candidates += [(el, el.value, [arg, arg.value] + path) for el, path in _pin_entries(arg.value, [])]
    return _findings(ctx, call, candidates)


@on_node("Assign")
def _pin_memory_dict(ctx, node: cst.Assign):
    """``kwargs = {"pin_memory": True, ...}`` (or ``{...} if use_cuda else {}``) in a gated branch."""
    if not _mentions_pinning(ctx):
        return []
    return _findings(ctx, node, [(el, el.value, [node.value] + path) for el, path in _pin_entries(node.value, [])])
