"""Helpers shared by the deeper op suites (variants, layouts, autograd, errors, properties).

Kept apart from :mod:`neuron_conformance.opsuites.samples` (OpInfo selection) so each suite module stays short: running a
callable while capturing its exception, tolerances per OpInfo (with :mod:`neuron_conformance.conformance.verdict.exact`), the
tensors of a nested value, a test's sample selection (:mod:`neuron_conformance.opsuites.sample_selection`), parametrization
with a suite's own dtype rule and variant, folding a comparison into an
:class:`~neuron_conformance.conformance.verdict.compare.ErrorTally`; one aten overload call checked on the CPU and the
device is :mod:`neuron_conformance.opsuites.aten_calls`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from torch.utils._pytree import tree_flatten

from neuron_conformance.conformance.backend import precision
from neuron_conformance.conformance.backend.transfer import to_float64
from neuron_conformance.conformance.pytest_plugin.options import selected_dtypes
from neuron_conformance.conformance.pytest_plugin.seeding import manual_seed
from neuron_conformance.conformance.verdict import index_semantics
from neuron_conformance.conformance.verdict.compare import ErrorTally, compare_outputs, raise_if_suspect
from neuron_conformance.conformance.verdict.exact import is_exact_op
from neuron_conformance.conformance.verdict.failures import ConformanceFailure, NoReference
from neuron_conformance.conformance.verdict.tolerances import Tolerance, tolerance_for
from neuron_conformance.opsuites.sample_selection import SampleSelection
from neuron_conformance.opsuites.samples import (
    cached_rows,
    gauge_free,
    has_undefined_values,
    is_random,
    op_db,
    opinfo_by_name,
    opinfo_params,
    random_sample_reason,
    reference_skipped_upstream,
    restriction_marks,
    sample_inputs,
)


def tensor_leaves(value) -> list:
    """The tensors among the leaves of a (nested) value (``torch.utils._pytree`` order: tuples, lists,
    dicts), e.g. an op's outputs or its ``(args, kwargs)``."""
    leaves, _ = tree_flatten(value)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def call(fn, *args, **kwargs):
    """``(result, None)`` or ``(None, exception)``: the exception is part of what the suites compare."""
    try:
        return fn(*args, **kwargs), None
    except Exception as exc:  # noqa: BLE001 - compared, not hidden
        return None, exc


def reseed(seed: int) -> BaseException | None:
    """Seed every generator with ``seed`` before a device-side call; the exception when that fails (a
    backend without RNG state: it belongs to the device-side call, a device failure), else None."""
    _, exc = call(manual_seed, seed)
    return exc


def require_reference(what: str, raised: int, total: int, first: BaseException | None) -> None:
    """End the test as ``no-reference`` when the CPU raised for every one of ``total`` (> 0) cases.

    Args:
        what: the test's op, dtype (and layout), for the message.
        raised: cases whose CPU call raised; ``first``: the first such exception.

    Raises:
        neuron_conformance.conformance.verdict.failures.NoReference: ``raised == total > 0``.
    """
    if total and raised >= total:
        detail = f"{type(first).__name__}: {str(first).splitlines()[0] if str(first) else ''}" if first else ""
        raise NoReference(
            f"{what}: no CPU reference: the CPU raised for all {total} sample(s) (first: "
            f"{detail}); the device was not judged"
        )


def annotate(exc: BaseException, where: str, index: int | None) -> BaseException:
    """Re-raise-ready copy of a device exception that names the sample, keeping the exception type
    (so ``NotImplementedError`` is still classed ``unsupported``)."""
    if isinstance(exc, ConformanceFailure):
        exc.sample = index
        return exc
    try:
        new = type(exc)(f"{where}: {type(exc).__name__} on the device: {exc}")
    except Exception:  # noqa: BLE001 - exception types with unusual constructors
        new = RuntimeError(f"{where}: {type(exc).__name__} on the device: {exc}")
    new.sample = index  # type: ignore[attr-defined]
    return new


def op_tolerance(op, dtype: torch.dtype, profile, device_type: str) -> Tolerance:
    """Tolerance of ``op`` results of ``dtype``: exact for exact-class ops (:mod:`neuron_conformance.conformance.verdict.exact`),
    exact when the backend mirrors the CPU, else the OpInfo override or the ``torch.testing`` default, widened
    to the TF32 tolerance for a float32 op that an active reduced-precision mode computes
    (:mod:`neuron_conformance.conformance.backend.precision`)."""
    tol = tolerance_for(
        dtype, opinfo=op, mirrors_cpu=profile.mirrors_cpu, exact=is_exact_op(op), device_type=device_type
    )
    mode = None if tol.exact else precision.mode_for(precision.detect(device_type), op.full_name, dtype)
    if mode is None:
        return tol
    wide = precision.TF32_TOLERANCE
    return Tolerance(max(tol.atol, wide), max(tol.rtol, wide), f"reduced-precision ({mode.name})", dtype)


