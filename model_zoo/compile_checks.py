"""The zoo's compile checks: a model compiled the way its users compile it, against eager mode and the CPU.

Both checks compile through :mod:`neuron_conformance.model_zoo.compile_path`:
``torch.compiler.set_default_backend(<backend>)`` then ``model.compile()`` with no argument, the backend's
calls counted, the previous default restored afterwards. ``<backend>`` is ``--conformance-compile-backend``,
else :func:`~neuron_conformance.model_zoo.compile_path.default_compile_backend` (the emulator's ``neuron``).

``compile``        one forward pass without grad of the compiled model, called twice: the first call's output
                   against eager mode on the device and against the CPU in the same dtype, the CPU float64 run
                   arbitrating (:func:`neuron_conformance.model_zoo.compare.judge_model_tensor`).
``compile_train``  ``TRAIN_STEPS`` AdamW steps of :func:`neuron_conformance.model_zoo.measure.measure_train` with the
                   model compiled (the backend receives the forward graph and, through AOT autograd, the
                   backward graph) and the optimizer eager: the loss curve and every final parameter against
                   the eager train step on the device and against the CPU's, float64 arbitrating, with the
                   ``train`` check's drift budget.

Why the optimizer stays eager in ``compile_train``: it is what ``model.compile()`` gives a training loop (the
user path this check follows compiles the module, not the step); compiling the whole step would not put the
backward in the same graph anyway (``loss.backward()`` breaks the graph without compiled autograd,
torch/_dynamo/config.py ``compiled_autograd``), so it would add one more graph, the optimizer's, whose kernels
the ``train`` check already runs eagerly, at a Dynamo tracing cost over every parameter larger than the
model's.

Judged in this order, the first failure deciding:

1. compiling or running raised: ``compile-error``, ``compiled-run-error`` (``unsupported`` for a kernel the
   device lacks) or ``recompile`` (:func:`~neuron_conformance.opsuites.compile.capture.classify_compile_exception`);
2. the backend received no graph: ``error`` (the default was not the backend used, or Dynamo ran the model
   eagerly);
3. a later call with identical inputs (the second forward; train steps 2 and on) converted a frame:
   ``recompile``;
4. the values (``numeric``, ``metadata``, ``nonfinite``);
5. graph breaks: recorded always (``one_graph``, ``graphs``, ``graph_breaks``, ``break_reasons``); a model
   that does not compile as one graph is compiled on CPU tensors with ``aot_eager`` too (cached per process)
   and the device fails ``graph-break`` only with more graphs or breaks than the CPU
   (``opsuites/compile/capture.py`` rule 2).

A failure the CPU shares is PyTorch's, not the device's: when a check fails on a device other than the CPU,
the same check runs on the CPU with ``aot_eager`` (Dynamo and AOT autograd over the CPU's eager kernels); if
it fails with the same class and, for values, at the same first tensor, the result is left out
(:data:`CPU_FAILS_TOO`, the test skipped) with the CPU's message kept in ``metrics["cpu_fails_too"]``, as the
op-suite compile suite leaves such samples out (``opsuites/compile/checks.py``). Found this way on torch
2.13 / transformers 5.24: llava's compiled backward returns zero gradients where eager returns None (an
unused vision ``post_layernorm``, which AdamW's weight decay then moves), qwen3_next's compiled backward
raises a ``view`` stride error, qwen2_vl's second train step recompiles.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from neuron_conformance.conformance.verdict.failures import ConformanceFailure
from neuron_conformance.model_zoo.case import Case, cpu_reference, reference
from neuron_conformance.model_zoo.compare import judge_model_tensor, train_verdicts
from neuron_conformance.model_zoo.compile_path import (
    CountedCalls,
    backend_label,
    compile_module,
    cpu_graph_counts,
    default_backend,
    default_compile_backend,
)
from neuron_conformance.model_zoo.dtypes import dtype_name
from neuron_conformance.model_zoo.measure import (
    DRIFT_BUDGET,
    TRAIN_LR,
    TRAIN_STEPS,
    measure_forward,
    measure_train,
    primary_output,
    to_cpu,
)
from neuron_conformance.model_zoo.registry import ModelSpec
from neuron_conformance.model_zoo.results import CheckResult, combine
from neuron_conformance.opsuites.compile.capture import REFERENCE_BACKEND, Counts, judge_graphs


def _graph_fields(counts: Counts, recompiles: int, cpu: Counts | None) -> dict:
    """The record's compile fields (the names the op-suite compile suite writes)."""
    return dict(
        one_graph=counts.one_graph,
        graphs=counts.graphs,
        graph_breaks=counts.breaks,
        break_reasons=list(counts.reasons),
        recompiles=recompiles,
        cpu_graphs=None if cpu is None else cpu.graphs,
        cpu_graph_breaks=None if cpu is None else cpu.breaks,
    )


