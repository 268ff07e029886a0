"""Distributed scenarios on the device under test, each compared with one CPU process doing the same run.

One test per scenario (``scenarios.SCENARIOS``): ``world_size`` ranks are spawned on the device with its
collective backend, train for 3 steps, and the parameters are compared with the reference. Records:
``suite="distributed"``, ``kind="scenario"``, ``op`` = scenario name, ``variant`` = ``fp32`` /
``bf16-mp`` / ``gpipe`` / ``1f1b``.

Time limits: a scenario's ranks are killed after ``$CONFORMANCE_DIST_TIMEOUT`` seconds (default
:data:`DEFAULT_TIMEOUT_S`, doubled for world size 4) and the test fails with class ``timeout``; the
pytest-timeout marker adds :data:`TIMEOUT_MARGIN_S` on top as a safety net for the reference run.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from neuron_conformance.conformance.pytest_plugin.options import get_option
from neuron_conformance.model_zoo.distributed import check
from neuron_conformance.model_zoo.distributed.launch import run_world
from neuron_conformance.model_zoo.distributed.reference import reference_run
from neuron_conformance.model_zoo.distributed.scenarios import SCENARIOS

ENV_TIMEOUT = "CONFORMANCE_DIST_TIMEOUT"
DEFAULT_TIMEOUT_S = 240.0
"""Seconds a world-2 scenario may run (spawn, imports and 3 steps take 5-15 s on 2 idle cores)."""
TIMEOUT_MARGIN_S = 120.0
CI_SCENARIOS = ("ddp-fp32",)
"""Scenarios in the bounded CI subset (marker ``model_zoo_ci``: ``pytest model_zoo -m model_zoo_ci``)."""


def scenario_timeout(world_size: int) -> float:
    """Whole-scenario limit in seconds: ``$CONFORMANCE_DIST_TIMEOUT`` (default 240) times world_size / 2.

    Raises:
        ValueError: the environment variable is not a positive number of seconds.
    """
    raw = os.environ.get(ENV_TIMEOUT, "").strip()
    try:
        base = float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        raise ValueError(f"{ENV_TIMEOUT}={raw!r} is not a number of seconds") from None
    if base <= 0:
        raise ValueError(f"{ENV_TIMEOUT}={raw!r} must be > 0 seconds")
    return base * max(world_size, 2) / 2


def _param(scenario):
    marks = [
        pytest.mark.conformance(
            op=scenario.name, variant=scenario.variant, dtype=scenario.dtype, suite="distributed", kind="scenario"
        ),
        pytest.mark.timeout(scenario_timeout(scenario.world_size) + TIMEOUT_MARGIN_S),
        pytest.mark.capability("distributed"),
    ]
    if scenario.id in CI_SCENARIOS:
        marks.append(pytest.mark.model_zoo_ci)
    return pytest.param(scenario, id=scenario.id, marks=marks)


def _skip_reason(scenario, profile) -> str | None:
    for package in scenario.needs:
        if importlib.util.find_spec(package) is None:
            return f"{scenario.id} needs the {package!r} package"
    if profile.type in ("cpu",) or profile.emulated:
        return None  # any number of ranks can share the CPU or the emulated device
    module = getattr(torch, profile.type, None)
    count = module.device_count() if module is not None and hasattr(module, "device_count") else 0
    if count < scenario.world_size:
        return f"{scenario.id} needs {scenario.world_size} {profile.type} devices, found {count}"
    return None


@pytest.mark.parametrize("scenario", [_param(s) for s in SCENARIOS])
def test_scenario(scenario, device_profile, conformance_record, request):
    conformance_record.update(
        suite="distributed", kind="scenario", op=scenario.name, variant=scenario.variant, dtype=scenario.dtype
    )
    reason = _skip_reason(scenario, device_profile)
    if reason:
        pytest.skip(reason)
    backend_module = None if device_profile.emulated else get_option(request.config, "backend_module")
    env = {}
    if device_profile.emulated and device_profile.emulator_mode:
        env["CONFORMANCE_EMULATOR_MODE"] = device_profile.emulator_mode
    timeout_s = scenario_timeout(scenario.world_size)
    result = run_world(
        scenario.target,
        scenario.world_size,
        device_type=device_profile.type,
        backend_module=backend_module,
        dist_backend=device_profile.dist_backend,
        timeout_s=timeout_s,
        env=env,
        kwargs=scenario.kwargs,
    )
    conformance_record.update(
        wall_s=round(result.wall_s, 2),
        world_size=scenario.world_size,
        dist_backend=result.dist_backend,
        rank_peak_rss_mib=result.peak_rss_mib,
    )
    check.raise_for_status(scenario.id, result, timeout_s)
    try:
        fields = check.judge_scenario(scenario, result.results, reference_run(scenario.reference))
    except AssertionError as exc:
        conformance_record.update(**getattr(exc, "record_fields", {}))
        raise
    conformance_record.update(**fields)
