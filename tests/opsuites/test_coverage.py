"""aten coverage (neuron_conformance.conformance.results.coverage): counting on the device, merging worker files."""

from __future__ import annotations

import json

import torch

from neuron_conformance.conformance.results import coverage


def test_mode_counts_only_ops_on_the_device_type():
    counts = {}
    with coverage.CoverageMode("meta", counts):
        a = torch.ones(3, device="meta")
        (a + a).relu()
        torch.ones(2) + 1  # CPU only: not counted
    assert counts.get("aten::add.Tensor") == 1
    assert counts.get("aten::relu") == 1
    assert "aten::ones" in counts or "aten::full" in counts or "aten::empty.memory_format" in counts
    assert not any(k == "aten::add.Scalar" for k in counts)


def test_merge_sums_workers_and_lists_core_gaps(tmp_path):
    coverage.write_worker(tmp_path, "gw0", {"aten::add.Tensor": 2, "aten::relu": 1})
    coverage.write_worker(tmp_path, "gw1", {"aten::add.Tensor": 3})
    data = coverage.write_merged(tmp_path)
    assert data["executed"] == {"aten::add.Tensor": 5, "aten::relu": 1}
    assert data["registered_total"] == len(coverage.registered_overloads()) > 1000
    assert data["core_total"] == len(coverage.core_overloads()) > 100
    assert "aten::add.Tensor" in data["core_executed"]
    assert "aten::mm" in data["core_missing"]
    assert set(data["core_executed"]) | set(data["core_missing"]) == set(coverage.core_overloads())
    assert json.loads((tmp_path / "coverage.json").read_text()) == data


def test_clear_removes_old_worker_files(tmp_path):
    coverage.write_worker(tmp_path, "gw0", {"aten::relu": 1})
    coverage.clear(tmp_path)
    assert coverage.merge(tmp_path)["executed"] == {}


def test_mode_sees_device_tensors_inside_lists_and_results():
    counts = {}
    with coverage.CoverageMode("meta", counts):
        parts = [torch.ones(2, device="meta"), torch.ones(2, device="meta")]
        torch.cat(parts)
        torch.ones(4, device="meta").split(2)
    assert counts.get("aten::cat") == 1
    assert counts.get("aten::split.Tensor") == 1


def test_emulator_counter_counts_overloads_run_on_the_device():
    import neuron_conformance.emulator.backend as backend

    counts = {}
    x = torch.ones(3)
    with backend.CONFORMANCE_COUNT_OPS(counts):
        a = x.to("neuron")
        (a + a).relu()
        torch.ones(2) + 1  # CPU only: not counted
        a.untyped_storage()  # no aten op
    assert counts.get("aten::add.Tensor") == 1
    assert counts.get("aten::relu") == 1
    assert counts.get("aten::_to_copy") == 1  # a required kernel, registered outside the boxed fallback
    assert "aten::add.Scalar" not in counts
    before = dict(counts)
    (a * 2).sum()  # outside the block: not counted
    assert counts == before


def test_trace_uses_the_backend_counter_when_the_profile_names_one():
    from neuron_conformance.conformance.backend.device import DeviceProfile
    from neuron_conformance.emulator import opcount

    counter = "neuron_conformance.emulator.backend:CONFORMANCE_COUNT_OPS"  # the emulated device's declaration
    with_counter = DeviceProfile(type="neuron", backend="x", backend_version="1", op_counter=counter)
    without = DeviceProfile(type="meta", backend="x", backend_version="1")
    assert not coverage.uses_dispatch_mode(with_counter) and coverage.uses_dispatch_mode(without)
    counts = {}
    with coverage.trace(with_counter, counts):
        from neuron_conformance.emulator import fallback

        assert fallback.OP_COUNTS is counts
    assert fallback.OP_COUNTS is None and opcount.count_ops is not None
    assert isinstance(coverage.trace(without, {}), coverage.CoverageMode)


def test_trace_names_a_broken_counter():
    import pytest

    from neuron_conformance.conformance.backend.device import DeviceProfile

    broken = DeviceProfile(type="neuron", backend="x", backend_version="1", op_counter="no_such_module_xyz:count")
    with pytest.raises(RuntimeError, match="no_such_module_xyz:count"):
        coverage.trace(broken, {})


def test_out_variants_map_to_their_functional_overload():
    m = coverage.functional_of_out()
    assert m["aten::add.out"] == "aten::add.Tensor"
    assert m["aten::sum.IntList_out"] == "aten::sum.dim_IntList"
    assert m["aten::_log_softmax.out"] == "aten::_log_softmax"
    assert "aten::add_.Tensor" not in m.values()  # in-place overloads are not functional


def test_core_op_counts_as_executed_through_its_out_kernel(tmp_path):
    coverage.write_worker(tmp_path, "gw0", {"aten::add.out": 4, "aten::relu": 1})
    data = coverage.merge(tmp_path)
    assert "aten::add.Tensor" in data["core_executed"] and "aten::add.Tensor" in data["core_via_out"]
    assert "aten::relu" in data["core_executed"] and "aten::relu" not in data["core_via_out"]
    assert "aten::add.Tensor" not in data["core_missing"]
    assert data["executed"] == {"aten::add.out": 4, "aten::relu": 1}


def test_core_ops_run_above_a_backend_are_not_called_missing(tmp_path):
    assert coverage.runs_above_backend("aten::expand", "PrivateUse1")
    assert not coverage.runs_above_backend("aten::add.Tensor", "CPU")  # CPU has its own kernel
    coverage.write_worker(tmp_path / "backend", "gw0", {"aten::as_strided": 3}, "PrivateUse1")
    by_backend = coverage.merge(tmp_path / "backend")
    assert "aten::expand" in by_backend["core_composite"] and "aten::expand" not in by_backend["core_missing"]
    # a CPU kernel and no composite one (aten::mm has a CompositeExplicitAutogradNonFunctional kernel, the
    # structured op's generic one, so it runs above a backend without its own mm: not an example)
    assert not coverage.runs_above_backend("aten::_fft_r2c", "PrivateUse1")
    assert "aten::_fft_r2c" in by_backend["core_missing"] and by_backend["counted_by"].startswith("backend")
    coverage.write_worker(tmp_path / "mode", "gw0", {"aten::as_strided": 3})
    by_mode = coverage.merge(tmp_path / "mode")
    assert by_mode["core_composite"] == [] and "aten::expand" in by_mode["core_missing"]
    assert by_mode["counted_by"] == "dispatch mode"


def test_backend_key_of_a_profile():
    import neuron_conformance.emulator.backend  # noqa: F401 - registers the neuron PrivateUse1 backend
    from neuron_conformance.conformance.backend.device import DeviceProfile

    counter = "neuron_conformance.emulator.backend:CONFORMANCE_COUNT_OPS"
    emulated = DeviceProfile(type="neuron", backend="x", backend_version="1", op_counter=counter)
    assert coverage.backend_key(emulated) == "PrivateUse1"
    assert coverage.backend_key(DeviceProfile(type="cuda", backend="x", backend_version="1")) is None
