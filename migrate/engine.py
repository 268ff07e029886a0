"""Check and fix one source text: parse once, run every selected rule in one traversal, apply
fixes, repeat until nothing changes (at most :data:`MAX_PASSES` passes), validate the result.

Handlers are registered by the rule modules in :mod:`migrate.rules` (see
:mod:`migrate.registry`). The engine never imports or executes the code it reads.
"""
from __future__ import annotations

import ast
import dataclasses
import re
from typing import Dict, List, Optional

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from migrate import registry
from migrate.context import Context
from migrate.rule import REPORT, SAFE, UNSAFE, Finding, Violation

MAX_PASSES = 8

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I)


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
    """

    violations: List[Violation]
    fixed: int = 0
    new_source: Optional[str] = None
    error: Optional[str] = None


def noqa_lines(source: str) -> Dict[int, Optional[frozenset]]:
    """Line number (1-based) -> None for a blanket ``# noqa`` or the set of codes named."""
    out: Dict[int, Optional[frozenset]] = {}
    if "noqa" not in source and "NOQA" not in source:
        return out
    for i, line in enumerate(source.splitlines(), 1):
        if "#" not in line:
            continue
        m = _NOQA.search(line)
        if m:
            codes = m.group("codes")
            out[i] = None if codes is None else frozenset(
                c.upper() for c in re.split(r"[\s,]+", codes) if c)
    return out


def _path_to(root: cst.CSTNode, target: cst.CSTNode, depth: int = 4) -> Optional[list]:
    """Child indices leading from ``root`` to ``target`` (identity), searched ``depth`` deep."""
    if root is target:
        return []
    if depth == 0:
        return None
    for i, child in enumerate(root.children):
        sub = _path_to(child, target, depth - 1)
        if sub is not None:
            return [i] + sub
    return None


def _apply(finding: Finding, original, updated):
    """Apply ``finding.fix`` to ``updated`` or, when the finding is anchored on a descendant of
    ``original`` (an argument), to the matching descendant of ``updated``."""
    if original is None or finding.node is original or finding.fix_on_parent:
        return finding.fix(updated)
    path = _path_to(original, finding.node)
    if path is None:
        return None
    child = updated
    for i in path:
        children = child.children
        if i >= len(children):
            return None
        child = children[i]
    new_child = finding.fix(child)
    if new_child is None:
        return None
    if isinstance(new_child, cst.RemovalSentinel):
        return updated.deep_remove(child)
    return updated.deep_replace(child, new_child)


def _positions(module: cst.Module) -> dict:
    """Node -> CodeRange for every node of ``module`` (LibCST's PositionProvider, computed by a
    code generation pass: the most expensive step, so it runs only when a position is needed)."""
    provider = PositionProvider()
    try:
        # Run only the code-generation step: MetadataWrapper.resolve would first make an extra
        # full traversal for batchable providers (none here), which costs as much again.
        provider._gen_impl(module)
        return provider._computed
    except Exception:  # private API changed: fall back to the public path
        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


_STATEMENTS = (cst.BaseSmallStatement, cst.BaseCompoundStatement)
_AST_SMALL = (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return, ast.Raise, ast.Assert,
              ast.Delete, ast.Pass, ast.Break, ast.Continue, ast.Global, ast.Nonlocal, ast.Import,
              ast.ImportFrom) + ((ast.TypeAlias,) if hasattr(ast, "TypeAlias") else ())


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


def _statement_positions(module: cst.Module, source: str, pending) -> Optional[dict]:
    """Positions for the pending findings by generating code for only the statements that contain
    them, each started at the line and column ``ast`` gives for it. Returns None (use the
    whole-module provider) when the two statement lists cannot be matched."""
    from libcst.metadata.position_provider import PositionProvidingCodegenState

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


