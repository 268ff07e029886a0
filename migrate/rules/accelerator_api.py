"""NM0xx: misuse of ``torch.accelerator`` itself (lints no other tool has)."""

from __future__ import annotations

import libcst as cst

from neuron_conformance.migrate.hooks import on_attr_name, on_call, on_reference, rule
from neuron_conformance.migrate.rules._common import SAFE, UNSAFE, Finding, new_call, rename_reference
from neuron_conformance.migrate.traversal import ReadOnlyWalk

#: Exactly what ``torch.accelerator`` exports in torch 2.13 (``torch/accelerator/__init__.py`` ``__all__``).
ACCELERATOR_NAMES = frozenset(
    {
        "Graph",
        "current_accelerator",
        "current_device_idx",
        "current_device_index",
        "current_stream",
        "device_count",
        "device_index",
        "empty_cache",
        "empty_host_cache",
        "get_device_capability",
        "get_memory_info",
        "is_available",
        "max_memory_allocated",
        "max_memory_reserved",
        "memory_allocated",
        "memory_reserved",
        "memory_stats",
        "reset_accumulated_memory_stats",
        "reset_peak_memory_stats",
        "set_device_idx",
        "set_device_index",
        "set_stream",
        "synchronize",
        "graphs",
        "memory",
    }
)

#: Names people expect in ``torch.accelerator`` but that live elsewhere.
SUGGESTIONS = {
    "current_device": "torch.accelerator.current_device_index()",
    "set_device": "torch.accelerator.set_device_index(i)",
    "manual_seed": "torch.manual_seed(seed)",
    "manual_seed_all": "torch.manual_seed(seed)",
    "get_device_name": "torch.get_device_module().get_device_name(i)",
    "get_device_properties": "torch.get_device_module().get_device_properties(i)",
    "is_bf16_supported": 'torch.bfloat16 in torch.accelerator.get_device_capability()["supported_dtypes"]',
    "default_stream": "torch.get_device_module().default_stream() (CUDA/MTIA only)",
    "memory_summary": "torch.accelerator.memory_stats()",
    "Stream": "torch.Stream",
    "Event": "torch.Event",
    "mem_get_info": "torch.accelerator.get_memory_info()",
}

rule(
    "NM001",
    "device-index-not-entered",
    "`torch.accelerator.device_index(...)` used as a statement does nothing",
    "Replace with `torch.accelerator.set_device_index(...)`",
    UNSAFE,
    min_torch=(2, 8),
    what="Finds `torch.accelerator.device_index(i)` called as a statement.",
    why="`device_index` is a context-manager class: its constructor only stores the index and "
    "`__enter__` switches the device. As a statement it never enters, so the device is not changed. "
    "Official example code has shipped this bug.",
    example="torch.accelerator.device_index(rank)",
    use_instead="torch.accelerator.set_device_index(rank)  # or: with torch.accelerator.device_index(rank): ...",
    fix_safety="Unsafe: the statement did nothing before and switches the device for the rest of the "
    "process after; a scoped `with` block may be what was meant.",
    references="`torch/accelerator/__init__.py` (class `device_index`).",
)

rule(
    "NM002",
    "accelerator-name-missing",
    "`torch.accelerator.{attr}` does not exist",
    "",
    "report",
    what="Finds uses of names that `torch.accelerator` does not have in torch 2.13 (such as "
    "`get_device_name`, `manual_seed`, `current_device`, `is_bf16_supported`).",
    why="They raise AttributeError at run time. Migration guides and linters have proposed such names.",
    example="torch.accelerator.manual_seed(0)",
    use_instead="torch.manual_seed(0)  # seeds every accelerator",
    fix_safety="No fix in general; the message names the replacement where one exists "
    "(`current_device` -> `current_device_index`, `manual_seed` -> `torch.manual_seed`).",
    references="`torch/accelerator/__init__.py` (`__all__`, the export list, introspected on torch 2.13).",
)

