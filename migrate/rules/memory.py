"""NM301-NM307: memory statistics and caching allocator (``torch/accelerator/memory.py``). NM308 (a CUDA-gated
``pin_memory=``) is :mod:`neuron_conformance.migrate.rules.pin_memory`."""

from __future__ import annotations

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.exemptions.cuda_tests import NO_GENERIC_EQUIVALENT
from neuron_conformance.migrate.hooks import on_call, on_reference, on_string, rule
from neuron_conformance.migrate.rules._common import (
    SAFE,
    UNSAFE,
    Finding,
    comparison_others,
    container_use,
    contains,
    name_tokens,
    new_call,
    rename_reference,
)

_GUARD_SAFETY = (
    "On a CPU-only host the `torch.cuda` function is a silent no-op (or returns 0 / `{{}}`) while the "
    "`torch.accelerator` one raises `RuntimeError: Cannot access accelerator device when none is "
    "available`. So the fix is safe when the call already sits in an `if ...is_available():` body, or "
    "when it is a statement on its own line: it is then wrapped in `if torch.accelerator.is_available():` "
    "(evaluated at the call site, never at module level). Where the value of a statistic is used, it becomes "
    "`(torch.accelerator.X() if torch.accelerator.is_available() else 0)` (`{{}}` for `memory_stats`), what the "
    "CUDA function answers without CUDA; elsewhere the rename is unsafe. "
    "`device=` becomes positional (positional-only in `torch.accelerator`)."
)

rule(
    "NM301",
    "cuda-empty-cache",
    "`torch.cuda.empty_cache()` empties the CUDA cache only",
    "Replace with `torch.accelerator.empty_cache()`",
    SAFE,
    min_torch=(2, 8),
    what="Finds `torch.cuda.empty_cache()`.",
    why="On Trainium/XPU/MPS it does nothing for the device in use.",
    example="torch.cuda.empty_cache()",
    use_instead="if torch.accelerator.is_available():\n    torch.accelerator.empty_cache()",
    fix_safety=_GUARD_SAFETY.replace("{{}}", "{}"),
    references="`torch/accelerator/memory.py`, `torch/cuda/memory.py` (behaviour on a host without an accelerator).",
)

rule(
    "NM302",
    "cuda-memory-stats",
    "`{name}` reports CUDA memory only",
    "Replace with `torch.accelerator.{new}`",
    SAFE,
    min_torch=(2, 8),
    what="Finds `torch.cuda.memory_allocated`, `max_memory_allocated`, `memory_reserved`, "
    "`max_memory_reserved`, `memory_stats`, `reset_peak_memory_stats`, "
    "`reset_accumulated_memory_stats` and the deprecated `memory_cached`/`max_memory_cached`.",
    why="They answer 0 for the accelerator in use on Trainium/XPU/MPS.",
    example="peak = torch.cuda.max_memory_allocated(device=0)",
    use_instead="peak = torch.accelerator.max_memory_allocated(0)",
    fix_safety=_GUARD_SAFETY.replace("{{}}", "{}") + " The `memory_stats` key set is backend-defined.",
    references="`torch/accelerator/memory.py`, `torch/cuda/memory.py` (behaviour on a host without an accelerator, "
    "positional-only device arguments).",
)

rule(
    "NM303",
    "cuda-reset-max-memory-allocated",
    "`torch.cuda.reset_max_memory_allocated()` is deprecated and CUDA-only",
    "Replace with `torch.accelerator.reset_peak_memory_stats()`",
    UNSAFE,
    min_torch=(2, 8),
    what="Finds `torch.cuda.reset_max_memory_allocated()` and `reset_max_memory_cached()`.",
    why="Deprecated CUDA-only functions.",
    example="torch.cuda.reset_max_memory_allocated()",
    use_instead="torch.accelerator.reset_peak_memory_stats()",
    fix_safety="Unsafe: the replacement resets every peak statistic, not only the allocated one, and "
    "raises on CPU-only hosts.",
    references="`torch/accelerator/memory.py`.",
)

rule(
    "NM304",
    "cuda-mem-get-info",
    "`torch.cuda.mem_get_info()` is CUDA-specific",
    "Replace with `torch.accelerator.get_memory_info()`",
    SAFE,
    min_torch=(2, 9),
    what="Finds `torch.cuda.mem_get_info(d)`.",
    why="It fails on other accelerators.",
    example="free, total = torch.cuda.mem_get_info()",
    use_instead="free, total = torch.accelerator.get_memory_info()",
    fix_safety="Safe: both return `(free, total)` in bytes and both raise on CPU-only hosts.",
    references="`torch/accelerator/memory.py`.",
)

