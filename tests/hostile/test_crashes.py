"""Crashes and hangs on a hostile backend: unbounded worker restarts, the scheduler's KeyError, hangs
that must not hang failure formatting, crashes a manifest expects, the sample in flight."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

from neuron_conformance.conformance.survival import crashes
from tests.hostile.conftest import REPO, records, run_json

NEG_TESTS = """
import pytest, torch

def _case(op):
    return pytest.mark.conformance(op=op, dtype="float32", variant="function", suite="hostile")

@_case("ok0")
@pytest.mark.xdist_group("neg")
def test_ok0(device): assert torch.ones(2, device=device).mul(2.0).cpu().tolist() == [2.0, 2.0]

@_case("neg")
@pytest.mark.xdist_group("neg")
def test_neg_a(device): torch.neg(torch.ones(2, device=device))

@_case("neg")
@pytest.mark.xdist_group("neg")
def test_neg_b(device): torch.neg(torch.ones(3, device=device))

@_case("ok1")
@pytest.mark.xdist_group("neg")
def test_ok1(device): assert torch.ones(2, device=device).mul(2.0).cpu().tolist() == [2.0, 2.0]

@_case("ok2")
def test_ok2(device): assert torch.ones(2, device=device).mul(2.0).cpu().tolist() == [2.0, 2.0]
"""


def test_restart_limit_raised_only_when_unset():
    cfg = types.SimpleNamespace(option=types.SimpleNamespace(maxworkerrestart=None, numprocesses=2))
    assert crashes.raise_restart_limit(cfg) and cfg.option.maxworkerrestart == str(crashes.UNBOUNDED_RESTARTS)
    cfg = types.SimpleNamespace(option=types.SimpleNamespace(maxworkerrestart="3", numprocesses=2))
    assert not crashes.raise_restart_limit(cfg) and cfg.option.maxworkerrestart == "3"


class _Node:
    """A stand-in for xdist's WorkerController (hashable, as the scheduler keys its work by node)."""

    def __init__(self, wid, sent=None, stops=None):
        self.shutting_down = False
        self.gateway = types.SimpleNamespace(id=wid)
        self._sent, self._stops = sent if sent is not None else [], stops if stops is not None else []

    def send_runtest_some(self, indexes):
        self._sent.append(indexes)

    def shutdown(self):
        self._stops.append(True)


def test_scheduler_skips_a_worker_not_yet_collected():
    """xdist 3.8's loadscope _reschedule of a ready-but-uncollected replacement raised KeyError."""
    from xdist.scheduler import LoadGroupScheduling

    config = types.SimpleNamespace(
        getvalue=lambda name: 2 if name == "numprocesses" else ["2*popen"] if name == "tx" else None,
        option=types.SimpleNamespace(maxschedchunk=None),
    )
    sched = LoadGroupScheduling(config)
    node = _Node("gw3")
    sched.assigned_work[node] = {}
    sched.workqueue["x"] = {"t.py::x": False}
    with pytest.raises(KeyError):
        sched._reschedule(node)
    crashes.guard_scheduler(sched)
    sched._reschedule(node)  # no KeyError: the worker gets work when its collection arrives


def test_scheduler_tops_up_a_replacement_worker():
    """A replacement worker handed one test and no shutdown would wait forever for its "next" test (an xdist
    worker runs a test once it knows what follows): after a reschedule it has two units, or a shutdown."""
    from xdist.scheduler import LoadGroupScheduling

    config = types.SimpleNamespace(
        getvalue=lambda name: 1 if name == "numprocesses" else ["popen"] if name == "tx" else None,
        option=types.SimpleNamespace(maxschedchunk=None),
    )
    sched = LoadGroupScheduling(config)
    sent, stops = [], []
    node = _Node("gw1", sent, stops)
    sched.assigned_work[node] = {}
    sched.registered_collections[node] = ["t.py::a", "t.py::b", "t.py::c"]
    sched.collection = list(sched.registered_collections[node])
    sched.workqueue["t.py::b"] = {"t.py::b": False}
    crashes.guard_scheduler(sched)
    sched._reschedule(node)
    assert sent == [[1]] and stops == [True]  # the last unit, then "no more": the worker can run it
    sched.workqueue["t.py::a"] = {"t.py::a": False}
    sched.workqueue["t.py::c"] = {"t.py::c": False}
    node2 = _Node("gw2", sent, stops)
    sched.assigned_work[node2] = {}
    sched.registered_collections[node2] = list(sched.collection)
    sched._reschedule(node2)
    assert sent[1:] == [[0], [2]]  # topped up to two units


@pytest.mark.timeout(600)
def test_aborting_kernel_under_loadgroup(pytester, hostile):
    """aten::neg aborts twice in one group under -n 2 loadgroup: each crash recorded, the group's other
    tests rerun on a new worker, run complete."""
    pytester.makepyfile(test_h=NEG_TESTS)
    result = pytester.runpytest_subprocess(
        "--conformance-backend-module",
        hostile("abort-neg"),
        "--conformance-device",
        "neuron",
        "--conformance-report-dir",
        "out",
        "-n",
        "2",
        "-p",
        "no:randomly",
        timeout=500,
    )
    recs = records(pytester.path / "out")
    assert set(recs) == {"test_ok0", "test_neg_a", "test_neg_b", "test_ok1", "test_ok2"}, result.stdout.str()[-3000:]
    for name in ("test_neg_a", "test_neg_b"):
        assert (recs[name]["failure_class"], recs[name]["signal"]) == ("crash", "SIGABRT")
    assert all(recs[n]["outcome"] == "passed" for n in ("test_ok0", "test_ok1", "test_ok2"))
    assert run_json(pytester.path / "out")["complete"] is True
    assert result.ret == 1 and "INTERNALERROR" not in result.stdout.str()


