"""The generated suite has teeth: a wrong kernel on an overload only it reaches is flagged in both modes.

Each case runs ``opsuites/test_generated.py`` on one aten overload in a pytest subprocess against the
emulated device in mirror and in device mode, with one fault of ``fault_backend`` installed (a kernel on
the PrivateUse1 key whose floating outputs are 1 % off), and asserts that the overload's record failed as
``numeric``. The control runs the same overloads without a fault and asserts they pass, so the failures
come from the fault and the clean emulator raises no false alarm.
"""

from __future__ import annotations

import pytest

from tests.faults.suite_run import run_suite

pytest_plugins = ["pytester"]

CASES = [
    # fault of fault_backend.FAULTS, overload (reached by no OpInfo sample: an out= overload, a helper)
    ("out-overload-1e-2", "aten::_euclidean_dist.out"),
    ("no-opinfo-1e-2", "aten::_logcumsumexp.out"),
]
MODES = ("mirror", "device")


def _run(pytester, monkeypatch, fault: str, overloads: str, mode: str):
    return run_suite(pytester, monkeypatch, "test_generated.py", fault, overloads, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("fault", "overload"), CASES, ids=[c[0] for c in CASES])
def test_generated_suite_flags_fault(pytester, monkeypatch, fault, overload, mode):
    result, records = _run(pytester, monkeypatch, fault, overload, mode)
    mine = [r for r in records if r.get("suite") == "generated" and r.get("op") == overload]
    assert mine, f"no generated record for {overload}:\n{result.stdout.str()[-3000:]}"
    assert [r.get("failure_class") for r in mine if r.get("outcome") == "failed"] == ["numeric"], (
        f"fault {fault!r} on {overload} not flagged as numeric in {mode} mode: "
        f"{[(r.get('outcome'), r.get('message')) for r in mine]}\n{result.stdout.str()[-3000:]}"
    )


@pytest.mark.parametrize("mode", MODES)
def test_clean_emulator_passes_generated_overloads(pytester, monkeypatch, mode):
    """Control: without a fault the same overloads pass in both modes."""
    result, records = _run(pytester, monkeypatch, "", ",".join(o for _, o in CASES), mode)
    mine = [r for r in records if r.get("suite") == "generated"]
    assert sorted(r.get("op") for r in mine) == sorted(o for _, o in CASES), result.stdout.str()[-3000:]
    assert all(r.get("outcome") == "passed" for r in mine), [(r.get("op"), r.get("message")) for r in mine]
