"""Shared pieces of the survival tests: a test file whose tests hit injected faults, and record readers.

The faults come from ``faulty_backend.py`` (``--conformance-backend-module tests.survival.faulty_backend``): each
fault sits on its own aten op, so every other test of the file runs normally.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_conformance.conformance.results.records import read_records as merged_records

REPO = Path(__file__).resolve().parents[2]
BACKEND = "tests.survival.faulty_backend"

FAULT_TESTS = """
import pytest, torch

def _ok(device):
    assert torch.ones(3, device=device).add(1).mul(2).cpu().tolist() == [4.0, 4.0, 4.0]

def _case(name, op):
    return pytest.mark.conformance(op=op, dtype="float32", variant="function", suite="survival")

@_case("ok0", "ok0")
@pytest.mark.xdist_group("g1")
def test_ok0(device): _ok(device)

@_case("abort", "relu")
@pytest.mark.xdist_group("g1")
def test_abort(device): torch.relu(torch.ones(2, device=device))

@_case("ok1", "ok1")
@pytest.mark.xdist_group("g1")
def test_ok1(device): _ok(device)

@_case("segfault", "exp")
def test_segfault(device): torch.exp(torch.ones(2, device=device))

@_case("ok2", "ok2")
def test_ok2(device): _ok(device)

@_case("hang", "sin")
def test_hang(device): torch.sin(torch.ones(2, device=device))

@_case("poison", "cos")
@pytest.mark.xdist_group("g2")
def test_poison(device): torch.cos(torch.ones(2, device=device))

@_case("ok3", "ok3")
@pytest.mark.xdist_group("g2")
def test_ok3(device): _ok(device)

@_case("ok4", "ok4")
def test_ok4(device): _ok(device)
"""


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long end-to-end test (deselect with -m 'not slow')")


@pytest.fixture
def faulty_env(monkeypatch) -> str:
    """The backend module name; makes ``tests.survival.faulty_backend`` importable in pytester's subprocesses (and xdist workers)."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    for var in ("CONFORMANCE_REPORT_DIR", "CONFORMANCE_ISOLATE", "CONFORMANCE_TEST_TIMEOUT", "FAULTY_BACKEND_OFF"):
        monkeypatch.delenv(var, raising=False)
    return BACKEND


@pytest.fixture
def fault_tests() -> str:
    """The text of a test file whose tests hit the faults of ``faulty_backend.py`` (see FAULT_TESTS)."""
    return FAULT_TESTS


@pytest.fixture
def read_records():
    """``read_records(report_dir) -> {test name: record}``."""
    return records


def records(report_dir: Path) -> dict[str, dict]:
    """Merged records by test function name (the project's one reader: the report's merge rules)."""
    return {r["nodeid"].split("::")[-1]: r for r in merged_records(report_dir)}
