"""``torch.compile`` of one OpInfo sample, with every graph, graph break, recompile and exception accounted for.

The compile suite (``opsuites/test_compile.py``) turns a sample input into a function of its tensors
(:func:`sample_function`: the sample's other arguments are constants of the function, as hyperparameters
are in a model) and compiles it with :func:`compile_sample`, through a :class:`GraphCapture` that wraps the
backend under test. The rules, and where they come from:

1. **Graphs and breaks are counted at Dynamo's output.** Every FX graph Dynamo hands to a backend passes
   through :class:`GraphCapture` (the pattern of ``torch._dynamo.explain``'s accumulating compiler,
   torch/_dynamo/eval_frame.py); a graph break is a ``GraphCompileReason`` with ``graph_break=True``
   (torch/_dynamo/output_graph.py appends each to ``torch._dynamo.utils.graph_break_reasons``, which
   ``torch._dynamo.reset()`` clears). One graph and no break is "compiled as one graph".
2. **A break the CPU shares is the op's, not the device's.** Under Dynamo's default settings some ops
   break on every device: a data-dependent output shape (``nonzero``, ``unique``, ``masked_select``:
   ``capture_dynamic_output_shape_ops`` is False) or a tensor read as a Python number (``.item()``,
   ``tolist``: ``capture_scalar_outputs`` is False), both in torch/_dynamo/config.py. A sample that does not
   compile as one graph is compiled again on CPU tensors with ``aot_eager`` (Dynamo and AOT autograd over
   the CPU's eager kernels: the same stack without the device); the device is charged only with graphs or
   breaks beyond the CPU's (:func:`judge_graphs`), as ``graph-break``. Zero graphs where the CPU compiles
   one is a silent eager fallback, also ``graph-break``.
3. **Compiling and running are told apart.** An exception Dynamo raises (``torch._dynamo.exc``'s
   ``TorchDynamoException``: ``BackendCompilerFailed``, ``TorchRuntimeError``, ``Unsupported``) is a
   ``compile-error``; the backward graph is compiled with the forward one
   (``torch._functorch.config.force_non_lazy_backward_lowering``), so a backward compile failure is one too.
   An exception raised while a compiled graph runs, or by the eager code between graphs, or in the
   backward, is ``compiled-run-error`` (``unsupported`` for a kernel the device lacks):
   :class:`~neuron_conformance.conformance.verdict.failures.CompiledRunFailure`.
4. **A second call with identical inputs compiles nothing.** Dynamo's guards hold for inputs of the same
   sizes, strides, dtype, device and ``requires_grad``; a new frame conversion on such a call
   (``counters["frames"]["total"]``, torch/_dynamo/convert_frame.py) is a ``recompile``. Hitting the
   recompile limit (``torch._dynamo.config.recompile_limit``, 8) raises instead of running eagerly
   (``fail_on_recompile_limit_hit``), so the limit never hides as a silent fallback.
5. **One test cannot poison the next.** :func:`dynamo_settings` resets Dynamo (``torch._dynamo.reset()``)
   before and after, and every sample is compiled after a reset of its own.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

from neuron_conformance.conformance.verdict.failures import (
    CompiledRunFailure,
    CompileFailure,
    ConformanceFailure,
    GraphBreakFailure,
    RecompileFailure,
)

REFERENCE_BACKEND = "aot_eager"
"""The backend of the CPU reference compile (rule 2): Dynamo and AOT autograd over the CPU's eager kernels."""

MAX_REASONS = 4
"""Most graph-break reasons a record keeps (distinct, first line each, :data:`REASON_CHARS` characters)."""
REASON_CHARS = 160


LINE_CHARS = 400
"""Most characters of one message line quoted in a failure."""


def _lines(exc: BaseException, count: int) -> str:
    lines = [ln.strip()[:LINE_CHARS] for ln in str(exc).strip().splitlines() if ln.strip()]
    return " | ".join(lines[:count])


