"""DTensor op sweep on the device under test (:mod:`neuron_conformance.model_zoo.distributed.dtensor_ops`): one test per
OpInfo x mesh, id ``<op>-dtensor-<mesh>``, records ``suite="distributed"``, ``kind="op"``, ``op`` = OpInfo name,
``variant="dtensor-1d"`` (world 2) or ``"dtensor-2d"`` (world 4, mesh 2 x 2).

The selected ops are cut into batches of :data:`~neuron_conformance.model_zoo.distributed.dtensor_ops.OPS_PER_WORLD`;
each batch's ranks are spawned once per mesh (a module-level cache; the tests of one batch and mesh share an
xdist group, so batches run on different workers) and sweep the batch's ops; each test then judges its op's
rows against the single-process CPU result. A launch killed by its time limit fails its own batch's ops only.
Ops:
``$CONFORMANCE_DTENSOR_OPS`` (unset: the default list; ``all``: every ``op_db`` entry; or a comma-separated list).
"""

from __future__ import annotations

import functools
import os

import pytest

from neuron_conformance.conformance.pytest_plugin.options import get_option
from neuron_conformance.conformance.verdict.failures import ConformanceFailure, NumericFailure
from neuron_conformance.model_zoo.distributed import check, dtensor_expected, dtensor_ops
from neuron_conformance.model_zoo.distributed.launch import run_world
from neuron_conformance.model_zoo.distributed.test_distributed import TIMEOUT_MARGIN_S, scenario_timeout

MESHES = {"1d": [2], "2d": [2, 2]}
"""Mesh id -> mesh shape; the world size is the product."""


def _names() -> list[str]:
    raw = os.environ.get(dtensor_ops.ENV_OPS, "").strip()
    if raw == "all":
        return dtensor_ops.selected_ops("all")
    return [n.strip() for n in raw.split(",") if n.strip()] if raw else list(dtensor_ops.DEFAULT_OPS)


def _world(shape) -> int:
    out = 1
    for s in shape:
        out *= s
    return out


def _batch_of() -> dict[str, int]:
    """OpInfo name -> index of its launch batch (:func:`dtensor_ops.batches` of the selected names); computed
    once per value of ``$CONFORMANCE_DTENSOR_OPS``, since every test of the sweep asks."""
    return _batch_index(os.environ.get(dtensor_ops.ENV_OPS, "").strip())


@functools.lru_cache(maxsize=4)
def _batch_index(_raw: str) -> dict[str, int]:
    return {op: b for b, ops in enumerate(dtensor_ops.batches(_names())) for op in ops}


def pytest_generate_tests(metafunc):
    if {"dtensor_op", "dtensor_mesh"} <= set(metafunc.fixturenames):
        batch = _batch_of()
        params = [
            pytest.param(
                op,
                mesh,
                id=f"{op}-dtensor-{mesh}",
                marks=[
                    pytest.mark.xdist_group(f"dtensor-{mesh}-{batch[op]}"),
                    pytest.mark.conformance(
                        op=op, variant=f"dtensor-{mesh}", dtype="float32", suite="distributed", kind="op"
                    ),
                    pytest.mark.capability("distributed"),
                    pytest.mark.timeout(4 * scenario_timeout(_world(shape)) + TIMEOUT_MARGIN_S),
                ],
            )
            for mesh, shape in MESHES.items()
            for op in _names()
        ]
        metafunc.parametrize(("dtensor_op", "dtensor_mesh"), params)


_RUNS: dict = {}


def _sweep(mesh: str, op: str, profile, request):
    """The launch result and time limit of the batch holding ``op`` on ``mesh`` (launched at its first test)."""
    index = _batch_of()[op]
    key = (mesh, index)
    if key not in _RUNS:
        names = dtensor_ops.selected_ops(",".join(_names()))  # validated: a bad name is one error naming it
        shape = MESHES[mesh]
        backend_module = None if profile.emulated else get_option(request.config, "backend_module")
        env = {"CONFORMANCE_EMULATOR_MODE": profile.emulator_mode} if profile.emulated and profile.emulator_mode else {}
        timeout_s = 4 * scenario_timeout(_world(shape))
        ops = dtensor_ops.batches(names)[index]
        _RUNS[key] = (
            run_world(
                f"{dtensor_ops.__name__}:sweep",
                _world(shape),
                device_type=profile.type,
                backend_module=backend_module,
                dist_backend=profile.dist_backend,
                timeout_s=timeout_s,
                env=env,
                kwargs={"ops": ops, "mesh_shape": shape},
            ),
            timeout_s,
        )
    return _RUNS[key]


def test_dtensor_op(dtensor_op, dtensor_mesh, device_profile, conformance_record, request):
    conformance_record.update(
        suite="distributed", kind="op", op=dtensor_op, variant=f"dtensor-{dtensor_mesh}", dtype="float32"
    )
    if device_profile.type != "cpu" and not device_profile.emulated:
        module = getattr(__import__("torch"), device_profile.type, None)
        count = module.device_count() if module is not None and hasattr(module, "device_count") else 0
        if count < _world(MESHES[dtensor_mesh]):
            pytest.skip(f"dtensor-{dtensor_mesh} needs {_world(MESHES[dtensor_mesh])} {device_profile.type} devices")
    result, timeout_s = _sweep(dtensor_mesh, dtensor_op, device_profile, request)
    conformance_record.update(
        wall_s=round(result.wall_s, 2),
        world_size=_world(MESHES[dtensor_mesh]),
        dist_backend=result.dist_backend,
        rank_peak_rss_mib=result.peak_rss_mib,
    )
    check.raise_for_status(f"dtensor-{dtensor_mesh}", result, timeout_s)
    verdict = dtensor_ops.judge_op(
        dtensor_op, dtensor_mesh, result.results[0][dtensor_op], dtensor_ops.reference(dtensor_op)
    )
    conformance_record.update(samples=verdict["combinations"], metrics=verdict)
    if verdict["combinations"] == 0:
        pytest.skip(f"{dtensor_op}: no float32 sample CPU can run")
    if verdict["outcome"] == "expected":
        pytest.xfail(f"{dtensor_op} dtensor-{dtensor_mesh}: {verdict['expected_reason']} ({verdict['first']})")
    if verdict["outcome"] == "unexpected-pass":
        pytest.fail(
            f"{dtensor_op} dtensor-{dtensor_mesh} is listed in {dtensor_expected.DEFAULT_PATH.name} "
            f"({verdict['expected_reason']}) but passed: remove the entry",
            pytrace=False,
        )
    if verdict["outcome"] == "unexpected":
        cls = ConformanceFailure if ": raised " in verdict["unexplained"] else NumericFailure
        raise cls(
            f"{dtensor_op} dtensor-{dtensor_mesh} is listed in {dtensor_expected.DEFAULT_PATH.name} "
            f"({verdict['expected_reason']}) but failed otherwise: {verdict['unexplained']}"
        )
    if verdict["outcome"] == "failed":
        cls = ConformanceFailure if verdict["raised"] == verdict["failed"] else NumericFailure  # error / numeric
        raise cls(
            f"{dtensor_op} dtensor-{dtensor_mesh}: {verdict['failed']} of {verdict['combinations']} "
            f"placement combinations differ from CPU; first: {verdict['first']}"
        )
