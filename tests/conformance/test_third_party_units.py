"""Units behind the third-party points (end to end in tests/hostile/test_third_party_points.py): the environment
snapshot, the reason of a failure message, a backend's own refusal as ``unsupported`` in one cause, the suites
``--conformance-ops`` leaves out, a ``pin_memory`` that does not pin, the RNG freeze without an RNG-state API,
and the message for a backend module that registers nothing."""

from __future__ import annotations

import types

import pytest
import torch

from neuron_conformance.conformance.backend import device as device_mod
from neuron_conformance.conformance.backend import probe
from neuron_conformance.conformance.backend.environment import Snapshot, describe
from neuron_conformance.conformance.pytest_plugin import seeding, selection
from neuron_conformance.conformance.results.causes import (
    REASON_LINES,
    backend_refusal,
    group_causes,
    normalize_message,
    reason_line,
)
from neuron_conformance.conformance.verdict.failures import classify_exception

REFUSAL = "Operator '{op}' is not implemented for device nntile (nntile 0.1.0; see docs/ops.md)"


def test_snapshot_puts_back_what_changed_and_keeps_what_it_is_told():
    env = {"PATH": "/bin", "HOME": "/root", "MODE": "a"}
    snap = Snapshot(env)
    env["PYTHONEXECUTABLE"] = "/opt/backend/python"
    env["PATH"] = "/opt/backend/bin:/bin"
    del env["HOME"]
    env["MODE"] = "b"
    assert snap.changed() == ["HOME", "MODE", "PATH", "PYTHONEXECUTABLE"]
    assert snap.environ(keep=("MODE",)) == {"PATH": "/bin", "HOME": "/root", "MODE": "b"}
    assert snap.restore(keep=("MODE",)) == ["HOME", "PATH", "PYTHONEXECUTABLE"]
    assert env == {"PATH": "/bin", "HOME": "/root", "MODE": "b"}
    assert snap.changed(keep=("MODE",)) == []
    assert describe([f"V{i}" for i in range(10)], limit=3) == "V0, V1, V2 and 7 more"


def test_reason_line_follows_a_heading_to_its_reason():
    message = (
        "mojo build failed for logic_ops (/opt/kernels/logic_ops.mojo):\n"
        "  error: PYTHONEXECUTABLE points to another interpreter\n"
        "  note: rebuild with the runtime of this process\n"
    )
    assert reason_line(message) == (
        "mojo build failed for logic_ops (/opt/kernels/logic_ops.mojo): error: PYTHONEXECUTABLE points to another interpreter"
    )
    normalized = normalize_message(message)
    assert normalized.startswith("mojo build failed for logic_ops (<path>): error: PYTHONEXECUTABLE points to")
    assert reason_line("max_abs 0.5 > atol 1e-05\nat index (2, 3)") == "max_abs 0.5 > atol 1e-05"  # no heading
    headings = "".join(f"step {i}:\n" for i in range(REASON_LINES + 2))
    assert reason_line(headings).count("step") == REASON_LINES


def test_backend_refusal_is_unsupported():
    refusal = RuntimeError(REFUSAL.format(op="aten::add.Tensor"))
    assert classify_exception(refusal) == "unsupported"
    assert classify_exception(RuntimeError("Operator 'aten::add' is not supported on the device xla")) == "unsupported"
    assert classify_exception(RuntimeError("mojo build failed for logic_ops")) == "error"
    # the CPU kernels' dtype refusal is another message: it stays as it was classified
    assert classify_exception(RuntimeError("\"addmm_impl_cpu_\" not implemented for 'Half'")) == "error"
    assert backend_refusal("sample 3: " + REFUSAL.format(op="aten::mul.Tensor"))


def _record(i: int, op: str, message: str) -> dict:
    return {
        "nodeid": f"opsuites/test_compare_cpu.py::test_compare_cpu[{op}-float32]",
        "outcome": "failed",
        "failure_class": "unsupported",
        "op": op,
        "dtype": "float32",
        "suite": "compare_cpu",
        "message": f"{op} float32 sample {i}: RuntimeError on the device: {message}",
    }


