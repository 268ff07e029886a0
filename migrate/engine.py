"""Check and fix one source text: parse once, run every selected rule in one traversal, apply
fixes, repeat until nothing changes (at most :data:`MAX_PASSES` passes), validate the result.

Public API: :func:`check_source`, :class:`Settings`, :class:`FileResult` (and
:func:`noqa_lines`, from :mod:`neuron_conformance.migrate.noqa`). The pass itself is :mod:`neuron_conformance.migrate.rule_pass`,
positions are :mod:`neuron_conformance.migrate.positions`, the whole-module transforms after fixing are
:mod:`neuron_conformance.migrate.postfix`. Handlers are registered by the rule modules in :mod:`neuron_conformance.migrate.rules`
(see :mod:`neuron_conformance.migrate.registry`). The engine never imports or executes the code it reads.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import List, Optional

import libcst as cst

from neuron_conformance.migrate.context import Context
from neuron_conformance.migrate.noqa import noqa_lines
from neuron_conformance.migrate.positions import StatementPositions
from neuron_conformance.migrate.postfix import apply_postfix
from neuron_conformance.migrate.rule import SAFE, UNSAFE, Violation
from neuron_conformance.migrate.rule_pass import RulePass

__all__ = ["MAX_PASSES", "FileResult", "Settings", "check_source", "noqa_lines"]

MAX_PASSES = 8


@dataclasses.dataclass
class Settings:
    """Which rules run and which fixes are applied.

    Attributes:
        selected: rule codes that run (already expanded from prefixes, target-torch applied).
        fix: apply safe fixes.
        unsafe_fixes: also apply unsafe fixes (only with ``fix``).
    """

    selected: frozenset
    fix: bool = False
    unsafe_fixes: bool = False

    def applies(self, applicability: str) -> bool:
        """Whether a fix of ``applicability`` (``safe``/``unsafe``/``report``) is applied."""
        if not self.fix:
            return False
        return applicability == SAFE or (applicability == UNSAFE and self.unsafe_fixes)


@dataclasses.dataclass
class FileResult:
    """Outcome for one source text.

    Attributes:
        violations: findings left in the final text (positions in ``new_source`` when fixed).
        fixed: number of fixes applied.
        new_source: the rewritten text, or None when nothing changed.
        error: why the file was skipped (syntax error, fix failed to parse), else None.
        internal: True when ``error`` is a tool error (a rule or fix raised, a fix produced
            code that does not parse), not a property of the input; the command line exits 2.
    """

    violations: List[Violation]
    fixed: int = 0
    new_source: Optional[str] = None
    error: Optional[str] = None
    internal: bool = False


def _one_pass(source: str, module: cst.Module, settings: Settings, path: str):
    """One pass over ``module`` (parsed from ``source``): ``(pass, new module)``. The new module
    is ``module`` itself unless a fix was applied."""
    noqa = noqa_lines(source)
    # noqa needs positions before fixes are decided: computed per statement, for findings only
    positions = StatementPositions(module, source) if noqa else None
    # First a read-only walk: enough for check mode, and in fix mode tells whether a fix applies.
    visitor = RulePass(Context(module, source, path), settings, path, noqa)
    visitor.positions = positions
    visitor.dry = True
    visitor.walk(module)
    visitor.resolve_guards()
    if not visitor.fixable or visitor.ctx.errors:
        return visitor, module
    limits = visitor.guard_limits
    ctx = Context(module, source, path)
    visitor = RulePass(ctx, settings, path, noqa)
    visitor.positions = positions
    visitor.guard_limits = limits
    new_module = module.visit(visitor)
    if visitor.fixed:
        new_module = apply_postfix(new_module, ctx)
    return visitor, new_module


def check_source(source: str, settings: Settings, path: str = "<string>") -> FileResult:
    """Check (and with ``settings.fix``, fix) one Python source text; ``path`` is only reported.

    Returns a :class:`FileResult` with the violations sorted by (line, column, code). Never
    raises for bad input: a syntax error, a fix whose output does not parse, a rule that raised,
    or an unexpected exception (also ``RecursionError`` on deeply nested code) is reported in
    ``FileResult.error``, with the source left unchanged or as it was after the last good pass.
    """
    try:
        return _check_source(source, settings, path)
    except RecursionError:
        return FileResult([], error="internal error: nesting too deep to analyse", internal=True)
    except Exception as exc:  # noqa: BLE001 - the run continues with the next file
        return FileResult([], error=f"internal error: {type(exc).__name__}: {exc}", internal=True)


def _check_source(source: str, settings: Settings, path: str = "<string>") -> FileResult:
    """The fixed-point loop of :func:`check_source` (which turns its exceptions into errors)."""
    try:
        module = cst.parse_module(source)
    except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError) as exc:
        return FileResult([], error=f"cannot parse: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
    current = source
    fixed = 0
    for _ in range(MAX_PASSES):
        traversed = module
        visitor, new_module = _one_pass(current, module, settings, path)
        if visitor.ctx.errors:
            return FileResult(
                visitor.violations, error="internal error in rule " + "; ".join(visitor.ctx.errors[:3]), internal=True
            )
        if not visitor.fixed:
            break
        new_source = new_module.code
        try:
            module = cst.parse_module(new_source)
            ast.parse(new_source)
        except Exception as exc:  # a fix produced code that does not parse: keep the last good text
            return FileResult(
                visitor.violations,
                fixed=fixed,
                new_source=current if current != source else None,
                error=f"internal error: fix output does not parse ({type(exc).__name__}); "
                f"file left as it was after {fixed} fixes",
                internal=True,
            )
        fixed += visitor.fixed
        if new_source == current:
            break
        current = new_source
    visitor.finish(traversed)
    violations = sorted(visitor.violations, key=lambda v: (v.line, v.column, v.code))
    return FileResult(violations, fixed=fixed, new_source=current if current != source else None)
