"""Gradients on the device against the CPU, for every OpInfo with ``supports_autograd``.

Dtypes are the selected ones in the OpInfo's ``backward_dtypes`` (``op.supported_backward_dtypes``).
For every sample (``requires_grad=True``) with a floating or complex tensor that requires grad and a
differentiable output, within ``--conformance-sample-budget`` (the others are counted in the record under their
reason: ``no tensor requiring grad``, ``no differentiable output``, ``CPU raised``, ``time budget``;
:mod:`neuron_conformance.opsuites.sample_selection`), the forward runs on both devices; every differentiable output gets the same ``grad_output`` (drawn on the CPU from the session
seed and copied exactly to the device); ``torch.autograd.grad`` then gives the gradient of every input
that requires grad, on each device. Every gradient is compared with the CPU's (tolerance policy, with
fp64 arbitration against the CPU gradient computed in float64; never bitwise for an exact-class op, whose
backward accumulates: :func:`neuron_conformance.conformance.verdict.tolerances.for_gradient`). A gradient that exists on one side only
is a ``metadata`` failure. Ops whose values are random or undefined are compared by metadata only.
"""

from __future__ import annotations

import functools

import torch
from torch.utils._pytree import tree_flatten

from neuron_conformance.conformance.backend.transfer import to_device_exact
from neuron_conformance.conformance.verdict.compare import check_same_error
from neuron_conformance.conformance.verdict.failures import ConformanceFailure, MetadataFailure
from neuron_conformance.conformance.verdict.index_semantics import GRADIENT_TIES, tie_canonical_gradient
from neuron_conformance.conformance.verdict.tolerances import for_gradient
from neuron_conformance.opsuites.grad_helpers import (
    differentiable_outputs,
    float64_for_grad,
    float64_grad_outputs,
    grad_leaves,
    move_keeping_grad,
)
from neuron_conformance.opsuites.sample_selection import require_compared
from neuron_conformance.opsuites.suite_helpers import (
    annotate,
    call,
    finish,
    fold,
    for_sample,
    require_reference,
    reseed,
    start_case,
    suite_params,
    up_to_gauge,
)

SUITE = "autograd"


def pytest_generate_tests(metafunc):
    if {"grad_op_name", "grad_dtype_name"} <= set(metafunc.fixturenames):
        metafunc.parametrize(
            ("grad_op_name", "grad_dtype_name"),
            suite_params(
                metafunc.config,
                SUITE,
                variant="backward",
                predicate=lambda op: op.supports_autograd,
                dtypes_of=lambda op: op.supported_backward_dtypes("cpu"),
            ),
        )


def reject(sample) -> str | None:
    """``"no tensor requiring grad"`` when no floating or complex tensor of ``sample`` requires grad (the
    OpInfo marks the differentiable inputs with ``requires_grad``), else None."""
    for t in tree_flatten((sample.input, sample.args, sample.kwargs))[0]:
        if isinstance(t, torch.Tensor) and t.requires_grad and (t.is_floating_point() or t.is_complex()):
            return None
    return "no tensor requiring grad"


def _grads(op, triple, grad_outputs, process=None):
    """(gradients of the leaves, None) or (None, exception). ``process``: applied to the op's result first
    (outputs defined up to a sign or phase: :func:`up_to_gauge`)."""
    inp, args, kwargs = triple
    leaves = grad_leaves((inp, args, kwargs))
    result, exc = call(op, inp, *args, **kwargs)
    if exc is not None:
        return None, exc
    if process is not None:
        result = process(result)
    outs = differentiable_outputs(result)
    if not outs or not leaves:
        return [], None
    if len(outs) != len(grad_outputs):
        return None, RuntimeError(f"{len(outs)} differentiable output(s), {len(grad_outputs)} on the CPU")
    return call(torch.autograd.grad, outs, leaves, grad_outputs, allow_unused=True)


