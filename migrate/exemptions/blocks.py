"""Statement and block helpers shared by the exemptions (:mod:`neuron_conformance.migrate.exemptions`):
the statements of a block, a name assigned and read in it, a block that ends by leaving, and the tests of
an ``if``/``elif`` chain."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_conformance.migrate.traversal import walk_in_scope


def block_statements(block) -> list:
    body = block.body if isinstance(block, (cst.IndentedBlock, cst.Module)) else []
    return body


def assigned(stmt) -> Optional[tuple]:
    """``(name, value)`` of ``name = value`` (one simple statement), else None."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
        a = stmt.body[0]
        if len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name):
            return a.targets[0].target.value, a.value
    return None


def reads_name(node, name: str) -> bool:
    for n in walk_in_scope(node, skip_scopes=False):
        if isinstance(n, cst.Name) and n.value == name:
            return True
    return False


def value_in(ctx, block, test, name: str):
    """The value of the last ``name = value`` before the statement holding ``test`` in ``block``."""
    body = block_statements(block)
    for k, stmt in enumerate(body):
        if any(n is test for n in walk_in_scope(stmt, skip_scopes=False)):
            for earlier in reversed(body[:k]):
                hit = assigned(earlier)
                if hit and hit[0] == name:
                    return hit[1]
            return None
    return None


def later_reads(block, stmt, name: str) -> list:
    body = block_statements(block)
    i = next((k for k, s in enumerate(body) if s is stmt), None)
    if i is None:
        return []
    out = []
    for later in body[i + 1 :]:
        hit = assigned(later)
        if reads_name(later, name):
            out.append(later)
        if hit and hit[0] == name:
            break
    return out


def block_exits(block) -> bool:
    body = block.body if isinstance(block, cst.IndentedBlock) else ()
    return (
        bool(body)
        and isinstance(body[-1], cst.SimpleStatementLine)
        and isinstance(body[-1].body[-1], (cst.Return, cst.Raise))
    )


def chain_tests(ctx, a) -> list:
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
