"""NM7xx: CUDA graphs and torch.compile (``torch/accelerator/graphs.py``, ``torch/compiler/__init__.py``)."""

from __future__ import annotations

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.hooks import on_any_call, on_call, on_reference, on_string, rule
from neuron_conformance.migrate.rules._common import Finding, container_use

rule(
    "NM701",
    "cuda-graph",
    "`{name}` captures a CUDA graph",
    "",
    "report",
    what="Finds `torch.cuda.CUDAGraph`, `torch.cuda.graph`, `torch.cuda.graphs.*` and "
    "`torch.cuda.make_graphed_callables`.",
    why="`torch.accelerator.Graph` exists but is not a drop-in: its context manager captures on the "
    "current stream (no side stream), its default `capture_error_mode` differs, and it lacks "
    "`raw_cuda_graph`; which backends implement it is not known.",
    example="g = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(g):\n    out = model(x)",
    use_instead="g = torch.accelerator.Graph()\nwith torch.Stream() as s, g:\n    out = model(x)  # check the backend supports it",
    fix_safety="No fix: a human must decide.",
    references="`torch/accelerator/graphs.py`, `torch/compiler/__init__.py`.",
)

rule(
    "NM702",
    "compile-cudagraph-mode",
    "`torch.compile(mode={value!r})` relies on CUDA graphs",
    "",
    "report",
    what='Finds `torch.compile(..., mode="reduce-overhead")` and `mode="max-autotune"`.',
    why="Both turn on `triton.cudagraphs`; off CUDA that is unsupported or degrades silently "
    "(pytorch#187715 on ROCm). TorchNeuron's guide says to drop CUDA-specific modes.",
    example='model = torch.compile(model, mode="reduce-overhead")',
    use_instead='model = torch.compile(model, mode="max-autotune-no-cudagraphs")  # or the backend\'s own',
    fix_safety="No fix: a human must decide.",
    references="`torch/accelerator/graphs.py`, `torch/compiler/__init__.py` (`torch._inductor.list_mode_options()`).",
)

rule(
    "NM703",
    "cudagraph-option",
    "CUDA-graph compiler option `{value}`",
    "",
    "report",
    what='Finds the `"triton.cudagraphs"` option where it is set (a dict key, call argument, assigned '
    "index or value; not a comparison, a docstring or a read such as `options.get(...)` or "
    "`options[...]` outside an assignment). `torch.compiler.cudagraph_mark_step_begin()` is not "
    "reported: it only advances a counter of the CUDA-graph trees, a no-op "
    "without a CUDA-graph compiled function (`torch/compiler/__init__.py`; "
    "`migrate/exemptions/no_effect.py`).",
    why="CUDA graphs are CUDA-specific.",
    example='torch.compile(model, options={"triton.cudagraphs": True})',
    use_instead="torch.compile(model)",
    fix_safety="No fix.",
    references="`torch/accelerator/graphs.py`, `torch/compiler/__init__.py`.",
)


@on_call("torch.cuda.CUDAGraph", "torch.cuda.graph", "torch.cuda.make_graphed_callables", "torch.cuda.graphs.*")
def _graph(ctx, call, q):
    return Finding("NM701", call, {"name": q})


@on_reference("torch.cuda.CUDAGraph", "torch.cuda.graph", "torch.cuda.make_graphed_callables", "torch.cuda.graphs*")
def _graph_ref(ctx, node, q):
    return Finding("NM701", node, {"name": q})


@on_any_call
def _compile_mode(ctx, call, q):
    if q not in ("torch.compile", "torch._dynamo.optimize"):
        return None
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "mode":
            v = string_value(arg.value)
            if v in ("reduce-overhead", "max-autotune"):
                return Finding("NM702", arg, {"value": v})
    return None


@on_string
def _option(ctx, node):
    if "cudagraphs" in node.value:
        v = string_value(node)
        kind, where = container_use(ctx, node)
        if v == "triton.cudagraphs" and kind in ("key", "arg", "subscript", "assign") and not _reads(ctx, kind, where):
            # an option key or `config.patch("triton.cudagraphs", True)`, not a comparison or docstring
            return Finding("NM703", node, {"value": v})
    return None


#: Mapping methods that read an option rather than set it.
_READERS = frozenset({"get", "pop", "__getitem__", "__contains__"})


def _reads(ctx, kind, where) -> bool:
    """Whether the option name is only read: ``options.get("triton.cudagraphs", False)`` or
    ``options["triton.cudagraphs"]`` outside an assignment target (asking whether a compile mode
    uses CUDA graphs, as transformers' continuous batching does to turn them off)."""
    if kind == "arg":
        call = ctx.parent(where)
        return isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in _READERS
    if kind == "subscript":
        return not isinstance(ctx.parent(where), (cst.AssignTarget, cst.AugAssign, cst.Del))
    return False
