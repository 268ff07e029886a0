"""Read-only tree walk with LibCST's visitor hooks, and the ancestor/statement bookkeeping
shared with LibCST's own traversal.

LibCST's traversal (``CSTNode.visit``) reconstructs every node it passes, which makes it several
times slower than reading the tree; :meth:`ReadOnlyWalk.walk` calls the same ``visit_<Node>``,
``visit_<Node>_<field>``, ``leave_<Node>_<field>`` and ``leave_<Node>`` methods without rebuilding
anything (a ``leave_<Node>`` gets the original node as both arguments; its result is ignored).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import libcst as cst

#: Statement node classes: the walk keeps a stack of them (for per-statement position passes).
STATEMENTS = (cst.BaseSmallStatement, cst.BaseCompoundStatement)

#: Field names that never hold a node a rule looks at (whitespace, punctuation).
_SKIP_FIELDS = frozenset(
    {
        "lpar",
        "rpar",
        "comma",
        "leading_lines",
        "header",
        "footer",
        "lines_after_decorators",
        "trailing_whitespace",
        "semicolon",
        "equal",
        "star",
        "colon",
        "dot",
        "operator",
        "newline",
        "asynchronous",
        "lbracket",
        "rbracket",
        "lbrace",
        "rbrace",
        "default_indent",
        "default_newline",
        "encoding",
        "has_trailing_newline",
        "indent",
        "prefix",
        "quote",
        "start",
        "end",
        "value_whitespace",
    }
)

#: visitor class -> {node class -> hooks} (see :func:`_hooks_for`).
_HOOKS: dict = {}
#: node class -> names of the fields :func:`child_nodes` reads.
_FIELDS: dict = {}


def child_nodes(node: cst.CSTNode) -> list:
    """The child nodes of ``node`` that a rule looks at, in field order: the fields the walk reads
    (whitespace and punctuation skipped). Much cheaper than LibCST's ``children`` property, which
    runs a visitor over the node to collect them."""
    cls = type(node)
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in _SKIP_FIELDS and not f.name.startswith("whitespace")
        )
    out = []
    for name in names:
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            out.append(value)
        elif isinstance(value, (tuple, list)):
            out.extend(c for c in value if isinstance(c, cst.CSTNode))
    return out


SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
"""Nodes that open a scope of their own (a function, class or lambda body)."""


def walk_in_scope(node: cst.CSTNode, skip_scopes: bool = True):
    """Every node below ``node`` (itself first), depth first through LibCST's ``children``; with ``skip_scopes``
    the bodies of nested functions, classes and lambdas (:data:`SCOPES`) are not entered (the nodes themselves
    are yielded)."""
    stack = [node]
    while stack:
        cur = stack.pop()
        yield cur
        if not (skip_scopes and cur is not node and isinstance(cur, SCOPES)):
            stack.extend(cur.children)


def node_path(root: cst.CSTNode, target: cst.CSTNode, depth: int = 4) -> Optional[list]:
    """Child indices leading from ``root`` to ``target`` (identity), searched ``depth`` deep."""
    if root is target:
        return []
    if depth == 0:
        return None
    for i, child in enumerate(root.children):
        sub = node_path(child, target, depth - 1)
        if sub is not None:
            return [i] + sub
    return None


def full_path(path: list) -> list:
    """``path`` (the ancestors of the node visited, then a finding's node) with the nodes between the
    last ancestor and the finding's node filled in (a hook on an ``Assign`` may report a string
    deep inside it), found by a search below the last ancestor; ``path`` itself when not found."""
    if len(path) < 2:
        return path
    top, node = path[-2], path[-1]
    if any(c is node for c in top.children):
        return path
    sub = node_path(top, node, depth=12)
    if not sub:
        return path
    out, cur = list(path[:-1]), top
    for i in sub:
        cur = cur.children[i]
        out.append(cur)
    return out


def and_operands(node: cst.CSTNode) -> list:
    """The operands of a chain of ``and`` (``a and (b and c)`` -> ``[a, b, c]``, through parentheses); ``[node]``
    for anything else. (:func:`neuron_conformance.migrate.exemptions.names.bare_and_operands` stops at
    parentheses on purpose.)"""
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And):
        return and_operands(node.left) + and_operands(node.right)
    return [node]


def _hooks_for(visitor_cls, cls, table: dict):
    """(visit, leave, [(field, visit_field, leave_field)]) for node class ``cls``, cached in ``table``."""
    name = cls.__name__
    fields = []
    for f in dataclasses.fields(cls):
        if f.name in _SKIP_FIELDS or f.name.startswith("whitespace"):
            continue
        fields.append(
            (
                f.name,
                getattr(visitor_cls, f"visit_{name}_{f.name}", None),
                getattr(visitor_cls, f"leave_{name}_{f.name}", None),
            )
        )
    hooks = (getattr(visitor_cls, f"visit_{name}", None), getattr(visitor_cls, f"leave_{name}", None), tuple(fields))
    table[cls] = hooks
    return hooks


class ReadOnlyWalk:
    """Mixin for a :class:`libcst.CSTTransformer` subclass (put it first in the bases).

    Both traversals keep ``self.ancestors`` (a list the subclass assigns: the nodes from the module
    down to the node being visited). :meth:`walk` also keeps ``self.stmt_stack``, the enclosing
    ``(statement node, pre-order statement index)`` pairs, innermost last; LibCST's traversal
    does not (fixes are applied there and positions are then computed for the whole module).
    """

    ancestors: list
    stmt_stack: list
    stmt_count: int

    def walk(self, node: cst.CSTNode) -> None:
        """Visit ``node`` and its descendants read-only (see the module docstring).

        A ``visit_<Node>`` returning False skips the node's children. Exceptions raised by the
        hooks propagate.
        """
        cls = type(node)
        table = _HOOKS.get(type(self))
        if table is None:
            table = _HOOKS[type(self)] = {}
        hooks = table.get(cls)
        if hooks is None:
            hooks = _hooks_for(type(self), cls, table)
        visit, leave, fields = hooks
        is_stmt = isinstance(node, STATEMENTS)
        if is_stmt:
            self.stmt_stack.append((node, self.stmt_count))
            self.stmt_count += 1
        ancestors = self.ancestors
        ancestors.append(node)
        if visit is None or visit(self, node) is not False:
            for fname, fvisit, fleave in fields:
                value = getattr(node, fname)
                if fvisit is not None:
                    fvisit(self, node)
                if isinstance(value, cst.CSTNode):
                    self.walk(value)
                elif isinstance(value, (tuple, list)):
                    for child in value:
                        if isinstance(child, cst.CSTNode):
                            self.walk(child)
                if fleave is not None:
                    fleave(self, node)
        if leave is not None:
            leave(self, node, node)
        ancestors.pop()
        if is_stmt:
            self.stmt_stack.pop()

    # LibCST's own traversal (fix mode): keep the same ancestor stack as :meth:`walk`.
    def on_visit(self, node):
        self.ancestors.append(node)
        return super().on_visit(node)

    def on_leave(self, original_node, updated_node):
        try:
            return super().on_leave(original_node, updated_node)
        finally:
            self.ancestors.pop()
