"""The spawning launcher (model_zoo/distributed/launch.py): results, failures, timeouts, validation."""

from __future__ import annotations

import pytest

from neuron_conformance.model_zoo.distributed import launch
from neuron_conformance.model_zoo.distributed.launch import run_world


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(target="no_colon", world_size=2), "package.module:function"),
        (dict(target="a:b", world_size=0), "world_size must be an int >= 1"),
        (dict(target="a:b", world_size=2, timeout_s=0), "timeout_s must be > 0"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        run_world(device_type="cpu", **kwargs)


def test_hanging_scenario_is_killed_and_reported_as_timeout(tmp_path):
    result = run_world(
        "neuron_conformance.model_zoo.distributed.probes:hang", 2, device_type="cpu", timeout_s=8, workdir=tmp_path
    )
    assert result.status == "timeout"
    assert result.wall_s < 30
    assert all(code is not None and code < 0 for code in result.exit_codes)  # killed by a signal
    assert result.results == [None, None]


def test_rank_failure_is_reported_and_peers_are_killed(tmp_path):
    result = run_world(
        "neuron_conformance.model_zoo.distributed.probes:fail_on_rank",
        2,
        device_type="cpu",
        timeout_s=120,
        pg_timeout_s=100,
        kwargs={"failing_rank": 1},
        workdir=tmp_path,
    )
    assert result.status == "error"
    assert result.wall_s < 60  # the waiting peer was killed, not left until the process-group timeout
    assert result.failures[0].rank == 1  # the first rank that failed comes first; its peer may fail after it
    assert result.failures[0].type == "ValueError"
    assert "rank 1 failed on purpose" in result.failures[0].message
    assert "rank 1 raised ValueError" in result.describe()


def test_unknown_target_is_an_error_not_a_hang():
    result = run_world(
        "neuron_conformance.model_zoo.distributed.probes:no_such_function", 1, device_type="cpu", timeout_s=60
    )
    assert result.status == "error"
    assert result.failures[0].type == "AttributeError"


def test_choose_dist_backend_prefers_torch_default_then_fallback():
    assert launch.choose_dist_backend("cpu", None) == "gloo"
    assert launch.choose_dist_backend("no_such_device_type", "mybackend") == "mybackend"
    with pytest.raises(RuntimeError, match="no collective backend for device type 'no_such_device_type'"):
        launch.choose_dist_backend("no_such_device_type", None)
