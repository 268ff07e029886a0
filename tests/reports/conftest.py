"""Factories for report inputs: result records, worker files, run.json, coverage.json."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import pytest

DEFAULT_DEVICE = {
    "type": "neuron",
    "backend": "neuron_conformance.emulator",
    "backend_version": "0.1.0",
    "emulated": True,
    "mirrors_cpu": True,
    "dist_backend": "gloo",
    "api_support": {"synchronize": "native", "Stream": "shim", "memory_allocated": "missing"},
}


def make_record(
    op: str = "add",
    dtype: str | None = "float32",
    outcome: str = "passed",
    *,
    suite: str = "compare_cpu",
    variant: str = "function",
    kind: str = "op",
    nodeid: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """One schema-1 record (docs/architecture.md); failing outcomes get a class, errors, message and repro."""
    rec: dict[str, Any] = {
        "schema": 1,
        "suite": suite,
        "kind": kind,
        "op": op,
        "variant": variant,
        "dtype": dtype,
        "nodeid": nodeid or f"opsuites/test_{suite}.py::test_{suite}[{op}-{variant}-{dtype}]",
        "sample": 0,
        "samples": 4,
        "outcome": outcome,
        "failure_class": None,
        "rule": "tolerance",
        "max_abs": 1e-7,
        "max_rel": 1e-7,
        "max_ulp": 1.0,
        "atol": 1e-5,
        "rtol": 1.3e-6,
        "message": None,
        "repro": None,
        "duration": 0.01,
        "worker": "gw0",
    }
    if outcome in ("failed", "error", "xfailed"):
        rec.update(
            failure_class="numeric",
            max_abs=2e-3,
            max_rel=1e-2,
            max_ulp=4096.0,
            sample=2,
            message=f"{op} {dtype}: max_abs 2e-3 > atol 1e-5",
            repro=f"python -m neuron_conformance.conformance.results.repro {op} --dtype {dtype} --conformance-sample 2",
        )
    rec.update(fields)
    return rec


def make_run(**fields: Any) -> dict[str, Any]:
    """A run.json dict for a complete emulated run; keyword arguments override fields."""
    run = {
        "device": dict(DEFAULT_DEVICE),
        "torch_version": "2.13.0+cpu",
        "harness_version": "0.1.0",
        "dtypes": ["float32", "bfloat16"],
        "seed": 1234,
        "started": "2026-11-29T20:00:00Z",
        "finished": "2026-11-29T20:10:00Z",
        "complete": True,
        "argv": ["pytest", "--conformance-device", "neuron"],
        "shard": None,
    }
    run.update(fields)
    return run


def write_report(
    root: Path,
    workers: dict[str, list[Any]],
    *,
    run: dict[str, Any] | None = None,
    coverage: dict[str, Any] | None = None,
    truncate: dict[str, str] | None = None,
    repro: dict[str, str] | None = None,
) -> Path:
    """Write a report directory under ``root``.

    ``workers`` maps worker id -> records (dicts, or raw strings written as lines); files
    are given increasing modification times in the order of ``workers``. ``truncate`` maps
    worker id -> a partial line appended last (a killed run).
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "run.json").write_text(json.dumps(run if run is not None else make_run()))
    rec_dir = root / "records"
    rec_dir.mkdir(exist_ok=True)
    for i, (worker, recs) in enumerate(workers.items()):
        lines = [r if isinstance(r, str) else json.dumps(r) for r in recs]
        text = "".join(line + "\n" for line in lines)
        if truncate and worker in truncate:
            text += truncate[worker]
        path = rec_dir / f"{worker}.jsonl"
        path.write_text(text)
        os.utime(path, ns=(1_700_000_000_000_000_000 + i * 10**9,) * 2)
    if coverage is not None:
        (root / "coverage.json").write_text(json.dumps(coverage))
    for name, text in (repro or {}).items():
        (root / "repro" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "repro" / name).write_text(text)
    return root


@pytest.fixture(scope="session")
def record() -> Callable[..., dict[str, Any]]:
    """The record factory (see :func:`make_record`)."""
    return make_record


@pytest.fixture(scope="session")
def run_meta() -> Callable[..., dict[str, Any]]:
    """The run.json factory (see :func:`make_run`)."""
    return make_run


@pytest.fixture(scope="session")
def write_report_fn() -> Callable[..., Path]:
    """:func:`write_report` itself, for fixtures wider than a test."""
    return write_report


@pytest.fixture
def report(tmp_path: Path) -> Callable[..., Path]:
    """Write a report dir: ``report(workers, name="r", **kw)`` (see :func:`write_report`)."""

    def factory(workers: dict[str, list[Any]], name: str = "r", **kw: Any) -> Path:
        return write_report(tmp_path / name, workers, **kw)

    return factory


@pytest.fixture
def no_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make sure a CI's $GITHUB_STEP_SUMMARY is not written by the tests."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture(autouse=True)
def _isolate_step_summary(no_step_summary: None) -> None:
    """Every test starts without $GITHUB_STEP_SUMMARY."""
