"""One pass over a module running every selected rule: dispatch of nodes to the rule handlers
of :mod:`neuron_conformance.migrate.hooks`, the traversal facts handlers read from the
:class:`~neuron_conformance.migrate.context.Context`, ``noqa`` filtering, and application of fixes.

The pass is a LibCST transformer. Check mode (and the first, dry, pass of fix mode) walks the
tree read-only with :meth:`~neuron_conformance.migrate.traversal.ReadOnlyWalk.walk`; fix mode uses LibCST's own
traversal so that fixes can replace nodes.

Node hooks (``neuron_conformance.migrate.hooks.on_node``): ``"visit:<Kind>"`` hooks run, in registration order, when a
node of that kind is entered (after the pass's own bookkeeping for it) and let rule modules
keep their own state (``ctx.rule_state``); ``"<Kind>"`` hooks run when it is left and return
findings. Kinds with visit hooks: Assign, Call, DictElement, IfExp, IndentedBlock, Module,
WithItem. Kinds with leave hooks: AnnAssign, Assign, Comparison, IfExp, IndentedBlock, Module, Param, WithItem.
"""

from __future__ import annotations

from typing import List

import libcst as cst

from neuron_conformance.migrate import exemptions, hooks, reach
from neuron_conformance.migrate.context import Context
from neuron_conformance.migrate.exemptions.onnx_runtime import onnx_runtime_nodes
from neuron_conformance.migrate.noqa import suppressed
from neuron_conformance.migrate.positions import module_positions, statement_positions
from neuron_conformance.migrate.rule import REPORT, SAFE, Finding, Violation
from neuron_conformance.migrate.traversal import ReadOnlyWalk, node_path

#: Availability checks that choose where values go (NM101 ``is_available()``, NM102 the device-selection
#: conditional): widened together or not at all (:meth:`RulePass._floor`).
_DEVICE_CHOICE = frozenset({"NM101", "NM102", "NM117"})
#: Findings that recognise what the code does themselves (NM117: a chain whose every branch only picks a device
#: is a device choice, not per-vendor code; NM118: a dtype chosen by CUDA's bfloat16 support), so the exemptions
#: are not asked about them.
_SELF_DECIDED = frozenset({"NM117", "NM118"})
#: The key of the file's floor in :attr:`RulePass.guard_limits` (handed from the read-only walk to the fixing pass).
_FLOOR = "device choices"

#: ``typing`` forms whose subscript is a type expression, never run.
_TYPE_FORMS = frozenset(
    {
        "typing.Union",
        "typing.Optional",
        "typing.Type",
        "typing.Annotated",
        "typing.Literal",
        "typing_extensions.Annotated",
        "typing_extensions.Literal",
    }
)


def _apply(finding: Finding, original, updated):
    """Apply ``finding.fix`` to ``updated`` or, when the finding is anchored on a descendant of
    ``original`` (an argument), to the matching descendant of ``updated``. Returns the new node,
    or None when the fix declines or the descendant cannot be found; exceptions of the fix propagate."""
    if original is None or finding.node is original or finding.fix_on_parent:
        return finding.fix(updated)
    path = node_path(original, finding.node)
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


def _string_parts(node) -> list:
    """The string nodes making up ``node`` (the parts of an implicit concatenation)."""
    if isinstance(node, cst.ConcatenatedString):
        return _string_parts(node.left) + _string_parts(node.right)
    return [node]


def _run_visit_hooks(kind: str, ctx: Context, node: cst.CSTNode) -> None:
    # A hook that raises is recorded in ctx.errors (the file becomes a tool error), as for handlers.
    for h in hooks.NODES.get("visit:" + kind, ()):
        hooks._safe(h, ctx, node)