VALUES_RANDOM = "random"
"""Rule of a record whose values depend on the RNG stream (``is_random``): only metadata (and, in
compare_cpu, seeded reproducibility on the device) is checked."""
VALUES_UNDEFINED = "values-undefined"
"""Rule of a record whose output values are undefined (``empty*``, ``has_nondeterministic_output``)."""
# ``implementation-defined`` (neuron_conformance.conformance.verdict.compare.IMPLEMENTATION_DEFINED) is the rule of a record of an op
# PyTorch skips in its own test_compare_cpu whose outputs are all integer or bool, on a backend that does
# not mirror the CPU (shifts past the bit width, float to int conversion of out-of-range values: C++
# leaves them implementation-defined or undefined), so no value was compared.
VALUES_NONE = "metadata-only"
"""Rule of a record where values were comparable but no output carried any (sparse layouts, ``Size`` or
``None`` outputs, every sample's CPU call raised)."""


@dataclass(frozen=True)
class ValuePolicy:
    """How the values of one op's outputs are judged against the CPU reference.

    Attributes:
        compare: float/complex outputs are judged by :func:`neuron_conformance.conformance.verdict.oracle.judge` (off for random ops
            and undefined values).
        integers: integer and bool outputs are judged (exactly); off where PyTorch calls them
            implementation-defined and the backend does not mirror the CPU.
        arbitrate: every suite gives the float64 reference, so a result outside the tolerance is arbitrated
            by the fp64 rule (``neuron_conformance.conformance.verdict.oracle``, rule 5) instead of failing on the
            CPU's rounding: on every backend that does not mirror the CPU (the same rule in compare_cpu,
            layouts, variants and the in-place checks), and where the CPU is not an exact reference for the op
            (PyTorch's OpInfo skips its own ``test_compare_cpu`` on every device,
            :func:`neuron_conformance.opsuites.samples.reference_skipped_upstream`).
        rule: the rule a record names when no verdict was given (``random``, ``values-undefined``,
            ``metadata-only``); never None, so no record hides that its values went unjudged. Integer
            outputs left unjudged give verdicts of rule ``implementation-defined``
            (:func:`neuron_conformance.conformance.verdict.compare.compare_outputs`).
    """

    compare: bool
    integers: bool
    arbitrate: bool
    rule: str

    def __bool__(self) -> bool:
        return self.compare or self.integers

    def record_rule(self, tally: ErrorTally) -> str:
        """The record's ``rule``: the strongest rule of the verdicts in ``tally``, else :attr:`rule`."""
        return tally.rule or self.rule


def value_policy(op_name: str, profile) -> ValuePolicy:
    """The :class:`ValuePolicy` of ``op_name`` on the device described by ``profile``.

    Random ops and ops with undefined values are not compared. Ops whose results PyTorch calls
    implementation-defined (``reference_skipped_upstream``), and ops whose index among ties the docs leave
    to the device (:data:`~neuron_conformance.conformance.verdict.index_semantics.DEVICE_CHOOSES_TIES`), are
    compared exactly when the backend mirrors the CPU; otherwise their float outputs are judged with the
    tolerance and fp64 arbitration, and their integer outputs by the op's semantics where a check is listed
    (:func:`index_checker`), else left unjudged (rule ``implementation-defined``).
    """
    if is_random(op_name):
        return ValuePolicy(False, False, False, VALUES_RANDOM)
    if has_undefined_values(op_name):
        return ValuePolicy(False, False, False, VALUES_UNDEFINED)
    device_defined = reference_skipped_upstream(op_name) or op_name in index_semantics.DEVICE_CHOOSES_TIES
    if profile.mirrors_cpu or not device_defined:
        # every suite arbitrates as compare_cpu does on a backend that does not run the CPU's kernels: the
        # layouts, variants and in-place checks judge the same op, dtype and samples (one rule everywhere)
        return ValuePolicy(True, True, not profile.mirrors_cpu, VALUES_NONE)
    return ValuePolicy(True, False, True, VALUES_NONE)


