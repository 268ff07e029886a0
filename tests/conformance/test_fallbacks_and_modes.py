"""Units of the fallback-aware verdicts and the differential mode runs: the emulator's op tracking and
fallback set, the hook loader, the native-only coverage merge, the report section, mode declarations, the
run plan and the comparison of two modes' records. End-to-end fault tests: tests/faults/test_fallback_faults.py."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

import neuron_conformance.emulator as emu
from neuron_conformance.conformance.backend import fallbacks, modes
from neuron_conformance.conformance.results import coverage
from neuron_conformance.emulator import optracking
from neuron_conformance.reports import fallback as report_fallback


@pytest.fixture
def fallback_set():
    """Install the emulator; restore the environment's fallback set (empty in the tests) afterwards."""
    emu.install()
    yield optracking.set_fallback_ops
    optracking.set_fallback_ops("")
    optracking.clear_op_tracking()


def test_fallback_set_entries_name_ops_or_overloads():
    overloads, ops = optracking.parse_fallback_set(" aten::add.Tensor, cumsum ,")
    assert overloads == {"aten::add.Tensor"} and ops == {"aten::cumsum"}
    for bad in ("aten::no_such_op", "aten::add.NoSuchOverload", "aten::1x"):
        with pytest.raises(ValueError, match="CONFORMANCE_EMULATOR_FALLBACK: .* is not an aten op"):
            optracking.parse_fallback_set(bad)


def test_emulator_tracks_native_and_fallback_ops(fallback_set):
    assert fallback_set("aten::cumsum") == ["aten::cumsum"]
    x = torch.arange(6.0, device="neuron")
    optracking.clear_op_tracking()
    y = torch.cumsum(x, 0) + x
    assert y.cpu().tolist() == torch.cumsum(torch.arange(6.0), 0).add(torch.arange(6.0)).tolist()
    fell = optracking.get_fallback_ops()
    assert fell and all(n.startswith("aten::cumsum") for n in fell)
    assert set(fell) < set(optracking.get_executed_ops())
    assert any(n.startswith("aten::add") for n in optracking.get_executed_ops())
    optracking.clear_op_tracking()
    fallback_set("")
    torch.cumsum(x, 0)
    assert optracking.get_fallback_ops() == [] and optracking.get_executed_ops()


def test_tracking_hook_is_loaded_from_a_module_or_a_dict(monkeypatch):
    tracker = fallbacks.load("neuron_conformance.emulator:optracking")
    assert tracker.fallback is optracking.get_fallback_ops
    fake = SimpleNamespace(CONFORMANCE_OP_TRACKING={"clear_op_tracking": list, "get_executed_ops": list})
    monkeypatch.setitem(__import__("sys").modules, "fake_tracking_backend", fake)
    with pytest.raises(
        RuntimeError, match="'fake_tracking_backend:CONFORMANCE_OP_TRACKING' has no callable get_fallback_ops"
    ):
        fallbacks.load("fake_tracking_backend:CONFORMANCE_OP_TRACKING")


def test_coverage_counts_native_execution_only(tmp_path):
    seen = fallbacks.Gathered(native={"aten::add.Tensor", "aten::mm"}, fallback={"aten::cumsum", "aten::mm"})
    coverage.write_worker(
        tmp_path,
        "gw0",
        {"aten::add.Tensor": 3, "aten::cumsum": 2, "aten::mm": 1},
        "PrivateUse1",
        suites={"compare_cpu": ["aten::add.Tensor", "aten::cumsum", "aten::mm"]},
        tracking=seen,
    )
    data = coverage.merge(tmp_path)
    assert data["op_tracking"] is True and data["fallback_only"] == ["aten::cumsum"]
    assert set(data["executed"]) == {"aten::add.Tensor", "aten::mm"} and "aten::cumsum" not in data["suites"]
    coverage.clear(tmp_path)
    coverage.write_worker(tmp_path, "gw0", {"aten::cumsum": 2}, "PrivateUse1")
    untracked = coverage.merge(tmp_path)
    assert untracked["op_tracking"] is False and untracked["fallback_only"] is None and untracked["executed"]


def _rec(op, outcome="passed", fallback_ops=(), failure_class=None):
    return {
        "nodeid": f"t[{op}]",
        "op": op,
        "dtype": "float32",
        "outcome": outcome,
        "failure_class": failure_class,
        "fallback_ops": list(fallback_ops),
    }