class _Pass(cst.CSTTransformer):
    """One traversal running every selected rule. Positions are resolved up front only when the
    file has ``noqa`` comments (needed to decide fixes); otherwise only after the pass, and only
    when something is left to report."""

    def __init__(self, ctx: Context, settings: Settings, path: str, noqa):
        super().__init__()
        self.ctx = ctx
        self.settings = settings
        self.path = path
        self.noqa = noqa
        self.violations: List[Violation] = []
        self.fixed = 0
        self._pending_stmt = None
        self._seen = set()
        self.positions = None
        self.dry = False
        self.fixable = 0
        self.pending = []
        self.stmt_stack: list = []  # (statement node, pre-order index) while walking
        self.stmt_count = 0  # (finding, rule, applicability) reported once positions are known

    # ------------------------------------------------------------- helpers
    def _suppressed(self, code: str, start: int, end: int) -> bool:
        for line in (start, end):
            if line in self.noqa:
                codes = self.noqa[line]
                if codes is None or code in codes:
                    return True
        return False

    def _handle(self, findings, updated, original=None):
        for finding in findings:
            if finding is None or finding.code not in self.settings.selected:
                continue
            if id(finding.node) in self.ctx.skip or id(finding.node) in self.ctx.cuda_keyed:
                continue
            key = (finding.code, id(finding.node))
            if key in self._seen:
                continue
            self._seen.add(key)
            rule = registry.RULES[finding.code]
            if self.positions is not None:
                pos = self.positions.get(finding.node)
                if pos is None or self._suppressed(finding.code, pos.start.line, pos.end.line):
                    continue
            appl = finding.applicability if finding.fix is not None else REPORT
            if finding.fix is not None and self.settings.applies(appl):
                if self.dry:
                    self.fixable += 1
                    continue
                if finding.stmt_fix:
                    if self._pending_stmt is None and self.ctx.stmt_call_id == id(finding.node):
                        self._pending_stmt = finding.fix
                        self.fixed += 1
                        continue
                else:
                    try:
                        new = _apply(finding, original, updated)
                    except Exception as exc:  # noqa: BLE001 - a faulty fix is reported, not applied
                        self.ctx.errors.append(f"fix for {finding.code}: {type(exc).__name__}: {exc}")
                        new = None
                    if new is not None:
                        self.fixed += 1
                        return new
            self.pending.append((finding, rule, appl, self.stmt_stack[-1] if self.stmt_stack else None))
        return updated

    def walk(self, node: cst.CSTNode) -> None:
        """Read-only traversal calling the same hooks as :meth:`cst.CSTNode.visit`, without
        rebuilding any node (LibCST's own traversal reconstructs every node, several times slower).
        Fixes are not applied (``dry`` mode)."""
        cls = type(node)
        hooks = _HOOKS.get(cls)
        if hooks is None:
            hooks = _hooks_for(type(self), cls)
        visit, leave, fields = hooks
        is_stmt = isinstance(node, _STATEMENTS)
        if is_stmt:
            self.stmt_stack.append((node, self.stmt_count))
            self.stmt_count += 1
        ancestors = self.ctx.ancestors
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
        self.ctx.ancestors.append(node)
        return super().on_visit(node)

    def on_leave(self, original_node, updated_node):
        try:
            return super().on_leave(original_node, updated_node)
        finally:
            self.ctx.ancestors.pop()

    def finish(self, module: cst.Module) -> None:
        """Turn the pending findings into violations with positions in ``module`` (the traversed tree)."""
        if not self.pending:
            return
        positions = self.positions
        if positions is None:
            positions = _statement_positions(module, self.ctx.source, self.pending)
        if positions is None:
            positions = _positions(module)
        for finding, rule, appl, _ in self.pending:
            pos = positions.get(finding.node)
            if pos is None:
                continue
            self.violations.append(Violation(
                path=self.path, code=finding.code, message=rule.message.format(**finding.fmt),
                line=pos.start.line, column=pos.start.column, end_line=pos.end.line,
                end_column=pos.end.column, fix_applicability=appl,
                fix_title=rule.fix_title.format(**finding.fmt) if appl != REPORT else ""))

    # ----------------------------------------------------------- traversal
    def visit_Import(self, node):
        return False

    def visit_ImportFrom(self, node):
        return False

    def visit_Call(self, node):
        self.ctx.call_funcs.add(id(node.func))
        if node.args:
            q = self.ctx.qname(node.func)
            for i, arg in enumerate(node.args):
                self.ctx.arg_info[id(arg)] = (node, q, arg.keyword.value if arg.keyword is not None else None, i)
        for h in registry.NODES.get("visit:Call", ()):
            h(self.ctx, node)

    def visit_IfExp(self, node):
        for h in registry.NODES.get("visit:IfExp", ()):
            h(self.ctx, node)

    def leave_IfExp(self, original, updated):
        return self._handle(registry.dispatch_node("IfExp", self.ctx, original), updated, original)

    def leave_Param(self, original, updated):
        return self._handle(registry.dispatch_node("Param", self.ctx, original), updated, original)

    def visit_Arg(self, node):
        info = self.ctx.arg_info.get(id(node))
        if info is not None:
            self.ctx.arg_stack.append((info, node))

    def leave_Arg(self, original, updated):
        if self.ctx.arg_stack and self.ctx.arg_stack[-1][1] is original:
            self.ctx.arg_stack.pop()
        return updated

    def visit_Expr(self, node):
        # A bare string statement (docstring or a string used as a comment) is never a value.
        value = node.value
        if isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            self.ctx.docstrings.update(id(n) for n in _string_parts(value))

    def visit_Assign(self, node):
        self.ctx.assign_stack.append(node)
        # `TABLE["cuda"] = torch.cuda.fn`: the CUDA entry of a per-device table.
        for t in node.targets:
            target = t.target
            if isinstance(target, cst.Subscript) and len(target.slice) == 1 \
                    and isinstance(target.slice[0].slice, cst.Index) \
                    and _is_cuda_key(target.slice[0].slice.value):
                self.ctx.cuda_keyed.add(id(node.value))

    def visit_DictElement(self, node):
        # `{"cuda": torch.cuda.device_count, "cpu": ...}`: the CUDA entry of a per-device
        # dispatch table is correct where it is; no rule reports the value.
        if _is_cuda_key(node.key):
            self.ctx.cuda_keyed.add(id(node.value))

    def leave_Assign(self, original, updated):
        if self.ctx.assign_stack and self.ctx.assign_stack[-1] is original:
            self.ctx.assign_stack.pop()
        return self._handle(registry.dispatch_node("Assign", self.ctx, original), updated, original)

    def visit_Comparison(self, node):
        self.ctx.comparison_depth += 1

    def visit_Attribute(self, node):
        self.ctx.call_funcs.discard(id(node.value))
        self.ctx.inner_attrs.add(id(node.value))
        self.ctx.inner_attrs.add(id(node.attr))

    def visit_Decorator(self, node):
        self.ctx.decorators.add(id(node.decorator))

    def leave_Call(self, original, updated):
        return self._handle(registry.dispatch_call(self.ctx, original), updated, original)

    def leave_Attribute(self, original, updated):
        if id(original) in self.ctx.inner_attrs or id(original) in self.ctx.call_funcs:
            return updated
        if id(original) in self.ctx.skip:
            return updated
        if self.ctx.qname(original) is None:
            handlers = registry.ATTR_NAMES.get(original.attr.value)
            if not handlers:
                return updated
            return self._handle([registry._safe(f, self.ctx, original) for f in handlers], updated, original)
        return self._handle(registry.dispatch_reference(self.ctx, original), updated, original)

    def leave_Name(self, original, updated):
        if id(original) in self.ctx.call_funcs or id(original) in self.ctx.inner_attrs:
            return updated
        if original.value not in self.ctx.aliases:
            return updated
        return self._handle(registry.dispatch_reference(self.ctx, original), updated, original)

    def leave_SimpleString(self, original, updated):
        if id(original) in self.ctx.docstrings:
            return updated
        return self._handle(registry.dispatch_string(self.ctx, original), updated, original)

    def leave_Comparison(self, original, updated):
        self.ctx.comparison_depth -= 1
        return self._handle(registry.dispatch_node("Comparison", self.ctx, original), updated, original)

    def visit_WithItem(self, node):
        for h in registry.NODES.get("visit:WithItem", ()):
            h(self.ctx, node)

    def leave_WithItem(self, original, updated):
        return self._handle(registry.dispatch_node("WithItem", self.ctx, original), updated, original)

    def visit_SimpleStatementLine(self, node):
        self._pending_stmt = None
        body = node.body
        if len(body) == 1 and isinstance(body[0], cst.Expr) and isinstance(body[0].value, cst.Call):
            self.ctx.stmt_call_id = id(body[0].value)
        else:
            self.ctx.stmt_call_id = None

    def leave_SimpleStatementLine(self, original, updated):
        fix, self._pending_stmt = self._pending_stmt, None
        self.ctx.stmt_call_id = None
        if fix is None:
            return updated
        return fix(updated)

    def visit_If_body(self, node):
        if registry.is_availability_test(self.ctx, node.test):
            self.ctx.guard_depth += 1
            self.ctx.guard_ifs.append(id(node))

    def leave_If_body(self, node):
        if self.ctx.guard_ifs and self.ctx.guard_ifs[-1] == id(node):
            self.ctx.guard_ifs.pop()
            self.ctx.guard_depth -= 1

    def visit_If(self, node):
        self.ctx.if_stack.append(node)

    def leave_If(self, original, updated):
        self.ctx.if_stack.pop()
        return updated

    def _push_seeds(self, body):
        seeds = set()
        for stmt in body:
            if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 \
                    and isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, cst.Call):
                call = stmt.body[0].value
                if self.ctx.qname(call.func) == "torch.manual_seed" and len(call.args) == 1:
                    seeds.add(self.ctx.code(call.args[0].value))
        self.ctx.seed_stack.append(seeds)

    def visit_IndentedBlock(self, node):
        self._push_seeds(node.body)

    def leave_IndentedBlock(self, original, updated):
        self.ctx.seed_stack.pop()
        return updated

    def visit_Module(self, node):
        self._push_seeds(node.body)


