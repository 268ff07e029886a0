"""Shared helpers for the neuron-migrate tests."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"


def run_cli(*args, cwd=None, timeout=120):
    """Run ``python -m neuron_conformance.migrate ARGS`` in a subprocess; returns CompletedProcess (text)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "neuron_conformance.migrate", *map(str, args)],
        cwd=cwd or ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long end-to-end test (deselect with -m 'not slow')")


@pytest.fixture
def cli():
    return run_cli