rule(
    "NM003",
    "accelerator-deprecated-alias",
    "`torch.accelerator.{attr}` is a deprecated alias",
    "Replace with `torch.accelerator.{new}`",
    SAFE,
    min_torch=(2, 7),
    what="Finds `torch.accelerator.current_device_idx` and `set_device_idx`.",
    why="Both were renamed (`current_device_index`, `set_device_index`) and warn when called.",
    example="i = torch.accelerator.current_device_idx()",
    use_instead="i = torch.accelerator.current_device_index()",
    fix_safety="Safe: the aliases call the new functions.",
    references="`torch/accelerator/__init__.py` (`__all__`).",
)

rule(
    "NM004",
    "unchecked-current-accelerator",
    "`current_accelerator().type` fails when there is no accelerator",
    'Fall back to `torch.device("cpu")` before reading `.type`',
    UNSAFE,
    what="Finds `torch.accelerator.current_accelerator().type` (and `.index`) read without a None check; "
    "not where `torch.accelerator.is_available()` was established (an `if` body, after `and`, after "
    "an early exit `if not torch.accelerator.is_available(): return ...`).",
    why="`current_accelerator()` returns None on a CPU-only build, so `.type` raises AttributeError.",
    example="device_type = torch.accelerator.current_accelerator().type",
    use_instead='device_type = (torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type',
    fix_safety='Unsafe: code that used to fail on CPU-only hosts now runs there with `"cpu"`.',
    references="`torch/accelerator/__init__.py` (`current_accelerator` docstring).",
)


rule(
    "NM005",
    "cuda-function-reference",
    "`{name}` is referenced (not called); its device-generic equivalent is `{new}`",
    "Replace with `{new}`",
    SAFE,
    what="Finds references (not calls) to `torch.cuda` functions that have a `torch.accelerator` "
    "equivalent: `f = torch.cuda.current_device`, `timer(torch.cuda.memory_allocated)`.",
    why="The stored function is called later, where no rule sees the call; it still targets CUDA only.",
    example="get_index = torch.cuda.current_device",
    use_instead="get_index = torch.accelerator.current_device_index",
    fix_safety="Safe for `current_device` and `device_count` (same arguments, none). Unsafe for the "
    "others: the `torch.accelerator` functions take the device positionally only "
    "(`(device_index=None, /)`), so a later `f(device=0)` raises TypeError, and on a CPU-only "
    "host the memory functions raise where the CUDA ones returned 0. Report-only where the "
    "equivalent is not a plain function (`manual_seed`, `get_device_name`): the message "
    "names it.",
    references="`torch/accelerator/__init__.py` (`__all__`); `torch/accelerator/memory.py` (positional-only device "
    "arguments), `torch/cuda/memory.py` (behaviour on a host without an accelerator); signatures "
    "introspected on torch 2.13.",
)

#: torch.cuda function -> (replacement text, applicability); replacement under torch.accelerator
#: unless it starts with "torch." (then report-only, the text is advice).
_REFERENCES = {
    "current_device": ("current_device_index", SAFE),
    "device_count": ("device_count", SAFE),
    "set_device": ("set_device_index", UNSAFE),
    "is_available": ("is_available", UNSAFE),
    "empty_cache": ("empty_cache", UNSAFE),
    "memory_allocated": ("memory_allocated", UNSAFE),
    "max_memory_allocated": ("max_memory_allocated", UNSAFE),
    "memory_reserved": ("memory_reserved", UNSAFE),
    "max_memory_reserved": ("max_memory_reserved", UNSAFE),
    "memory_stats": ("memory_stats", UNSAFE),
    "reset_peak_memory_stats": ("reset_peak_memory_stats", UNSAFE),
    "reset_accumulated_memory_stats": ("reset_accumulated_memory_stats", UNSAFE),
    "mem_get_info": ("get_memory_info", UNSAFE),
    "current_stream": ("current_stream", UNSAFE),
    "set_stream": ("set_stream", UNSAFE),
    "manual_seed": ("torch.manual_seed (it also seeds the CPU generator)", "report"),
    "manual_seed_all": ("torch.manual_seed (it also seeds the CPU generator)", "report"),
    "get_device_name": ("torch.get_device_module().get_device_name (CUDA and XPU only)", "report"),
}


