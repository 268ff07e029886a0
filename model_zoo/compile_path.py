"""``torch.compile`` of a zoo model the way its users compile it: ``set_default_backend`` and ``model.compile()``.

The zoo's compile checks (:mod:`neuron_conformance.model_zoo.compile_checks`) compile through this module. The
rules, and where they come from:

1. **The user path.** A backend's users are told to call ``torch.compiler.set_default_backend("<device>")``
   and then ``model.compile()`` with no argument (TorchNeuron's documentation does; ``nn.Module.compile`` calls
   ``torch.compile(self._call_impl)``, torch/nn/modules/module.py, which resolves the default backend,
   torch/_dynamo/backends/registry.py ``get_default_backend``). :func:`default_backend` sets the default and
   :func:`compile_module` calls ``model.compile()``: nothing names the backend on the way.
2. **The device's backend is the one used.** A backend given by name is looked up in Dynamo's registry when
   ``torch.compile`` builds its wrapper (``lookup_backend``, which reads ``_COMPILER_FNS``); for the duration
   of :func:`default_backend` that entry is a
   :class:`~neuron_conformance.opsuites.compile.capture.GraphCapture` around the registered backend, so every
   graph Dynamo hands to it is counted. A callable backend is set as the default wrapped the same way. So
   is ``inductor``: ``torch.compile`` builds its own wrapper for that name without the registry
   (``_TorchCompileInductorWrapper``, torch/__init__.py), so its registered function, counted, is made the
   default instead. A compiled call that reached the backend with no graph is reported (the default was not
   the backend used, or Dynamo ran the model eagerly).
3. **Nothing leaks.** The previous default and the registry entry are restored on leaving, also when the
   check raised; Dynamo is reset on entry and exit (``opsuites/compile/capture.py`` rule 5), with the
   recompile limit an error and, for training, the backward graph compiled with the forward one
   (:func:`~neuron_conformance.opsuites.compile.capture.dynamo_settings`). Each pytest-xdist worker is its own
   process, so restoring per check is restoring per worker.
4. **Dispatch modes are lifted.** Dynamo runs a frame eagerly while a ``TorchDispatchMode`` is active (the
   harness's aten coverage counter is one), which would leave nothing compiled; :func:`default_backend`
   lifts the active modes (``torch.utils._python_dispatch._disable_current_modes``) for its duration.
5. **Graph breaks are counted at Dynamo's output** and compared with the same model compiled on CPU
   tensors with ``aot_eager`` (:func:`cpu_graph_counts`); the device is charged only with graphs or breaks
   beyond the CPU's (``opsuites/compile/capture.py`` rule 2).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

from neuron_conformance.opsuites.compile.capture import (
    REFERENCE_BACKEND,
    Counts,
    GraphCapture,
    break_reasons,
    classify_compile_exception,
    dynamo_settings,
    frame_count,
)


def default_compile_backend(device_type: str) -> str:
    """The ``torch.compile`` backend used for ``device_type`` when ``--conformance-compile-backend`` names none.

    A dynamo backend registered under the device type's name (e.g. ``"neuron"``) wins; CPU, CUDA
    and XPU use ``"inductor"`` (torch.compile's default); any other device falls back to
    ``"aot_eager"`` (AOTAutograd decompositions run with the device's eager kernels).
    """
    from torch._dynamo import list_backends  # deferred: start-up cost (torch imports torch._dynamo lazily)

    if device_type in list_backends(exclude_tags=()):
        return device_type
    if device_type in ("cpu", "cuda", "xpu"):
        return "inductor"
    return "aot_eager"


def backend_label(backend: str | Callable) -> str:
    """The name a record shows for ``backend``: the registered name, else the callable's ``__name__``."""
    return backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))


