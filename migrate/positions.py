"""Source positions (line, column) of LibCST nodes, for reporting findings.

This is the ONLY module of ``migrate`` that uses private LibCST APIs
(``PositionProvider._gen_impl``, ``PositionProvider._computed``,
``libcst.metadata.position_provider.PositionProvidingCodegenState`` and ``CSTNode._codegen``);
keep every such use here. Each use has a fallback: when the private API is missing or behaves
differently, positions come from the public ``MetadataWrapper.resolve(PositionProvider)`` path.

Positions are computed by a code-generation pass, the most expensive step of a check, so the
engine asks for them only when something is to be reported or the file has ``# noqa`` comments.
"""

from __future__ import annotations

import ast
from typing import Optional, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

try:  # private LibCST API (see the module docstring); without it the public path is used
    from libcst.metadata.position_provider import PositionProvidingCodegenState
except ImportError:  # pragma: no cover - depends on the LibCST release
    PositionProvidingCodegenState = None

_AST_SMALL = (
    ast.Expr,
    ast.Assign,
    ast.AnnAssign,
    ast.AugAssign,
    ast.Return,
    ast.Raise,
    ast.Assert,
    ast.Delete,
    ast.Pass,
    ast.Break,
    ast.Continue,
    ast.Global,
    ast.Nonlocal,
    ast.Import,
    ast.ImportFrom,
) + ((ast.TypeAlias,) if hasattr(ast, "TypeAlias") else ())


def module_positions(module: cst.Module) -> dict:
    """Node -> ``libcst.metadata.CodeRange`` for every node of ``module``.

    Uses LibCST's ``PositionProvider``, running only its code-generation step (private API);
    ``MetadataWrapper.resolve`` would first make an extra full traversal for batchable providers
    (none here), which costs as much again. Falls back to the public path if the private API
    fails. Exceptions of the public path (none expected for a parsed module) propagate.
    """
    provider = PositionProvider()
    try:
        provider._gen_impl(module)
        return provider._computed
    except Exception:  # private API changed: fall back to the public path
        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


def _ast_statements(tree) -> list:
    """Every ``ast`` statement in textual pre-order (the order LibCST visits statements)."""
    out = []

    def visit(body):
        for stmt in body:
            out.append(stmt)
            for name in ("body", "handlers", "orelse", "finalbody", "cases"):
                sub = getattr(stmt, name, None)
                if not sub:
                    continue
                if name in ("handlers", "cases"):
                    for h in sub:
                        visit(h.body)
                else:
                    visit(sub)

    visit(tree.body)
    return out


class StatementPositions:
    """Node -> ``libcst.metadata.CodeRange`` for the nodes of the statements asked for, generating
    code for those statements only (not the whole module), with a whole-module fallback.

    Each statement is generated starting at the line and column ``ast`` gives for the statement with
    the same pre-order index in ``source`` (``source`` is parsed with ``ast`` once, on first use).

    Args:
        module: the parsed module.
        source: the text ``module`` was parsed from.
    """

    def __init__(self, module: cst.Module, source: str):
        self.module = module
        self.source = source
        self.computed: dict = {}
        self._whole = False
        self._done: set = set()
        self._stmts = None
        self._lines = None

    def add(self, stmt) -> bool:
        """Compute the positions of the nodes of ``stmt`` (``(statement node, pre-order index)``).
        False when that cannot be done exactly: the private LibCST API is missing, ``source`` does
        not parse with ``ast``, the LibCST and ``ast`` statements do not match, or code generation
        fails. Never raises."""
        if self._whole:
            return True
        node, index = stmt
        if index in self._done:
            return True
        if PositionProvidingCodegenState is None:
            return False
        try:
            if self._stmts is None:
                self._stmts = _ast_statements(ast.parse(self.source))
                self._lines = self.source.splitlines(True)
            if index >= len(self._stmts):
                return False
            a = self._stmts[index]
            is_compound = isinstance(node, cst.BaseCompoundStatement)
            if is_compound != (not isinstance(a, _AST_SMALL)):
                return False
            provider = PositionProvider()
            first = min([a.lineno] + [d.lineno for d in getattr(a, "decorator_list", ())])
            text = self._lines[a.lineno - 1] if a.lineno - 1 < len(self._lines) else ""
            col = len(text.encode("utf-8")[: a.col_offset].decode("utf-8", "replace"))
            state = PositionProvidingCodegenState(
                default_indent=self.module.default_indent,
                default_newline=self.module.default_newline,
                provider=provider,
            )
            indent = text[: len(text) - len(text.lstrip(" \t"))]
            state.indent_tokens = [indent] if indent else []
            if is_compound:
                state.line = first - len(node.leading_lines)
                state.column = 0
            else:
                state.line, state.column = a.lineno, col
            if isinstance(node, cst.If) and text.lstrip().startswith("elif"):
                node._codegen(state, is_elif=True)
            else:
                node._codegen(state)
        except Exception:  # noqa: BLE001 - any mismatch: the caller falls back to the whole module
            return False
        self.computed.update(provider._computed)
        self._done.add(index)
        return True

    def get(self, node: cst.CSTNode, stmt=None):
        """The position of ``node``, which lies in ``stmt`` (``(statement node, index)``, or None
        when unknown): computed for that statement on first use, or for the whole module when the
        statement is unknown or cannot be generated alone. None for a node not in the module."""
        pos = self.computed.get(node)
        if pos is not None or self._whole:
            return pos
        if stmt is None or not self.add(stmt):
            self.computed = module_positions(self.module)
            self._whole = True
        return self.computed.get(node)


def statement_positions(module: cst.Module, source: str, pending: Sequence[tuple]) -> Optional[dict]:
    """Positions for pending findings, generating code for only the statements that contain them.

    ``pending`` holds ``(finding, rule, applicability, stmt)`` tuples where ``stmt`` is
    ``(statement node, pre-order index of the statement)`` or None (see :class:`StatementPositions`).

    Returns a node -> ``CodeRange`` dict covering the nodes of those statements, or None (the
    caller then uses :func:`module_positions`) when a finding has no statement or a statement
    cannot be generated alone. Never raises.
    """
    if any(item[3] is None for item in pending):
        return None
    positions = StatementPositions(module, source)
    for item in pending:
        if not positions.add(item[3]):
            return None
    return positions.computed
