"""Tests that hold only on CUDA, shared by the exemptions (:mod:`neuron_conformance.migrate.exemptions`).

A CUDA operand (``torch.cuda.is_available()``, ``x.is_cuda``, ``<x> == "cuda"``, a name with a ``cuda``
word that is not negated), a test true only on CUDA (:func:`positive`) or whenever CUDA is missing
(:func:`negative`), an early exit taken off CUDA (:func:`early_exit`), a CUDA device test
(:func:`device_test`) and a capability query (:data:`CAPABILITY`, :func:`capability_node`).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.exemptions.names import CUDA_PROBE_NAME, callee, identifier, operands, word_set

#: Queries of NVIDIA architecture or device properties without a device-generic counterpart.
CAPABILITY = frozenset(
    {
        "torch.cuda.get_device_capability",
        "torch.cuda.get_device_properties",
        "torch.cuda.is_bf16_supported",
        "torch.cuda.get_arch_list",
        "torch.cuda.is_tf32_supported",
    }
)
NO_GENERIC_EQUIVALENT = (
    "memory_summary",
    "ipc_collect",
    "caching_allocator_alloc",
    "caching_allocator_delete",
    "set_per_process_memory_fraction",
    "MemPool",
    "use_mem_pool",
    "memory_snapshot",
    "list_gpu_processes",
)
"""``torch.cuda`` functions with no device-generic equivalent in torch (NM305 reports them, with every
``torch.cuda.memory.*`` function)."""


_NO_GENERIC_PREFIXES = ("torch.cuda.memory._", "torch.cuda.nvtx.", "torch.cuda.profiler.", "torch.cuda.cudart")


def no_generic_equivalent(ctx, node: cst.CSTNode) -> bool:
    """``node`` calls a CUDA function with no device-generic equivalent: one of :data:`NO_GENERIC_EQUIVALENT`,
    a private ``torch.cuda.memory._*`` function (memory history, snapshots, allocator settings), NVTX ranges
    (``torch.cuda.nvtx.*``) or the CUDA profiler and runtime (``torch.cuda.profiler.*``,
    ``torch.cuda.cudart()``), or a method of what ``torch.cuda.cudart()`` returns."""
    if not isinstance(node, cst.Call):
        return False
    func = node.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
        func = func.value.func  # torch.cuda.cudart().cudaProfilerStart()
    q = ctx.qname(func) or ""
    return q in {f"torch.cuda.{n}" for n in NO_GENERIC_EQUIVALENT} or q.startswith(_NO_GENERIC_PREFIXES)


_PROBES = frozenset({"torch.cuda.is_available", "torch.cuda.device_count", "torch.cuda.is_initialized"})
_NEGATING = frozenset({"no", "not", "non", "without", "disable", "disabled", "skip"})


def is_cuda_literal(node) -> bool:
    return string_value(node) == "cuda"


def cuda_operand(ctx, node: cst.CSTNode) -> bool:
    """True when ``node`` alone is true only on CUDA: a CUDA probe call (``torch.cuda.is_available()``,
    ``is_torch_cuda_available()``), ``x.is_cuda``, ``<x> == "cuda"``, ``torch.version.cuda``, or a
    name with a ``cuda`` word that is not negated (``pt_cuda_available``, ``IS_CUDA_SYSTEM``; not
    ``no_cuda``)."""
    if isinstance(node, cst.Call):
        return ctx.qname(node.func) in _PROBES or bool(CUDA_PROBE_NAME.match(callee(node)))
    if isinstance(node, cst.Comparison):
        if len(node.comparisons) != 1 or not isinstance(node.comparisons[0].operator, cst.Equal):
            return False
        return is_cuda_literal(node.left) or is_cuda_literal(node.comparisons[0].comparator)
    if isinstance(node, cst.Attribute) and ctx.qname(node) == "torch.version.cuda":
        return True
    ident = identifier(node)
    if ident is None:
        return False
    words = word_set(ident)
    return ident == "is_cuda" or ("cuda" in words and not words & _NEGATING)


def _not_cuda_operand(ctx, node: cst.CSTNode) -> bool:
    """True when ``node`` is true off CUDA: ``not <cuda operand>`` or ``<x> != "cuda"``."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return cuda_operand(ctx, node.expression)
    if (
        isinstance(node, cst.Comparison)
        and len(node.comparisons) == 1
        and isinstance(node.comparisons[0].operator, cst.NotEqual)
    ):
        return is_cuda_literal(node.left) or is_cuda_literal(node.comparisons[0].comparator)
    return False


def positive(ctx, test: cst.CSTNode) -> bool:
    """``test`` is true only on CUDA (an ``and`` chain with a CUDA operand)."""
    return any(cuda_operand(ctx, o) for o in operands(test, cst.And))


def negative(ctx, test: cst.CSTNode) -> bool:
    """``test`` is true whenever CUDA is missing (an ``or`` chain with a not-CUDA operand)."""
    return any(_not_cuda_operand(ctx, o) for o in operands(test, cst.Or))


def _exit_value(stmt: cst.CSTNode) -> Optional[str]:
    """For ``if <test>: return/raise ...`` with no ``else``: ``"false"`` for ``return False``,
    ``"exit"`` for another ``return``/``raise``; else None."""
    if not isinstance(stmt, cst.If) or stmt.orelse is not None or not isinstance(stmt.body, cst.IndentedBlock):
        return None
    last = stmt.body.body[-1] if stmt.body.body else None
    if not isinstance(last, cst.SimpleStatementLine) or not isinstance(last.body[-1], (cst.Return, cst.Raise)):
        return None
    small = last.body[-1]
    if (
        len(stmt.body.body) == 1
        and isinstance(small, cst.Return)
        and isinstance(small.value, cst.Name)
        and small.value.value == "False"
    ):
        return "false"
    return "exit"


def early_exit(ctx, stmt: cst.CSTNode) -> Optional[str]:
    """:func:`_exit_value` of ``stmt`` when its test is true whenever CUDA is missing, else None."""
    kind = _exit_value(stmt)
    return kind if kind is not None and negative(ctx, stmt.test) else None


def capability_node(ctx, node: cst.CSTNode) -> bool:
    """``node`` is a capability query (a call of, or a reference to, a :data:`CAPABILITY` name)."""
    target = node.func if isinstance(node, cst.Call) else node
    return ctx.qname(target) in CAPABILITY


def device_test(ctx, node) -> bool:
    """A CUDA device test: ``x.is_cuda``, ``<x> == "cuda"`` or ``<x> != "cuda"``."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        node = node.expression
    if isinstance(node, cst.Attribute):
        return node.attr.value == "is_cuda"
    if (
        isinstance(node, cst.Comparison)
        and len(node.comparisons) == 1
        and isinstance(node.comparisons[0].operator, (cst.Equal, cst.NotEqual))
    ):
        return is_cuda_literal(node.left) or is_cuda_literal(node.comparisons[0].comparator)
    return False
