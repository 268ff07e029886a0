"""Shards -> merge, end to end, as the CI workflow runs them (.github/workflows/conformance.yml).

One unsharded run of a small selection (six ops of ``opsuites/test_compare_cpu.py``, float32, on the
emulated device, with a manifest whose stale entry makes one test fail), then three shard processes at
once, balanced by the unsharded run's ``summary.json`` (``--shard-durations``), then ``python -m reports
merge``. The merged report must hold the same tests with the same outcomes as the unsharded run, each
shard the tests :func:`conformance.sharding.assign_shards` deals it, and merging shards of different runs
(another torch version, another device) must stop with one line naming both values and both folders,
writing nothing. About 1-2 minutes on 2 cores: marked slow.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.sharding import assign_shards, durations_from_summary

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
OPS = "add,mul,abs,neg,sub,exp"
SHARDS = 3
MANIFEST = '[[xfail]]\nop = "neg"\nreason = "numeric"\nnote = "stale on purpose: neg passes on the emulator"\n'


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONFORMANCE_") and k != "GITHUB_STEP_SUMMARY"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _pytest(report: Path, manifest: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "opsuites/test_compare_cpu.py", f"--ops={OPS}", "--dtypes=float32",
            "-n", "0", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", f"--manifest={manifest}",
            f"--report-dir={report}", *extra]


def _merge(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reports", "merge", *map(str, args), "--no-step-summary", "-q"],
                          cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """``full/`` (unsharded), ``shard0..2/`` and ``merged/`` under one folder."""
    base = tmp_path_factory.mktemp("shard_merge")
    manifest = base / "manifest.toml"
    manifest.write_text(MANIFEST, encoding="utf-8")
    full = subprocess.run(_pytest(base / "full", manifest), cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=300)
    assert full.returncode == 1, full.stdout + full.stderr  # the stale neg entry fails
    durations = f"--shard-durations={base / 'full' / 'summary.json'}"
    procs = [subprocess.Popen(_pytest(base / f"shard{i}", manifest, f"--shard-id={i}", f"--num-shards={SHARDS}",
                                      durations),
                              cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(SHARDS)]
    for i, proc in enumerate(procs):
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode in (0, 1), f"shard {i}: exit {proc.returncode}\n{out}"
    merged = _merge(*(base / f"shard{i}" for i in range(SHARDS)), "-o", base / "merged")
    assert merged.returncode == 0, merged.stdout + merged.stderr
    return base


def _summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text(encoding="utf-8"))


def _outcomes(summary: dict) -> dict[str, tuple]:
    return {r["nodeid"]: (r["outcome"], r.get("failure_class")) for r in summary["records"]}


def test_merged_shards_hold_the_unsharded_runs_tests_and_outcomes(runs):
    full, merged = _summary(runs / "full"), _summary(runs / "merged")
    assert len(full["records"]) == 6
    assert _outcomes(merged) == _outcomes(full)
    assert ("failed", "stale") in _outcomes(full).values()  # the comparison covers a failing test too
    assert merged["totals"] == full["totals"]
    assert merged["complete"] is True and not merged["warnings"]
    assert sorted(s["shard"]["id"] for s in merged["run"]["shards"]) == list(range(SHARDS))
    for name in ("index.html", "summary.md"):
        assert (runs / "merged" / name).stat().st_size > 0
    assert "neg" in (runs / "merged" / "summary.md").read_text(encoding="utf-8")


def test_each_shard_ran_the_tests_its_durations_deal_it(runs):
    full = _summary(runs / "full")
    op_of = {r["nodeid"]: r["op"] for r in full["records"]}
    expected = assign_shards(sorted(op_of), op_of.__getitem__, SHARDS, durations_from_summary(full))
    for i in range(SHARDS):
        shard = _summary(runs / f"shard{i}")
        assert shard["run"]["shard"] == {"id": i, "count": SHARDS}
        assert set(_outcomes(shard)) == {n for n, s in expected.items() if s == i} != set()


def _copy_run(runs: Path, shard: int, dest: Path, edit) -> Path:
    """A copy of ``shard<N>/`` whose run metadata ``edit(run)`` changed (in summary.json and run.json)."""
    shutil.copytree(runs / f"shard{shard}", dest)
    for name in ("summary.json", "run.json"):
        data = json.loads((dest / name).read_text(encoding="utf-8"))
        edit(data["run"] if name == "summary.json" else data)
        (dest / name).write_text(json.dumps(data), encoding="utf-8")
    return dest


@pytest.mark.parametrize(("field", "value", "raw"), [
    ("torch_version", "2.12.0", False),
    ("device.type", "cuda", True),
], ids=["torch-version", "device-of-a-raw-report-folder"])
def test_merging_shards_of_different_runs_is_one_line_and_writes_nothing(runs, tmp_path, field, value, raw):
    def edit(run: dict) -> None:
        head, _, leaf = field.rpartition(".")
        (run[head] if head else run)[leaf] = value

    other = _copy_run(runs, 1, tmp_path / "other_run", edit)
    if raw:  # a shard that never built its summary: the merge reads run.json and records/
        (other / "summary.json").unlink()
    ours: object = _summary(runs / "shard0")["run"]
    for part in field.split("."):
        ours = ours[part]
    out = tmp_path / "merged"
    proc = _merge(runs / "shard0", other, "-o", out)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for part in (field, repr(ours), repr(value), str(runs / "shard0"), str(other)):
        assert part in lines[0], (part, lines[0])
    assert not out.exists()