def test_autograd(
    grad_op_name, grad_dtype_name, device, device_profile, conformance_record, sample_index, sample_budget
):
    op, dtype, tol, policy, tally, selection = start_case(
        grad_op_name,
        grad_dtype_name,
        device,
        device_profile,
        conformance_record,
        sample_index,
        budget=sample_budget,
        reject=reject,
        requires_grad=True,
    )
    tol = for_gradient(tol, dtype, mirrors_cpu=device_profile.mirrors_cpu)  # a gradient accumulates
    conformance_record.update(atol=tol.atol, rtol=tol.rtol)
    taken = cpu_raised = 0
    first_cpu_exc = None
    ties_free = op.name in GRADIENT_TIES and not device_profile.mirrors_cpu
    for index, sample in selection:
        taken += 1
        where = f"{grad_op_name} {grad_dtype_name} sample {index} (backward)"
        cpu_triple = move_keeping_grad(sample, "cpu", op.name)
        seed = torch.initial_seed()
        # forward on the CPU once to learn the outputs' shapes, then fixed grad_outputs for both devices
        process = functools.partial(up_to_gauge, op, sample, device_profile)  # SVD, eigenvectors: up to sign
        probe, exc = call(op, cpu_triple[0], *cpu_triple[1], **cpu_triple[2])
        if exc is not None:
            cpu_raised += 1
            first_cpu_exc = first_cpu_exc or exc
            selection.leave_out("CPU raised")
            continue
        outs = differentiable_outputs(process(probe) if exc is None else probe)
        if not outs:
            selection.leave_out("no differentiable output")
            continue
        gen = torch.Generator().manual_seed(seed)
        cpu_gos = [torch.randn(o.shape, dtype=o.dtype, generator=gen) for o in outs]
        dev_gos = [to_device_exact(g, device) for g in cpu_gos]
        torch.random.default_generator.manual_seed(seed)  # the CPU reference seeds the CPU only
        expected, cpu_exc = _grads(op, move_keeping_grad(sample, "cpu", op.name), cpu_gos, process)
        dev_exc = reseed(seed)  # a device RNG failure is the device call's
        if dev_exc is None:
            actual, dev_exc = _grads(op, move_keeping_grad(sample, device, op.name), dev_gos, process)
        try:
            if cpu_exc is not None:
                cpu_raised += 1
                first_cpu_exc = first_cpu_exc or cpu_exc
                check_same_error(dev_exc, cpu_exc, where)
                selection.leave_out("CPU raised")
                continue
            if dev_exc is not None:
                raise annotate(dev_exc, where, index)
            for i, (a, e) in enumerate(zip(actual, expected)):
                if (a is None) != (e is None):
                    raise MetadataFailure(
                        f"{where}, input {i}: gradient is {'None' if a is None else 'a tensor'} "
                        f"on the device, {'None' if e is None else 'a tensor'} on the CPU"
                    )

            if ties_free:  # the device may send a gradient to another of equal inputs (index_semantics)
                leaves = grad_leaves(cpu_triple)
                actual, expected = _by_ties(actual, leaves), _by_ties(expected, leaves)
            fold(
                tally,
                index,
                [a for a in actual if a is not None],
                [e for e in expected if e is not None],
                device=device,
                profile=device_profile,
                tol=tol,
                where=where,
                values=for_sample(policy, op, sample, device_profile),
                reference64=(
                    lambda s=sample, g=cpu_gos, t=cpu_triple, p=process: _reference64(
                        op, s, dtype, g, t if ties_free else None, p
                    )
                )
                if dtype.is_floating_point
                else None,
            )
        except ConformanceFailure as exc:
            exc.sample = index
            finish(conformance_record, tally, selection, failed=True)
            raise
    finish(conformance_record, tally, selection, policy=policy)
    require_reference(f"{grad_op_name} {grad_dtype_name} (backward)", cpu_raised, taken, first_cpu_exc)
    require_compared(selection, f"{grad_op_name} {grad_dtype_name} (backward)")


def _by_ties(grads: list, leaves: list) -> list:
    """Each gradient ordered up to the tie choice (:func:`tie_canonical_gradient`), None kept."""
    return [None if g is None else tie_canonical_gradient(g, leaf).to(g.device) for g, leaf in zip(grads, leaves)]


def _reference64(op, sample, dtype, grad_outputs, tie_leaves_of=None, process=None):
    """The CPU gradients computed in float64 (complex128) from the same sample and grad_outputs; ordered up
    to the tie choice by the leaves of ``tie_leaves_of`` (a CPU triple) when given."""
    triple = float64_for_grad(move_keeping_grad(sample, "cpu", op.name), dtype)
    grads, exc = _grads(op, triple, float64_grad_outputs(grad_outputs), process)
    if exc is None and tie_leaves_of is not None:
        grads = _by_ties(list(grads), grad_leaves(tie_leaves_of))
    if exc is not None:
        raise exc
    return [g for g in grads if g is not None]