def _is_cuda_key(node) -> bool:
    """A ``"cuda"`` string literal (the key of a per-device table)."""
    return isinstance(node, cst.SimpleString) and node.value[-6:] in ('"cuda"', "'cuda'") \
        and node.prefix.lower() in ("", "u", "r")


def _string_parts(node) -> list:
    """The string nodes making up ``node`` (the parts of an implicit concatenation)."""
    if isinstance(node, cst.ConcatenatedString):
        return _string_parts(node.left) + _string_parts(node.right)
    return [node]


#: Field names that never hold a node a rule looks at (whitespace, punctuation).
_SKIP_FIELDS = frozenset({"lpar", "rpar", "comma", "leading_lines", "header", "footer", "lines_after_decorators",
                          "trailing_whitespace", "semicolon", "equal", "star", "colon", "dot", "operator",
                          "newline", "asynchronous", "lbracket", "rbracket", "lbrace", "rbrace", "default_indent",
                          "default_newline", "encoding", "has_trailing_newline", "indent", "prefix", "quote",
                          "start", "end", "value_whitespace"})
_HOOKS: dict = {}


def _hooks_for(visitor_cls, cls):
    """(visit, leave, [(field, visit_field, leave_field)]) for node class ``cls``, cached."""
    import dataclasses as _dc
    name = cls.__name__
    fields = []
    for f in _dc.fields(cls):
        if f.name in _SKIP_FIELDS or f.name.startswith("whitespace"):
            continue
        fields.append((f.name, getattr(visitor_cls, f"visit_{name}_{f.name}", None),
                       getattr(visitor_cls, f"leave_{name}_{f.name}", None)))
    hooks = (getattr(visitor_cls, f"visit_{name}", None), getattr(visitor_cls, f"leave_{name}", None), tuple(fields))
    _HOOKS[cls] = hooks
    return hooks


