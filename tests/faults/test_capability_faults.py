"""Capabilities end to end: tests of unclaimed capabilities are ``not-claimed``, claimed ones still fail.

Each case runs suites in a pytest subprocess against ``capability_backend`` (the emulated device wrapped
as a ``--conformance-backend-module``, with a ``CONFORMANCE_CAPABILITIES`` declaration from the environment) and
reads the records and the summary it wrote (:mod:`neuron_conformance.conformance.backend.capabilities`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuron_conformance.conformance.results.records import read_records

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
VALUE_CLASSES = {"numeric", "nonfinite", "metadata"}


def _run(
    pytester, monkeypatch, capabilities: str, *args, fault: str = "", asynchronous: bool = False, report: bool = False
):
    """Run ``args`` (suite files and options) with ``capability_backend`` declaring ``capabilities``;
    returns ``(result, records, report dir)``."""
    monkeypatch.setenv("PYTHONPATH", f"{HERE}:{ROOT}")
    monkeypatch.setenv("CONFORMANCE_TEST_CAPABILITIES", capabilities)
    monkeypatch.setenv("CONFORMANCE_TEST_FAULT", fault)
    monkeypatch.setenv("CONFORMANCE_EMULATOR_ASYNC", "1" if asynchronous else "0")
    out = pytester.path / "report"
    result = pytester.runpytest_subprocess(
        *args,
        "--rootdir",
        str(ROOT),
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        "--conformance-backend-module",
        "capability_backend",
        "--conformance-device",
        "neuron",
        f"--conformance-report-dir={out}",
        "-q",
        *([] if report else ["--conformance-no-report"]),
        timeout=600,
    )
    return result, (read_records(out) if (out / "records").is_dir() else []), out


def test_unclaimed_streams_and_float64_are_not_claimed(pytester, monkeypatch):
    """No streams, no float64: the streams suite, the device API's stream check and add in float64 are
    ``not-claimed`` (records, summary.json, summary.md); the other tests pass; the run is green."""
    result, records, out = _run(
        pytester,
        monkeypatch,
        "streams=0,float64=0",
        str(ROOT / "opsuites" / "test_streams.py"),
        str(ROOT / "opsuites" / "test_device_api.py"),
        str(ROOT / "opsuites" / "test_compare_cpu.py"),
        "--conformance-ops",
        "add," + ",".join(API_OPS) + "," + STREAM_OPS,
        "--conformance-dtypes",
        "float32,float64",
        report=True,
    )
    text = result.stdout.str()[-3000:]
    assert result.ret == 0, text
    by_op = {(r["op"], r.get("dtype")): r for r in records}
    unclaimed = [r for r in records if r["outcome"] == "not-claimed"]
    streams = [r for r in records if r.get("suite") == "streams"]
    assert len(streams) == 9 and all(
        r["outcome"] == "not-claimed" and r["not_claimed"] == ["streams"] for r in streams
    ), text
    assert by_op[("accelerator.streams", None)]["not_claimed"] == ["streams"], text
    assert by_op[("add", "float64")]["outcome"] == "not-claimed", text
    assert by_op[("add", "float64")]["not_claimed"] == ["float64"], text
    assert "capability_backend:CONFORMANCE_CAPABILITIES" in by_op[("add", "float64")]["message"], text
    assert by_op[("add", "float32")]["outcome"] == "passed", text
    for op in ("accelerator.devices", "rng.seed", "autocast", "compile.device_backend"):
        assert by_op[(op, None)]["outcome"] == "passed", (op, text)
    # the emulator's own non-claims stay in force under the declaration
    assert by_op[("pin_memory", None)]["not_claimed"] == ["pinned_memory"], text
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["verdict"] == "passed"
    assert summary["totals"]["not-claimed"] == len(unclaimed) == 12
    assert summary["totals"]["failing"] == 0 and summary["totals"]["xfailed"] == 0
    md = (out / "summary.md").read_text(encoding="utf-8")
    assert "12 of capabilities the backend does not claim (not-claimed, not run)" in md
    assert "not-claimed" in md.split("\n| suite |", 1)[1].split("\n", 1)[0]


API_OPS = ("accelerator.devices", "accelerator.streams", "rng.seed", "pin_memory", "autocast", "compile.device_backend")
"""The device API checks the first case selects (``--conformance-ops``)."""

STREAM_OPS = ",".join(
    f"streams.{n}"
    for n in (
        "wait_event",
        "event_wait",
        "wait_stream",
        "record_stream",
        "event_query",
        "elapsed_time",
        "nonblocking_to_host",
        "nonblocking_to_device",
        "current_stream",
    )
)
"""The streams suite's nine checks."""


def test_claimed_broken_streams_still_fail(pytester, monkeypatch):
    """A backend that explicitly claims streams and events whose events do not order work (the emulator's
    asynchronous mode with ``events_do_not_order``) fails the streams checks: claiming hides nothing."""
    result, records, _ = _run(
        pytester,
        monkeypatch,
        "streams=1,events=1",
        str(ROOT / "opsuites" / "test_streams.py"),
        fault="async-events-do-not-order",
        asynchronous=True,
    )
    failed = {r["op"] for r in records if r["outcome"] == "failed" and r.get("failure_class") in VALUE_CLASSES}
    assert {"streams.wait_event", "streams.event_wait"} <= failed, result.stdout.str()[-3000:]
    assert not [r for r in records if r["outcome"] == "not-claimed"]
    assert result.ret == 1


@pytest.mark.parametrize(
    ("declared", "manifest", "named"),
    [
        ("stream=0", "", "'stream'"),
        ("", "[capabilities]\nfloat65 = false\n", "'float65'"),
        ("", "[capabilities]\nstreams = 0\n", "streams must be true or false"),
    ],
    ids=["module-unknown-name", "manifest-unknown-name", "manifest-not-bool"],
)
def test_bad_declaration_is_one_line_exit_2(pytester, monkeypatch, declared, manifest, named):
    """An unknown capability name (module or manifest) or a non-bool value stops the run before any test:
    one line naming it and listing the accepted names, exit code 2."""
    extra = []
    if manifest:
        path = pytester.path / "caps.toml"
        path.write_text(manifest, encoding="utf-8")
        extra = [f"--conformance-manifest={path}"]
    result, records, _ = _run(
        pytester,
        monkeypatch,
        declared,
        str(ROOT / "opsuites" / "test_device_api.py"),
        "--conformance-ops",
        "rng.seed",
        *extra,
    )
    err = result.stderr.str() + result.stdout.str()
    assert result.ret == 2, err[-2000:]
    line = next(ln for ln in err.splitlines() if named in ln)
    assert line.startswith("conformance: ") or "conformance: " in line
    if "unknown" in line:
        assert "accepted: float64, complex, float8, sparse" in line
    assert not records
