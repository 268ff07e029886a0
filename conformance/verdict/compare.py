"""Run an op on the device and on the CPU and compare every output.

:func:`compare_outputs` walks two (nested) results in step and checks, for each output: the device it
lives on (an output left on the CPU when the reference is on the CPU is a failure: it should be on the
device under test), dtype, shape, strides (when the backend mirrors CPU kernels), and values with
:func:`neuron_conformance.conformance.verdict.oracle.judge`. :class:`ErrorTally` keeps the largest errors and the strongest rule
across outputs and samples, for the result record.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import torch
from torch.utils._pytree import tree_flatten

from neuron_conformance.conformance.verdict.failures import (
    MetadataFailure,
    ReferenceSuspect,
    TransferError,
    WrongErrorFailure,
)
from neuron_conformance.conformance.verdict.oracle import REFERENCE_SUSPECT, Verdict, judge
from neuron_conformance.conformance.verdict.output_dtypes import device_dtype_allowed, device_shape_allowed
from neuron_conformance.conformance.verdict.tolerances import Tolerance, for_output

_RULE_ORDER = {
    None: 0,
    "implementation-defined": 0.5,
    "index-semantics": 0.75,
    "exact": 1,
    "tolerance": 2,
    "fp64": 3,
    REFERENCE_SUSPECT: 3.5,
}

IMPLEMENTATION_DEFINED = "implementation-defined"
"""Rule of the verdict :func:`compare_outputs` gives an integer output it was told not to judge
(``integer_values=False``): any judged output's rule outranks it in an :class:`ErrorTally`."""


@dataclass
class ErrorTally:
    """Largest errors and strongest deciding rule over many comparisons (for one result record)."""

    max_abs: float | None = None
    max_rel: float | None = None
    max_ulp: float | None = None
    rule: str | None = None
    atol: float | None = None
    rtol: float | None = None
    worst_sample: int | None = None
    compared: int = 0
    suspect: str | None = None
    """The first ``reference-suspect`` verdict's message (:func:`raise_if_suspect` raises it at the test's end)."""

    def add(self, verdict: Verdict, sample: int | None = None) -> None:
        """Fold one verdict in."""
        self.compared += 1
        if verdict.rule == REFERENCE_SUSPECT and self.suspect is None:
            self.suspect = verdict.message
        if verdict.max_abs is not None and (self.max_abs is None or verdict.max_abs > self.max_abs):
            self.max_abs, self.worst_sample = verdict.max_abs, sample
        if verdict.max_rel is not None:
            self.max_rel = max(self.max_rel or 0.0, verdict.max_rel)
        if verdict.max_ulp is not None:
            self.max_ulp = max(self.max_ulp or 0.0, verdict.max_ulp)
        if _RULE_ORDER.get(verdict.rule, 4) >= _RULE_ORDER.get(self.rule, 0):
            self.rule = verdict.rule
        self.atol, self.rtol = verdict.atol, verdict.rtol

    def record_fields(self) -> dict:
        """Fields for the result record."""
        return {
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "max_ulp": self.max_ulp,
            "rule": self.rule,
            "atol": self.atol,
            "rtol": self.rtol,
        }


def raise_if_suspect(tally: ErrorTally) -> None:
    """Raise :class:`~neuron_conformance.conformance.verdict.failures.ReferenceSuspect` when a compared sample found the CPU
    reference suspect and no sample failed (call it once every sample is compared)."""
    if tally.suspect is not None:
        raise ReferenceSuspect(tally.suspect)


def flatten(value) -> list:
    """Leaves of a (nested) op result: tensors, numbers, None, ..."""
    leaves, _ = tree_flatten(value)
    return leaves


def significant_strides(t: torch.Tensor) -> tuple[int, ...]:
    """Strides of the dimensions longer than 1 (a size-1 dimension's stride never moves the address;
    PyTorch compares strides the same way: ``torch._prims_common.check_significant_strides``)."""
    return tuple(st for st, n in zip(t.stride(), t.shape) if n > 1)