def _insert_prelude(module: cst.Module, ctx: Context) -> cst.Module:
    """Add ``import torch`` and the device-type constant once, after the top-level imports."""
    body = list(module.body)
    need_import = ctx.need_torch_import and not ctx.torch_anywhere
    need_const = ctx.need_device_const and ctx.existing_const_index is None
    if not need_import and not need_const:
        return module
    name = ctx.device_const
    # First top-level statement that mentions the constant (module-level use).
    first_use = len(body)
    if need_const:
        pat = re.compile(r"\b" + re.escape(name) + r"\b")
        for i, stmt in enumerate(body):
            if pat.search(module.code_for_node(stmt)):
                first_use = i
                break
    insert_at = 0
    for i, stmt in enumerate(body[:first_use]):
        if isinstance(stmt, cst.SimpleStatementLine) and any(
                isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body):
            insert_at = i + 1
    if insert_at == 0:  # after the docstring and __future__ imports
        for i, stmt in enumerate(body[:first_use]):
            if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and (
                    isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, cst.SimpleString)
                    and i == 0 or isinstance(stmt.body[0], cst.ImportFrom)
                    and ctx.code(stmt.body[0].module) == "__future__"):
                insert_at = i + 1
            else:
                break
    new = []
    if need_import:
        new.append(cst.parse_statement("import torch\n"))
    if need_const:
        const = cst.parse_statement(f"{name} = {ctx.device_const_code()}\n")
        if insert_at > 0 or new:
            const = const.with_changes(leading_lines=[cst.EmptyLine()])
        new.append(const)
    if insert_at < len(body):
        nxt = body[insert_at]
        if not getattr(nxt, "leading_lines", ()):
            body[insert_at] = nxt.with_changes(leading_lines=[cst.EmptyLine()])
    body[insert_at:insert_at] = new
    return module.with_changes(body=body)


class _NameCounter(cst.CSTVisitor):
    def __init__(self, names):
        super().__init__()
        self.names = names
        self.used = set()

    def visit_Import(self, node):
        return False

    def visit_ImportFrom(self, node):
        return False

    def visit_Attribute(self, node):
        node.value.visit(self)
        return False

    def visit_Name(self, node):
        if node.value in self.names:
            self.used.add(node.value)


