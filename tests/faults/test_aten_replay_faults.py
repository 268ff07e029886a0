"""The aten replay suite has teeth: a wrong kernel on an overload only it reaches is flagged in both modes.

Each case runs ``opsuites/test_aten_replay.py`` on one aten overload in a pytest subprocess against the
emulated device in mirror and in device mode, with one fault of ``fault_backend`` installed (a kernel on
the PrivateUse1 key whose floating outputs are 1 % off), and asserts that the overload's record failed as
``numeric``. The overloads are ones whose schema-derived inputs the CPU kernel rejects, so the generated
suite skips them: an ``out=`` variant (derived from the functional call captured from an OpInfo sample)
and the ``grad_input`` variant of a backward kernel (derived from the backward captured under autograd).
The control runs the same overloads without a fault and asserts they pass.
"""

from __future__ import annotations

import pytest

from tests.faults.suite_run import run_suite

pytest_plugins = ["pytester"]

CASES = [
    # fault of fault_backend.FAULTS, overload (schema-derived inputs rejected; in the replay index)
    ("replay-out-1e-2", "aten::binary_cross_entropy.out"),
    ("replay-backward-1e-2", "aten::glu_backward.grad_input"),
]
MODES = ("mirror", "device")


def _run(pytester, monkeypatch, fault: str, overloads: str, mode: str):
    return run_suite(pytester, monkeypatch, "test_aten_replay.py", fault, overloads, mode)


def test_cases_are_replay_only():
    """The overloads faulted here are indexed and have no schema-derived input the CPU accepts."""
    from neuron_conformance.opsuites import replay_index

    entries = replay_index.load()
    for _, overload in CASES:
        assert overload in entries and overload in replay_index.targets(), overload


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("fault", "overload"), CASES, ids=[c[0] for c in CASES])
def test_aten_replay_suite_flags_fault(pytester, monkeypatch, fault, overload, mode):
    result, records = _run(pytester, monkeypatch, fault, overload, mode)
    mine = [r for r in records if r.get("suite") == "aten_replay" and r.get("op") == overload]
    assert mine, f"no aten_replay record for {overload}:\n{result.stdout.str()[-3000:]}"
    assert [r.get("failure_class") for r in mine if r.get("outcome") == "failed"] == ["numeric"], (
        f"fault {fault!r} on {overload} not flagged as numeric in {mode} mode: "
        f"{[(r.get('outcome'), r.get('message')) for r in mine]}\n{result.stdout.str()[-3000:]}"
    )


@pytest.mark.parametrize("mode", MODES)
def test_clean_emulator_passes_replayed_overloads(pytester, monkeypatch, mode):
    """Control: without a fault the same overloads pass in both modes."""
    result, records = _run(pytester, monkeypatch, "", ",".join(o for _, o in CASES), mode)
    mine = [r for r in records if r.get("suite") == "aten_replay"]
    assert sorted(r.get("op") for r in mine) == sorted(o for _, o in CASES), result.stdout.str()[-3000:]
    assert all(r.get("outcome") == "passed" for r in mine), [(r.get("op"), r.get("message")) for r in mine]