@on_reference(*[f"torch.cuda.{n}" for n in _REFERENCES])
def _cuda_reference(ctx, node, q):
    name = q.rsplit(".", 1)[1]
    new, appl = _REFERENCES[name]
    if new.startswith("torch."):
        return Finding("NM005", node, {"name": q, "new": new})
    fmt = {"name": q, "new": f"torch.accelerator.{new}"}
    return Finding("NM005", node, fmt, fix=rename_reference(ctx, node, f"accelerator.{new}"), applicability=appl)


@on_call("torch.accelerator.device_index")
def _device_index_statement(ctx, call, q):
    if ctx.stmt_call_id != id(call):
        return None
    return Finding("NM001", call, fix=new_call(ctx, call, "accelerator.set_device_index"), applicability=UNSAFE)


def _missing(ctx, node, q):
    parts = q.split(".")
    if len(parts) < 3:
        return None
    attr = parts[2]
    if attr in ACCELERATOR_NAMES or attr.startswith("__"):
        return None
    return Finding("NM002", node, {"attr": attr + (f" (use {SUGGESTIONS[attr]})" if attr in SUGGESTIONS else "")})


_DEPRECATED = {"current_device_idx": "current_device_index", "set_device_idx": "set_device_index"}


@on_call("torch.accelerator.*")
def _accelerator_call(ctx, call, q):
    attr = q.split(".")[2] if q.count(".") >= 2 else ""
    if attr in _DEPRECATED:
        return Finding(
            "NM003",
            call,
            {"attr": attr, "new": _DEPRECATED[attr]},
            fix=new_call(ctx, call, f"accelerator.{_DEPRECATED[attr]}"),
            applicability=SAFE,
        )
    return _missing(ctx, call, q)


@on_reference("torch.accelerator.*")
def _accelerator_ref(ctx, node, q):
    attr = q.split(".")[2] if q.count(".") >= 2 else ""
    if attr in _DEPRECATED:
        return Finding(
            "NM003",
            node,
            {"attr": attr, "new": _DEPRECATED[attr]},
            applicability=SAFE,
            fix=lambda updated: ctx.torch_attr(f"accelerator.{_DEPRECATED[attr]}"),
        )
    return _missing(ctx, node, q)


@on_attr_name("type", "index")
def _unchecked(ctx, node):
    if node.attr.value not in ("type", "index"):
        return None
    value = node.value
    if isinstance(value, cst.Call) and ctx.qname(value.func) == "torch.accelerator.current_accelerator":
        if _availability_checked(ctx, node):
            return None

        def fix(updated):  # also `current_accelerator(check_available=True)`: None when unavailable
            inner = cst.BooleanOperation(
                left=updated.value,
                operator=cst.Or(),
                right=cst.Call(func=ctx.torch_attr("device"), args=[cst.Arg(cst.SimpleString('"cpu"'))]),
                lpar=[cst.LeftParen()],
                rpar=[cst.RightParen()],
            )
            return updated.with_changes(value=inner)

        return Finding("NM004", node, fix=fix, applicability=UNSAFE)
    if isinstance(value, cst.Name) and "current_accelerator" in ctx.source:
        assigned, checked = ctx.rule_state(__name__, lambda: _accelerator_names(ctx))
        if value.value in assigned and value.value not in checked:
            return Finding("NM004", node, reason=_UNCHECKED.format(name=value.value, call=assigned[value.value]))
    return None


_AVAILABLE = "torch.accelerator.is_available"


def _is_available_call(ctx, node) -> bool:
    return isinstance(node, cst.Call) and ctx.qname(node.func) == _AVAILABLE