def compare_outputs(
    actual,
    expected,
    *,
    device_type: str,
    tolerance: Tolerance,
    check_strides: bool = False,
    values: bool = True,
    integer_values: bool | None = None,
    reference64: Callable[[], object] | None = None,
    where: str = "",
    op: str | None = None,
) -> list[Verdict]:
    """Compare a device result with the CPU reference, output by output; raise on the first failure.

    Args:
        actual: result of the op on the device (nested tuples/lists of tensors and numbers).
        expected: result of the op on the CPU.
        device_type: device type under test; tensor outputs whose reference is on the CPU must be on it.
        tolerance: tolerance of the comparison (exact when ``tolerance.exact``); an output whose dtype
            differs from the test's where one of them is float8 gets its own dtype's
            (:func:`neuron_conformance.conformance.verdict.tolerances.for_output`).
        check_strides: also require equal strides of the dimensions longer than 1 (:func:`significant_strides`;
            a backend that mirrors CPU kernels must match them).
        values: compare values (False for ops whose values are random or undefined).
        integer_values: compare the values of integer, bool and Python-number outputs (default: as
            ``values``; False where they are implementation-defined, see
            :class:`neuron_conformance.opsuites.suite_helpers.ValuePolicy`).
        reference64: callable giving the float64 reference result (same structure), used by the fp64 rule.
        where: prefix of failure messages (``"sample 3"``).
        op: the op's OpInfo or aten name; where :mod:`~neuron_conformance.conformance.verdict.output_dtypes` lets the
            device choose an output's dtype, that dtype is accepted and the values are compared in the CPU's;
            where it lets the device fill an output the CPU leaves empty, that output is not judged.

    Returns:
        The passing verdicts of the value comparisons, and a passing verdict of rule
        :data:`IMPLEMENTATION_DEFINED` (no error sizes) for each integer output left unjudged.

    Raises:
        MetadataFailure: number of outputs, output kind, device, dtype, shape or strides differ.
        NumericFailure / NonFiniteFailure: values differ (see :func:`neuron_conformance.conformance.verdict.oracle.judge`).
    """
    integer_values = values if integer_values is None else integer_values
    a_leaves, e_leaves = flatten(actual), flatten(expected)
    if len(a_leaves) != len(e_leaves):
        raise MetadataFailure(f"{where}: {len(a_leaves)} output(s) on the device, {len(e_leaves)} on the CPU")
    r64_cache: dict = {}
    verdicts = []
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        label = f"{where}, output {i}" if len(e_leaves) > 1 else where
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                raise MetadataFailure(f"{label}: got a {type(a).__name__}, the CPU returned a tensor")
            want = device_type if e.device.type == "cpu" else e.device.type
            if a.device.type != want:
                raise MetadataFailure(f"{label}: output is on {a.device}, expected a {want} tensor")
            if a.dtype != e.dtype:
                if not device_dtype_allowed(op, i, a.dtype, e.dtype):
                    raise MetadataFailure(f"{label}: dtype {a.dtype}, the CPU gives {e.dtype}")
                a = a.to("cpu").to(e.dtype)  # output_dtypes rule 1: judged in the CPU's dtype
            if a.shape != e.shape:
                if device_shape_allowed(op, i, a.shape, e.shape):
                    continue  # output_dtypes rule 2: the CPU returns no values (eval-mode batch-norm statistics)
                raise MetadataFailure(f"{label}: shape {tuple(a.shape)}, the CPU gives {tuple(e.shape)}")
            if (
                check_strides
                and a.layout == torch.strided
                and e.numel() > 1
                and significant_strides(a) != significant_strides(e)
            ):
                raise MetadataFailure(f"{label}: strides {a.stride()}, the CPU gives {e.stride()}")
            floating = e.is_floating_point() or e.is_complex()
            if values and not floating and not integer_values:
                verdicts.append(Verdict(True, IMPLEMENTATION_DEFINED))
                continue
            if not (values if floating else integer_values) or a.layout != torch.strided:
                continue
            v = _judge_tensor(a, e, i, label, for_output(tolerance, e.dtype), reference64, r64_cache)
            if v.rule == REFERENCE_SUSPECT:  # not the device's failure: the tally carries it to the test's end
                verdicts.append(dataclasses.replace(v, message=f"{label}: {v.message}"))
                continue
            v.raise_if_failed(label)
            verdicts.append(v)
        elif isinstance(e, (bool, int, float, complex)):
            if values and not integer_values and not isinstance(e, (float, complex)):
                verdicts.append(Verdict(True, IMPLEMENTATION_DEFINED))
                continue
            if not (values if isinstance(e, (float, complex)) else integer_values):
                continue
            v = judge(a, e, exact=tolerance.exact, atol=tolerance.atol, rtol=tolerance.rtol)
            v.raise_if_failed(label)
            verdicts.append(v)
        elif isinstance(e, (torch.dtype, torch.device, torch.Size, str, type(None))):
            if isinstance(e, torch.device) and e.type == "cpu":
                e = torch.device(device_type)
            if isinstance(a, torch.device):
                a = torch.device(a.type)
                e = torch.device(e.type)
            if a != e:
                raise MetadataFailure(f"{label}: got {a!r}, the CPU gives {e!r}")
    return verdicts


