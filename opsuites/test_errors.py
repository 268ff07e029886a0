"""Error inputs: each OpInfo ``error_inputs`` sample must raise on the device as it does on the CPU.

For every OpInfo with ``error_inputs_func``, each ``ErrorInput`` (sample, ``error_type``, ``error_regex``)
is generated on the CPU (``op.error_inputs("cpu")``) and moved to the device exactly. The CPU run
establishes the reference: it must raise ``error_type`` with a message matching ``error_regex`` (when it
does not, PyTorch's own expectation does not hold on this CPU and the sample is left out). On the device:

* returning a result (garbage) instead of raising fails as ``wrong-error``;
* raising an exception that is not an instance of the CPU's exception type fails as ``wrong-error``;
* a message that does not match the OpInfo's regex fails as ``wrong-error``.

The device call is followed by a device synchronisation in the same error window
(:func:`_run_on_device`), so a backend that reports a kernel's error asynchronously, at the next
synchronising call, has it judged for this error input.

Some error inputs are generated differently per device type: ``error_inputs(device)`` expects the CPU
kernel's own message on ``cpu`` and the composite path's error elsewhere (``narrow_copy``: a
``RuntimeError`` from the CPU kernel's check, an ``IndexError`` from ``narrow`` on CUDA). When the device
does not raise what the CPU raised, the same error input generated for the device under test is
consulted: an exception of its ``error_type`` matching its ``error_regex`` passes (PyTorch's expectation
for that device type).

One test per op (error inputs take no dtype). At most :data:`MAX_SAMPLES` error inputs per op (a
:class:`~neuron_conformance.opsuites.sample_selection.SampleSelection` with that ``limit``; the rest are counted in the record
under ``past the per-test limit``).
"""

from __future__ import annotations

import re

import pytest
import torch

from neuron_conformance.conformance.backend.transfer import sample_to_device
from neuron_conformance.conformance.verdict.compare import check_same_error
from neuron_conformance.conformance.verdict.failures import WrongErrorFailure
from neuron_conformance.opsuites.sample_selection import SampleSelection
from neuron_conformance.opsuites.suite_helpers import call, opinfo, suite_params

SUITE = "errors"
MAX_SAMPLES = 12
"""Error inputs per op."""


def pytest_generate_tests(metafunc):
    if {"err_op_name", "err_dtype"} <= set(metafunc.fixturenames):
        metafunc.parametrize(
            ("err_op_name", "err_dtype"),
            suite_params(
                metafunc.config,
                SUITE,
                variant="error_inputs",
                per_dtype=False,
                predicate=lambda op: op.error_inputs_func is not None,
            ),
        )


def _run(op, triple):
    inp, args, kwargs = triple
    return call(op, inp, *args, **kwargs)


def _run_on_device(op, triple, device):
    """:func:`_run`, then a device synchronisation inside the same error window.

    A backend that runs kernels asynchronously reports a kernel's error at the next synchronising call, not
    at the call (CUDA's device-side asserts; the emulator's asynchronous mode, whose meta kernels cannot see
    an index out of bounds or a fill value that overflows): synchronising here attributes that error to
    this error input instead of to a later, unrelated call. ``torch.accelerator.synchronize`` is used when
    the device is the current accelerator, else the device module's ``synchronize`` when it has one.
    """
    result, exc = _run(op, triple)
    if exc is None and device.type != "cpu":
        try:
            acc = torch.accelerator.current_accelerator() if hasattr(torch, "accelerator") else None
            if acc is not None and acc.type == device.type:
                torch.accelerator.synchronize()
            elif callable(sync := getattr(getattr(torch, device.type, None), "synchronize", None)):
                sync()
        except Exception as raised:  # noqa: BLE001 - the asynchronous kernel's error is this input's
            exc = raised
    return result, exc


def _meets_device_expectation(op, device, index: int, err, dev_exc) -> bool:
    """True when ``dev_exc`` is what the OpInfo expects of error input ``index`` generated for ``device``'s
    type (same input shape as the CPU one, so it is the same case): an instance of its ``error_type``
    whose message matches its ``error_regex``."""
    if dev_exc is None or device.type == "cpu":
        return False
    try:
        for i, theirs in enumerate(op.error_inputs(device.type)):
            if i == index:
                break
        else:
            return False
    except Exception:  # noqa: BLE001 - generating on the device failed: no device-specific expectation
        return False
    mine, other = err.sample_input.input, theirs.sample_input.input
    if getattr(mine, "shape", None) != getattr(other, "shape", None):
        return False
    return isinstance(dev_exc, theirs.error_type) and re.search(theirs.error_regex, str(dev_exc)) is not None


def test_errors(err_op_name, err_dtype, device, conformance_record, sample_index):
    op = opinfo(err_op_name)
    errors = SampleSelection(op.error_inputs("cpu"), only=sample_index, limit=MAX_SAMPLES)
    checked = 0
    for index, err in errors:
        sample = err.sample_input
        where = f"{err_op_name} error input {index}"
        _, cpu_exc = _run(op, sample_to_device(sample, "cpu", op.name))
        if cpu_exc is None or not isinstance(cpu_exc, err.error_type) or not re.search(err.error_regex, str(cpu_exc)):
            continue  # the CPU itself does not meet the OpInfo's expectation: no reference
        _, dev_exc = _run_on_device(op, sample_to_device(sample, device, op.name), device)
        try:
            check_same_error(dev_exc, cpu_exc, where)
            if not re.search(err.error_regex, str(dev_exc)):
                raise WrongErrorFailure(
                    f"{where}: the device raised {type(dev_exc).__name__}: {dev_exc}; the "
                    f"message does not match the OpInfo's regex {err.error_regex!r}"
                )
        except WrongErrorFailure as exc:
            if _meets_device_expectation(op, device, index, err, dev_exc):
                checked += 1
                continue
            exc.sample = index
            errors.drain()
            conformance_record.update(sample=index, rule="error", **errors.record_fields())
            raise
        checked += 1
    conformance_record.update(rule="error", **dict(errors.record_fields(), samples=checked))
    if not checked:
        pytest.skip("no error input raises the expected error on the CPU")
