"""The training-runtime checks' own rules, on CPU without the emulated device: GradScaler's documented
scale schedule, the no-reference rule of :func:`neuron_conformance.model_zoo.runtime_case.compare_runs`, exact ``#`` values,
and the catalogue's test identities."""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.verdict.failures import NoReference
from neuron_conformance.model_zoo.runtime_case import compare_runs
from neuron_conformance.model_zoo.runtime_checks import CI, catalogue
from neuron_conformance.model_zoo.train_loop import scaler_rule
from neuron_conformance.model_zoo.train_runtime import expected_scales


def test_scaler_rule_halves_on_overflow_and_doubles_after_the_interval():
    scales, skipped = scaler_rule((None, None, 1.0, None, 1.0), init=8.0, interval=2)
    assert scales == [8.0, 16.0, 8.0, 8.0, 4.0]
    assert skipped == [False, False, True, False, True]
    assert expected_scales((0, 1, 0, 0), init=4.0) == [4.0, 2.0, 2.0, 4.0]


def _measure(values: dict):
    def measure(device, dtype, fp64):
        return {k: (v(device) if callable(v) else v).clone() for k, v in values.items()}

    return measure


def test_exact_values_must_match_and_float_values_get_the_tolerance():
    same = compare_runs("probe", torch.float32, "cpu", _measure({"x": torch.ones(3), "#n": torch.tensor([2])}))
    assert same.passed and same.compared == 2
    calls = iter(range(10))
    drift = compare_runs(
        "probe", torch.float32, "cpu", _measure({"#n": lambda d: torch.tensor([0 if next(calls) == 0 else 1])})
    )
    # the device run comes first: 0 against CPU's 1, compared exactly
    assert not drift.passed and drift.failure_class == "numeric"


def test_an_irreproducible_cpu_reference_is_no_reference():
    draws = iter(range(10))
    with pytest.raises(NoReference, match="not reproducible"):
        compare_runs("probe", torch.float32, "cpu", _measure({"x": lambda d: torch.full((2,), float(next(draws)))}))


def test_a_cpu_result_off_its_baseline_is_no_reference():
    # the CPU kernel gives 2 where the baseline and float64 give 1: no reference (float64 arbitrates, so a
    # CPU result closer to float64 than its baseline would pass)
    def off(device, dtype, fp64):
        return {"x": torch.ones(4, dtype=torch.float64) if fp64 else torch.full((4,), 2.0)}

    with pytest.raises(NoReference, match="baseline"):
        compare_runs("probe", torch.float32, "cpu", off, cpu_baseline=_measure({"x": torch.ones(4)}))


def test_catalogue_ids_are_unique_and_the_ci_subset_exists():
    checks = catalogue()
    names = [c.name for c in checks]
    assert len(names) == len(set(names))
    assert CI <= set(names)
    assert {"adamw-fused", "kernel-_fused_adamw_", "grad_scaler-fused", "dataloader-pin"} <= set(names)
    assert next(c for c in checks if c.name == "dataloader-pin").capability == "pinned_memory"
