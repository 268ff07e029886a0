"""Results of the model checks: :class:`CheckResult` (one check's outcome and record fields) and
:func:`combine` (one result from many per-tensor oracle verdicts)."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from neuron_conformance.conformance.verdict.failures import (
    CompileFailure,
    ConformanceFailure,
    GraphBreakFailure,
    MetadataFailure,
    NonFiniteFailure,
    NumericFailure,
    RecompileFailure,
)
from neuron_conformance.conformance.verdict.oracle import Verdict
from neuron_conformance.model_zoo.dtypes import dtype_name
from neuron_conformance.model_zoo.localize import Divergence


@dataclasses.dataclass
class CheckResult:
    """Outcome of one model check.

    Attributes:
        model: model id.
        check: check name (``forward``, ``backward``, ...).
        dtype: dtype under test.
        passed: whether the device passed.
        verdict: the oracle verdict that decided (first failing comparison, else the one with the
            largest absolute error), or ``None`` for checks that compare tokens only.
        failure_class: ``numeric``, ``metadata`` or ``nonfinite`` when failed.
        message: failure explanation (empty when passed).
        compared: number of tensors compared.
        metrics: extra numbers for the record and report (agreement fractions, counts).
        divergence: the localizer's finding when the check failed and the localizer ran.
        left_out: the reason the result is not the device's to answer for (the compile checks' "compiled code
            fails on the CPU too"): the test is skipped with it; None otherwise.
        fields: extra top-level record fields (the compile checks' ``one_graph``, ``graphs``,
            ``graph_breaks``, ... as the op-suite compile suite names them).
    """

    model: str
    check: str
    dtype: torch.dtype
    passed: bool
    verdict: Verdict | None = None
    failure_class: str | None = None
    message: str = ""
    compared: int = 0
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    divergence: Divergence | None = None
    fields: dict[str, Any] = dataclasses.field(default_factory=dict)
    left_out: str | None = None

    def record_fields(self) -> dict[str, Any]:
        """Fields for the ``conformance_record`` fixture (schema 1, docs/architecture.md)."""
        fields: dict[str, Any] = dict(
            suite="model_zoo",
            kind="model",
            op=self.model,
            variant=self.check,
            dtype=dtype_name(self.dtype),
            samples=self.compared,
        )
        if self.verdict is not None:
            fields.update(self.verdict.record_fields())
        else:
            fields["rule"] = self.metrics.get("rule")
        fields.update(self.fields)
        return fields

    def full_message(self) -> str:
        msg = f"{self.model} {self.check} [{dtype_name(self.dtype)}]: {self.message}"
        if self.divergence is not None:
            msg += "\n" + self.divergence.describe()
        elif self.metrics.get("localizer") == "no-divergence":
            msg += "\nlocalizer: every submodule's forward output is within tolerance"
        return msg

    def raise_if_failed(self) -> None:
        """Raise the :class:`~neuron_conformance.conformance.verdict.failures.ConformanceFailure` subclass matching the failure
        (its ``failure_class`` the result's: a compile check's ``compile-error``, ``graph-break``, ...)."""
        if self.passed:
            return
        cls = _FAILURES.get(self.failure_class or "", ConformanceFailure)
        exc = cls(self.full_message())
        exc.failure_class = self.failure_class or exc.failure_class
        raise exc


_FAILURES = {
    "numeric": NumericFailure,
    "metadata": MetadataFailure,
    "nonfinite": NonFiniteFailure,
    "compile-error": CompileFailure,
    "graph-break": GraphBreakFailure,
    "recompile": RecompileFailure,
}
"""Failure class -> the exception :meth:`CheckResult.raise_if_failed` raises (others: ``ConformanceFailure``
with the class set)."""


def combine(
    model: str, check: str, dtype: torch.dtype, verdicts: list[tuple[str, Verdict]], metrics: dict | None = None
) -> CheckResult:
    """One result from many named verdicts: the first failure decides, else the largest error."""
    metrics = dict(metrics or {})
    failed = [(name, v) for name, v in verdicts if not v.passed]
    metrics["failed_tensors"] = len(failed)
    if failed:
        name, v = failed[0]
        more = f" ({len(failed)} of {len(verdicts)} tensors failed)" if len(failed) > 1 else ""
        return CheckResult(
            model, check, dtype, False, v, v.failure_class, f"{name}: {v.message}{more}", len(verdicts), metrics
        )
    worst = max(verdicts, key=lambda nv: nv[1].max_abs or 0.0, default=(None, None))[1]
    return CheckResult(model, check, dtype, True, worst, None, "", len(verdicts), metrics)
