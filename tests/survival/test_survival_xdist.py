"""Crash, abort, hang and poisoned device under pytest-xdist: each recorded as such, the run goes on."""

import json
import xml.etree.ElementTree as ET

import pytest


@pytest.mark.timeout(900)  # several worker starts, each importing torch
@pytest.mark.parametrize("dist", ["loadgroup", pytest.param("load", marks=pytest.mark.slow)])
def test_faults_under_xdist(pytester, faulty_env, fault_tests, read_records, dist):
    pytester.makepyfile(test_faults=fault_tests)
    result = pytester.runpytest_subprocess(
        "--conformance-backend-module",
        faulty_env,
        "--conformance-report-dir",
        "out",
        "-n",
        "2",
        "--dist",
        dist,
        "--conformance-test-timeout",
        "2",
        "--junitxml",
        "out/junit.xml",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        timeout=400,
    )
    out = pytester.path / "out"
    recs = read_records(out)
    assert all("@" not in r["nodeid"] for r in recs.values())  # loadgroup's "@group" suffix is dropped
    # every test has exactly one record; the crashing ones are not rerun, the others keep their result
    assert set(recs) == {
        "test_ok0",
        "test_abort",
        "test_ok1",
        "test_segfault",
        "test_ok2",
        "test_hang",
        "test_poison",
        "test_ok3",
        "test_ok4",
    }, result.stdout.str()[-3000:]
    for name in ("test_ok0", "test_ok1", "test_ok2", "test_ok3", "test_ok4"):
        assert recs[name]["outcome"] == "passed", (name, recs[name])
    abort, segv = recs["test_abort"], recs["test_segfault"]
    assert (abort["outcome"], abort["failure_class"], abort["signal"]) == ("failed", "crash", "SIGABRT")
    assert (segv["outcome"], segv["failure_class"], segv["signal"]) == ("failed", "crash", "SIGSEGV")
    assert abort["op"] == "relu" and abort["dtype"] == "float32" and abort["suite"] == "survival"
    assert "faults.py" in abort["message"]  # the worker's faulthandler traceback
    hang = recs["test_hang"]
    assert (hang["outcome"], hang["failure_class"]) == ("failed", "timeout")
    poison = recs["test_poison"]
    assert poison["outcome"] == "failed" and poison["device_poisoned"] is True
    assert "canary" in poison["message"]
    # the controller wrote the crash records; the report counts them; the run is complete
    ctl = [json.loads(ln) for ln in (out / "records" / "controller.jsonl").read_text().splitlines()]
    assert sorted(r["failure_class"] for r in ctl) == ["crash", "crash"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True
    assert summary["totals"]["passed"] == 5 and summary["totals"]["failed"] == 4
    assert summary["counts"]["by_failure_class"]["crash"] == 2
    assert summary["counts"]["by_failure_class"]["timeout"] == 1
    # pytest's own --junitxml sees the same failures
    cases = {c.get("name").split("@")[0]: c for c in ET.parse(out / "junit.xml").getroot().iter("testcase")}
    # a crash is a <failure> when the controller reports it, an <error> when xdist does (--dist load)
    crash = cases["test_abort"].find("failure")
    crash = crash if crash is not None else cases["test_abort"].find("error")
    assert crash is not None and "SIGABRT" in crash.get("message", "") + (crash.text or "")
    assert list(cases["test_ok1"]) == []
    assert result.ret == 1
    assert "rerun" not in result.stdout.str().splitlines()[-1]  # no test was blamed for another's crash