rule(
    "NM305",
    "cuda-memory-no-equivalent",
    "`{name}` has no device-generic equivalent",
    "",
    "report",
    what="Finds `torch.cuda.memory_summary`, `ipc_collect`, `caching_allocator_alloc`/`delete`, "
    "`set_per_process_memory_fraction`, `MemPool`, `use_mem_pool` and `torch.cuda.memory._*` "
    "(memory history and snapshots).",
    why="None of these exist in `torch.accelerator`; most are CUDA-only.",
    example="print(torch.cuda.memory_summary())",
    use_instead="print(torch.accelerator.memory_stats())",
    fix_safety="No fix.",
    references="`torch/accelerator/memory.py`; `torch/__init__.py` (`get_device_module`; the per-device modules' attributes).",
)

rule(
    "NM306",
    "cuda-out-of-memory-error",
    "`torch.cuda.OutOfMemoryError` is the generic `torch.OutOfMemoryError`",
    "Replace with `torch.OutOfMemoryError`",
    SAFE,
    what="Finds references to `torch.cuda.OutOfMemoryError`.",
    why="The generic name documents that any accelerator's OOM is caught.",
    example="except torch.cuda.OutOfMemoryError:",
    use_instead="except torch.OutOfMemoryError:",
    fix_safety="Safe: the two names are the same class object in torch 2.13.",
    references="`torch/accelerator/memory.py`.",
)

rule(
    "NM307",
    "cuda-oom-message",
    'Matching the text "CUDA out of memory" misses other accelerators',
    "",
    "report",
    what="Finds strings containing `CUDA out of memory` used to recognise an error: compared "
    "with an error text (`in str(e)`, `== e.args[0]`), iterated over, passed as the pattern of a `re` function or a string search method, or "
    "assigned to a name (a list of messages). Docstrings, messages passed to other calls "
    "and keyword arguments are not reported.",
    why="Other backends word their out-of-memory errors differently.",
    example='if "CUDA out of memory" in str(e):',
    use_instead="except torch.OutOfMemoryError:",
    fix_safety="No fix.",
    references="`torch/accelerator/memory.py`; accelerate `utils/memory.py` (`should_reduce_batch_size`).",
)

_STATS = {
    "memory_allocated": "memory_allocated",
    "max_memory_allocated": "max_memory_allocated",
    "memory_reserved": "memory_reserved",
    "max_memory_reserved": "max_memory_reserved",
    "memory_stats": "memory_stats",
    "reset_peak_memory_stats": "reset_peak_memory_stats",
    "reset_accumulated_memory_stats": "reset_accumulated_memory_stats",
    "memory_cached": "memory_reserved",
    "max_memory_cached": "max_memory_reserved",
}


def _guarded_finding(ctx, call, code, new, fmt):
    fix = new_call(ctx, call, f"accelerator.{new}", old_params=["device"], new_positional=["device"])
    if fix is None:
        return Finding(code, call, fmt)
    if ctx.in_guard():
        return Finding(code, call, fmt, fix=fix, applicability=SAFE)
    if ctx.stmt_call_id == id(call):

        def stmt_fix(line: cst.SimpleStatementLine):
            expr = line.body[0]
            new_expr = expr.with_changes(value=fix(expr.value))
            inner = line.with_changes(body=[new_expr], leading_lines=[])
            test = cst.Call(func=ctx.torch_attr("accelerator.is_available"))
            return cst.If(test=test, body=cst.IndentedBlock(body=[inner]), leading_lines=line.leading_lines)

        return Finding(code, call, fmt, fix=stmt_fix, applicability=SAFE, stmt_fix=True)
    if code == "NM301" or code == "NM302" and new in _CPU_ONLY_VALUE:

        def value_fix(updated):  # `(torch.accelerator.X() if torch.accelerator.is_available() else 0)`
            return cst.IfExp(
                test=cst.Call(func=ctx.torch_attr("accelerator.is_available")),
                body=fix(updated),
                orelse=_CPU_ONLY_VALUE[new](),
                lpar=[cst.LeftParen()],
                rpar=[cst.RightParen()],
            )

        return Finding(code, call, fmt, fix=value_fix, applicability=SAFE)
    return Finding(code, call, fmt, fix=fix, applicability=UNSAFE)


#: What the ``torch.cuda`` statistic answers on a host without CUDA (torch 2.13, measured: 0, and an empty
#: ``OrderedDict`` for ``memory_stats``): a used value keeps it there (a script's memory report).
_CPU_ONLY_VALUE = {
    name: (lambda: cst.Integer("0"))
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved")
}
_CPU_ONLY_VALUE["memory_stats"] = lambda: cst.Dict(elements=[])
_CPU_ONLY_VALUE["empty_cache"] = lambda: cst.Name(
    "None"
)  # `lambda: torch.cuda.empty_cache()` (a training script's callback)


