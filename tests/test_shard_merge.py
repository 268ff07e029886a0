"""Shards -> merge, end to end, with the CI workflow's own scripts (.github/workflows/conformance.yml).

One unsharded run of a small selection (six ops of ``opsuites/test_compare_cpu.py``, float32, on the
emulated device, with a manifest whose stale entry makes one test fail); then the shard job's script for
three shards at once, balanced by the unsharded run's ``summary.json`` (the ``durations`` input); then the
merge job's scripts (``python -m neuron_conformance.reports merge``, the baseline gate), where ``import torch`` fails as on
that job's runner, on the shard folders laid out as the artifacts download. The merged report must hold the same tests with the same outcomes as the unsharded
run, each shard the tests :func:`neuron_conformance.conformance.pytest_plugin.sharding.assign_shards` deals it, the gate must pass against
the unsharded run and fail against a baseline in which the failing test passed, and merging shards of
different runs (another torch version, another device) must stop with one line naming both values and
both folders, writing nothing. About 1-2 minutes on 2 cores: marked slow.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_conformance.conformance.pytest_plugin.sharding import assign_shards, durations_from_summary
from tests.workflow_steps import run_step

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
OPS = "add,mul,abs,neg,sub,exp"
SELECTION = f"--conformance-ops={OPS} --conformance-dtypes=float32 -n 0 -q -p no:randomly"
SHARDS = 3
MANIFEST = '[[xfail]]\nop = "neg"\nreason = "numeric"\nnote = "stale on purpose: neg passes on the emulator"\n'


def _env(workspace: Path, **inputs: str) -> dict[str, str]:
    """Our environment without harness settings, as a runner in ``workspace`` with the step's ``inputs``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONFORMANCE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(GITHUB_WORKSPACE=str(workspace), GITHUB_STEP_SUMMARY=str(workspace / "step_summary.md"))
    env.update(inputs)
    return env


def _merge(*args: object) -> subprocess.CompletedProcess:
    env = {k: v for k, v in _env(ROOT).items() if k != "GITHUB_STEP_SUMMARY"}
    return subprocess.run(
        [sys.executable, "-m", "neuron_conformance.reports", "merge", *map(str, args), "--no-step-summary", "-q"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """A workspace: ``full/`` (unsharded), ``conformance-shard/0..2/``, ``shards/`` and ``conformance-report/``."""
    ws = tmp_path_factory.mktemp("workspace")
    (ws / "manifest.toml").write_text(MANIFEST, encoding="utf-8")
    full = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "opsuites/test_compare_cpu.py",
            *SELECTION.split(),
            "-p",
            "no:cacheprovider",
            f"--conformance-manifest={ws / 'manifest.toml'}",
            f"--conformance-report-dir={ws / 'full'}",
        ],
        cwd=ROOT,
        env=_env(ws, GITHUB_STEP_SUMMARY=str(ws / "full.md")),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert full.returncode == 1, full.stdout + full.stderr  # the stale neg entry fails
    inputs = dict(
        NUM_SHARDS=str(SHARDS),
        DEVICE="neuron",
        BACKEND_MODULE="",
        TESTS="opsuites/test_compare_cpu.py",
        PYTEST_ARGS=SELECTION,
        MANIFEST="manifest.toml",
        DURATIONS="full/summary.json",
    )
    jobs = [_env(ws, SHARD=str(i), GITHUB_STEP_SUMMARY=str(ws / f"job{i}.md"), **inputs) for i in range(SHARDS)]
    procs = [run_step("shard", "Run shard ${{ matrix.shard }}", env, ROOT, wait=False) for env in jobs]
    for i, proc in enumerate(procs):
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"shard {i}: exit {proc.returncode}\n{out}"  # pytest's 1 is the gate's
        assert (ws / f"job{i}.md").read_text(encoding="utf-8").startswith("#")  # the shard job's step summary
        shutil.copytree(ws / "conformance-shard" / str(i), ws / "shards" / f"conformance-shard-{i}")
    merged = run_step("merge", "merge", _without_torch(ws), ws)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    return ws


def _without_torch(workspace: Path, **inputs: str) -> dict[str, str]:
    """:func:`_env` where ``import torch`` fails, as on the merge job's runner (it installs no torch)."""
    stub = workspace / "no_torch"
    stub.mkdir(exist_ok=True)
    (stub / "torch.py").write_text('raise ImportError("the merge job installs no torch")\n', encoding="utf-8")
    env = _env(workspace, **inputs)
    env["PYTHONPATH"] = os.pathsep.join([str(stub), env["PYTHONPATH"]])
    return env


def _summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text(encoding="utf-8"))


