"""What third-party backends showed, each as a fault of the hostile backend (tests/hostile/faults_third_party.py):

* a backend that marks its runtime in the process environment when the controller loads it: the xdist
  workers set it up themselves and pass (the controller puts its environment back and says so);
* a failure whose first line only announces its reason: the cause in summary.md keeps the reason;
* a device module without ``get_rng_state``: random ops that go through the sample wrapper pass, the gap
  is charged once, to the device-API check ``rng.state`` (and the preflight's row);
* a backend's own "Operator 'aten::X' is not implemented for device D": ``unsupported``, one cause;
* a backend module that registers nothing at import: one line saying so, naming the likely call;
* ``--conformance-ops`` names the suites it left out whole, under xdist too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuron_conformance.conformance.backend.probe import RNG_STATE
from neuron_conformance.conformance.results.causes import group_causes
from neuron_conformance.conformance.results.records import read_records
from tests.hostile.conftest import records, run_json
from tests.hostile.faults_third_party import BUILD_FAILED, BUILD_REASON, OWNER_ENV

ROOT = Path(__file__).resolve().parents[2]

LOGICAL = """
import pytest, torch

@pytest.mark.conformance(op="logical_and", dtype="bool", suite="hostile")
@pytest.mark.parametrize("n", [1, 2, 3, 4], ids=lambda n: f"logical_and-{n}")  # the op in the id, as in the suites
def test_logical_and(device, n):
    a = torch.tensor([True, False] * n, device=device)
    assert torch.logical_and(a, a).cpu().tolist() == [True, False] * n

@pytest.mark.conformance(op="other", suite="hostile_api", kind="api")
def test_other_api(device):
    pass