def first_line(exc: BaseException, lines: int = 1) -> str:
    """``Type: first line(s) of the message`` of ``exc`` (``lines`` non-empty lines; Dynamo puts the cause
    of a ``TorchRuntimeError`` on its second, "Explanation: ..."); for an exception that wraps another
    (Dynamo's ``BackendCompilerFailed.inner_exception``, else ``__cause__``) the wrapped one's first line too."""
    line = f"{type(exc).__name__}: {_lines(exc, lines)}"
    inner = getattr(exc, "inner_exception", None) or exc.__cause__
    if isinstance(inner, BaseException) and inner is not exc:
        line += f" <- {type(inner).__name__}: {_lines(inner, 1)}"
    return line


class _Slot:
    """Where the ``index``-th tensor of a sample goes in its call (:func:`sample_function`)."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"T{self.index}"


def _template(value, tensors: list):
    """``value`` with each tensor replaced by a :class:`_Slot` (appended to ``tensors``); tuples (named ones
    as plain tuples), lists and dicts walked."""
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return _Slot(len(tensors) - 1)
    if isinstance(value, (list, tuple)):
        walked = [_template(v, tensors) for v in value]
        return walked if isinstance(value, list) else tuple(walked)
    if isinstance(value, dict):
        return {k: _template(v, tensors) for k, v in value.items()}
    return value


def _fill(template, tensors):
    """The inverse of :func:`_template`: the slots replaced by ``tensors`` (traced by Dynamo: plain Python)."""
    if isinstance(template, _Slot):
        return tensors[template.index]
    if isinstance(template, list):
        return [_fill(v, tensors) for v in template]
    if isinstance(template, tuple):
        return tuple(_fill(v, tensors) for v in template)
    if isinstance(template, dict):
        return {k: _fill(v, tensors) for k, v in template.items()}
    return template


def split_sample(triple) -> tuple:
    """``(template, tensors)`` of ``triple`` = ``(input, args, kwargs)``: its tensors in order, and the call
    with a slot for each."""
    tensors: list = []
    return _template(tuple(triple), tensors), tensors


def sample_function(fn, template):
    """``call(*tensors)``: ``fn(input, *args, **kwargs)`` of the sample ``template`` describes
    (:func:`split_sample`) with its slots filled by ``tensors``; the constants stay constants of the compiled
    function (Dynamo guards on them by value)."""

    def call(*tensors):
        inp, args, kwargs = _fill(template, tensors)
        return fn(inp, *args, **kwargs)

    return call


class GraphCapture:
    """A ``torch.compile`` backend that hands every graph to ``backend`` and keeps count.

    Args:
        backend: a registered backend name (``torch._dynamo.list_backends()``) or a backend callable
            ``(gm, example_inputs) -> compiled``.

    Attributes:
        graphs: FX graphs Dynamo handed over (int).
        ops: per graph, its number of ``call_function``/``call_method``/``call_module`` nodes.
        run_error: the first exception a compiled graph raised while running, or None.
    """

    def __init__(self, backend):
        from torch._dynamo.backends.registry import lookup_backend  # deferred: importing torch._dynamo costs ~1 s

        self.name = backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))
        self._inner = lookup_backend(backend) if isinstance(backend, str) else backend
        self.graphs = 0
        self.ops: list[int] = []
        self.run_error: BaseException | None = None

    def __repr__(self) -> str:
        return f"GraphCapture({self.name})"

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        self.ops.append(sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")))
        return self._watch(self._inner(gm, example_inputs))

    def _watch(self, compiled):
        """``compiled`` with its exceptions noted in :attr:`run_error` (Dynamo calls a backend's result with
        the graph's inputs as positional arguments, torch/_dynamo/output_graph.py)."""
        capture = self

        def run(*args):
            try:
                return compiled(*args)
            except BaseException as exc:
                if capture.run_error is None:
                    capture.run_error = exc
                raise

        return run


@dataclass
class Counts:
    """What compiling one sample produced: ``graphs`` (int), ``breaks`` (int), ``reasons`` (distinct break
    reasons, short), ``frames`` (frame conversions Dynamo ran, int), and ``reference``: the CPU reference
    compile's counts when they were needed (rule 2), else None."""

    graphs: int = 0
    breaks: int = 0
    reasons: list = field(default_factory=list)
    frames: int = 0
    reference: Counts | None = None

    @property
    def one_graph(self) -> bool:
        """True for exactly one graph and no break."""
        return self.graphs == 1 and self.breaks == 0


def frame_count() -> int:
    """Frame conversions Dynamo has run since its last reset (``counters["frames"]["total"]``, rule 4)."""
    from torch._dynamo.utils import counters  # deferred: importing torch._dynamo costs ~1 s

    return int(counters["frames"]["total"])


def _break_reasons() -> list:
    from torch._dynamo.utils import graph_break_reasons  # deferred: importing torch._dynamo costs ~1 s

    return list(graph_break_reasons)


def break_reasons() -> tuple[int, list[str]]:
    """``(graph breaks, distinct short reasons)`` Dynamo has recorded since its last reset (rule 1)."""
    found = _break_reasons()
    return len(found), _reasons(found)


def classify_compile_exception(
    exc: BaseException, capture: GraphCapture, where: str, compiling: str
) -> ConformanceFailure:
    """The failure ``exc`` is, raised by a call of code compiled through ``capture`` (rules 3 and 4).

    ``where`` names the function in the message, ``compiling`` the compile call
    (``"torch.compile(backend='neuron', dynamic=False)"``). A :class:`~neuron_conformance.conformance.verdict.failures.RecompileFailure`
    for Dynamo's recompile limit; a :class:`~neuron_conformance.conformance.verdict.failures.CompiledRunFailure` for an exception a
    compiled graph raised (``capture.run_error``) or one that is not Dynamo's (the eager code between graphs, a
    backward); else a :class:`~neuron_conformance.conformance.verdict.failures.CompileFailure`. Returned, not raised.
    """
    from torch._dynamo.exc import FailOnRecompileLimitHit, TorchDynamoException  # deferred: ~1 s import

    if isinstance(exc, FailOnRecompileLimitHit):
        return RecompileFailure(f"{where}: hit Dynamo's recompile limit: {first_line(exc)}")
    if capture.run_error is exc or not isinstance(exc, TorchDynamoException):
        inside = "a compiled graph" if capture.run_error is exc else "the compiled function"
        return CompiledRunFailure(
            f"{where}: {inside} raised while running (backend {capture.name}): {first_line(exc)}", cause=exc
        )
    return CompileFailure(f"{where}: {compiling} raised while compiling: {first_line(exc, lines=2)}")


def _reasons(found: list) -> list[str]:
    out: list[str] = []
    for r in found:
        text = (str(getattr(r, "reason", r)).strip().splitlines() or [""])[0][:REASON_CHARS]
        if text not in out:
            out.append(text)
    return out[:MAX_REASONS]


def reset_dynamo() -> None:
    """``torch._dynamo.reset()``: every compiled frame, guard and graph-break reason forgotten (rule 5)."""
    import torch._dynamo  # deferred: importing torch._dynamo costs ~1 s

    torch._dynamo.reset()


@contextlib.contextmanager
def dynamo_settings(*, backward: bool):
    """Dynamo reset on entry and exit, the recompile limit an error (rule 4), and with ``backward`` the
    backward graph compiled with the forward one (rule 3)."""
    import torch._dynamo  # deferred: importing torch._dynamo costs ~1 s
    import torch._functorch.config

    torch._dynamo.reset()
    try:
        with (
            torch._dynamo.config.patch(fail_on_recompile_limit_hit=True),
            torch._functorch.config.patch(force_non_lazy_backward_lowering=backward),
        ):
            yield
    finally:
        torch._dynamo.reset()


class CompiledSample:
    """One function compiled for a sample; call it with :meth:`call`.

    Args:
        call: the function (:func:`sample_function`).
        backend: the backend under test (name or callable), wrapped in a :class:`GraphCapture`.
        dynamic: ``torch.compile``'s ``dynamic`` (False: static shapes; True: symbolic shapes).
        where: names the op, dtype and sample in messages.
    """

    def __init__(self, call, backend, *, dynamic: bool, where: str):
        self.capture = GraphCapture(backend)
        self.where = where
        self.dynamic = dynamic
        self._compiled = torch.compile(call, backend=self.capture, dynamic=dynamic, fullgraph=False)
        self._reasons_seen = 0

    def call(self, tensors, device=None) -> tuple:
        """``(result, counts)`` of one call (counts of what this call compiled); under ``torch.device(device)``
        when given (a factory sample with no tensor).

        Raises:
            CompileFailure: Dynamo or the backend compiler raised (rule 3).
            RecompileFailure: the recompile limit was hit (rule 4).
            CompiledRunFailure: a compiled graph, or the eager code around it, raised (rule 3).
        """
        graphs, frames = self.capture.graphs, frame_count()
        self.capture.run_error = None
        try:
            with torch.device(device) if device is not None else contextlib.nullcontext():
                result = self._compiled(*tensors)
        except ConformanceFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - every exception gets its class here
            raise classify_compile_exception(
                exc, self.capture, self.where, f"torch.compile(backend={self.capture.name!r}, dynamic={self.dynamic})"
            ) from exc
        reasons = _break_reasons()
        new = reasons[self._reasons_seen :]
        self._reasons_seen = len(reasons)
        return result, Counts(self.capture.graphs - graphs, len(new), _reasons(new), frame_count() - frames)


def check_recompile(compiled: CompiledSample, tensors, device=None) -> None:
    """Call ``compiled`` again with ``tensors`` (fresh inputs identical in every guarded property to the
    first call's); nothing may compile (rule 4).

    Raises:
        RecompileFailure: the call converted a frame again (or hit the recompile limit).
        CompileFailure, CompiledRunFailure: as :meth:`CompiledSample.call`.
    """
    _, counts = compiled.call(tensors, device)
    if counts.frames:
        raise RecompileFailure(
            f"{compiled.where}: a second call with identical inputs compiled again "
            f"({counts.frames} frame(s), {counts.graphs} graph(s)): Dynamo's guards do not "
            f"hold for the device's tensors"
        )


def reference_counts(fn, template, cpu_tensors, *, dynamic: bool, where: str) -> tuple:
    """``(counts, exception)`` of the same function compiled on the CPU tensors with
    :data:`REFERENCE_BACKEND` (rule 2) after a Dynamo reset; ``exception`` is what it raised, or None."""
    reset_dynamo()
    compiled = CompiledSample(
        sample_function(fn, template),
        REFERENCE_BACKEND,
        dynamic=dynamic,
        where=f"{where} (CPU reference, {REFERENCE_BACKEND})",
    )
    try:
        _, counts = compiled.call(cpu_tensors)
        return counts, None
    except ConformanceFailure as exc:
        return Counts(compiled.capture.graphs), exc
    finally:
        reset_dynamo()


def judge_graphs(device: Counts, cpu: Counts, where: str) -> None:
    """Rule 2: the device may not split the function into more graphs, or break more often, than the CPU
    reference, nor compile nothing where the CPU compiles a graph.

    Raises:
        GraphBreakFailure: naming both counts and the device's break reasons.
    """
    extra = device.graphs > cpu.graphs or device.breaks > cpu.breaks
    silent = device.graphs == 0 and cpu.graphs > 0
    if extra or silent:
        why = "; ".join(device.reasons) or "no reason recorded"
        what = "compiled no graph (ran eagerly)" if silent else "broke the graph"
        raise GraphBreakFailure(
            f"{where}: Dynamo {what} on the device: {device.graphs} graph(s), "
            f"{device.breaks} break(s); on the CPU {cpu.graphs} graph(s), {cpu.breaks} "
            f"break(s). Device break reasons: {why}"
        )


__all__ = [
    "Counts",
    "CompiledSample",
    "GraphCapture",
    "REFERENCE_BACKEND",
    "break_reasons",
    "check_recompile",
    "classify_compile_exception",
    "dynamo_settings",
    "first_line",
    "frame_count",
    "judge_graphs",
    "reference_counts",
    "reset_dynamo",
    "sample_function",
    "split_sample",
]