def _and_parts(node) -> list:
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And):
        return _and_parts(node.left) + _and_parts(node.right)
    return [node]


def _availability_checked(ctx, node) -> bool:
    """``node`` is reached only when ``torch.accelerator.is_available()`` is true: in the body of a
    test ``and``-ing it (``if``, conditional expression, the right of ``and``), or after an early
    exit ``if not torch.accelerator.is_available(): return ...`` in an enclosing block. There
    ``current_accelerator()`` is not None (its docstring: the accelerator "if available"), so
    ``.type`` cannot fail (diffusers 0.42.1's ``_detect_device_type``)."""
    path = ctx.ancestors if ctx.ancestors and ctx.ancestors[-1] is node else ctx.ancestors + [node]
    for a, child in zip(path, path[1:]):
        if (
            isinstance(a, (cst.If, cst.IfExp))
            and child is a.body
            and any(_is_available_call(ctx, o) for o in _and_parts(a.test))
        ):
            return True
        if (
            isinstance(a, cst.BooleanOperation)
            and isinstance(a.operator, cst.And)
            and child is a.right
            and any(_is_available_call(ctx, o) for o in _and_parts(a.left))
        ):
            return True
        if isinstance(a, (cst.IndentedBlock, cst.Module)):
            for s in a.body:
                if s is child:
                    break
                if (
                    isinstance(s, cst.If)
                    and s.orelse is None
                    and isinstance(s.test, cst.UnaryOperation)
                    and isinstance(s.test.operator, cst.Not)
                    and _is_available_call(ctx, s.test.expression)
                    and isinstance(s.body, cst.IndentedBlock)
                    and isinstance(s.body.body[-1], cst.SimpleStatementLine)
                    and isinstance(s.body.body[-1].body[-1], (cst.Return, cst.Raise))
                ):
                    return True
    return False


_UNCHECKED = (
    "`{name}` is `{call}`, which returns None on a build without an accelerator (and, with "
    "check_available=True, whenever none is available at run time): test `{name} is not None` first"
)


class _AcceleratorNames(ReadOnlyWalk):
    """Names assigned a ``torch.accelerator.current_accelerator(...)`` result, and names tested
    against None or for truth anywhere in the module (a read-only walk: LibCST's own traversal
    rebuilds every node, seconds on a large module)."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.ancestors, self.stmt_stack, self.stmt_count = [], [], 0
        self.assigned: dict = {}
        self.checked: set = set()

    def _assign(self, target, value):
        if (
            isinstance(target, cst.Name)
            and isinstance(value, cst.Call)
            and self.ctx.qname(value.func) == "torch.accelerator.current_accelerator"
        ):
            self.assigned[target.value] = " ".join(self.ctx.code(value).split())

    def visit_Assign(self, node):
        for t in node.targets:
            self._assign(t.target, node.value)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self._assign(node.target, node.value)

    def visit_NamedExpr(self, node):
        self._assign(node.target, node.value)
        self.checked.add(getattr(node.target, "value", None))  # `if (acc := ...) is not None`

    def visit_Comparison(self, node):
        operands = [node.left] + [c.comparator for c in node.comparisons]
        if any(isinstance(o, cst.Name) and o.value == "None" for o in operands):
            self.checked.update(o.value for o in operands if isinstance(o, cst.Name))

    def _truth(self, node):
        while isinstance(node, cst.UnaryOperation):
            node = node.expression
        if isinstance(node, cst.Name):
            self.checked.add(node.value)

    def visit_If(self, node):
        self._truth(node.test)

    def visit_While(self, node):
        self._truth(node.test)

    def visit_IfExp(self, node):
        self._truth(node.test)

    def visit_Assert(self, node):
        self._truth(node.test)

    def visit_BooleanOperation(self, node):
        self._truth(node.left)
        self._truth(node.right)


def _accelerator_names(ctx):
    v = _AcceleratorNames(ctx)
    v.walk(ctx.module)
    return v.assigned, v.checked
