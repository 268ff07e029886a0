"""Aten overloads the schema-derived inputs cannot reach, called with arguments captured from OpInfo samples.

One test per overload of the replay index (:mod:`neuron_conformance.opsuites.replay_index`, the committed
``aten_replay_index.json``, built on one torch release): overloads with a CPU kernel and no exclusion rule
whose schema-derived inputs the CPU kernel rejects (or that are unsafe on them), and which some OpInfo sample
reaches, itself or through a related overload. On another release, an entry whose overload or OpInfo that
release lacks, or whose sample no longer reaches it, is skipped naming the index's release. At test time the
indexed sample is re-run on the CPU under capture and the target's calls are derived from the captured one
(:func:`neuron_conformance.opsuites.replay_calls.replay_calls`: the call itself, ``out=`` variants with sized
and zero-element outs, in-place from functional and back, ``*_copy`` from the view op). Each call runs through
``torch.ops.aten.<op>.<overload>`` on the CPU and, with its tensors moved by
:func:`neuron_conformance.conformance.backend.transfer.to_device_exact` (same storage offset and strides,
aliasing kept), on the device; every output and every written argument is compared with the tolerance policy,
as in the generated suite (:func:`neuron_conformance.opsuites.aten_calls.fold_aten_call`).

Records: suite ``aten_replay``, op = the dispatcher name (``aten::adaptive_max_pool2d.out``), variant
``replay``, ``samples`` = calls compared, ``replay_source`` = the derivation path and the OpInfo sample.
"""

from __future__ import annotations

import functools

import pytest
import torch

from neuron_conformance.conformance.results import coverage
from neuron_conformance.conformance.survival.crash_files import note_sample
from neuron_conformance.conformance.verdict.compare import ErrorTally, raise_if_suspect
from neuron_conformance.conformance.verdict.failures import ConformanceFailure
from neuron_conformance.opsuites import replay_index
from neuron_conformance.opsuites.aten_calls import (
    aten_call_tolerance,
    aten_reference64,
    aten_to_device,
    aten_values_defined,
    fold_aten_call,
)
from neuron_conformance.opsuites.replay_calls import StaleReplayEntry, replay_calls
from neuron_conformance.opsuites.samples import opinfo_by_name
from neuron_conformance.opsuites.suite_helpers import annotate

SUITE = "aten_replay"
VARIANT = "replay"


@functools.lru_cache(maxsize=1)
def _entries() -> dict:
    return replay_index.load()


def _other_release() -> str | None:
    """The release the index was built on when the running torch is another one, else None."""
    built = replay_index.built_on()
    return built if built and built != torch.__version__.split("+")[0] else None


def _not_replayable(overload: str, entry: dict) -> str | None:
    """Why the running torch cannot replay ``entry`` (its overload is not registered, or its OpInfo is not in
    the running OpInfo database), or None. The index is built on one release: an older one may lack either."""
    if coverage._overload(overload) is None:
        lacks = f"has no {overload}"
    elif entry["opinfo"] not in opinfo_by_name():
        lacks = f"has no OpInfo {entry['opinfo']!r}"
    else:
        return None
    return f"torch {torch.__version__} {lacks} (the replay index is built on torch {replay_index.built_on()})"


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
                for n in sorted(_entries())
            ],
        )


def _source(entry: dict) -> str:
    steps = " <- ".join(f"{name} ({rel})" for name, rel in entry["path"][1:])
    return (
        f"{steps + ' <- ' if steps else ''}{entry['source']} captured from OpInfo {entry['opinfo']} "
        f"{entry['dtype']} sample {entry['sample']} {entry['phase']}"
    )


def test_aten_replay(overload, device, device_profile, conformance_record):
    entry = _entries()[overload]
    conformance_record.update(dtype=entry["dtype"], replay_source=_source(entry))
    reason = _not_replayable(overload, entry)
    if reason is not None:
        pytest.skip(reason)
    try:
        calls = replay_calls(overload, entry)
    except StaleReplayEntry as exc:
        if _other_release() is None:  # on the index's own release a stale entry is the index's bug
            raise
        pytest.skip(f"{exc} (the replay index is built on torch {_other_release()}; this is torch {torch.__version__})")
    values = aten_values_defined(overload)
    tally = ErrorTally()
    conformance_record.update(samples=len(calls))
    try:
        for index, call in enumerate(calls):
            note_sample(index)
            where = f"{overload} ({call.label}; {_source(entry)})"
            args, kwargs = call.fresh()
            memo: dict = {}
            dev_args = tuple(aten_to_device(a, device, memo) for a in args)
            dev_kwargs = {k: aten_to_device(v, device, memo) for k, v in kwargs.items()}
            reference64 = aten_reference64(call.op, args, kwargs, getattr(torch, entry["dtype"]), device_profile)
            expected = call.op(*args, **kwargs)
            try:
                actual = call.op(*dev_args, **dev_kwargs)
            except ConformanceFailure:
                raise
            except Exception as exc:  # noqa: BLE001 - the CPU kernel accepted these inputs: the device must too
                raise annotate(exc, where, index) from None
            tol = aten_call_tolerance(overload, expected, getattr(torch, entry["dtype"]), device_profile)
            conformance_record.update(atol=tol.atol, rtol=tol.rtol)
            fold_aten_call(
                tally,
                index,
                call.op,
                (args, kwargs),
                (dev_args, dev_kwargs),
                expected,
                actual,
                device=device,
                profile=device_profile,
                tol=tol,
                values=values,
                reference64=reference64,
                where=where,
            )
    finally:
        conformance_record.update(sample=tally.worst_sample, **tally.record_fields())
    if conformance_record.get("rule") is None:  # no verdict: say why the values went unjudged
        conformance_record["rule"] = "metadata-only" if values else "values-undefined"
    raise_if_suspect(tally)  # the CPU reference, not the device, was off the float64 computation
