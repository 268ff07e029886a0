"""Shared fixtures for the emulator tests.

PrivateUse1 registration is process-global, so one autouse session fixture installs the emulator for every
test here, in the mode named by ``$CONFORMANCE_EMULATOR_MODE`` (default ``mirror``; run the suite once
with ``CONFORMANCE_EMULATOR_MODE=device`` to exercise device mode). Tests that need one mode use the
``mirror_mode`` / ``device_mode`` fixtures, which restore the previous mode.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import neuron_conformance.emulator as emu

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session", autouse=True)
def emulator():
    emu.install()
    yield emu


@pytest.fixture
def mirror_mode():
    """Run a test in mirror mode and restore the previous mode afterwards."""
    previous = emu.get_mode()
    emu.set_mode("mirror")
    yield
    emu.set_mode(previous)


@pytest.fixture
def device_mode():
    """Run a test in device mode and restore the previous mode afterwards."""
    previous = emu.get_mode()
    emu.set_mode("device")
    yield
    emu.set_mode(previous)


@pytest.fixture
def async_mode():
    """Run a test with the asynchronous mode on; restore the previous execution mode afterwards."""
    previous = emu.is_async()
    emu.set_async(True)
    yield
    emu.set_async(previous)


def run_python(code: str, timeout: float = 120.0, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter with the repo on ``sys.path``; return the completed process."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=str(REPO_ROOT),
    )


def neuron(data, **kwargs) -> torch.Tensor:
    """``torch.tensor(data, device="neuron", **kwargs)``."""
    return torch.tensor(data, device="neuron", **kwargs)


@pytest.fixture
def run_py():
    """Fixture form of :func:`run_python` (test modules are not a package, so they cannot import it)."""
    return run_python