def test_report_section_separates_native_from_fallback_passes():
    run = {"op_tracking": {"by": "m:CONFORMANCE_OP_TRACKING", "reason": None}}
    sec = report_fallback.section(
        run,
        [
            _rec("add"),
            _rec("cumsum", fallback_ops=["aten::cumsum"]),
            _rec("mm", "failed", ["aten::mm"], "fallback"),
            _rec("sin", "failed", (), "numeric"),
        ],
    )
    assert (sec["native_passes"], sec["fallback_passes"], sec["fallback_failures"]) == (1, 1, 1)
    assert [(r["op"], r["native"], r["fallback"], r["failed"]) for r in sec["rows"]] == [
        ("add", 1, 0, 0),
        ("cumsum", 0, 1, 0),
        ("mm", 0, 0, 1),
    ]
    assert "1 fallback passes" in report_fallback.headline(sec)


def test_report_says_fallback_was_not_observable():
    run = {"op_tracking": {"by": None, "reason": fallbacks.NOT_OBSERVABLE}}
    sec = report_fallback.section(run, [{"nodeid": "t", "op": "add", "outcome": "passed"}])
    assert not sec["observable"] and sec["fallback_passes"] is None and sec["rows"] == []
    assert "not observable" in report_fallback.headline(sec)
    assert "not observable" in report_fallback.headline(report_fallback.section({}, []))


@pytest.mark.parametrize(
    ("declared", "fragment"),
    [
        (["A"], "must be a dict"),
        ({"A": ["0"]}, "two or more string values"),
        ({"A": "01"}, "two or more"),
        ({"": ["0", "1"]}, "is not a name"),
        ({"A": [0, 1]}, "two or more string values"),
    ],
)
def test_bad_mode_declarations_are_named(declared, fragment):
    with pytest.raises(modes.ModesError, match=fragment):
        modes.validate(declared, "--conformance-backend-module m")


def test_plan_changes_one_setting_at_a_time():
    declared = modes.validate({"A": ["0", "1"], "B": (print, ["on", "off", "auto"])}, "m")
    todo = modes.plan(declared)
    assert [modes.label(m, todo[0]) for m in todo] == ["baseline", "A=1", "B=off", "B=auto"]
    assert declared["B"][0] is print
    with pytest.raises(modes.ModesError, match="--setting C: not declared; declared: A, B"):
        modes.plan(declared, ["C"])
    assert modes.declared_modes(None, "cpu") == {} and "CONFORMANCE_EMULATOR_ASYNC" in modes.declared_modes(None, None)


def test_differences_of_outcome_class_and_value():
    base = [
        {"nodeid": "a", "outcome": "passed", "max_abs": 0.0, "atol": 1e-5, "rule": "tolerance"},
        {"nodeid": "b", "outcome": "passed", "max_abs": 1e-6, "atol": 1e-5, "rule": "tolerance"},
        {"nodeid": "c", "outcome": "passed", "max_abs": 0.0, "rule": "exact"},
        {"nodeid": "d", "outcome": "failed", "failure_class": "numeric"},
    ]
    other = [
        {"nodeid": "a", "outcome": "failed", "failure_class": "numeric"},
        {"nodeid": "b", "outcome": "passed", "max_abs": 2e-6, "atol": 1e-5, "rule": "tolerance"},
        {"nodeid": "c", "outcome": "passed", "max_abs": 1e-9, "rule": "exact"},
        {"nodeid": "e", "outcome": "passed"},
    ]
    found = modes.differences(base, other, "baseline", "X=1")
    assert sorted(found) == ["a", "c", "d", "e"]  # b: within atol
    assert found["a"] == "baseline: passed; X=1: failed numeric" and "rule exact" in found["c"]
    assert found["d"].endswith("X=1: not run") and found["e"].startswith("baseline: not run")


def test_callable_settings_are_applied_from_the_environment(monkeypatch):
    seen = []
    module = SimpleNamespace(__name__="m", CONFORMANCE_MODES={"F": (seen.append, ["on", "off"]), "E": ["0", "1"]})
    monkeypatch.setenv(modes.CALLABLES_ENV, json.dumps({"F": "off"}))
    modes.apply_callables(module)
    assert seen == ["off"]
    monkeypatch.setenv(modes.CALLABLES_ENV, json.dumps({"E": "1"}))
    with pytest.raises(modes.ModesError, match="'E' is not a callable setting of m"):
        modes.apply_callables(module)
