"""Shared pieces of the hostile-backend tests: the environment that selects faults, and record readers.

The backend is ``tests.hostile.backend`` (faults by ``$HOSTILE_FAULTS``); runs are pytester subprocesses
(the plugin is off in this process, tests/pytest.ini), as in tests/survival.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuron_conformance.conformance.results.records import read_records

REPO = Path(__file__).resolve().parents[2]
BACKEND = "tests.hostile.backend"


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long end-to-end test (deselect with -m 'not slow')")


@pytest.fixture
def hostile(monkeypatch):
    """``hostile(faults)`` sets ``$HOSTILE_FAULTS`` and returns the backend module name; the repository is
    on PYTHONPATH (pytester subprocesses, xdist workers, isolation children, the preflight child)."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    for var in (
        "CONFORMANCE_REPORT_DIR",
        "CONFORMANCE_ISOLATE",
        "CONFORMANCE_TEST_TIMEOUT",
        "CONFORMANCE_PREFLIGHT",
        "HOSTILE_FAULTS",
    ):
        monkeypatch.delenv(var, raising=False)

    def select(faults: str) -> str:
        monkeypatch.setenv("HOSTILE_FAULTS", faults)
        return BACKEND

    return select


def records(report_dir: Path) -> dict[str, dict]:
    """Merged records by test function name (with its parameters)."""
    return {r["nodeid"].split("::")[-1]: r for r in read_records(report_dir)}


def run_json(report_dir: Path) -> dict:
    return json.loads((report_dir / "run.json").read_text())