@on_call("torch.cuda.empty_cache")
def _empty_cache(ctx, call, q):
    return _guarded_finding(ctx, call, "NM301", "empty_cache", {})


@on_call(*[f"torch.cuda.{n}" for n in _STATS])
def _stats(ctx, call, q):
    name = q.rsplit(".", 1)[1]
    return _guarded_finding(ctx, call, "NM302", _STATS[name], {"name": q, "new": _STATS[name]})


@on_call("torch.cuda.reset_max_memory_allocated", "torch.cuda.reset_max_memory_cached")
def _reset_max(ctx, call, q):
    fix = new_call(ctx, call, "accelerator.reset_peak_memory_stats", old_params=["device"], new_positional=["device"])
    return Finding("NM303", call, fix=fix, applicability=UNSAFE if fix else "report")


@on_call("torch.cuda.mem_get_info")
def _mem_get_info(ctx, call, q):
    fix = new_call(ctx, call, "accelerator.get_memory_info", old_params=["device"], new_positional=["device"])
    return Finding("NM304", call, fix=fix, applicability=SAFE if fix else "report")


@on_call(*[f"torch.cuda.{n}" for n in NO_GENERIC_EQUIVALENT], "torch.cuda.memory.*")
def _no_equivalent(ctx, call, q):
    return Finding("NM305", call, {"name": q})


@on_reference("torch.cuda.OutOfMemoryError")
def _oom(ctx, node, q):
    return Finding("NM306", node, fix=rename_reference(ctx, node, "OutOfMemoryError"), applicability=SAFE)


@on_call("torch.cuda.OutOfMemoryError")
def _oom_call(ctx, call, q):
    """``raise torch.cuda.OutOfMemoryError("...")``: the same class as ``torch.OutOfMemoryError`` (torch 2.13
    ``torch/cuda/__init__.py`` binds it to ``torch._C.OutOfMemoryError``), so the constructor is renamed too."""
    fix = rename_reference(ctx, call.func, "OutOfMemoryError")
    if fix is None:
        return Finding("NM306", call)

    def whole(updated):
        return updated.with_changes(func=fix(updated.func))

    return Finding("NM306", call, fix=whole, applicability=SAFE)


_MATCH_METHODS = frozenset(
    {
        "find",
        "rfind",
        "index",
        "rindex",
        "count",
        "startswith",
        "endswith",
        "search",
        "match",
        "fullmatch",
        "findall",
        "finditer",
        "__contains__",
    }
)


_ERROR_WORDS = frozenset(
    {
        "e",
        "ex",
        "exc",
        "err",
        "error",
        "errors",
        "exception",
        "msg",
        "message",
        "messages",
        "args",
        "stderr",
        "stdout",
        "output",
        "reason",
        "traceback",
        "tb",
        "log",
        "what",
    }
)


def _error_operand(node) -> bool:
    """``str(e)``, ``repr(exc)``, ``e.args[0]``, ``err_msg``, ``traceback.format_exc()``..."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in ("str", "repr"):
        return True
    return bool(name_tokens(node) & _ERROR_WORDS)


def _oom_matching_context(ctx, node, value: str) -> bool:
    """Whether the string is used to recognise an error message: compared with an error text
    (``"CUDA out of memory" in str(e)``), the pattern of a ``re`` function or of a string search
    method, iterated over as a list of messages, or assigned to a name (a constant or list of
    messages used later). Messages passed to other calls (``raise RuntimeError("CUDA out of
    memory")``), keyword arguments (documentation tables), comparisons with other strings and
    docstrings are not matching."""
    kind, where = container_use(ctx, node)
    if kind == "compare":
        return any(_error_operand(o) for o in comparison_others(where, node) if not contains(o, node))
    if kind == "assign":
        return True
    if kind == "other":
        return isinstance(where, (cst.CompFor, cst.For))
    if kind != "arg" or where.keyword is not None and where.keyword.value not in ("pattern", "string"):
        return False
    call = ctx.parent(where)
    q = ctx.qname(call.func)
    if q == "re.compile":
        # A many-branch alternation is a keyword pre-filter, not an error matcher.
        return value.count("|") < 4
    if q is not None and q.startswith(("re.", "regex.")):
        return True
    return q is None and isinstance(call.func, cst.Attribute) and call.func.attr.value in _MATCH_METHODS


@on_string
def _oom_text(ctx, node):
    if "out of memory" in node.value and "CUDA" in node.value:
        v = string_value(node)
        if v is not None and "CUDA out of memory" in v and _oom_matching_context(ctx, node, v):
            return Finding("NM307", node)
    return None
