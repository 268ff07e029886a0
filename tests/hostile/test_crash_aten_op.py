"""A crash record names the aten op that was running (the breadcrumb, conformance/survival/breadcrumb.py), under
--conformance-isolate and under xdist, and says the op is unknown when nothing traced the test."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from neuron_conformance.conformance.survival.breadcrumb import (
    Breadcrumb,
    CountingBreadcrumb,
    breadcrumb_path,
    read_breadcrumb,
)
from tests.hostile.conftest import REPO, records, run_json

HOW = {"isolate": ["-p", "no:xdist", "--conformance-isolate", "process"], "xdist": ["-n", "2"]}


def _run(tmp_path, backend: str, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "opsuites/test_compare_cpu.py",
            "--conformance-backend-module",
            backend,
            "--conformance-device",
            "neuron",
            f"--conformance-report-dir={out}",
            "-q",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            *args,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    assert run_json(out)["complete"] is True, proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc, {r["op"]: r for r in records(out).values() if r.get("failure_class") == "crash"}


def test_breadcrumb_round_trip(tmp_path):
    """Written names are read back after the writer is gone; armed means traced with no op; cleared means
    not traced; a missing file is unknown."""
    crumb = Breadcrumb(breadcrumb_path(tmp_path, "gw0"))
    assert read_breadcrumb(tmp_path, "gw0") == (False, None)
    crumb.arm()
    assert read_breadcrumb(tmp_path, "gw0") == (True, None)
    counts = CountingBreadcrumb(crumb)
    counts["aten::add.Tensor"] = counts.get("aten::add.Tensor", 0) + 1
    counts["aten::neg"] = 1
    assert dict(counts) == {"aten::add.Tensor": 1, "aten::neg": 1}
    crumb.close()
    assert read_breadcrumb(tmp_path, "gw0") == (True, "aten::neg")
    assert read_breadcrumb(tmp_path, "gw9") == (False, None)
    long = Breadcrumb(breadcrumb_path(tmp_path, "gw1"))
    long.enter("aten::" + "x" * 400)
    assert read_breadcrumb(tmp_path, "gw1")[1] == ("aten::" + "x" * 400)[:255]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("how", sorted(HOW))
def test_crash_record_names_the_aten_op(tmp_path, hostile, how):
    """aten::neg aborts, the conj kernels segfault: each crash record's ``aten_op`` is the overload that
    was entered (neg; conj_physical.out or _conj_physical), named in the message and used as the cause's op."""
    proc, crashed = _run(
        tmp_path,
        hostile("abort-neg,conj-segv"),
        "--conformance-ops=neg,conj_physical",
        "--conformance-dtypes=complex64",
        *HOW[how],
    )
    tail = proc.stdout[-3000:] + proc.stderr[-2000:]
    assert set(crashed) == {"neg", "conj_physical"}, tail
    neg, conj = crashed["neg"], crashed["conj_physical"]
    assert (neg["signal"], neg["aten_op"]) == ("SIGABRT", "aten::neg"), tail
    assert conj["signal"] == "SIGSEGV" and conj["aten_op"] in ("aten::conj_physical.out", "aten::_conj_physical")
    for rec in (neg, conj):
        assert f"last aten op entered on the device: {rec['aten_op']}" in rec["message"]
    causes = json.loads((tmp_path / "out" / "summary.json").read_text())["causes"]
    assert {c["aten_op"] for c in causes if c["failure_class"] == "crash"} == {neg["aten_op"], conj["aten_op"]}
    assert "INTERNALERROR" not in proc.stdout


@pytest.mark.timeout(900)
def test_untraced_crash_says_the_op_is_unknown(tmp_path, hostile):
    """--conformance-aten-coverage off: nothing traces the test, so the record does not guess an op."""
    proc, crashed = _run(
        tmp_path,
        hostile("abort-neg"),
        "--conformance-ops=neg",
        "--conformance-dtypes=float32",
        "--conformance-aten-coverage",
        "off",
        *HOW["isolate"],
    )
    assert set(crashed) == {"neg"}, proc.stdout[-3000:]
    assert crashed["neg"]["aten_op"] is None
    assert "aten op: unknown (the test was not traced" in crashed["neg"]["message"]
