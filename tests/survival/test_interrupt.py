"""SIGTERM halfway through a run: the report is built from what ran and marked incomplete."""

import json
import os
import signal
import subprocess
import sys
import time

SLOW_TESTS = """
import time, pytest

@pytest.mark.parametrize("i", range(40))
def test_slow(i):
    time.sleep(0.3)
"""


def test_sigterm_leaves_an_incomplete_report(pytester, monkeypatch):
    monkeypatch.delenv("CONFORMANCE_REPORT_DIR", raising=False)
    pytester.makepyfile(test_slow=SLOW_TESTS)
    out = pytester.path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "--conformance-device",
            "cpu",
            "--conformance-report-dir",
            "out",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
        ],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    records = out / "records" / "main.jsonl"
    deadline = time.time() + 180
    while time.time() < deadline:
        if records.exists() and len(records.read_text().splitlines()) >= 3:
            break
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2, stdout  # pytest's "interrupted"
    run = json.loads((out / "run.json").read_text())
    assert run["complete"] is False and "SIGTERM" in run["stop_reason"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False
    assert 3 <= summary["totals"]["total"] < 40 and summary["totals"]["passed"] == summary["totals"]["total"]
    assert "Incomplete run" in (out / "summary.md").read_text()
    assert "INCOMPLETE RUN" in stdout
    assert os.path.exists(out / "index.html")
