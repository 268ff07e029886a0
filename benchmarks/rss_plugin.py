"""pytest plugin (``-p benchmarks.rss_plugin``): peak RSS and phase times of each pytest process.

When ``BENCH_RSS_DIR`` is set, every process (the controller and each xdist worker) writes
``<dir>/<worker>.json`` at session end: ``worker``, ``pid``, ``peak_rss_mib`` (``ru_maxrss`` of
``resource.getrusage(RUSAGE_SELF)``, KiB on Linux), ``start_to_collected_s`` (session start to the end
of collection), ``collected_to_end_s`` and ``tests`` (test items run by this process). Without the
variable it does nothing, so it is harmless in any run.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest

_T: dict = {}


def _worker(config) -> str:
    wi = getattr(config, "workerinput", None)
    return wi["workerid"] if wi else "main"


def pytest_sessionstart(session) -> None:
    _T["start"] = time.perf_counter()
    _T["tests"] = 0


def pytest_collection_finish(session) -> None:
    _T["collected"] = time.perf_counter()


def pytest_runtest_logfinish(nodeid, location) -> None:
    _T["tests"] = _T.get("tests", 0) + 1


@pytest.hookimpl(trylast=True)  # after the conformance plugin has built its report
def pytest_sessionfinish(session, exitstatus) -> None:
    directory = os.environ.get("BENCH_RSS_DIR")
    if not directory:
        return
    end = time.perf_counter()
    start = _T.get("start", end)
    collected = _T.get("collected", end)
    data = {
        "worker": _worker(session.config), "pid": os.getpid(),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "start_to_collected_s": round(collected - start, 3), "collected_to_end_s": round(end - collected, 3),
        "tests": _T.get("tests", 0),
    }
    Path(directory).mkdir(parents=True, exist_ok=True)
    (Path(directory) / f"{data['worker']}.json").write_text(json.dumps(data), encoding="utf-8")