def test_backend_refusals_are_one_cause_listing_their_aten_ops():
    recs = [_record(i, op, REFUSAL.format(op=f"aten::{op}")) for i, op in enumerate(["neg", "exp", "abs", "sin"])]
    causes = group_causes(recs)
    assert len(causes) == 1
    assert causes[0]["count"] == 4 and causes[0]["aten_op"] is None
    assert causes[0]["aten_ops"] == ["aten::abs", "aten::exp", "aten::neg", "aten::sin"]
    assert "Operator 'aten::<op>' is not implemented for device nntile" in causes[0]["message"]
    # the dispatcher's message still names its aten op: one cause each
    dispatcher = "Could not run 'aten::{op}' with arguments from the 'PrivateUse1' backend."
    causes = group_causes([_record(i, op, dispatcher.format(op=op)) for i, op in enumerate(["neg", "exp"])])
    assert sorted(c["aten_op"] for c in causes) == ["aten::exp", "aten::neg"]
    assert all("aten_ops" not in c for c in causes)


class _Item:
    def __init__(self, suite: str, op: str):
        self.nodeid = f"opsuites/test_{suite}.py::test_x[{op}]"
        self.name = f"test_x[{op}]"
        self._mark = pytest.mark.conformance(op=op, suite=suite).mark

    def get_closest_marker(self, name):
        return self._mark if name == "conformance" else None


def test_ops_line_names_the_suites_left_out_whole():
    keep = [_Item("compare_cpu", "add")]
    drop = [_Item("compare_cpu", "mul"), _Item("device_api", "rng.state"), _Item("streams", "a"), _Item("streams", "b")]
    left_out = selection.suites_left_out(keep, drop)
    assert left_out == {"device_api": 1, "streams": 2}
    assert selection.left_out_line(left_out) == (
        "conformance: --conformance-ops left out the suites with none of the named ops: "
        "device_api (1 test), streams (2 tests)"
    )
    assert selection.left_out_line({}) is None


def test_pin_memory_that_does_not_pin_is_missing(monkeypatch):
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self, *a, **k: self)
    problem = probe._run_one("torch.Tensor.pin_memory", torch.device("cpu"))
    assert problem is not None and "not pinned" in problem
    found = probe.interpret({"allocate": None, "torch.Tensor.pin_memory": problem})
    assert found.api_support["torch.Tensor.pin_memory"] == "missing"
    assert "not pinned" in found.notes["torch.Tensor.pin_memory"]


def test_rng_state_probe_names_the_missing_function(monkeypatch):
    fake = types.SimpleNamespace(get_rng_state=lambda: torch.zeros(1))
    monkeypatch.setattr(torch, "get_device_module", lambda _type=None: fake)
    assert probe._run_one(probe.RNG_STATE, torch.device("cpu")) == "AttributeError: torch.cpu has no set_rng_state"


@pytest.mark.parametrize("module", ["absent", "raises", "works"])
def test_frozen_rng_state_without_a_device_rng_state_api(monkeypatch, module):
    calls = []

    def fails(*_a):
        raise NotImplementedError("no RNG state on this device")

    modules = {
        "absent": types.SimpleNamespace(),
        "raises": types.SimpleNamespace(get_rng_state=fails, set_rng_state=fails),
        "works": types.SimpleNamespace(get_rng_state=lambda: "state", set_rng_state=calls.append),
    }
    monkeypatch.setattr(seeding, "_accelerator_module", lambda: modules[module])
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    with seeding.frozen_rng_state():
        torch.rand(100)
    assert torch.equal(torch.rand(3), expected)  # the CPU's state is put back in every case
    assert calls == (["state"] if module == "works" else [])


def test_backend_module_that_registers_nothing_message(monkeypatch):
    module = types.ModuleType("lazy_backend")
    module.register_device = lambda: None
    module.Config = type("Config", (), {})
    monkeypatch.setattr(device_mod, "_privateuse1_name", lambda: "privateuseone")
    text = device_mod._unregistered("lazy_backend", module, "lazy")
    assert "'lazy_backend' was imported but registered no device" in text
    assert "(lazy_backend.register_device()?)" in text
    monkeypatch.setattr(device_mod, "_privateuse1_name", lambda: "lazygpu")
    assert device_mod._unregistered("lazy_backend", module, "lazy") == (
        "--conformance-backend-module 'lazy_backend' registered the device 'lazygpu', not 'lazy': use "
        "--conformance-device lazygpu"
    )
