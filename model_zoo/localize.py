"""Divergence localizer: name the first submodule whose output leaves tolerance.

When a model check fails, "logits differ" tells a backend author little. The localizer runs the
same inputs through the model on the device, on CPU in the same dtype, and on CPU in float64 (the
weights rounded to the dtype first), with a forward hook on every submodule. Outputs are paired by
``(module name, call index)`` and judged in the order the device run *finished* them (a forward
hook fires when a module returns, so children come before their parent), with the oracle
:func:`neuron_conformance.model_zoo.compare.judge_model_tensor` (the harness oracle). The first module whose output fails is the innermost, earliest
place where the device's answer leaves the CPU's: for a broken ``silu`` kernel in a Llama model it
is ``model.layers.0.mlp.act_fn``.

Error grows along the network, so a module late in the model can fail only because its inputs
already differ by an amount each earlier module accepted. The localizer reports the first failure,
which is where a user should start; the message also gives the module's class and its errors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import torch

from neuron_conformance.conformance.verdict.oracle import Verdict
from neuron_conformance.model_zoo.compare import judge_model_tensor


@dataclasses.dataclass
class Divergence:
    """The first module whose device output left tolerance.

    Attributes:
        module: qualified submodule name, e.g. ``"model.layers.0.mlp.down_proj"``.
        module_class: its class name, e.g. ``"Linear"``.
        call: call index of that module in the forward pass (0 unless a module is reused).
        output_index: index of the floating tensor within the module's output (tuples are
            flattened depth-first).
        verdict: the oracle's :class:`~neuron_conformance.conformance.verdict.oracle.Verdict` for that tensor.
        position: 1-based position of the module among the outputs compared.
        compared: number of module outputs compared in total.
    """

    module: str
    module_class: str
    call: int
    output_index: int
    verdict: Verdict
    position: int
    compared: int

    def describe(self) -> str:
        """One line naming the module and its error, for a failure message."""
        v = self.verdict
        call = f" (call {self.call})" if self.call else ""
        out = f" output {self.output_index}" if self.output_index else ""
        return (
            f"first divergent module: {self.module}{call} [{self.module_class}]{out}, "
            f"module {self.position} of {self.compared} in execution order: rule {v.rule}, "
            f"max abs error {_fmt(v.max_abs)}, max rel error {_fmt(v.max_rel)}, "
            f"max ULP {_fmt(v.max_ulp)}"
        )


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def floating_tensors(value: Any) -> list[torch.Tensor]:
    """Floating-point tensors in a module output, depth-first.

    Tensors, tuples, lists, dicts and ``ModelOutput`` objects are walked; anything else (cache
    objects, ints, None) is ignored.
    """
    found: list[torch.Tensor] = []

    def walk(v: Any) -> None:
        if isinstance(v, torch.Tensor):
            if v.is_floating_point():
                found.append(v)
        elif isinstance(v, (tuple, list)):
            for item in v:
                walk(item)
        elif isinstance(v, Mapping):
            for item in v.values():
                walk(item)

    walk(value)
    return found


@dataclasses.dataclass
class Trace:
    """Module outputs recorded by :func:`trace_forward`, in completion order.

    ``entries`` holds ``(name, call index, class name, [tensors on CPU])`` tuples.
    """

    entries: list[tuple[str, int, str, list[torch.Tensor]]]

    def by_key(self) -> dict[tuple[str, int], list[torch.Tensor]]:
        return {(name, call): tensors for name, call, _, tensors in self.entries}


def trace_forward(model: torch.nn.Module, run: Callable[[torch.nn.Module], Any]) -> Trace:
    """Call ``run(model)`` with a forward hook on every submodule, recording floating outputs.

    Outputs are detached and copied to CPU as they are produced. Hooks are removed afterwards,
    also when ``run`` raises. The root module itself is not recorded (its output is what the
    failing check already compared).
    """
    entries: list[tuple[str, int, str, list[torch.Tensor]]] = []
    counts: dict[str, int] = {}
    handles = []

    def make_hook(name: str):
        def hook(module, args, output):
            call = counts.get(name, 0)
            counts[name] = call + 1
            tensors = [t.detach().to("cpu", copy=True) for t in floating_tensors(output)]
            if tensors:
                entries.append((name, call, type(module).__name__, tensors))

        return hook

    try:
        for name, module in model.named_modules():
            if name:
                handles.append(module.register_forward_hook(make_hook(name)))
        with torch.no_grad():
            run(model)
    finally:
        for h in handles:
            h.remove()
    return Trace(entries)


def first_divergence(device_trace: Trace, cpu_trace: Trace, fp64_trace: Trace | None = None) -> Divergence | None:
    """Judge every recorded module output of ``device_trace`` against ``cpu_trace``.

    Outputs are visited in the device run's completion order and paired by ``(name, call)``;
    entries present on one side only, or whose shapes differ from the float64 reference, are
    compared without it. Each output goes through
    :func:`neuron_conformance.model_zoo.compare.judge_model_tensor` (the oracle with a tolerance scaled to the
    tensor). Returns the first failing output as a :class:`Divergence`, or ``None``
    when every module output passes.
    """
    cpu = cpu_trace.by_key()
    ref = fp64_trace.by_key() if fp64_trace is not None else {}
    pairs = [(e, cpu[(e[0], e[1])]) for e in device_trace.entries if (e[0], e[1]) in cpu]
    for position, ((name, call, cls, dev_tensors), cpu_tensors) in enumerate(pairs, start=1):
        refs = ref.get((name, call), [])
        for i, (a, e) in enumerate(zip(dev_tensors, cpu_tensors)):
            r = refs[i] if i < len(refs) and tuple(refs[i].shape) == tuple(e.shape) else None
            verdict = judge_model_tensor(a, e, r)
            if not verdict.passed:
                return Divergence(name, cls, call, i, verdict, position, len(pairs))
    return None


def localize(
    device_model: torch.nn.Module,
    device_inputs: Mapping[str, Any],
    cpu_model: torch.nn.Module,
    cpu_inputs: Mapping[str, Any],
    fp64_model: torch.nn.Module | None = None,
    fp64_inputs: Mapping[str, Any] | None = None,
) -> Divergence | None:
    """Run the three models on their inputs with hooks and return the first divergence.

    ``device_model``/``cpu_model``/``fp64_model`` must be the same architecture with the same
    weights (module names must agree). ``fp64_model`` is optional; without it the localizer uses
    the tolerance rule alone.
    """
    dev = trace_forward(device_model, lambda m: m(**device_inputs))
    cpu = trace_forward(cpu_model, lambda m: m(**cpu_inputs))
    ref = None
    if fp64_model is not None:
        if fp64_inputs is None:
            raise ValueError("localize: fp64_model given without fp64_inputs")
        ref = trace_forward(fp64_model, lambda m: m(**fp64_inputs))
    return first_divergence(dev, cpu, ref)
