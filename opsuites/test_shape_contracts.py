"""Aten overloads with hand-written inputs that respect their size contracts, on the device vs the CPU.

One test per overload of the contract tables (:mod:`neuron_conformance.opsuites.contracts.nn`, :mod:`neuron_conformance.opsuites.contracts.conv`,
:mod:`neuron_conformance.opsuites.contracts.misc`, :mod:`neuron_conformance.opsuites.contracts.extra`;
the machinery in :mod:`neuron_conformance.opsuites.contracts.registry`): overloads whose arguments must agree in size (batch,
channel and group counts, running statistics, offsets and lengths), which schema-derived inputs cannot
give (the ``generated`` suite skips them, or must not run them: :data:`neuron_conformance.conformance.results.aten_audit.SCHEMA_UNSAFE`),
and the core ``sym_*`` metadata queries on non-contiguous and offset views. Every sample is run through
``torch.ops.aten.<op>.<overload>`` on the CPU and, moved with the same sizes, strides and offset, on the
device (:func:`neuron_conformance.opsuites.aten_calls.check_aten_call`): every output and every written argument
(``Tensor(a!)``) is compared with the tolerance policy.

Records: suite ``shape_contracts``, op = the dispatcher name (``aten::native_group_norm``), variant
``contract``; the aten audit counts a non-skipped record as a ``generated`` disposition
(:data:`neuron_conformance.conformance.results.aten_audit.GENERATED_SUITES`).
"""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.results import aten_audit
from neuron_conformance.conformance.survival.crash_files import note_sample
from neuron_conformance.conformance.verdict.compare import ErrorTally
from neuron_conformance.opsuites.aten_calls import check_aten_call
from neuron_conformance.opsuites.contracts import conv as contracts_conv
from neuron_conformance.opsuites.contracts import extra as contracts_extra
from neuron_conformance.opsuites.contracts import misc as contracts_misc
from neuron_conformance.opsuites.contracts import nn as contracts_nn
from neuron_conformance.opsuites.contracts.registry import call_samples, registry
from neuron_conformance.opsuites.suite_helpers import tensor_leaves

SUITE = "shape_contracts"
VARIANT = "contract"

ABSENT: list[str] = []
"""Overloads of the tables the running torch lacks (no ``torch.ops.aten`` binding): no case is built for them."""
CONTRACTS = registry(
    [contracts_nn.CONTRACTS, contracts_conv.CONTRACTS, contracts_misc.CONTRACTS, contracts_extra.CONTRACTS],
    absent=ABSENT,
)
"""Dispatcher name -> :class:`neuron_conformance.opsuites.contracts.registry.Contract`, for the overloads the
running torch has."""


def pytest_generate_tests(metafunc):
    if "overload" in metafunc.fixturenames:
        metafunc.parametrize(
            "overload",
            [
                pytest.param(
                    n,
                    id=n,
                    marks=[pytest.mark.xdist_group(n), pytest.mark.conformance(op=n, variant=VARIANT, suite=SUITE)],
                )
                for n in sorted(CONTRACTS)
            ],
        )


def _shapes(args, kwargs) -> str:
    return ", ".join(f"{tuple(t.shape)}" for t in tensor_leaves([*args, *kwargs.values()]))


def test_shape_contract(overload, device, device_profile, conformance_record):
    contract = CONTRACTS[overload]
    op = aten_audit.overload_of(overload)
    samples = call_samples(overload, contract)
    first = next(iter(tensor_leaves([*samples[0][0], *samples[0][1].values()])), None)
    dtype = first.dtype if first is not None else torch.float32
    conformance_record.update(samples=len(samples), dtype=str(dtype).removeprefix("torch."))
    tally = ErrorTally()
    for i, (args, kwargs) in enumerate(samples):
        note_sample(i)
        check_aten_call(
            op,
            args,
            kwargs,
            device=device,
            profile=device_profile,
            record=conformance_record,
            where=f"{overload} sample {i} [{_shapes(args, kwargs)}]",
            dtype=dtype,
            index=i,
            tally=tally,
            values=contract.values,
            reproducible=contract.reproducible,
            on_cpu=contract.cpu_args,
            cpu_outputs=contract.cpu_outputs,
        )
    conformance_record.update(sample=tally.worst_sample, **tally.record_fields())
    if conformance_record.get("rule") is None:  # no verdict: say why the values went unjudged
        conformance_record["rule"] = "metadata-only" if contract.values else "values-undefined"
