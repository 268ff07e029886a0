"""The ``run:`` scripts of .github/workflows/conformance.yml, to run them locally as a runner would."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
REUSABLE = ROOT / ".github" / "workflows" / "conformance.yml"


def step(job: str, id_or_name: str) -> dict:
    """The step of ``job`` whose ``id`` or ``name`` is ``id_or_name``.

    Raises:
        StopIteration: no such step (the workflow changed; update the caller).
    """
    steps = yaml.safe_load(REUSABLE.read_text(encoding="utf-8"))["jobs"][job]["steps"]
    return next(s for s in steps if id_or_name in (s.get("id"), s.get("name")))


def run_step(
    job: str, id_or_name: str, env: dict[str, str], cwd: Path, *, timeout: float = 300, wait: bool = True
) -> subprocess.CompletedProcess | subprocess.Popen:
    """Run the step's script with ``bash -e`` (as GitHub's default shell does), ``env`` added to ours.

    Returns the finished process (stdout and stderr captured as text), or with ``wait=False`` the running
    one (stdout and stderr together on its ``stdout`` pipe).
    """
    cmd = ["bash", "-e", "-c", step(job, id_or_name)["run"]]
    full_env = {**os.environ, **env}
    if not wait:
        return subprocess.Popen(cmd, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)
