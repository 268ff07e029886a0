"""The training-runtime checks' model and the three-run comparison they share.

Every training-runtime check (:mod:`neuron_conformance.model_zoo.train_runtime`, :mod:`neuron_conformance.model_zoo.train_loop`) runs one
measurement three times: on the device under test in the dtype under test (*actual*), on CPU in that
dtype (*expected*) and on CPU in float64 from the weights and inputs rounded to that dtype
(*reference64*), exactly as the model checks do (:mod:`neuron_conformance.model_zoo.case`). Each measured tensor then goes
through :func:`neuron_conformance.model_zoo.compare.judge_model_tensor`: the dtype's tolerance, and where that fails the
fp64 arbitration of :func:`neuron_conformance.conformance.verdict.oracle.judge`, which accepts the device when its error against
float64 is within ``k`` times the CPU's own error against float64. Errors that compound over several
optimizer steps are therefore measured, not guessed: the CPU run's distance from the float64 run is
the noise floor the device is held to. Discrete results (skipped steps, loss scales, growth trackers,
hook call counts) are compared exactly.

The model is a small MLP built from :data:`MODEL_CONFIG` (no download, no transformers).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from neuron_conformance.conformance.verdict.failures import NoReference
from neuron_conformance.conformance.verdict.oracle import Verdict, judge
from neuron_conformance.model_zoo.compare import judge_model_tensor
from neuron_conformance.model_zoo.measure import to_cpu
from neuron_conformance.model_zoo.results import CheckResult, combine

#: The record ``op`` of every training-runtime check.
MODEL_ID = "train_runtime"

#: Layer sizes of the MLP and the batch size of its seeded sample batch.
MODEL_CONFIG = {"inputs": 16, "hidden": 32, "outputs": 8, "batch": 12}

#: A measurement: ``measure(device, dtype, fp64) -> {name: CPU tensor}``; names starting with ``#`` are
#: compared exactly (counts, flags, loss scales), the others through the model tolerance.
Measure = Callable[[torch.device | str, torch.dtype, bool], dict[str, torch.Tensor]]


def build_mlp(
    dtype: torch.dtype, device: torch.device | str, *, fp64: bool = False, seed: int = 0
) -> torch.nn.Sequential:
    """``Linear -> LayerNorm -> GELU -> Linear`` from :data:`MODEL_CONFIG`, seeded, in ``dtype`` on ``device``.

    With ``fp64`` the weights are made in ``dtype`` and held in float64 on CPU (the reference run).
    """
    c = MODEL_CONFIG
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
        model = torch.nn.Sequential(
            torch.nn.Linear(c["inputs"], c["hidden"]),
            torch.nn.LayerNorm(c["hidden"]),
            torch.nn.GELU(),
            torch.nn.Linear(c["hidden"], c["outputs"]),
        )
    model = model.to(dtype)
    if fp64:
        return model.to(torch.float64)
    return model.to(device)


def sample_batch(
    dtype: torch.dtype, device: torch.device | str, *, fp64: bool = False, seed: int = 0, rows: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded ``(inputs (rows, inputs), target (rows, outputs))``, rounded to ``dtype`` (float64 with ``fp64``)."""
    c = MODEL_CONFIG
    rows = c["batch"] if rows is None else rows
    gen = torch.Generator().manual_seed(1000 + seed)
    x = torch.randn(rows, c["inputs"], generator=gen).to(dtype)
    y = torch.randn(rows, c["outputs"], generator=gen).to(dtype)
    if fp64:
        return x.double(), y.double()
    return x.to(device), y.to(device)


