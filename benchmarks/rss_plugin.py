"""pytest plugin (``-p benchmarks.rss_plugin``): peak RSS and phase times of each pytest process.

When ``BENCH_RSS_DIR`` is set, every process (the controller and each xdist worker) writes
``<dir>/<worker>.json`` when pytest unconfigures: ``worker``, ``pid``, ``peak_rss_mib`` (the process's own
peak, :func:`neuron_conformance.conformance.results.peak_memory.peak_rss_mib`; the ranks a distributed scenario
launches report theirs in the records, ``rank_peak_rss_mib``), ``tests`` (items run by this process) and ``stamps``:
wall-clock times (``time.time()``) of ``plugin_imported`` (``-p`` plugins are imported while pytest
parses its arguments, before the entry-point plugins such as the conformance plugin), ``configured`` (every ``pytest_configure`` done),
``session_start``, ``collected``, ``session_finished`` (after every other ``pytest_sessionfinish``,
so after the conformance report is built) and ``unconfigured``. Without the variable it does nothing.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from neuron_conformance.conformance.results.peak_memory import peak_rss_mib

_STAMPS: dict = {"plugin_imported": time.time()}
_TESTS = [0]


def _worker(config) -> str:
    wi = getattr(config, "workerinput", None)
    return wi["workerid"] if wi else "main"


@pytest.hookimpl(trylast=True)
def pytest_configure(config) -> None:
    _STAMPS["configured"] = time.time()


def pytest_sessionstart(session) -> None:
    _STAMPS["session_start"] = time.time()


def pytest_collection_finish(session) -> None:
    _STAMPS["collected"] = time.time()


def pytest_runtest_logfinish(nodeid, location) -> None:
    _TESTS[0] += 1


@pytest.hookimpl(trylast=True)  # after the conformance plugin has built its report
def pytest_sessionfinish(session, exitstatus) -> None:
    _STAMPS["session_finished"] = time.time()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config) -> None:
    directory = os.environ.get("BENCH_RSS_DIR")
    if not directory:
        return
    _STAMPS["unconfigured"] = time.time()
    data = {
        "worker": _worker(config),
        "pid": os.getpid(),
        "peak_rss_mib": peak_rss_mib(),
        "tests": _TESTS[0],
        "stamps": _STAMPS,
    }
    Path(directory).mkdir(parents=True, exist_ok=True)
    (Path(directory) / f"{data['worker']}.json").write_text(json.dumps(data), encoding="utf-8")