def _failed(case: Case, check: str, exc: ConformanceFailure, metrics: dict, fields: dict) -> CheckResult:
    result = CheckResult(
        case.spec.id, check, case.dtype, False, None, exc.failure_class, str(exc), 0, {**metrics, "rule": "compiled"}
    )
    result.fields = fields
    return result


def _cpu_counts(case: Case, train: bool) -> Counts:
    """The CPU ``aot_eager`` compile's counts of ``case``'s model (rule 5), cached per process."""

    def compute():
        model, inputs = case.model_and_inputs("cpu")
        return cpu_graph_counts(model, inputs, train=train)

    return cpu_reference(("<compile graphs>", case.spec.id, dtype_name(case.dtype), case.seed, train), compute)


def _judged(case: Case, check: str, counted: CountedCalls, verdicts: list, metrics: dict, train: bool) -> CheckResult:
    """Steps 2 to 5 of the module docstring on a run that raised nothing."""
    where = f"{case.spec.id} {dtype_name(case.dtype)} {check}"
    first = counted.first()
    fields = _graph_fields(first, counted.recompiles(), None)
    metrics = {**metrics, "graph_ops": sum(counted.capture.ops)}
    if counted.capture.graphs == 0:
        result = CheckResult(
            case.spec.id,
            check,
            case.dtype,
            False,
            None,
            "error",
            f"{where}: the default backend {metrics['backend']!r} received no graph: "
            f"model.compile() ran the model eagerly (the default was not the backend used, or "
            f"Dynamo skipped every frame), so nothing compiled was compared",
            0,
            {**metrics, "rule": "compiled-graphs"},
        )
        result.fields = fields
        return result
    if counted.recompiles():
        result = CheckResult(
            case.spec.id,
            check,
            case.dtype,
            False,
            None,
            "recompile",
            f"{where}: later calls with identical inputs compiled again ({counted.recompiles()} "
            f"frame(s)): Dynamo's guards do not hold for the device's tensors",
            0,
            {**metrics, "rule": "recompile"},
        )
        result.fields = fields
        return result
    result = combine(case.spec.id, check, case.dtype, verdicts, metrics)
    if result.passed and not first.one_graph:
        cpu = _cpu_counts(case, train)
        fields = _graph_fields(first, counted.recompiles(), cpu)
        try:
            judge_graphs(first, cpu, where)
        except ConformanceFailure as exc:
            return _failed(case, check, exc, metrics, fields)
    result.fields = fields
    return result


CPU_FAILS_TOO = "compiled code fails on the CPU too"
"""Reason of a result left out because the CPU reference compile fails the same way (module docstring)."""


def _backend(device: torch.device, backend: str | Callable | None) -> str | Callable:
    return backend or default_compile_backend(device.type)


def _first_failure(result: CheckResult) -> tuple:
    """What a failure is, for telling whether the CPU shares it: its class and, for values, the first failing
    tensor's name (the message before its first ``": "``, without the check's own prefix)."""
    if result.failure_class in ("numeric", "metadata", "nonfinite"):
        return result.failure_class, result.message.split(": ", 1)[0]
    return (result.failure_class,)


def _unless_cpu_fails_too(
    result: CheckResult, device: torch.device, run_on_cpu: Callable[[], CheckResult]
) -> CheckResult:
    """``result``, marked left out (``left_out`` = :data:`CPU_FAILS_TOO`) when it failed on a device and
    ``run_on_cpu()`` (the same check on the CPU with ``aot_eager``) fails the same way."""
    if result.passed or device.type == "cpu":
        return result
    cpu = run_on_cpu()
    if not cpu.passed and _first_failure(cpu) == _first_failure(result):
        result.left_out = CPU_FAILS_TOO
        result.metrics["cpu_fails_too"] = cpu.message[:300]
    return result


def check_compile(
    model: str | ModelSpec, dtype, device, *, seed: int = 0, backend: str | Callable | None = None
) -> CheckResult:
    """``compile`` check (module docstring): the compiled forward against eager on the device and the CPU; a
    failure the CPU's ``aot_eager`` compile shares is left out (``left_out``).

    Args:
        backend: a registered backend name or a backend callable made the default; None: the device's.
    """
    device = torch.device(device)
    result = _compile_forward(model, dtype, device, seed, backend)
    return _unless_cpu_fails_too(
        result, device, lambda: _compile_forward(model, dtype, torch.device("cpu"), seed, REFERENCE_BACKEND)
    )