def _remove_unused_imports(module: cst.Module, ctx: Context) -> cst.Module:
    """Drop ``from torch.cuda... import X`` aliases whose every use a fix rewrote."""
    heads = {h for h in ctx.rewritten_heads if ctx.aliases.get(h, "").startswith(("torch.cuda", "torch.cpu.amp"))}
    if not heads:
        return module
    counter = _NameCounter(heads)
    module.visit(counter)
    unused = heads - counter.used
    if not unused:
        return module

    class _Remover(cst.CSTTransformer):
        def leave_ImportFrom(self, original, updated):
            if isinstance(updated.names, cst.ImportStar):
                return updated
            keep = [a for a in updated.names
                    if (a.asname.name.value if a.asname else ctx.code(a.name)) not in unused]
            if len(keep) == len(updated.names):
                return updated
            if not keep:
                return cst.RemoveFromParent()
            keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return updated.with_changes(names=keep)

        def leave_Import(self, original, updated):
            keep = [a for a in updated.names if not (a.asname is not None and a.asname.name.value in unused)]
            if len(keep) == len(updated.names):
                return updated
            if not keep:
                return cst.RemoveFromParent()
            keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return updated.with_changes(names=keep)

    return module.visit(_Remover())


class _Unparen(cst.CSTTransformer):
    """Drop the parentheses of generated ``a or b`` expressions where no parentheses are needed
    (assignment values, arguments, return values); user-written parentheses are never touched."""

    def __init__(self, generated):
        super().__init__()
        self.generated = generated

    def _strip(self, original, updated):
        if id(original.value) in self.generated and isinstance(updated.value, cst.BooleanOperation):
            return updated.with_changes(value=updated.value.with_changes(lpar=[], rpar=[]))
        return updated

    def leave_Assign(self, original, updated):
        return self._strip(original, updated)

    def leave_Arg(self, original, updated):
        return self._strip(original, updated)

    def leave_Return(self, original, updated):
        return self._strip(original, updated) if updated.value else updated


def _one_pass(source: str, module: cst.Module, settings: Settings, path: str):
    noqa = noqa_lines(source)
    positions = _positions(module) if noqa else None
    # First a read-only walk: enough for check mode, and in fix mode tells whether a fix applies.
    visitor = _Pass(Context(module, source), settings, path, noqa)
    visitor.positions = positions
    visitor.dry = True
    visitor.walk(module)
    if not visitor.fixable or visitor.ctx.errors:
        return visitor, module
    ctx = Context(module, source)
    visitor = _Pass(ctx, settings, path, noqa)
    visitor.positions = positions
    new_module = module.visit(visitor)
    if visitor.fixed:
        if ctx.generated_parens:
            new_module = new_module.visit(_Unparen(ctx.generated_parens))
        new_module = _insert_prelude(new_module, ctx)
        new_module = _remove_unused_imports(new_module, ctx)
    return visitor, new_module


def check_source(source: str, settings: Settings, path: str = "<string>") -> FileResult:
    """See :func:`_check_source`; an unexpected exception becomes ``FileResult.error``."""
    try:
        return _check_source(source, settings, path)
    except RecursionError:
        return FileResult([], error="internal error: nesting too deep to analyse")
    except Exception as exc:  # noqa: BLE001 - the run continues with the next file
        return FileResult([], error=f"internal error: {type(exc).__name__}: {exc}")


def _check_source(source: str, settings: Settings, path: str = "<string>") -> FileResult:
    """Check (and with ``settings.fix``, fix) one Python source text.

    Returns a :class:`FileResult`; never raises for bad input: a syntax error, or a fix whose
    output does not parse, is reported in ``FileResult.error`` with the source left unchanged.
    """
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
            return FileResult(visitor.violations, error="internal error in a rule: " + "; ".join(visitor.ctx.errors[:3]))
        if not visitor.fixed:
            break
        new_source = new_module.code
        try:
            module = cst.parse_module(new_source)
            ast.parse(new_source)
        except Exception as exc:  # a fix produced code that does not parse: keep the last good text
            return FileResult(visitor.violations, fixed=fixed, new_source=current if current != source else None,
                              error=f"internal error: fix output does not parse ({type(exc).__name__}); "
                                    f"file left as it was after {fixed} fixes")
        fixed += visitor.fixed
        if new_source == current:
            break
        current = new_source
    visitor.finish(traversed)
    violations = sorted(visitor.violations, key=lambda v: (v.line, v.column, v.code))
    return FileResult(violations, fixed=fixed, new_source=current if current != source else None)
