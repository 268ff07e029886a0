"""Custom-op conformance: the backend's own ``torch.library`` ops (NKI-style kernels) it declares.

Every op of the backend module's ``CONFORMANCE_CUSTOM_OPS`` (:mod:`neuron_conformance.conformance.backend.custom_ops`; the emulated
device declares ``neuron_ops::rms_norm``, ``rotary`` and ``attention``) x each declared dtype the run
selects (``--conformance-dtypes``) gets three tests, each recorded on its own, with its own failure classes:

* ``test_opcheck``: ``torch.library.opcheck`` on the device samples (schema, fake kernel, autograd
  registration, AOT dispatch): classes ``opcheck-schema``, ``opcheck-fake``, ``opcheck-autograd``,
  ``opcheck-aot`` (:mod:`neuron_conformance.opsuites.custom_op_checks`).
* ``test_eager``: the op on the device against the declared reference on the CPU: outputs, then the
  gradients of the arguments declared ``grad`` (dtype, shape, device, values by the dtype's tolerance and
  the fp64 rule): ``metadata``, ``numeric``, ``nonfinite``; a failing record's ``stage`` says
  ``forward`` or ``backward``.
* ``test_compile``: the op inside a function compiled with ``fullgraph=True`` by the device's compile
  backend (:func:`neuron_conformance.opsuites.custom_op_checks.compile_backend_for`), forward and backward, against the
  same reference: ``compile-error`` when compilation raises, else as ``test_eager``. Needs the capability
  ``compile``.

A malformed declaration stops the run at collection with one line naming it (exit code 2).
"""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.backend.custom_ops import ERROR_KEY, CustomOpError, build_args, declared_ops
from neuron_conformance.conformance.pytest_plugin.options import selected_dtypes
from neuron_conformance.conformance.pytest_plugin.session import find_session
from neuron_conformance.conformance.verdict.failures import CompileFailure, ConformanceFailure
from neuron_conformance.opsuites.custom_op_checks import (
    compare,
    compile_backend_for,
    forward_backward,
    reference_results,
    run_opcheck,
    to_device,
)

SUITE = "custom_ops"
CHECKS = ("opcheck", "eager", "compile")
SEED = 20240607
"""Seed of the sample values and cotangents (any fixed value; the same on the CPU and the device)."""


def _specs(config) -> list:
    session = find_session(config)
    if session is None:
        return []
    try:
        return declared_ops(session.backend_module())
    except CustomOpError as exc:
        # an exit here would be shown as a collection error with a traceback; the conftest ends the run
        setattr(config, ERROR_KEY, exc)
        return []


def pytest_generate_tests(metafunc):
    if "custom_op" not in metafunc.fixturenames:
        return
    check = metafunc.function.__name__.removeprefix("test_")
    selected = selected_dtypes(metafunc.config)
    params = [
        pytest.param(
            spec,
            dt,
            id=f"{spec.test_id}-{dt}",
            marks=pytest.mark.conformance(op=spec.test_id, dtype=dt, suite=SUITE, variant=check),
        )
        for spec in _specs(metafunc.config)
        for dt in spec.dtypes
        if dt in selected
    ]
    metafunc.parametrize(("custom_op", "dtype_name"), params)


def _samples(spec, dtype_name):
    dtype = getattr(torch, dtype_name)
    for index, sample in enumerate(spec.samples):
        yield index, build_args(sample, dtype, SEED + index), dtype


def test_opcheck(custom_op, dtype_name, device, conformance_record):
    op = custom_op.overload()
    ran = []
    for index, cpu_args, _dtype in _samples(custom_op, dtype_name):
        ran = run_opcheck(op, to_device(cpu_args, device), f"{custom_op.name} {dtype_name} sample {index}")
    conformance_record.update(samples=len(custom_op.samples), rule="opcheck:" + ",".join(ran))


def _judge(fn, custom_op, dtype_name, device, conformance_record, label: str) -> None:
    """``fn`` (the op, or its compiled wrapper) on the device against the reference, forward then backward."""
    tally, worst = 0, None
    for index, cpu_args, dtype in _samples(custom_op, dtype_name):
        where = f"{custom_op.name} {dtype_name} sample {index} ({label})"
        expected, grads, out64, grads64 = reference_results(custom_op, cpu_args, SEED, dtype)
        actual, dev_grads = fn(to_device(cpu_args, device))
        conformance_record.update(sample=index, stage="forward")
        try:
            verdicts = list(compare(actual, expected, out64, dtype, device.type, f"{where}, forward"))
            conformance_record.update(stage="backward")
            verdicts += compare(
                tuple(dev_grads),
                tuple(grads),
                tuple(grads64) if grads64 is not None else None,
                dtype,
                device.type,
                f"{where}, backward",
            )
        except ConformanceFailure as exc:
            exc.sample = index
            raise
        tally += len(verdicts)
        worst = max([*verdicts, *([worst] if worst else [])], key=lambda v: v.max_abs or 0.0, default=None)
    if worst is not None:  # the record names the largest error of any sample, output or gradient
        conformance_record.update(**worst.record_fields())
    conformance_record.update(samples=len(custom_op.samples), stage=None, sample=None)
    assert tally, f"{custom_op.name} {dtype_name}: no output or gradient was compared"


def test_eager(custom_op, dtype_name, device, conformance_record):
    op = custom_op.overload()
    _judge(lambda args: forward_backward(op, args, SEED), custom_op, dtype_name, device, conformance_record, "eager")


@pytest.mark.capability("compile")
def test_compile(custom_op, dtype_name, device, compile_backend, conformance_record):
    op = custom_op.overload()
    backend = compile_backend_for(device, compile_backend)
    torch._dynamo.reset()  # each test compiles afresh: no cache entry of another dtype decides

    @torch.compile(backend=backend, fullgraph=True, dynamic=False)
    def compiled(*args):
        return op(*args)

    def run(args):
        try:
            return forward_backward(compiled, args, SEED)
        except ConformanceFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - any compile-time exception is the class compile-error
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise CompileFailure(
                f"{custom_op.name} {dtype_name}: torch.compile(backend={backend!r}, "
                f"fullgraph=True) raised {type(exc).__name__}: {first}"
            ) from exc

    conformance_record.update(compile_backend=backend)
    _judge(run, custom_op, dtype_name, device, conformance_record, f"compiled, backend {backend}")
