"""A ``device_exclusive`` test never runs beside another test, in any worker (pytest_plugin/exclusive.py).

The stress suite's out-of-memory check asks for more than the device's free memory; run beside other
tests it starved them (on an H200 the run then ran past its time limit). Each test writes the interval it
ran in; under ``-n 2`` no other test's interval may overlap the exclusive one's.
"""

from __future__ import annotations

import json

pytest_plugins = ["pytester"]

TESTS = """
import json, os, time
import pytest

def _run(name, pause):
    start = time.monotonic()
    time.sleep(pause)
    with open(os.path.join(os.environ["SPANS"], name), "w") as f:
        json.dump([start, time.monotonic()], f)

@pytest.mark.parametrize("i", range(6))
def test_ordinary(i):
    _run(f"ordinary{i}", 0.4)

@pytest.mark.device_exclusive
def test_whole_device():
    _run("exclusive", 0.6)
"""


def test_the_exclusive_test_runs_alone(pytester, monkeypatch):
    spans = pytester.path / "spans"
    spans.mkdir()
    monkeypatch.setenv("SPANS", str(spans))
    pytester.makepyfile(test_x=TESTS)
    result = pytester.runpytest_subprocess(
        "--conformance-device", "cpu", "--conformance-report-dir", "out", "--conformance-no-report", "-n", "2",
        "-p", "no:randomly",
    )  # fmt: skip
    result.assert_outcomes(passed=7)
    got = {p.name: json.loads(p.read_text()) for p in spans.iterdir()}
    start, end = got.pop("exclusive")
    overlapping = [name for name, (s, e) in got.items() if s < end and e > start]
    assert not overlapping, (start, end, got)


def test_the_lock_file_stays_in_the_report_folder(pytester):
    pytester.makepyfile(test_y="def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess(
        "--conformance-device", "cpu", "--conformance-report-dir", "out", "--conformance-no-report", "-p", "no:xdist",
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    assert (pytester.path / "out" / ".device.lock").is_file()
