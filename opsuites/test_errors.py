"""Error inputs: each OpInfo ``error_inputs`` sample must raise on the device as it does on the CPU.

For every OpInfo with ``error_inputs_func``, each ``ErrorInput`` (sample, ``error_type``, ``error_regex``)
is generated on the CPU (``op.error_inputs("cpu")``) and moved to the device exactly. The CPU run
establishes the reference: it must raise ``error_type`` with a message matching ``error_regex`` (when it
does not, PyTorch's own expectation does not hold on this CPU and the sample is left out). On the device:

* returning a result (garbage) instead of raising fails as ``wrong-error``;
* raising an exception that is not an instance of the CPU's exception type fails as ``wrong-error``;
* a message that does not match the OpInfo's regex fails as ``wrong-error``.

One test per op (error inputs take no dtype). At most :data:`MAX_SAMPLES` error inputs per op.
"""

from __future__ import annotations

import re

import pytest

from conformance.compare import check_same_error
from conformance.failures import WrongErrorFailure
from conformance.transfer import sample_to_device
from opsuites.suite_helpers import call, capped, opinfo, suite_params

SUITE = "errors"
MAX_SAMPLES = 12
"""Error inputs per op."""


def pytest_generate_tests(metafunc):
    if {"err_op_name", "err_dtype"} <= set(metafunc.fixturenames):
        metafunc.parametrize(("err_op_name", "err_dtype"), suite_params(
            metafunc.config, SUITE, variant="error_inputs", per_dtype=False,
            predicate=lambda op: op.error_inputs_func is not None))


def _run(op, triple):
    inp, args, kwargs = triple
    return call(op, inp, *args, **kwargs)


def test_errors(err_op_name, err_dtype, device, conformance_record, sample_index):
    op = opinfo(err_op_name)
    errors = capped(op.error_inputs("cpu"), MAX_SAMPLES, sample_index)
    checked = 0
    for index, err in errors:
        sample = err.sample_input
        where = f"{err_op_name} error input {index}"
        _, cpu_exc = _run(op, sample_to_device(sample, "cpu", op.name))
        if cpu_exc is None or not isinstance(cpu_exc, err.error_type) \
                or not re.search(err.error_regex, str(cpu_exc)):
            continue  # the CPU itself does not meet the OpInfo's expectation: no reference
        _, dev_exc = _run(op, sample_to_device(sample, device, op.name))
        try:
            check_same_error(dev_exc, cpu_exc, where)
            if not re.search(err.error_regex, str(dev_exc)):
                raise WrongErrorFailure(f"{where}: the device raised {type(dev_exc).__name__}: {dev_exc}; the "
                                        f"message does not match the OpInfo's regex {err.error_regex!r}")
        except WrongErrorFailure as exc:
            exc.sample = index
            conformance_record.update(sample=index, samples=len(errors), rule="error")
            raise
        checked += 1
    conformance_record.update(samples=checked, rule="error")
    if not checked:
        pytest.skip("no error input raises the expected error on the CPU")