def mse(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean squared error of ``model(x)`` against ``y``, accumulated in float32 (float64 for float64 inputs)."""
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    return (model(x).to(acc) - y.to(acc)).square().mean()


def parameters_cpu(model: torch.nn.Module, prefix: str = "param ") -> dict[str, torch.Tensor]:
    """``{prefix + parameter name: detached CPU copy}``."""
    return {prefix + n: to_cpu(p) for n, p in model.named_parameters()}


def compare_runs(
    check: str,
    dtype: torch.dtype,
    device,
    measure: Measure,
    *,
    metrics: dict | None = None,
    param_atol: float = 0.0,
    cpu_baseline: Measure | None = None,
    rule: Callable[[dict[str, torch.Tensor]], str | None] | None = None,
) -> CheckResult:
    """Run ``measure`` on the device, on CPU and in float64; judge every tensor; one :class:`CheckResult`.

    The CPU run is made twice; when the two differ (a CPU kernel reading uninitialised memory: torch
    2.13's ``_fused_sgd_`` in bfloat16/float16 on its vectorised path) there is no reference and
    :class:`neuron_conformance.conformance.verdict.failures.NoReference` is raised (outcome ``no-reference``). With
    ``cpu_baseline`` (another implementation of the same algorithm, e.g. the per-tensor loop for a fused
    optimizer) the CPU result must itself pass against that baseline on CPU, float64 arbitrating; when it
    does not, the CPU kernel is wrong and ``NoReference`` is raised too. ``param_atol`` raises the
    absolute tolerance of values named ``param ...`` to at least that much (an optimizer's drift budget,
    :data:`neuron_conformance.model_zoo.measure.DRIFT_BUDGET`). ``rule(actual)`` holds the device's values to a documented
    rule besides CPU (GradScaler's scale schedule): it returns a failure message, or None. A name the device run lacks (or adds) is a ``metadata`` failure. Names starting with ``#`` are
    compared exactly (:func:`neuron_conformance.conformance.verdict.oracle.judge` with ``exact=True``); a floating one of them is
    judged in float64 so that rounding the value does not hide a difference.
    """
    actual = measure(device, dtype, False)
    expected = measure("cpu", dtype, False)
    unstable = _irreproducible(expected, measure("cpu", dtype, False))
    if unstable:
        raise NoReference(
            f"{MODEL_ID} {check} [{dtype}]: the CPU reference is not reproducible: two CPU runs "
            f"differ in {unstable[:3]} (the CPU kernel reads memory it did not write), so the "
            f"device was not judged"
        )
    ref64 = measure("cpu", dtype, True)
    if cpu_baseline is not None:
        baseline = cpu_baseline("cpu", dtype, False)
        wrong = [
            n
            for n, e in expected.items()
            if not n.startswith("#") and not _judge(n, e, baseline[n], ref64[n], dtype, param_atol).passed
        ]
        if wrong:
            raise NoReference(
                f"{MODEL_ID} {check} [{dtype}]: CPU's own result disagrees with the CPU baseline "
                f"implementation beyond tolerance in {wrong[:3]}, so the CPU kernel is no reference "
                f"and the device was not judged"
            )
    if set(actual) != set(expected):
        only_dev, only_cpu = sorted(set(actual) - set(expected)), sorted(set(expected) - set(actual))
        return CheckResult(
            MODEL_ID,
            check,
            dtype,
            False,
            None,
            "metadata",
            f"measured values differ: only on the device {only_dev[:5]}, only on CPU {only_cpu[:5]}",
            len(expected),
            {"rule": "value-set"},
        )
    verdicts: list[tuple[str, Verdict]] = []
    for name, e in expected.items():
        a = actual[name]
        verdicts.append((name.lstrip("#"), _judge(name, a, e, ref64.get(name), dtype, param_atol)))
    result = combine(MODEL_ID, check, dtype, verdicts, metrics)
    broken = rule(actual) if rule is not None and result.passed else None
    if broken:
        result.passed, result.failure_class, result.message = False, "numeric", broken
    return result


def _judge(
    name: str,
    actual: torch.Tensor,
    expected: torch.Tensor,
    ref64: torch.Tensor | None,
    dtype: torch.dtype,
    param_atol: float,
) -> Verdict:
    if name.startswith("#"):
        return judge(actual, expected, exact=True)
    if expected.dtype == torch.float32 and dtype != torch.float32:  # a float32 loss of a half-precision run
        return judge_model_tensor(actual.to(dtype), expected.to(dtype), ref64)
    return judge_model_tensor(actual, expected, ref64, min_atol=param_atol if name.startswith("param ") else 0.0)


def _irreproducible(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]) -> list[str]:
    """Names whose values differ between two runs of the same CPU measurement (NaN equals NaN)."""
    return [
        n
        for n, a in first.items()
        if n not in second
        or not torch.equal(a.nan_to_num(1.0, 2.0, 3.0), second[n].nan_to_num(1.0, 2.0, 3.0))
        or not torch.equal(a.isnan(), second[n].isnan())
    ]