def _outcomes(summary: dict) -> dict[str, tuple]:
    return {r["nodeid"]: (r["outcome"], r.get("failure_class")) for r in summary["records"]}


def test_merged_shards_hold_the_unsharded_runs_tests_and_outcomes(runs):
    full, merged = _summary(runs / "full"), _summary(runs / "conformance-report")
    assert len(full["records"]) == 6
    assert _outcomes(merged) == _outcomes(full)
    assert ("failed", "stale") in _outcomes(full).values()  # the comparison covers a failing test too
    assert merged["totals"] == full["totals"]
    assert merged["complete"] is True and not merged["warnings"]
    assert sorted(s["shard"]["id"] for s in merged["run"]["shards"]) == list(range(SHARDS))
    for name in ("index.html", "summary.md"):
        assert (runs / "conformance-report" / name).stat().st_size > 0
    step_summary = (runs / "step_summary.md").read_text(encoding="utf-8")
    assert step_summary == (runs / "conformance-report" / "summary.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("neg_passed_before", "status", "headline"),
    [(False, 0, "0 regression(s)"), (True, 1, "1 regression(s)")],
    ids=["same-as-baseline", "regression"],
)
def test_the_baseline_gate(runs, tmp_path, neg_passed_before, status, headline):
    baseline = _summary(runs / "full")
    for rec in baseline["records"]:
        if neg_passed_before and rec["op"] == "neg":
            rec.update(outcome="passed", failure_class=None)
    (tmp_path / "baseline.json").write_text(json.dumps(baseline), encoding="utf-8")
    ws = tmp_path / "ws"
    shutil.copytree(runs / "conformance-report", ws / "conformance-report")
    proc = run_step("merge", "Baseline regression gate", _without_torch(ws, BASELINE="../baseline.json"), ws)
    assert proc.returncode == status, proc.stdout + proc.stderr
    assert headline in (ws / "conformance-report" / "baseline-diff.md").read_text(encoding="utf-8")
    assert headline in (ws / "step_summary.md").read_text(encoding="utf-8")


def test_each_shard_ran_the_tests_its_durations_deal_it(runs):
    full = _summary(runs / "full")
    op_of = {r["nodeid"]: r["op"] for r in full["records"]}
    expected = assign_shards(sorted(op_of), op_of.__getitem__, SHARDS, durations_from_summary(full))
    for i in range(SHARDS):
        shard = _summary(runs / "conformance-shard" / str(i))
        assert shard["run"]["shard"] == {"id": i, "count": SHARDS}
        assert set(_outcomes(shard)) == {n for n, s in expected.items() if s == i} != set()


def _copy_run(runs: Path, shard: int, dest: Path, edit) -> Path:
    """A copy of shard N's report folder whose run metadata ``edit(run)`` changed (in summary.json and run.json)."""
    shutil.copytree(runs / "conformance-shard" / str(shard), dest)
    for name in ("summary.json", "run.json"):
        data = json.loads((dest / name).read_text(encoding="utf-8"))
        edit(data["run"] if name == "summary.json" else data)
        (dest / name).write_text(json.dumps(data), encoding="utf-8")
    return dest


@pytest.mark.parametrize(
    ("field", "value", "raw"),
    [("torch_version", "2.12.0", False), ("device.type", "cuda", True)],
    ids=["torch-version", "device-of-a-raw-report-folder"],
)
def test_merging_shards_of_different_runs_is_one_line_and_writes_nothing(runs, tmp_path, field, value, raw):
    def edit(run: dict) -> None:
        head, _, leaf = field.rpartition(".")
        (run[head] if head else run)[leaf] = value

    other = _copy_run(runs, 1, tmp_path / "other_run", edit)
    if raw:  # a shard that never built its summary: the merge reads run.json and records/
        (other / "summary.json").unlink()
    first = runs / "conformance-shard" / "0"
    ours: object = _summary(first)["run"]
    for part in field.split("."):
        ours = ours[part]
    out = tmp_path / "merged"
    proc = _merge(first, other, "-o", out)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for part in (field, repr(ours), repr(value), str(first), str(other)):
        assert part in lines[0], (part, lines[0])
    assert not out.exists()