def _compile_forward(model, dtype, device: torch.device, seed: int, backend) -> CheckResult:
    case = Case.make(model, dtype, seed)
    expected, ref64 = reference(case, "forward", measure_forward)
    device = torch.device(device)
    backend = _backend(device, backend)
    label = backend_label(backend)
    metrics = {"backend": label, "path": "set_default_backend + model.compile()"}
    model_obj, inputs = case.model_and_inputs(device)
    where = f"{case.spec.id} {dtype_name(case.dtype)} compile"
    with torch.no_grad():
        with default_backend(backend) as capture:  # lifts dispatch modes: eager runs under the same conditions
            eager = to_cpu(primary_output(case.spec, model_obj(**inputs)))
            compile_module(model_obj)
            counted = CountedCalls(capture, where, backend)
            try:
                got = to_cpu(primary_output(case.spec, counted(lambda: model_obj(**inputs))))
                counted(lambda: model_obj(**inputs))
            except ConformanceFailure as exc:
                return _failed(case, "compile", exc, metrics, _graph_fields(counted.first(), 0, None))
    out = case.spec.output
    verdicts = [
        (f"compiled ({label}) {out} vs eager on the device", judge_model_tensor(got, eager, ref64)),
        (f"compiled ({label}) {out} vs CPU", judge_model_tensor(got, expected, ref64)),
    ]
    return _judged(case, "compile", counted, verdicts, metrics, train=False)


def check_compile_train(
    model: str | ModelSpec,
    dtype,
    device,
    *,
    seed: int = 0,
    backend: str | Callable | None = None,
    steps: int = TRAIN_STEPS,
) -> CheckResult:
    """``compile_train`` check (module docstring): ``steps`` AdamW steps of the compiled model against the eager
    train step on the device and on the CPU; a failure the CPU's ``aot_eager`` compile shares is left out.

    Args:
        backend: as :func:`check_compile`.
    """
    device = torch.device(device)
    result = _compile_train(model, dtype, device, seed, backend, steps)
    return _unless_cpu_fails_too(
        result, device, lambda: _compile_train(model, dtype, torch.device("cpu"), seed, REFERENCE_BACKEND, steps)
    )


def _compile_train(model, dtype, device: torch.device, seed: int, backend, steps: int) -> CheckResult:
    case = Case.make(model, dtype, seed)
    expected, ref64 = reference(case, f"train{steps}", lambda c, d, f: measure_train(c, d, f, steps))
    device = torch.device(device)
    backend = _backend(device, backend)
    label = backend_label(backend)
    dt = case.dtype
    drift = DRIFT_BUDGET[dt] * TRAIN_LR * steps
    metrics = {
        "backend": label,
        "path": "set_default_backend + model.compile(), eager AdamW",
        "steps": steps,
        "drift_budget": drift,
    }
    where = f"{case.spec.id} {dtype_name(dt)} compile_train"
    with default_backend(backend, train=True) as capture:
        eager = measure_train(case, device, False, steps)
        counted = CountedCalls(capture, where, backend)

        def prepare(model_obj):
            compile_module(model_obj)
            return counted

        try:
            actual = measure_train(case, device, False, steps, prepare=prepare)
        except Exception as exc:  # noqa: BLE001 - a backward graph raises from loss.backward(), outside counted()
            failure = exc if isinstance(exc, ConformanceFailure) else counted.classify(exc)
            return _failed(case, "compile_train", failure, metrics, _graph_fields(counted.first(), 0, None))
    if set(actual) != set(expected):
        return CheckResult(
            case.spec.id,
            "compile_train",
            dt,
            False,
            None,
            "metadata",
            f"{where}: parameters differ from CPU's: only on the device "
            f"{sorted(set(actual) - set(expected))[:5]}, only on CPU "
            f"{sorted(set(expected) - set(actual))[:5]}",
            len(expected),
            {**metrics, "rule": "param-set"},
        )
    verdicts = train_verdicts(actual, eager, ref64, dt, steps, drift, label=" vs eager on the device") + train_verdicts(
        actual, expected, ref64, dt, steps, drift, label=" vs CPU"
    )
    return _judged(case, "compile_train", counted, verdicts, metrics, train=True)


__all__ = ["CPU_FAILS_TOO", "check_compile", "check_compile_train"]
