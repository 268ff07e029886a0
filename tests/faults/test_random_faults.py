"""The random_ops suite has teeth: a wrong random kernel is flagged in both emulator modes.

Each case runs ``opsuites/test_random_ops.py`` on one random aten overload in a pytest subprocess against
the emulated device in mirror and in device mode, with one fault of ``fault_backend`` installed
(:mod:`tests.faults.random_kernels`: a constant ``uniform_``, a ``randperm`` with a repeated value, a
``bernoulli_`` that ignores p, a ``normal_`` that ignores std, a ``native_dropout`` without the 1/(1-p)
rescale, a generator that ignores the seed, a device draw from the CPU's stream), and asserts that the
overload's record failed as ``numeric`` with the rule of the check that should catch it. The control
runs the same overloads without a fault and asserts they pass: the clean emulator raises no false alarm.
"""

from __future__ import annotations

import pytest

from tests.faults.suite_run import run_suite

pytest_plugins = ["pytester"]

CASES = [
    # fault of fault_backend.FAULTS, overload the suite calls, rule of the check that must flag it
    ("uniform-constant", "aten::uniform_", "ks"),
    ("randperm-duplicate", "aten::randperm", "support"),
    ("bernoulli-ignores-p", "aten::bernoulli_.float", "z-test"),
    ("normal-ignores-std", "aten::normal_", "ks"),
    ("dropout-no-rescale", "aten::native_dropout", "tolerance"),
    ("generator-ignores-seed", "aten::uniform_", "seeded-reproducible"),
    ("draws-cpu-stream", "aten::normal_", "seeded-reproducible"),
]
MODES = ("mirror", "device")


def _run(pytester, monkeypatch, fault: str, overloads: str, mode: str):
    return run_suite(pytester, monkeypatch, "test_random_ops.py", fault, overloads, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("fault", "overload", "rule"), CASES, ids=[c[0] for c in CASES])
def test_random_ops_flags_fault(pytester, monkeypatch, fault, overload, rule, mode):
    result, records = _run(pytester, monkeypatch, fault, overload, mode)
    mine = [r for r in records if r.get("suite") == "random_ops" and r.get("op") == overload]
    assert mine, f"no random_ops record for {overload}:\n{result.stdout.str()[-3000:]}"
    failed = [(r.get("failure_class"), r.get("rule")) for r in mine if r.get("outcome") == "failed"]
    assert failed == [("numeric", rule)], (
        f"fault {fault!r} on {overload} not flagged as numeric/{rule} in {mode} mode: "
        f"{[(r.get('outcome'), r.get('rule'), r.get('message')) for r in mine]}\n{result.stdout.str()[-3000:]}")


@pytest.mark.parametrize("mode", MODES)
def test_clean_emulator_passes_random_overloads(pytester, monkeypatch, mode):
    """Control: without a fault the same overloads pass in both modes."""
    overloads = sorted({o for _, o, _ in CASES})
    result, records = _run(pytester, monkeypatch, "", ",".join(overloads), mode)
    mine = [r for r in records if r.get("suite") == "random_ops"]
    assert sorted(r.get("op") for r in mine) == overloads, result.stdout.str()[-3000:]
    assert all(r.get("outcome") == "passed" for r in mine), [(r.get("op"), r.get("message")) for r in mine]
