"""One OpInfo sample compiled on the device against eager CPU: the compile suite's per-sample check.

:func:`check_sample` runs the sample three ways: eagerly on the CPU (the reference for values, dtype and
shape), eagerly on the device (the reference for strides: compiled code must lay its outputs out as the
device's eager kernels do), and compiled on the device (:mod:`neuron_conformance.opsuites.compile.capture`).
It then checks, in this order, each failure raising and ending the sample:

1. compiling (``compile-error``) and running (``compiled-run-error``) the compiled function, and a second
   call with identical inputs (``recompile``; static shapes only);
2. the forward outputs: values through the oracle with the suite's tolerance, dtype and shape against the
   CPU (:func:`neuron_conformance.opsuites.suite_helpers.fold`), strides against the eager device result
   (``metadata``);
3. with autograd, the gradients of every input that requires grad for one seeded ``grad_output`` per
   differentiable output, computed through the compiled function's backward graph, against CPU eager
   gradients (fp64 arbitration against CPU gradients in float64), as ``opsuites/test_autograd.py`` does
   in eager mode;
4. the graph count: a sample that does not compile as one graph is compared with the CPU reference compile
   (``graph-break`` beyond it; ``compile_capture`` rule 2).

A compile error or run error of the forward call that the CPU reference compile raises too (same class)
is PyTorch's (an op Dynamo or AOT autograd cannot trace or run on any device): the sample is left out under
:data:`CPU_FAILS_TOO`, its message kept in the record's ``cpu_fails_too``, not failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import torch
from torch.utils._pytree import tree_flatten, tree_map

from neuron_conformance.conformance.backend.transfer import to_device_exact
from neuron_conformance.conformance.verdict.compare import ErrorTally, significant_strides
from neuron_conformance.conformance.verdict.failures import CompiledRunFailure, CompileFailure, MetadataFailure
from neuron_conformance.conformance.verdict.tolerances import for_gradient
from neuron_conformance.opsuites.compile.capture import (
    CompiledSample,
    Counts,
    check_recompile,
    first_line,
    judge_graphs,
    reference_counts,
    reset_dynamo,
    sample_function,
    split_sample,
)
from neuron_conformance.opsuites.grad_helpers import differentiable_outputs as differentiable
from neuron_conformance.opsuites.grad_helpers import float64_for_grad, float64_grad_outputs, grad_leaves
from neuron_conformance.opsuites.grad_helpers import move_keeping_grad as move_sample
from neuron_conformance.opsuites.suite_helpers import ValuePolicy, call, fold, index_checker, reference64_of, reseed

CPU_RAISED = "CPU raised"
"""Reason of a sample whose eager CPU call raised (the ``errors`` and ``compare_cpu`` suites judge errors)."""
DEVICE_RAISED = "eager device raised"
"""Reason of a sample the device's eager mode cannot run (``compare_cpu`` reports it): compiled code is
judged only where eager mode works."""
CPU_FAILS_TOO = "compiled code fails on the CPU too"
"""Reason of a sample whose compile or run error the CPU reference compile shares (PyTorch's limit, not the
device's)."""


@dataclass
class CompileCase:
    """What every sample of one compile test shares.

    Attributes:
        op: the OpInfo; ``dtype``: the dtype under test; ``device``: the ``torch.device`` under test;
        profile: the device profile (``mirrors_cpu``); ``tol``: the tolerance; ``policy``: the
        :class:`~neuron_conformance.opsuites.suite_helpers.ValuePolicy`; ``tally``: the error tally;
        backend: the backend under test (name or callable); ``dynamic``: ``torch.compile``'s ``dynamic``;
        backward: gradients are checked too; ``record``: the result record (``stage`` set as checks run).
    """

    op: object
    dtype: torch.dtype
    device: torch.device
    profile: object
    tol: object
    policy: ValuePolicy
    tally: ErrorTally
    backend: object
    dynamic: bool
    backward: bool
    record: dict = field(default_factory=dict)


def factory_device(triple, device):
    """``device`` when the call has no tensor and no device among its arguments (a factory sample such as
    ``arange(5)``: it runs under ``torch.device(device)``, as in ``compare_cpu``), else None."""
    leaves = tree_flatten(triple)[0]
    if any(isinstance(x, (torch.Tensor, torch.device)) for x in leaves) or "device" in triple[2]:
        return None
    return device


def _run_eager(fn, triple, device):
    where = factory_device(triple, device) if device is not None else None
    if where is None:
        return call(fn, triple[0], *triple[1], **triple[2])
    with torch.device(where):
        return call(fn, triple[0], *triple[1], **triple[2])


def _detached(value):
    return tree_map(lambda x: x.detach() if isinstance(x, torch.Tensor) else x, value)


def grown_sample(sample):
    """A copy of ``sample`` (an OpInfo ``SampleInput``, or anything with ``input``, ``args``, ``kwargs``) whose
    every strided tensor has each dimension of size ``n >= 2`` grown to ``n + 1``, its new last slice a copy
    of the old last one: sizes that agree between tensors still agree, values stay valid (an index tensor's
    values are the original's), sizes 0 and 1 (which Dynamo specializes) stay. The dynamic-shape pass feeds
    it to the function compiled for ``sample``; constants that name sizes may make it an invalid call, which
    the CPU then refuses."""

    def grow(t):
        if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t.device.type == "meta":
            return t
        out = t.detach()
        for dim, n in enumerate(t.shape):
            if n >= 2:
                out = out.index_select(dim, torch.arange(n + 1).clamp_(max=n - 1))
        out = out.clone()
        return out.requires_grad_(True) if t.requires_grad and (out.is_floating_point() or out.is_complex()) else out

    return SimpleNamespace(
        input=tree_map(grow, sample.input),
        args=tree_map(grow, tuple(sample.args)),
        kwargs=tree_map(grow, dict(sample.kwargs)),
    )


def check_strides(actual, eager, where: str) -> None:
    """Each strided tensor output of more than one element has the strides of the eager device result
    (dimensions longer than 1: :func:`neuron_conformance.conformance.verdict.compare.significant_strides`).

    Raises:
        MetadataFailure: naming the output and both strides.
    """
    a_leaves, e_leaves = tree_flatten(actual)[0], tree_flatten(eager)[0]
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        if (
            isinstance(a, torch.Tensor)
            and isinstance(e, torch.Tensor)
            and a.layout == e.layout == torch.strided
            and e.numel() > 1
            and a.shape == e.shape
            and significant_strides(a) != significant_strides(e)
        ):
            label = f"{where}, output {i}" if len(e_leaves) > 1 else where
            raise MetadataFailure(
                f"{label}: compiled strides {a.stride()}, eager mode on the device gives {e.stride()}"
            )


def _grads(outs, leaves, grad_outputs):
    return torch.autograd.grad(outs, leaves, grad_outputs, allow_unused=True)


def _grads64(op, pristine, dtype, grad_outputs):
    """The CPU gradients in float64 (complex128) for the same sample and ``grad_outputs`` (fp64 rule)."""
    triple = float64_for_grad(pristine, dtype)
    outs = differentiable(op.op(triple[0], *triple[1], **triple[2]))
    return [g for g in _grads(outs, grad_leaves(triple), float64_grad_outputs(grad_outputs)) if g is not None]


@dataclass
class SampleRun:
    """A checked sample: ``counts`` (what its call compiled), ``pristine`` (its CPU inputs, untouched) and
    ``compiled`` (the :class:`~neuron_conformance.opsuites.compile.capture.CompiledSample` it ran through)."""

    counts: Counts
    pristine: tuple
    compiled: CompiledSample


def check_sample(
    case: CompileCase, index: int, sample, where: str, reuse: CompiledSample | None = None
) -> SampleRun | str:
    """Check one sample (module docstring, steps 1 to 3); a :class:`SampleRun`, or the reason it was left out
    (:data:`CPU_RAISED`, :data:`DEVICE_RAISED`, :data:`CPU_FAILS_TOO`). Step 4 is
    :func:`judge_sample_graphs`, run by the caller when Dynamo's cache may be reset.

    Args:
        reuse: a compiled function of an earlier sample of the same call structure to call instead of
            compiling afresh (the dynamic-shape pass); None: Dynamo is reset and the sample compiled anew.

    Raises:
        neuron_conformance.conformance.verdict.failures.ConformanceFailure: the first failing check, ``sample`` set.
    """
    op, device = case.op, case.device
    pristine = move_sample(sample, "cpu", op.name)  # exact copies made before any run can mutate the sample
    cpu_triple = move_sample(pristine, "cpu", op.name)
    seed = torch.initial_seed()
    torch.random.default_generator.manual_seed(seed)
    expected, cpu_exc = _run_eager(op.op, cpu_triple, None)
    if cpu_exc is not None:
        return CPU_RAISED
    eager_triple = move_sample(sample, device, op.name, index=index)
    dev_exc = reseed(seed)
    eager, dev_exc = (None, dev_exc) if dev_exc is not None else _run_eager(op.op, eager_triple, device)
    if dev_exc is not None:
        return DEVICE_RAISED
    dev_triple = move_sample(sample, device, op.name, index=index)
    template, tensors = split_sample(dev_triple)
    if reuse is None:
        reset_dynamo()
    compiled = reuse or CompiledSample(
        sample_function(op.op, template), case.backend, dynamic=case.dynamic, where=where
    )
    on_device = factory_device(dev_triple, device)
    case.record["stage"] = "compile"
    reseed(seed)
    try:
        actual, counts = compiled.call(tensors, on_device)
    except (CompileFailure, CompiledRunFailure) as exc:
        cpu_template, cpu_tensors = split_sample(move_sample(pristine, "cpu", op.name))
        _, ref_exc = reference_counts(op.op, cpu_template, cpu_tensors, dynamic=case.dynamic, where=where)
        if ref_exc is not None and ref_exc.failure_class == exc.failure_class:
            case.record.setdefault("cpu_fails_too", []).append(str(exc)[:300])
            return CPU_FAILS_TOO
        exc.sample = index
        raise
    if not case.dynamic:
        check_recompile(compiled, split_sample(move_sample(sample, device, op.name, index=index))[1], on_device)
    case.record["stage"] = "forward"
    fold(
        case.tally,
        index,
        _detached(actual),
        _detached(expected),
        device=device,
        profile=case.profile,
        tol=case.tol,
        where=where,
        values=case.policy,
        check_strides=False,
        reference64=reference64_of(op.op, pristine, case.dtype),
        semantics=index_checker(op.full_name, case.policy, pristine),
        op=op.name,
    )
    check_strides(actual, eager, where)
    if case.backward:
        _check_backward(case, index, pristine, cpu_triple, expected, dev_triple, actual, seed, where)
    return SampleRun(counts, pristine, compiled)


def judge_sample_graphs(case: CompileCase, run: SampleRun, where: str) -> None:
    """Step 4: a sample that compiled but not as one graph against the CPU reference compile (which resets
    Dynamo); sets ``run.counts.reference``. A call served by an earlier sample's graphs (no frame
    converted) is not judged.

    Raises:
        neuron_conformance.conformance.verdict.failures.GraphBreakFailure: beyond the CPU's graphs or breaks.
    """
    counts = run.counts
    if counts.one_graph or (counts.frames == 0 and counts.graphs == 0):
        return
    case.record.pop("stage", None)  # a graph-break failure has no stage: it is about the whole call
    cpu_template, cpu_tensors = split_sample(move_sample(run.pristine, "cpu", case.op.name))
    counts.reference, _ = reference_counts(case.op.op, cpu_template, cpu_tensors, dynamic=case.dynamic, where=where)
    judge_graphs(counts, counts.reference, where)


def _check_backward(case, index, pristine, cpu_triple, expected, dev_triple, actual, seed, where) -> None:
    """Step 3 of the module docstring: compiled-backward gradients against CPU eager gradients."""
    cpu_outs, dev_outs = differentiable(expected), differentiable(actual)
    if not cpu_outs:
        return
    case.record["stage"] = "backward"
    if len(dev_outs) != len(cpu_outs):
        raise MetadataFailure(
            f"{where} (backward): {len(dev_outs)} differentiable output(s) from the compiled "
            f"function, {len(cpu_outs)} on the CPU",
            sample=index,
        )
    gen = torch.Generator().manual_seed(seed)
    cpu_gos = [torch.randn(o.shape, dtype=o.dtype, generator=gen) for o in cpu_outs]
    dev_gos = [to_device_exact(g, case.device) for g in cpu_gos]
    cpu_grads, cpu_exc = call(_grads, cpu_outs, grad_leaves(cpu_triple), cpu_gos)
    if cpu_exc is not None:  # no CPU gradient (a derivative PyTorch does not implement): nothing to compare
        case.record["backward_cpu_raised"] = case.record.get("backward_cpu_raised", 0) + 1
        return
    try:
        dev_grads = _grads(dev_outs, grad_leaves(dev_triple), dev_gos)
    except Exception as exc:  # noqa: BLE001 - the backward graph was compiled with the forward: this is a run
        raise CompiledRunFailure(
            f"{where}: the compiled backward raised while running: {first_line(exc)}", cause=exc, sample=index
        ) from exc
    for i, (a, e) in enumerate(zip(dev_grads, cpu_grads)):
        if (a is None) != (e is None):
            raise MetadataFailure(
                f"{where} (backward), input {i}: gradient is {'None' if a is None else 'a tensor'}"
                f" from the compiled function, {'None' if e is None else 'a tensor'} on the CPU",
                sample=index,
            )
    fold(
        case.tally,
        index,
        [a for a in dev_grads if a is not None],
        [e for e in cpu_grads if e is not None],
        device=case.device,
        profile=case.profile,
        tol=for_gradient(case.tol, case.dtype, mirrors_cpu=case.profile.mirrors_cpu),  # a gradient accumulates
        where=f"{where} (backward)",
        values=case.policy,
        check_strides=False,
        reference64=(lambda: _grads64(case.op, pristine, case.dtype, cpu_gos))
        if case.dtype.is_floating_point
        else None,
    )


__all__ = [
    "CPU_FAILS_TOO",
    "CPU_RAISED",
    "CompileCase",
    "DEVICE_RAISED",
    "SampleRun",
    "check_sample",
    "check_strides",
    "factory_device",
    "grown_sample",
    "judge_sample_graphs",
]