def up_to_gauge(op, sample, profile, result):
    """``result`` with the gauge (sign, phase) removed for an op of
    :data:`~neuron_conformance.opsuites.samples.DEFINED_UP_TO_GAUGE` on a backend that does not mirror the CPU
    (:func:`~neuron_conformance.opsuites.samples.gauge_free`); unchanged otherwise."""
    return result if profile.mirrors_cpu else gauge_free(op, sample, result)


def for_sample(policy: ValuePolicy, op, sample, profile) -> ValuePolicy:
    """``policy`` for one sample: values not compared (rule ``random``) when the sample draws from the RNG
    although the op does not always (:func:`neuron_conformance.opsuites.samples.random_sample_reason`), on a
    backend that does not mirror the CPU (one that does draws from the CPU's stream: compared exactly)."""
    if profile.mirrors_cpu or not policy.compare or random_sample_reason(op, sample) is None:
        return policy
    return ValuePolicy(False, False, False, VALUES_RANDOM)


def reference64_of(fn, triple, dtype: torch.dtype):
    """A callable giving ``fn``'s float64 (complex128) result on copies of ``triple`` = ``(input, args,
    kwargs)`` whose tensors of ``dtype`` are widened (:func:`neuron_conformance.conformance.backend.transfer.to_float64`), for the
    fp64 rule; None for non-float dtypes. The copies are made now, so ``triple`` may be mutated after
    (an in-place CPU run)."""
    if not (dtype.is_floating_point or dtype.is_complex):
        return None
    inp, args, kwargs = to_float64(triple, dtype)

    def reference64():
        return fn(inp, *args, **kwargs)

    return reference64


def parametrize_opinfos(metafunc: pytest.Metafunc) -> None:
    """Parametrize a test that takes ``op_name`` and ``dtype_name`` over OpInfo x selected dtypes.

    Called from a suite module's ``pytest_generate_tests``. The module sets ``SUITE`` (the suite name in
    records) and optionally ``OPINFO_FILTER`` (a predicate on OpInfos) and ``VARIANT``. The (op, dtype)
    list is kept in pytest's cache between sessions (:func:`neuron_conformance.opsuites.samples.cached_opinfo_pairs`), so
    collection does not import the OpInfo database.
    """
    if {"op_name", "dtype_name"} <= set(metafunc.fixturenames):
        module = metafunc.module
        params = opinfo_params(
            selected_dtypes(metafunc.config),
            getattr(module, "SUITE"),
            variant=getattr(module, "VARIANT", "function"),
            predicate=getattr(module, "OPINFO_FILTER", None),
            cache=getattr(metafunc.config, "cache", None),
            module_file=getattr(module, "__file__", None),
        )
        metafunc.parametrize(("op_name", "dtype_name"), params)


def suite_params(config, suite: str, *, variant: str, predicate=None, dtypes_of=None, per_dtype: bool = True) -> list:
    """``pytest.param`` list for a suite with its own dtype rule.

    Args:
        config: the pytest config (for ``--conformance-dtypes``, and ``config.cache`` to keep the rows between
            sessions, so collection does not import the OpInfo database: see
            :func:`neuron_conformance.opsuites.samples.cached_rows`).
        suite, variant: recorded in the ``conformance`` marker (manifest matching).
        predicate: keeps OpInfos for which it is true.
        dtypes_of: ``op -> set of torch.dtype`` supported by the suite (default: CPU dtypes).
        per_dtype: False gives one param per op (``dtype`` None), e.g. for error inputs.
    """
    selected = selected_dtypes(config)

    def rows() -> list:
        out = []
        for op in op_db():
            if predicate is not None and not predicate(op):
                continue
            if not per_dtype:
                out.append([op.full_name, None])
                continue
            supported = (dtypes_of or (lambda o: o.supported_dtypes("cpu")))(op)
            out.extend([op.full_name, name] for name in selected if getattr(torch, name) in supported)
        return out

    cached = cached_rows(
        getattr(config, "cache", None),
        f"suite_params|{suite}|{variant}|{per_dtype}",
        rows,
        sources=(__file__, predicate, dtypes_of),
        selected=selected,
    )
    params = []
    groups: dict = {}
    for name, dt in cached:
        group = groups.get(name)
        if group is None:
            group = groups[name] = pytest.mark.xdist_group(name)
        kwargs = (
            dict(op=name, variant=variant, suite=suite)
            if dt is None
            else dict(op=name, dtype=dt, variant=variant, suite=suite)
        )
        params.append(
            pytest.param(
                name,
                dt,
                id=name if dt is None else f"{name}-{dt}",
                marks=[group, pytest.mark.conformance(**kwargs), *restriction_marks(name)],
            )
        )
    return params