class RulePass(ReadOnlyWalk, cst.CSTTransformer):
    """One traversal running every selected rule.

    Args:
        ctx: a fresh :class:`Context` for the module traversed.
        settings: a :class:`neuron_conformance.migrate.engine.Settings` (``selected`` codes, ``applies(applicability)``).
        path: the file name reported in violations.
        noqa: :func:`neuron_conformance.migrate.noqa.noqa_lines` of the source.

    Attributes set by the caller before traversing: ``positions`` (a
    :class:`neuron_conformance.migrate.positions.StatementPositions` when the file has ``noqa``
    comments, which fixes need decided: each finding's statement is positioned when the finding is
    seen; else None and resolved by :meth:`finish`, only when something is left to report) and ``dry`` (count
    applicable fixes in ``fixable`` instead of applying them). After the traversal: ``fixed``
    (fixes applied), ``pending`` (findings left), and, after :meth:`finish`, ``violations``.
    Rule errors are collected in ``ctx.errors``.
    """

    def __init__(self, ctx: Context, settings, path: str, noqa):
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
        self.pending = []  # (finding, rule, applicability, stmt) reported once positions are known
        self.ancestors = ctx.ancestors
        self.stmt_stack: list = []  # (statement node, pre-order index) while walking
        # Guards (neuron_conformance.migrate.reach): id(finding node) -> applicability, recorded by the read-only
        # walk; the guard findings it deferred; id(region) -> (limit, reason), handed from the
        # read-only walk to the fixing pass over the same tree; ids of the guard calls.
        self.applicability: dict = {}
        # neuron_conformance.migrate.exemptions' answers for the file (module facts, enclosing nodes, pairs of
        # nodes), computed only when a finding is inside them (findings are rare; these nodes are not).
        self._deliberate_cache: dict = {}
        self.deferred: list = []
        self.guard_limits: dict = {}
        self.guard_nodes: set = set()
        self.choice_tiers: list = []  # (applicability, node) of the availability checks without a region
        self._places_cache: dict = {}  # id(guard region) -> whether it places values (:meth:`_places`)
        self.stmt_count = 0

    # ------------------------------------------------------------- helpers
    def _handle(self, findings, updated, original=None):
        for finding in findings:
            if finding is None or finding.code not in self.settings.selected:
                continue
            if (
                id(finding.node) in self.ctx.skip
                or id(finding.node) in self.ctx.unreported
                or self._deliberate(finding)
            ):
                continue
            key = (finding.code, id(finding.node))
            if key in self._seen:
                continue
            self._seen.add(key)
            rule = hooks.RULES[finding.code]
            if self.positions is not None:
                pos = self.positions.get(finding.node, self.stmt_stack[-1] if self.stmt_stack else None)
                if pos is None or suppressed(self.noqa, finding.code, pos.start.line, pos.end.line):
                    if not finding.advisory:  # left as it is: limits a guard over it
                        self.applicability[id(finding.node)] = REPORT
                    continue
            appl = finding.applicability if finding.fix is not None else REPORT
            if finding.code in _DEVICE_CHOICE and finding.guard is None:
                if self.dry:
                    self.choice_tiers.append((appl, finding.node))
                    if finding.fix is not None:  # decided with the file's other device choices (resolve_guards)
                        self.applicability[id(finding.node)] = appl
                        self.deferred.append((finding, rule, appl, self.stmt_stack[-1] if self.stmt_stack else None))
                        continue
                elif finding.fix is not None:
                    appl = self._floor(finding, appl)
            if finding.guard is not None and finding.fix is not None:
                self.guard_nodes.add(id(finding.node))
                if self.dry:  # decided once the whole region has been seen (resolve_guards)
                    self.applicability[id(finding.node)] = appl  # its own tier limits an enclosing guard
                    self.deferred.append((finding, rule, appl, self.stmt_stack[-1] if self.stmt_stack else None))
                    continue
                appl = self._limit(finding, appl)
            elif self.dry and not finding.advisory:
                self.applicability[id(finding.node)] = reach.worst(appl, self.applicability.get(id(finding.node), appl))
            if finding.fix is not None and self.settings.applies(appl):
                if self.dry:
                    self.fixable += 1
                    continue
                if finding.stmt_fix:
                    if self._pending_stmt is None and self.ctx.stmt_call_id == id(finding.node):
                        self._pending_stmt = (finding.code, finding.fix)
                        self.fixed += 1
                        continue
                else:
                    try:
                        new = _apply(finding, original, updated)
                    except Exception as exc:  # noqa: BLE001 - a faulty fix is reported, not applied
                        self.ctx.errors.append(f"{finding.code} (fix): {type(exc).__name__}: {exc}")
                        new = None
                    if new is not None:
                        self.fixed += 1
                        return new
            self.pending.append((finding, rule, appl, self.stmt_stack[-1] if self.stmt_stack else None))
        return updated

    def _deliberate(self, finding: Finding) -> bool:
        """Whether ``finding`` is on code that is CUDA-specific on purpose: one of the exemptions of
        :mod:`neuron_conformance.migrate.exemptions` (per-vendor dispatch, CUDA requirements, runtimes and
        components, capability probes, old-torch fallbacks, code without effect off CUDA, sanity checks,
        kernel modules, ONNX Runtime devices), asked in their fixed order; the answers are kept for the
        file in ``_deliberate_cache``."""
        if finding.code in _SELF_DECIDED:
            return False
        return exemptions.exempt_finding(self.ctx, finding, self.ancestors, self._deliberate_cache)

    def _limit(self, finding: Finding, appl: str) -> str:
        """``appl`` limited by the region of a guard finding (from :attr:`guard_limits`) and by the file's
        other device choices (:meth:`_floor`); sets the finding's reason when a limit lowers it."""
        limit, why = self.guard_limits.get(id(finding.guard), (REPORT, "its region was not analysed"))
        new = reach.worst(appl, limit)
        if new != appl and not finding.reason:
            finding.reason = why
        return self._floor(finding, new)

    def _floor(self, finding: Finding, appl: str) -> str:
        """``appl`` limited by the least fixable availability check of the file (:data:`_DEVICE_CHOICE`): two
        checks that place a model and its input must be widened together or not at all, or the model stays on
        the CPU while the input goes to the accelerator (a script that places its model with ``if
        torch.cuda.is_available(): model.cuda()`` beside ``device = "cuda" if torch.cuda.is_available() else
        "cpu"``)."""
        if finding.code not in _DEVICE_CHOICE or finding.guard is not None and not self._places(finding.guard):
            return appl
        floor, why = self.guard_limits.get(_FLOOR, (SAFE, ""))
        new = reach.worst(appl, floor)
        if new != appl:
            finding.reason = why  # the last limit decides, so its reason is the one given
        return new

    def _places(self, guard: cst.CSTNode) -> bool:
        """:func:`reach.places_values` of a guard's region, walked once per region."""
        key = id(guard)
        if key not in self._places_cache:
            self._places_cache[key] = reach.places_values(guard)
        return self._places_cache[key]

    def resolve_guards(self) -> None:
        """After a read-only walk: decide the guard findings deferred by :meth:`_handle` from the
        applicability of everything in their regions (:func:`neuron_conformance.migrate.reach.region_limit`)."""
        own = []
        for finding, rule, appl, stmt in self.deferred:
            if finding.guard is not None:
                key = id(finding.guard)
                if key not in self.guard_limits:
                    self.guard_limits[key] = reach.region_limit(
                        self.ctx, finding.guard, self.applicability, self.guard_nodes
                    )
                limit, _ = self.guard_limits[key]
                if finding.code in _DEVICE_CHOICE and self._places(finding.guard):
                    own.append((reach.worst(appl, limit), finding.node))
        floor, culprit = SAFE, None
        for appl, node in own + self.choice_tiers:
            if reach.worst(floor, appl) != floor:
                floor, culprit = appl, node
        if culprit is not None:
            snippet = " ".join(self.ctx.code(culprit).split())[:60]
            head, tier = (
                ("not fixed", "is not fixed")
                if floor == REPORT
                else ("fixed only with --unsafe-fixes", "is fixed only with --unsafe-fixes")
            )
            self.guard_limits[_FLOOR] = (
                floor,
                f"{head}: another availability check of this file, `{snippet}`, "
                f"{tier}; checks that place values which may meet are widened together",
            )
        for finding, rule, appl, stmt in self.deferred:
            appl = self._limit(finding, appl) if finding.guard is not None else self._floor(finding, appl)
            if self.settings.applies(appl):
                self.fixable += 1
            else:
                self.pending.append((finding, rule, appl, stmt))
        self.deferred = []

    def finish(self, module: cst.Module) -> None:
        """Turn the pending findings into :attr:`violations` with positions in ``module`` (the
        traversed tree)."""
        if not self.pending:
            return
        if self.positions is not None:
            lookup = self.positions.get
        else:
            table = statement_positions(module, self.ctx.source, self.pending)
            if table is None:
                table = module_positions(module)
            lookup = lambda node, stmt: table.get(node)  # noqa: E731
        for finding, rule, appl, stmt in self.pending:
            pos = lookup(finding.node, stmt)
            if pos is None:
                continue
            self.violations.append(
                Violation(
                    path=self.path,
                    code=finding.code,
                    message=rule.message.format(**finding.fmt) + (f"; {finding.reason}" if finding.reason else ""),
                    line=pos.start.line,
                    column=pos.start.column,
                    end_line=pos.end.line,
                    end_column=pos.end.column,
                    fix_applicability=appl,
                    fix_title=rule.fix_title.format(**finding.fmt) if appl != REPORT else "",
                )
            )

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
        _run_visit_hooks("Call", self.ctx, node)

    def visit_IfExp(self, node):
        onnx = self.ctx.rule_state("onnx-runtime", lambda: "ExecutionProvider" in self.ctx.source)  # once a file
        if onnx and onnx_runtime_nodes(self.ctx, node.test):
            # an ONNX Runtime device: its literals are not torch devices
            self.ctx.skip.update(id(n) for n in (node.body, node.orelse) if isinstance(n, cst.SimpleString))
        _run_visit_hooks("IfExp", self.ctx, node)

    def leave_IfExp(self, original, updated):
        return self._handle(hooks.dispatch_node("IfExp", self.ctx, original), updated, original)

    def leave_Param(self, original, updated):
        return self._handle(hooks.dispatch_node("Param", self.ctx, original), updated, original)

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
        _run_visit_hooks("Assign", self.ctx, node)

    def visit_DictElement(self, node):
        _run_visit_hooks("DictElement", self.ctx, node)

    def leave_Assign(self, original, updated):
        if self.ctx.assign_stack and self.ctx.assign_stack[-1] is original:
            self.ctx.assign_stack.pop()
        return self._handle(hooks.dispatch_node("Assign", self.ctx, original), updated, original)

    def leave_AnnAssign(self, original, updated):
        return self._handle(hooks.dispatch_node("AnnAssign", self.ctx, original), updated, original)

    def visit_Comparison(self, node):
        self.ctx.comparison_depth += 1

    def visit_Attribute(self, node):
        self.ctx.call_funcs.discard(id(node.value))
        self.ctx.inner_attrs.add(id(node.value))
        self.ctx.inner_attrs.add(id(node.attr))

    def visit_Decorator(self, node):
        self.ctx.decorators.add(id(node.decorator))

    def leave_Call(self, original, updated):
        return self._handle(hooks.dispatch_call(self.ctx, original), updated, original)

    def leave_Attribute(self, original, updated):
        if id(original) in self.ctx.inner_attrs or id(original) in self.ctx.call_funcs:
            return updated
        if id(original) in self.ctx.skip:
            return updated
        if self.ctx.qname(original) is None:
            return self._handle(hooks.dispatch_attr_name(self.ctx, original), updated, original)
        return self._handle(hooks.dispatch_reference(self.ctx, original), updated, original)

    def leave_Name(self, original, updated):
        if id(original) in self.ctx.call_funcs or id(original) in self.ctx.inner_attrs:
            return updated
        if original.value not in self.ctx.aliases:
            return updated
        return self._handle(hooks.dispatch_reference(self.ctx, original), updated, original)

    def leave_SimpleString(self, original, updated):
        if id(original) in self.ctx.docstrings:
            return updated
        return self._handle(hooks.dispatch_string(self.ctx, original), updated, original)

    def leave_Comparison(self, original, updated):
        self.ctx.comparison_depth -= 1
        return self._handle(hooks.dispatch_node("Comparison", self.ctx, original), updated, original)

    def visit_WithItem(self, node):
        _run_visit_hooks("WithItem", self.ctx, node)

    def leave_WithItem(self, original, updated):
        return self._handle(hooks.dispatch_node("WithItem", self.ctx, original), updated, original)

    def visit_SimpleStatementLine(self, node):
        self._pending_stmt = None
        body = node.body
        if len(body) == 1 and isinstance(body[0], cst.Expr) and isinstance(body[0].value, cst.Call):
            self.ctx.stmt_call_id = id(body[0].value)
        else:
            self.ctx.stmt_call_id = None

    def leave_SimpleStatementLine(self, original, updated):
        pending, self._pending_stmt = self._pending_stmt, None
        self.ctx.stmt_call_id = None
        if pending is None:
            return updated
        code, fix = pending
        try:
            return fix(updated)
        except Exception as exc:  # noqa: BLE001 - a faulty fix is reported, not applied
            self.ctx.errors.append(f"{code} (fix): {type(exc).__name__}: {exc}")
            self.fixed -= 1
            return updated

    def visit_If_body(self, node):
        if hooks.is_availability_test(self.ctx, node.test):
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

    def visit_Annotation(self, node):
        return False  # a type annotation names a type; it moves no data and runs no CUDA code

    def visit_Subscript(self, node):
        # A type expression outside an annotation (``IndexType = Union[torch.LongTensor,
        # torch.cuda.LongTensor]``, a type alias): the same as an annotation (as in mmengine 0.10.7).
        return self.ctx.qname(node.value) not in _TYPE_FORMS

    def visit_Module(self, node):
        _run_visit_hooks("Module", self.ctx, node)

    def leave_Module(self, original, updated):
        return self._handle(hooks.dispatch_node("Module", self.ctx, original), updated, original)

    def visit_IndentedBlock(self, node):
        _run_visit_hooks("IndentedBlock", self.ctx, node)

    def leave_IndentedBlock(self, original, updated):
        return self._handle(hooks.dispatch_node("IndentedBlock", self.ctx, original), updated, original)