HANG_TEST = """
import pytest, torch

def negate(tensor):  # the device tensor is a frame argument: pytest's long traceback reprs it
    return torch.neg(tensor)

@pytest.mark.conformance(op="neg", dtype="float32", variant="function", suite="hostile")
def test_hang(device): negate(torch.ones(2, device=device))

@pytest.mark.conformance(op="mul", dtype="float32", variant="function", suite="hostile")
def test_after(device): assert torch.ones(2, device=device).mul(2.0).cpu().tolist() == [2.0, 2.0]
"""


def test_hang_does_not_hang_failure_formatting(pytester, hostile):
    """The soft limit stops the hung kernel; formatting the failure reprs the device tensor without running
    neg again, so the process is not killed at the hard limit and the next test runs (-n 0)."""
    pytester.makepyfile(test_h=HANG_TEST)
    result = pytester.runpytest_subprocess(
        "--conformance-backend-module",
        hostile("hang-neg"),
        "--conformance-device",
        "neuron",
        "--conformance-report-dir",
        "out",
        "-p",
        "no:xdist",
        "--conformance-test-timeout",
        "3",
        "-p",
        "no:randomly",
        timeout=300,
    )
    recs = records(pytester.path / "out")
    assert recs["test_hang"]["failure_class"] == "timeout", result.stdout.str()[-3000:]
    assert recs["test_hang"]["duration"] < 5  # 3 s limit; the grace period (>= 2 s) was not spent
    assert recs["test_after"]["outcome"] == "passed"
    assert "tensor(<neuron:0>, shape=(2,), dtype=torch.float32)" in result.stdout.str()
    assert run_json(pytester.path / "out")["complete"] is True


MANIFEST = """
[[xfail]]
op = "neg"
reason = "crash"
note = "aborts"

[[xfail]]
op = "conj"
reason = "timeout"
note = "wrong class on purpose"
"""

EXPECT_TESTS = """
import pytest, torch

def _case(op):
    return pytest.mark.conformance(op=op, dtype="float32", variant="function", suite="hostile")

@_case("neg")
def test_neg(device): torch.neg(torch.ones(2, device=device))

@_case("conj")
def test_conj(device): torch.conj_physical(torch.ones(2, dtype=torch.complex64, device=device))

@_case("mul")
def test_ok(device): assert torch.ones(2, device=device).mul(2.0).cpu().tolist() == [2.0, 2.0]
"""


@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", ["isolate", "xdist"])
def test_crash_a_manifest_expects_is_xfailed(pytester, hostile, mode):
    pytester.makepyfile(test_h=EXPECT_TESTS)
    (pytester.path / "m.toml").write_text(MANIFEST)
    how = ["-p", "no:xdist", "--conformance-isolate", "process"] if mode == "isolate" else ["-n", "1"]
    result = pytester.runpytest_subprocess(
        "--conformance-backend-module",
        hostile("abort-neg,conj-segv"),
        "--conformance-device",
        "neuron",
        "--conformance-report-dir",
        "out",
        "--conformance-manifest",
        "m.toml",
        *how,
        "-p",
        "no:randomly",
        timeout=500,
    )
    recs = records(pytester.path / "out")
    neg, conj = recs["test_neg"], recs["test_conj"]
    assert (neg["outcome"], neg["failure_class"], neg["expected_failure"]) == ("xfailed", "crash", "crash"), (
        result.stdout.str()[-3000:]
    )
    assert neg["manifest_entry"].startswith("m.toml") or "m.toml" in neg["manifest_entry"]
    assert (conj["outcome"], conj["failure_class"], conj["signal"]) == ("failed", "unexpected", "SIGSEGV")
    assert "expects a timeout failure; seen: crash" in conj["message"]
    assert recs["test_ok"]["outcome"] == "passed"
    assert "1 failed" in result.stdout.str() and "1 xfailed" in result.stdout.str()
    assert run_json(pytester.path / "out")["complete"] is True


def test_crash_record_names_the_sample(tmp_path, hostile):
    """An OpInfo suite notes each sample in the crash file: the crash record of neg says which sample."""
    env_backend = hostile("abort-neg")
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "opsuites/test_compare_cpu.py",
            "--conformance-ops=neg",
            "--conformance-dtypes=float32",
            "--conformance-backend-module",
            env_backend,
            "--conformance-device",
            "neuron",
            f"--conformance-report-dir={out}",
            "-p",
            "no:xdist",
            "--conformance-isolate",
            "process",
            "-q",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    recs = [r for r in records(out).values() if r.get("failure_class") == "crash"]
    assert len(recs) == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert recs[0]["sample"] == 0 and "(sample 0)" in recs[0]["message"]
    assert run_json(out)["complete"] is True