def index_checker(op_name: str, policy: ValuePolicy, triple):
    """The :func:`neuron_conformance.conformance.verdict.index_semantics.checker` of ``op_name`` on the CPU ``triple`` = ``(input,
    args, kwargs)`` when ``policy`` leaves its integer outputs unjudged (``compare`` without ``integers``),
    else None: integer outputs the CPU does not fix are judged by the semantics that hold."""
    if not policy.compare or policy.integers:
        return None
    return index_semantics.checker(op_name, triple)


def fold(
    tally: ErrorTally,
    index: int,
    actual,
    expected,
    *,
    device,
    profile,
    tol: Tolerance,
    where: str,
    values: ValuePolicy | bool = True,
    reference64=None,
    check_strides: bool | None = None,
    semantics=None,
    op: str | None = None,
) -> None:
    """:func:`~neuron_conformance.conformance.verdict.compare.compare_outputs` (raises on the first mismatch) and add the passing
    verdicts to ``tally``. ``values``: a :class:`ValuePolicy` (or a bool: every value, or none).
    ``semantics``: an :func:`index_checker` (None: none), run after the comparison. ``op``: the op's name,
    for the output dtypes a device may choose (:mod:`neuron_conformance.conformance.verdict.output_dtypes`).

    Raises:
        ConformanceFailure: from the comparison or the index semantics check.
    """
    strides = profile.mirrors_cpu if check_strides is None else check_strides
    floats = values.compare if isinstance(values, ValuePolicy) else bool(values)
    integers = values.integers if isinstance(values, ValuePolicy) else bool(values)
    for v in compare_outputs(
        actual,
        expected,
        device_type=device.type,
        tolerance=tol,
        check_strides=strides,
        values=floats,
        integer_values=integers,
        reference64=reference64,
        where=where,
        op=op,
    ):
        tally.add(v, index)
    for v in semantics(actual, expected, tol, where) if semantics is not None else ():
        tally.add(v, index)


def finish(
    record, tally: ErrorTally, selection: SampleSelection, *, failed: bool = False, policy: ValuePolicy | None = None
) -> None:
    """Fill the record's error fields from the tally and its sample counts from ``selection``
    (``samples``, ``samples_total``, ``samples_left_out``); ``failed``: a failure ends the test, the
    samples not reached are counted as left out (:meth:`SampleSelection.drain`); with ``policy``, a record
    whose values went unjudged names why in ``rule`` (:meth:`ValuePolicy.record_rule`).

    Raises:
        ReferenceSuspect: no sample failed and one found the CPU reference suspect (outcome ``reference-suspect``).
    """
    if failed:
        selection.drain()
    record.update(sample=tally.worst_sample, **selection.record_fields(), **tally.record_fields())
    if policy is not None:
        record["rule"] = policy.record_rule(tally)
    if not failed:
        raise_if_suspect(tally)  # the CPU reference, not the device, was off the float64 computation


def opinfo(op_name: str):
    """The OpInfo of ``op_name`` (its ``full_name``)."""
    return opinfo_by_name()[op_name]


def start_case(
    op_name: str,
    dtype_name: str,
    device,
    profile,
    record,
    sample_index: int | None,
    *,
    budget: float | None = None,
    reject=None,
    requires_grad: bool = False,
    limit: int | None = None,
):
    """What every deeper OpInfo suite test starts from: ``(op, dtype, tolerance, policy, tally, selection)``.

    ``selection`` is a :class:`~neuron_conformance.opsuites.sample_selection.SampleSelection` over every CPU sample input
    (:func:`neuron_conformance.opsuites.samples.sample_inputs`: the OpInfo's samples without its per-call stack inspection),
    leaving out those ``reject`` names a reason for and those past ``budget`` seconds (``--conformance-sample-budget``),
    or all but ``sample_index`` when replaying, and (``limit``) those past the first ``limit`` handed out;
    ``policy`` says how values are judged
    (:func:`value_policy`); the tolerance is also written to the result ``record``.
    """
    op = opinfo(op_name)
    dtype = getattr(torch, dtype_name)
    tol = op_tolerance(op, dtype, profile, device.type)
    policy = value_policy(op_name, profile)
    selection = SampleSelection(
        sample_inputs(op, "cpu", dtype, requires_grad=requires_grad),
        reject=reject,
        budget=budget,
        only=sample_index,
        limit=limit,
    )
    record.update(atol=tol.atol, rtol=tol.rtol)
    return op, dtype, tol, policy, ErrorTally(), selection
