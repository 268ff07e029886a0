"""Judge a distributed scenario's run against its single-process CPU reference.

:func:`raise_for_status` turns a run that did not finish into the failure class the records use
(``timeout``, ``unsupported`` or ``error``); :func:`judge_scenario` merges what the ranks returned,
checks that ranks holding the same parameter agree exactly, compares every parameter with the reference
through :func:`neuron_conformance.conformance.verdict.oracle.judge`, and raises the matching ``ConformanceFailure`` when one differs.

Tolerances (``atol``, ``rtol``), compared elementwise as ``|a - e| <= atol + rtol * |e|``:

* ``float32`` scenarios: ``torch.testing.assert_close``'s float32 default (``rtol=1.3e-6``,
  ``atol=1e-5``; ``torch/testing/_comparison.py``). Runs on gloo and on the emulator differ from the
  reference by at most 6e-8 (only the order of reductions differs); a collective that averages instead
  of summing moves DDP's parameters by about 2e-2.
* ``bfloat16`` (FSDP2 ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)``, and SimpleFSDP's
  bf16-mp with the same dtypes): ``atol=1e-3``, ``rtol=0``. The distributed run rounds per-rank bf16
  gradients, the reference rounds full-batch ones, so parameters differ by about 1.5e-4 after 3 steps
  (measured on gloo and on the emulator, 1.47e-4 for both); 1e-3 leaves about 7x headroom while a wrong
  gradient scale (about 1e-2 per step at lr 0.1) still fails.
"""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.verdict.failures import ConformanceFailure, NumericFailure
from neuron_conformance.conformance.verdict.oracle import Verdict, judge

TOLERANCES: dict[str, tuple[float, float]] = {"float32": (1e-5, 1.3e-6), "bfloat16": (1e-3, 0.0)}
"""``dtype -> (atol, rtol)`` for comparing parameters after the run (sources in the module docstring)."""


class ScenarioError(RuntimeError):
    """A rank raised an exception other than ``NotImplementedError``, or died without reporting one."""


def raise_for_status(scenario_id: str, result, timeout_s: float) -> None:
    """Raise for a run that did not finish; return for ``status == "ok"``.

    Raises:
        pytest.fail.Exception: ``status == "timeout"``; the message starts with ``Timeout`` so the
            plugin records the failure class ``timeout``.
        NotImplementedError: the first failing rank raised ``NotImplementedError`` (class
            ``unsupported``), with that rank's message and traceback.
        ScenarioError: any other rank failure (class ``error``).
    """
    if result.status == "ok":
        return
    if result.status == "timeout":
        pytest.fail(
            f"Timeout: scenario {scenario_id} ran past its {timeout_s:.0f} s limit; all {len(result.exit_codes)} "
            f"ranks were killed (exit codes {result.exit_codes})",
            pytrace=False,
        )
    first = result.failures[0] if result.failures else None
    if first is not None and first.type == "NotImplementedError":
        raise NotImplementedError(f"scenario {scenario_id}, rank {first.rank}: {first.message}\n{first.traceback}")
    raise ScenarioError(f"scenario {scenario_id} failed: {result.describe()}")


def merge_rank_params(results: list[dict]) -> dict[str, torch.Tensor]:
    """Union of the ranks' ``params``; a name returned by several ranks must be bitwise equal on all.

    Raises:
        NumericFailure: two ranks return different values for one parameter (replicas out of sync).
        ValueError: a rank returned no ``params`` dict.
    """
    merged: dict[str, torch.Tensor] = {}
    owner: dict[str, int] = {}
    for rank, result in enumerate(results):
        if not isinstance(result, dict) or not isinstance(result.get("params"), dict):
            raise ValueError(f"rank {rank} returned {type(result).__name__} without a 'params' dict")
        for name, value in result["params"].items():
            if name in merged and not torch.equal(merged[name], value):
                diff = (merged[name].float() - value.float()).abs().max().item()
                raise NumericFailure(
                    f"ranks {owner[name]} and {rank} disagree on parameter {name!r} (max abs diff {diff:.3g}): "
                    "replicas are out of sync"
                )
            merged.setdefault(name, value)
            owner.setdefault(name, rank)
    return merged


def judge_scenario(scenario, results: list[dict], reference: dict) -> dict:
    """Compare the ranks' parameters with the reference; return the record fields of the worst parameter.

    Args:
        scenario: a :class:`~neuron_conformance.model_zoo.distributed.scenarios.Scenario` (its ``dtype`` picks the tolerance).
        results: per rank, the dict the scenario function returned.
        reference: :func:`neuron_conformance.model_zoo.distributed.reference.reference_run`'s result.

    Returns:
        ``rule``, ``max_abs``, ``max_rel``, ``max_ulp``, ``atol``, ``rtol``, ``samples`` (parameters
        compared) and ``sample`` (index of the deciding parameter, in the reference's order).

    Raises:
        NumericFailure: a parameter is outside the tolerance, replicas disagree, or a DTensor
            consistency check in ``checks`` is not exactly 0.
        MetadataFailure / NonFiniteFailure: as :func:`neuron_conformance.conformance.verdict.oracle.judge` decides.
        ConformanceFailure: parameters are missing or unexpected (class ``error``).
    """
    atol, rtol = TOLERANCES[scenario.dtype]
    merged = merge_rank_params(results)
    expected = reference["params"]
    missing = sorted(set(expected) - set(merged))
    extra = sorted(set(merged) - set(expected))
    if missing or extra:
        raise ConformanceFailure(f"{scenario.id}: parameters missing {missing[:5]} / unexpected {extra[:5]}")
    for rank, result in enumerate(results):
        for name, value in (result.get("checks") or {}).items():
            if value != 0:
                raise NumericFailure(f"{scenario.id}: rank {rank} consistency check {name!r} is off by {value:.3g}")
    worst: tuple[float, int, str, Verdict] | None = None
    for index, (name, ref) in enumerate(expected.items()):
        verdict = judge(merged[name], ref, atol=atol, rtol=rtol)
        if not verdict.passed:
            fields = verdict.record_fields()
            fields.update(samples=len(expected), sample=index)
            exc = _failure_for(
                verdict,
                f"{scenario.id}: parameter {name!r} after the run differs from the "
                f"single-process CPU reference: {verdict.message}",
            )
            exc.record_fields = fields
            raise exc
        score = verdict.max_abs or 0.0
        if worst is None or score > worst[0]:
            worst = (score, index, name, verdict)
    assert worst is not None, "the reference has no parameters"
    fields = worst[3].record_fields()
    fields.update(samples=len(expected), sample=worst[1])
    return fields


def _failure_for(verdict: Verdict, message: str) -> ConformanceFailure:
    try:
        verdict.raise_if_failed()
    except ConformanceFailure as exc:
        return type(exc)(message)
    return NumericFailure(message)  # pragma: no cover - only called for failed verdicts