def _judge_tensor(a, e, i, label, tolerance, reference64, r64_cache: dict):
    """The verdict on tensor output ``i``: tolerance (or exact), then fp64 arbitration when it failed
    (``r64_cache`` keeps the float64 reference's leaves across outputs).

    Raises:
        TransferError: reading the device output back to the CPU failed (named by ``label``).
    """
    try:
        if reference64 is not None and e.is_floating_point() | e.is_complex():
            # exact ops stay exact (the fp64 rule never applies to them), but a CPU reference off the
            # float64 computation is suspect for them too (oracle: reference suspicion)
            v = judge(a, e, exact=tolerance.exact, atol=tolerance.atol, rtol=tolerance.rtol)
            if not v.passed and v.failure_class in ("numeric", "nonfinite"):
                if "leaves" not in r64_cache:
                    r64_cache["leaves"] = _safe_leaves(reference64)
                leaves = r64_cache["leaves"]
                r64 = leaves[i] if leaves is not None and i < len(leaves) else None
                if isinstance(r64, torch.Tensor) and r64.shape == e.shape:
                    v = judge(a, e, reference64=r64, exact=tolerance.exact, atol=tolerance.atol, rtol=tolerance.rtol)
            return v
        return judge(a, e, exact=tolerance.exact, atol=tolerance.atol, rtol=tolerance.rtol)
    except (TypeError, RuntimeError, NotImplementedError) as exc:
        raise TransferError(
            f"{label}: reading the device output back to the CPU failed: {type(exc).__name__}: {exc}", cause=exc
        ) from exc


def _safe_leaves(fn):
    try:
        return flatten(fn())
    except Exception:  # noqa: BLE001 - no fp64 kernel for the op: arbitration is not available
        return None


def check_same_error(device_exc: BaseException | None, cpu_exc: BaseException, where: str) -> None:
    """The device must raise when the CPU raised, with the same exception type.

    Raises:
        WrongErrorFailure: the device returned a result, or raised another exception type.
    """
    if device_exc is None:
        raise WrongErrorFailure(
            f"{where}: the CPU raised {type(cpu_exc).__name__}: {cpu_exc}; the device returned a result instead"
        )
    if not isinstance(device_exc, type(cpu_exc)):
        raise WrongErrorFailure(
            f"{where}: the CPU raised {type(cpu_exc).__name__}: {cpu_exc}; the device "
            f"raised {type(device_exc).__name__}: {device_exc}"
        )
