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

_AST_SMALL = (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return, ast.Raise, ast.Assert,
              ast.Delete, ast.Pass, ast.Break, ast.Continue, ast.Global, ast.Nonlocal, ast.Import,
              ast.ImportFrom) + ((ast.TypeAlias,) if hasattr(ast, "TypeAlias") else ())


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


def statement_positions(module: cst.Module, source: str, pending: Sequence[tuple]) -> Optional[dict]:
    """Positions for pending findings, generating code for only the statements that contain them.

    ``pending`` holds ``(finding, rule, applicability, stmt)`` tuples where ``stmt`` is
    ``(statement node, pre-order index of the statement)`` or None. Each statement is generated
    starting at the line and column ``ast`` gives for the statement with that index in ``source``.

    Returns a node -> ``CodeRange`` dict covering the nodes of those statements, or None (the
    caller then uses :func:`module_positions`) when a finding has no statement, ``source`` does not
    parse with ``ast``, the LibCST and ``ast`` statement lists cannot be matched, or the private
    LibCST API is unavailable or fails. Never raises.
    """
    if PositionProvidingCodegenState is None:
        return None
    if any(item[3] is None for item in pending):
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return None
    stmts = _ast_statements(tree)
    lines = source.splitlines(True)
    provider = PositionProvider()
    done = set()
    try:
        for _, _, _, (node, index) in pending:
            if index in done:
                continue
            done.add(index)
            if index >= len(stmts):
                return None
            a = stmts[index]
            is_compound = isinstance(node, cst.BaseCompoundStatement)
            if is_compound != (not isinstance(a, _AST_SMALL)):
                return None
            first = min([a.lineno] + [d.lineno for d in getattr(a, "decorator_list", ())])
            text = lines[a.lineno - 1] if a.lineno - 1 < len(lines) else ""
            col = len(text.encode("utf-8")[:a.col_offset].decode("utf-8", "replace"))
            state = PositionProvidingCodegenState(default_indent=module.default_indent,
                                                  default_newline=module.default_newline, provider=provider)
            indent = text[:len(text) - len(text.lstrip(" \t"))]
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
    except Exception:  # noqa: BLE001 - any mismatch: fall back to the whole-module provider
        return None
    return provider._computed
