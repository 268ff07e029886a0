"""The ``neuron_gloo`` collective backend of the emulated device (emulator/distributed.py)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from neuron_conformance import emulator
from neuron_conformance.emulator import distributed as nd
from neuron_conformance.model_zoo.distributed.launch import run_world
from neuron_conformance.model_zoo.distributed.probes import expected_collectives


@pytest.fixture(scope="module", autouse=True)
def _installed():
    emulator.install()
    nd.register()


def test_register_is_idempotent_and_sets_neuron_default():
    assert nd.register() == "neuron_gloo"
    assert nd.register() == "neuron_gloo"
    assert dist.get_default_backend_for_device("neuron") == "neuron_gloo"
    assert dist.Backend.backend_list.count("neuron_gloo") == 1


def test_register_keeps_cpu_default_but_carries_cpu_tensors():
    # "cpu" in devices= must not take CPU's default away from gloo, yet a neuron_gloo group carries CPU tensors
    assert dist.get_default_backend_for_device("cpu") == "gloo"
    assert set(dist.Backend.backend_capability["neuron_gloo"]) == {"neuron", "cpu"}


def test_cpu_alias_is_zero_copy_with_same_geometry():
    base = torch.arange(12, dtype=torch.float32, device="neuron").reshape(3, 4)
    view = base.t()[1:]
    alias = nd.cpu_alias(view)
    assert alias.device.type == "cpu"
    assert (alias.size(), alias.stride(), alias.storage_offset()) == (view.size(), view.stride(), view.storage_offset())
    assert alias.data_ptr() == view.data_ptr()
    alias.fill_(-1.0)  # a write through the alias is seen by the neuron tensor
    assert torch.equal(base.cpu()[:, 1:], torch.full((3, 3), -1.0))
    cpu = torch.ones(2)
    assert nd.cpu_alias(cpu) is cpu


def test_cpu_alias_rejects_bad_input():
    with pytest.raises(TypeError, match="expected a tensor"):
        nd.cpu_alias([1.0])
    with pytest.raises(ValueError, match="meta"):
        nd.cpu_alias(torch.empty(2, device="meta"))


def test_set_fault_validates_and_env_var_is_read(monkeypatch):
    with pytest.raises(ValueError, match="unknown fault 'bogus'"):
        nd.set_fault("bogus")
    monkeypatch.setenv(nd.ENV_FAULT, "allreduce_average")
    assert nd.active_fault() == "allreduce_average"
    monkeypatch.setenv(nd.ENV_FAULT, "nope")
    with pytest.raises(ValueError, match="CONFORMANCE_DIST_FAULT='nope'"):
        nd.active_fault()
    monkeypatch.delenv(nd.ENV_FAULT)
    nd.set_fault("allreduce_average")
    try:
        assert nd.active_fault() == "allreduce_average"
    finally:
        nd.set_fault(None)
    assert nd.active_fault() is None


def test_register_leaves_storage_resize_to_the_emulator_install():
    # FSDP2's free/re-allocate of neuron storages is the emulator's storage guard (installed by install()),
    # not a patch made by registering the collective backend.
    from neuron_conformance.emulator import storage as emu_storage

    assert torch.UntypedStorage.resize_ is emu_storage._guarded_storage_resize
    assert not hasattr(nd, "install_storage_resize_shim")
    t = torch.ones(4, device="neuron")
    st = t.untyped_storage()
    st.resize_(0)  # FSDP2's free_storage: really freed
    assert st.nbytes() == 0
    st.resize_(16)  # FSDP2's alloc_storage: back to the original size
    t.fill_(3.0)
    assert torch.equal(t.cpu(), torch.full((4,), 3.0))
    cpu = torch.ones(4).untyped_storage()
    cpu.resize_(32)  # CPU storages keep torch's behaviour
    assert cpu.nbytes() == 32


def _check_probe(result, world_size):
    assert result.status == "ok", result.describe()
    expected = expected_collectives(world_size)
    for rank, got in enumerate(result.results):
        assert set(got) == set(expected[rank])
        for name, value in expected[rank].items():
            assert torch.equal(got[name]["value"], value), (rank, name, got[name]["value"], value)
    return result


def test_every_collective_on_neuron_tensors_is_exact_and_in_place():
    result = _check_probe(
        run_world(
            "neuron_conformance.model_zoo.distributed.probes:collectives", 2, device_type="neuron", timeout_s=120
        ),
        2,
    )
    assert result.dist_backend == "neuron_gloo"
    for got in result.results:
        neuron_ops = {k: v for k, v in got.items() if k != "all_reduce_cpu_tensor"}
        assert all(v["device"] == "neuron" for v in neuron_ops.values())
        assert all(v["in_place"] for v in got.values())
        assert got["all_reduce_cpu_tensor"]["device"] == "cpu"


def test_fault_makes_all_reduce_average():
    result = run_world(
        "neuron_conformance.model_zoo.distributed.probes:collectives",
        2,
        device_type="neuron",
        timeout_s=120,
        env={nd.ENV_FAULT: "allreduce_average"},
    )
    assert result.status == "ok", result.describe()
    expected = expected_collectives(2)
    got = result.results[0]
    assert torch.equal(got["all_reduce"]["value"], expected[0]["all_reduce"] / 2)
    assert not torch.equal(got["all_reduce"]["value"], expected[0]["all_reduce"])
    assert torch.equal(got["all_gather"]["value"], expected[0]["all_gather"])  # only all_reduce is broken


def test_group_created_without_backend_uses_neuron_gloo_and_still_carries_cpu_tensors():
    import datetime

    server = dist.TCPStore("127.0.0.1", 0, 2, True, timeout=datetime.timedelta(seconds=60), wait_for_workers=False)
    result = run_world(
        "neuron_conformance.model_zoo.distributed.probes:default_group_collectives",
        2,
        device_type="neuron",
        timeout_s=120,
        kwargs={"port": server.port},
    )
    assert result.status == "ok", result.describe()
    total = expected_collectives(2)[0]["all_reduce"]
    for got in result.results:
        assert got["backend"] == "neuron_gloo"
        assert torch.equal(got["device"], total)
        assert torch.equal(got["cpu"], total)