@contextlib.contextmanager
def default_backend(backend: str | Callable, *, train: bool = False) -> Iterator[GraphCapture]:
    """``backend`` as ``torch.compile``'s default, counted (rules 2 to 4); yields the
    :class:`~neuron_conformance.opsuites.compile.capture.GraphCapture` that counts its graphs.

    Args:
        backend: a registered backend name (``torch._dynamo.list_backends()``) or a backend callable
            ``(gm, example_inputs) -> compiled``.
        train: compile backward graphs with the forward ones (a train step; rule 3).

    Raises:
        torch._dynamo.exc.InvalidBackend: ``backend`` is a name Dynamo does not know.
    """
    from torch._dynamo.backends import registry  # deferred: importing torch._dynamo costs ~1 s

    capture = GraphCapture(backend)  # looks a name up (loading an entry-point backend) before the swap
    previous = torch.compiler.get_default_backend()
    named = isinstance(backend, str) and backend != "inductor"  # rule 2: inductor's name bypasses the registry
    original = registry._COMPILER_FNS.get(backend) if named else None
    try:
        with _disable_current_modes(), dynamo_settings(backward=train):
            if named:
                registry._COMPILER_FNS[backend] = capture
            torch.compiler.set_default_backend(backend if named else capture)
            yield capture
    finally:
        torch.compiler.set_default_backend(previous)
        if named:
            registry._COMPILER_FNS[backend] = original


def compile_module(model: torch.nn.Module) -> None:
    """``model.compile()`` with no argument: the default backend, static shapes as Dynamo decides (rule 1)."""
    model.compile()


class CountedCalls:
    """Calls of a compiled model, each with what it compiled (graphs, breaks, frames), failures classified.

    Args:
        capture: the :class:`~neuron_conformance.opsuites.compile.capture.GraphCapture` of :func:`default_backend`.
        where: names the model, dtype and check in messages.
        backend: the backend, for messages.

    Attributes:
        calls: one :class:`~neuron_conformance.opsuites.compile.capture.Counts` per call, in order.
    """

    def __init__(self, capture: GraphCapture, where: str, backend: str | Callable):
        self.capture = capture
        self.where = where
        self.compiling = f"model.compile() (default backend {backend_label(backend)!r})"
        self.calls: list[Counts] = []

    def __call__(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` (a call of the compiled model), counted.

        Raises:
            neuron_conformance.conformance.verdict.failures.CompileFailure: Dynamo or the backend compiler raised.
            neuron_conformance.conformance.verdict.failures.CompiledRunFailure: a compiled graph, or code around it, raised.
            neuron_conformance.conformance.verdict.failures.RecompileFailure: Dynamo's recompile limit was hit.
        """
        graphs, frames, (breaks, _) = self.capture.graphs, frame_count(), break_reasons()
        self.capture.run_error = None
        try:
            out = fn()
        except Exception as exc:  # noqa: BLE001 - every exception gets its class here
            raise self.classify(exc) from exc
        total, reasons = break_reasons()
        self.calls.append(Counts(self.capture.graphs - graphs, total - breaks, reasons, frame_count() - frames))
        return out

    def classify(self, exc: BaseException):
        """The :class:`~neuron_conformance.conformance.verdict.failures.ConformanceFailure` ``exc`` is (a compile error, a
        compiled run error, a recompile: :func:`~neuron_conformance.opsuites.compile.capture.classify_compile_exception`)."""
        return classify_compile_exception(exc, self.capture, self.where, self.compiling)

    def first(self) -> Counts:
        """What the first call compiled (the model's graphs and breaks)."""
        return self.calls[0] if self.calls else Counts()

    def recompiles(self) -> int:
        """Frames converted by the calls after the first (inputs identical in every guarded property, so 0)."""
        return sum(c.frames for c in self.calls[1:])


def cpu_graph_counts(model: torch.nn.Module, inputs: dict[str, Any], *, train: bool) -> Counts:
    """What the same model compiles into on CPU tensors with ``aot_eager`` (rule 5), through the same path.

    ``model`` and ``inputs`` are on CPU; with ``train`` the call runs with grad (a train step's forward),
    else under ``no_grad``. A compile failure on the CPU gives the graphs counted before it.
    """
    from neuron_conformance.conformance.verdict.failures import ConformanceFailure  # deferred: only this path needs it

    with default_backend(REFERENCE_BACKEND, train=train) as capture:
        compile_module(model)
        counted = CountedCalls(capture, "CPU reference compile", REFERENCE_BACKEND)
        try:
            with torch.set_grad_enabled(train):
                counted(lambda: model(**inputs))
        except ConformanceFailure:
            return Counts(capture.graphs)
    return counted.first()


__all__ = [
    "CountedCalls",
    "backend_label",
    "compile_module",
    "cpu_graph_counts",
    "default_backend",
    "default_compile_backend",
]
