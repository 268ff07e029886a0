"""Whole-module transforms applied after a pass that applied fixes.

The fixes themselves only rewrite the node they are anchored on; what they need elsewhere is
recorded on the :class:`~neuron_conformance.migrate.context.Context` (``need_torch_import``, ``need_device_const``,
``rewritten_heads``, ``generated_parens``) and done here, once per pass:

* :class:`Unparen`: drop the parentheses of generated ``a or b`` expressions where none are needed;
* :func:`insert_prelude`: add ``import torch`` and the device-type constant after the imports;
* :func:`remove_unused_imports`: drop ``torch.cuda`` imports whose every use was rewritten.
"""

from __future__ import annotations

import re

import libcst as cst

from neuron_conformance.migrate.context import Context


def apply_postfix(module: cst.Module, ctx: Context) -> cst.Module:
    """Run the post-fix transforms, in order, on ``module`` (the tree after the fixing pass);
    ``ctx`` is the context the fixes of that pass recorded their needs on. Returns the new module."""
    if ctx.generated_parens:
        module = module.visit(Unparen(ctx.generated_parens))
    module = insert_prelude(module, ctx)
    return remove_unused_imports(module, ctx)


def insert_prelude(module: cst.Module, ctx: Context) -> cst.Module:
    """Add ``import torch`` and the device-type constant once, after the top-level imports
    (before the first top-level statement that uses the constant). Returns ``module`` itself when
    nothing is needed."""
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
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
        ):
            insert_at = i + 1
    if insert_at == 0:  # after the docstring and __future__ imports
        for i, stmt in enumerate(body[:first_use]):
            if (
                isinstance(stmt, cst.SimpleStatementLine)
                and len(stmt.body) == 1
                and (
                    isinstance(stmt.body[0], cst.Expr)
                    and isinstance(stmt.body[0].value, cst.SimpleString)
                    and i == 0
                    or isinstance(stmt.body[0], cst.ImportFrom)
                    and ctx.code(stmt.body[0].module) == "__future__"
                )
            ):
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
    """Collects which of ``names`` are read outside import statements."""

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


class _ImportRemover(cst.CSTTransformer):
    """Removes the import aliases binding a name in ``unused`` (a whole statement when none is left)."""

    def __init__(self, ctx: Context, unused: set):
        super().__init__()
        self.ctx = ctx
        self.unused = unused

    def leave_ImportFrom(self, original, updated):
        if isinstance(updated.names, cst.ImportStar):
            return updated
        keep = [
            a for a in updated.names if (a.asname.name.value if a.asname else self.ctx.code(a.name)) not in self.unused
        ]
        return _keep_names(updated, keep)

    def leave_Import(self, original, updated):
        keep = [a for a in updated.names if not (a.asname is not None and a.asname.name.value in self.unused)]
        return _keep_names(updated, keep)


def _keep_names(updated, keep: list):
    """``updated`` (an ``Import``/``ImportFrom``) with only the aliases ``keep``; removed when none is left."""
    if len(keep) == len(updated.names):
        return updated
    if not keep:
        return cst.RemoveFromParent()
    keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return updated.with_changes(names=keep)


def remove_unused_imports(module: cst.Module, ctx: Context) -> cst.Module:
    """Drop ``from torch.cuda... import X`` / ``import torch.cuda as tc`` aliases (also
    ``torch.cpu.amp``) whose every use a fix rewrote (``ctx.rewritten_heads``). Returns
    ``module`` itself when nothing is removed."""
    heads = {h for h in ctx.rewritten_heads if ctx.aliases.get(h, "").startswith(("torch.cuda", "torch.cpu.amp"))}
    if not heads:
        return module
    counter = _NameCounter(heads)
    module.visit(counter)
    unused = heads - counter.used
    if not unused:
        return module
    return module.visit(_ImportRemover(ctx, unused))


class Unparen(cst.CSTTransformer):
    """Drop the parentheses of generated ``a or b`` expressions where no parentheses are needed
    (assignment values, arguments, return values); user-written parentheses are never touched.

    ``generated`` is the set of ``id()`` of the generated expressions (``ctx.generated_parens``).
    """

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