"""


def _run(pytester, backend: str, *args: str):
    return pytester.runpytest_subprocess(
        "--conformance-backend-module",
        backend,
        "--conformance-device",
        "neuron",
        "--conformance-report-dir",
        "out",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        *args,
        timeout=600,
    )


@pytest.mark.parametrize(
    ("mode", "workers"),
    [(("-n", "2"), {"gw0", "gw1"}), (("-p", "no:xdist", "--conformance-isolate", "process"), {"iso0"})],
    ids=["xdist", "isolation"],
)
def test_environment_set_at_initialisation_stays_out_of_the_workers(pytester, hostile, monkeypatch, mode, workers):
    """Under -n 2 (and in isolation children) every test process loads the backend itself with the environment
    the run started with: no false failure; the header names the variable put back; --conformance-ops names
    the suite it left out, once."""
    monkeypatch.delenv(OWNER_ENV, raising=False)
    pytester.makepyfile(test_h=LOGICAL)
    result = _run(pytester, hostile("env-at-init"), *mode, "--conformance-ops", "logical_and")
    out = result.stdout.str()
    recs = records(pytester.path / "out")
    assert sorted(r["outcome"] for r in recs.values()) == ["passed"] * 4, out[-3000:]
    assert {r["worker"] for r in recs.values()} <= workers
    put_back = [ln for ln in out.splitlines() if "put back" in ln]
    assert len(put_back) == 1 and OWNER_ENV in put_back[0], out[-3000:]
    left_out = [ln for ln in out.splitlines() if "--conformance-ops left out" in ln]
    assert left_out == [
        "conformance: --conformance-ops left out the suites with none of the named ops: hostile_api (1 test)"
    ], out[-3000:]  # one line of its own, once for the two workers
    assert result.ret == 0


def test_failure_cause_keeps_the_reason_after_a_heading_line(pytester, hostile, monkeypatch):
    """A runtime another process set up (the variable set before the run): the failure's first line ends with
    ':' and only announces the reason; the cause in summary.json and summary.md carries the reason."""
    monkeypatch.setenv(OWNER_ENV, "1")
    pytester.makepyfile(test_h=LOGICAL)
    result = _run(pytester, hostile("env-at-init"), "-n", "0", "--conformance-ops", "logical_and")
    out = result.stdout.str()
    recs = records(pytester.path / "out")
    assert sorted(r["failure_class"] for r in recs.values()) == ["error"] * 4, out[-3000:]
    summary = json.loads((pytester.path / "out" / "summary.json").read_text())
    causes = [c for c in summary["causes"] if not c["expected"]]
    assert len(causes) == 1 and causes[0]["count"] == 4, causes
    assert BUILD_FAILED in causes[0]["message"] and BUILD_REASON in causes[0]["message"], causes[0]["message"]
    assert BUILD_REASON in (pytester.path / "out" / "summary.md").read_text()
    assert result.ret == 1


def test_missing_rng_state_api_is_charged_once(pytester, hostile):
    """No get_rng_state/set_rng_state on the device module: randn, dropout and SDPA (through the sample
    wrapper that freezes the RNG) pass; the device-API check rng.state fails unsupported; the preflight
    reports the API missing."""
    ops = "randn,nn.functional.dropout,nn.functional.scaled_dot_product_attention,rng.state"
    result = pytester.runpytest_subprocess(
        str(ROOT / "opsuites" / "test_compare_cpu.py"),
        str(ROOT / "opsuites" / "test_device_api.py"),
        "--rootdir",
        str(ROOT),
        "--conformance-backend-module",
        hostile("no-rng-state-api"),
        "--conformance-device",
        "neuron",
        f"--conformance-report-dir={pytester.path / 'out'}",
        f"--conformance-ops={ops}",
        "--conformance-dtypes=float32",
        "-n",
        "0",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        timeout=600,
    )
    out = result.stdout.str()
    recs = {r["op"]: r for r in read_records(pytester.path / "out")}
    assert set(recs) == set(ops.split(",")), out[-3000:]
    for op in ("randn", "nn.functional.dropout", "nn.functional.scaled_dot_product_attention"):
        assert recs[op]["outcome"] == "passed", (op, recs[op].get("message"))
    api = recs["rng.state"]
    assert api["outcome"] == "failed" and api["failure_class"] == "unsupported", api
    assert "get_rng_state" in api["message"]
    assert run_json(pytester.path / "out")["device"]["api_support"][RNG_STATE] == "missing"
    assert any(ln.startswith("conformance: device APIs missing") and RNG_STATE in ln for ln in out.splitlines())


def test_backend_own_not_implemented_is_unsupported_in_one_cause(pytester, hostile):
    """RuntimeError("Operator 'aten::X' is not implemented for device neuron ...") on three ops: every test is
    ``unsupported``, and the failures come down to one cause that lists the aten ops."""
    result = pytester.runpytest_subprocess(
        str(ROOT / "opsuites" / "test_compare_cpu.py"),
        "--rootdir",
        str(ROOT),
        "--conformance-backend-module",
        hostile("own-not-implemented"),
        "--conformance-device",
        "neuron",
        f"--conformance-report-dir={pytester.path / 'out'}",
        "--conformance-ops=neg,exp,abs",
        "--conformance-dtypes=float32",
        "-n",
        "0",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        timeout=600,
    )
    recs = list(read_records(pytester.path / "out"))
    assert sorted(r["op"] for r in recs) == ["abs", "exp", "neg"], result.stdout.str()[-3000:]
    assert {(r["outcome"], r["failure_class"]) for r in recs} == {("failed", "unsupported")}, recs
    causes = [c for c in group_causes(recs) if not c["expected"]]
    assert len(causes) == 1, causes
    assert causes[0]["aten_op"] is None, causes[0]
    assert "Operator 'aten::<op>' is not implemented for device neuron" in causes[0]["message"], causes[0]
    assert causes[0]["aten_ops"] == ["aten::abs", "aten::exp", "aten::neg"], causes[0]
    summary_md = (pytester.path / "out" / "summary.md").read_text()
    assert "`aten::abs`, `aten::exp`, `aten::neg`" in summary_md


def test_backend_module_that_registers_nothing_is_told_so(pytester, monkeypatch):
    """A backend that needs a registration call: one line naming the module and the call, exit 2, not the
    advice to load it with --conformance-backend-module."""
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    pytester.makepyfile(
        lazy_backend='''
def register_device():
    """Would rename PrivateUse1 and register the device module."""
''',
        test_h="def test_nothing():\n    pass\n",
    )
    result = _run(pytester, "lazy_backend", "-n", "0")
    err = result.stderr.str() + result.stdout.str()
    lines = [ln for ln in err.splitlines() if "conformance: " in ln]
    assert len(lines) == 1, err[-3000:]
    assert "'lazy_backend' was imported but registered no device" in lines[0]
    assert "lazy_backend.register_device()" in lines[0] and "Load its backend" not in lines[0]
    assert result.ret == 2
