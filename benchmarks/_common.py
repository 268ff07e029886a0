"""Helpers shared by the benchmarks: result lines, op subsets, timed pytest subprocesses."""

from __future__ import annotations

import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
RESULTS_ENV = "BENCH_RESULTS_DIR"
"""Environment variable that redirects the result lines (the smoke tests point it at a temporary dir)."""
RSS_PLUGIN = "benchmarks.rss_plugin"

QUICK_OPS = 40
"""Ops in the quick op subset: every k-th fp32 OpInfo of the sorted list, spread over the database."""


def env() -> dict:
    """Environment for subprocesses: the repository on ``PYTHONPATH`` and quiet Hugging Face loading."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.setdefault("HF_HUB_OFFLINE", "1")
    e.setdefault("TRANSFORMERS_OFFLINE", "1")
    e.pop("PYTEST_ADDOPTS", None)
    e.pop("PYTEST_XDIST_AUTO_NUM_WORKERS", None)
    return e


def write_result(name: str, record: dict) -> Path:
    """Append ``record`` (plus date, CPU count, Python and torch versions) to ``results/<name>.jsonl``."""
    import torch

    line = {
        "benchmark": name,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    line.update(record)
    directory = results_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.jsonl"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")
    return path


def results_dir() -> Path:
    """Where result lines go: ``$BENCH_RESULTS_DIR`` when set, else ``benchmarks/results``."""
    return Path(os.environ[RESULTS_ENV]) if os.environ.get(RESULTS_ENV) else RESULTS


def fp32_op_names() -> list[str]:
    """Sorted ``full_name`` of every OpInfo that supports float32 on the CPU (677 in torch 2.13)."""
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    return sorted(op.full_name for op in op_db if torch.float32 in op.supported_dtypes("cpu"))


def op_subset(count: int | None, names: str | None = None) -> list[str]:
    """``count`` ops spread evenly over :func:`fp32_op_names` (every op when ``count`` is None or 0), or
    the comma-separated OpInfo ``names`` when given.

    Raises:
        ValueError: ``count`` is negative, or a name is not an fp32 OpInfo.
    """
    every = fp32_op_names()
    if names:
        chosen = [n.strip() for n in names.split(",") if n.strip()]
        unknown = [n for n in chosen if n not in set(every)]
        if unknown:
            raise ValueError(f"--conformance-ops: not an fp32 OpInfo full name: {', '.join(unknown)}")
        return chosen
    names = every
    if count is None or count == 0 or count >= len(names):
        return names
    if count < 0:
        raise ValueError(f"--ops-count must be >= 0, got {count}")
    step = len(names) / count
    return [names[int(i * step)] for i in range(count)]


def positive_int(text: str) -> int:
    """argparse type of ``--ops-count``: an integer >= 1 (``--full`` selects every op)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1 (use --full for every op), got {value}")
    return value


def add_op_selection(parser, full_help: str = "every fp32 OpInfo") -> None:
    """Add the mutually exclusive op-selection flags the OpInfo benchmarks share: ``--ops-count N``
    (ops spread over the fp32 OpInfos, default :data:`QUICK_OPS`), ``--conformance-ops NAMES`` and ``--full``."""
    g = parser.add_mutually_exclusive_group()
    g.add_argument(
        "--ops-count",
        type=positive_int,
        default=QUICK_OPS,
        help=f"ops measured, spread over the fp32 OpInfos (default {QUICK_OPS}; --full for all)",
    )
    g.add_argument(
        "--ops", "--conformance-ops", default=None, help="comma-separated OpInfo full names to measure instead"
    )
    g.add_argument("--full", action="store_true", help=full_help)


def write_ops_file(names: list[str], directory: str | os.PathLike) -> Path:
    """Write ``names`` one per line (the plugin's ``--conformance-ops @FILE`` form) and return the path."""
    path = Path(directory) / "ops.txt"
    path.write_text("\n".join(names) + "\n", encoding="utf-8")
    return path


def timed(
    cmd: list[str], *, timeout: float = 3600, cwd: Path = ROOT, extra_env: dict | None = None
) -> tuple[float, subprocess.CompletedProcess]:
    """Run ``cmd`` and return ``(wall seconds, completed process)`` (stdout and stderr captured).

    The process gets two extra attributes: ``cpu_s`` (user + system CPU seconds of it and of the
    descendants it waited for) and ``launched_at`` (``time.time()`` just before it started).

    ``extra_env`` is added to :func:`env`; ``timeout`` is in seconds (``subprocess.TimeoutExpired``).
    """
    e = env()
    e.update(extra_env or {})
    start = time.perf_counter()
    e["BENCH_LAUNCHED_AT"] = repr(time.time())
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, cwd=cwd, env=e, capture_output=True, text=True, timeout=timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc.launched_at = float(e["BENCH_LAUNCHED_AT"])  # type: ignore[attr-defined]
    # CPU seconds of the process and every descendant it waited for (xdist workers included): on a
    # shared machine this is steadier than wall time
    proc.cpu_s = round((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), 3)  # type: ignore[attr-defined]
    return time.perf_counter() - start, proc


def pytest_cmd(*args: str) -> list[str]:
    """``python -m pytest`` with the RSS/timing plugin, without the cache provider's state leaking in."""
    return [sys.executable, "-m", "pytest", "-p", RSS_PLUGIN, *args]


def read_rss(directory: str | os.PathLike) -> dict:
    """Per-process lines written by :mod:`benchmarks.rss_plugin`: ``{worker: {...}}``."""
    out = {}
    for p in sorted(Path(directory).glob("*.json")):
        data = json.loads(p.read_text(encoding="utf-8"))
        out[data["worker"]] = data
    return out


def phases(stamps: dict, launched_at: float, ended_at: float) -> dict:
    """Seconds spent in each phase of a pytest process from :mod:`benchmarks.rss_plugin`'s ``stamps``:
    ``startup`` (interpreter and pytest), ``configure`` (entry-point plugins such as the conformance plugin
    with torch, and ``pytest_configure``: device resolution, the emulator's install), ``collect``, ``run`` (tests, records and
    the report), ``unconfigure`` (terminal summary, ``pytest_unconfigure``), ``exit`` (interpreter exit)."""
    s = stamps
    get = lambda k, d: s.get(k, d)  # noqa: E731
    points = [
        launched_at,
        get("plugin_imported", launched_at),
        get("configured", launched_at),
        get("session_start", launched_at),
        get("collected", launched_at),
        get("session_finished", ended_at),
        get("unconfigured", ended_at),
        ended_at,
    ]
    return {
        "startup": round(points[1] - points[0], 2),
        "configure": round(points[3] - points[1], 2),
        "collect": round(points[4] - points[3], 2),
        "run": round(points[5] - points[4], 2),
        "unconfigure": round(points[6] - points[5], 2),
        "exit": round(points[7] - points[6], 2),
    }


def check_rc(proc: subprocess.CompletedProcess, what: str, ok=(0, 1)) -> None:
    """Raise SystemExit with the output tail when ``proc`` ended with an exit code not in ``ok``.

    Exit code 1 (some tests failed) is accepted by default: a benchmark measures time, not conformance.
    """
    if proc.returncode not in ok:
        tail = (proc.stdout[-3000:] + "\n" + proc.stderr[-3000:]).strip()
        raise SystemExit(f"{what} failed with exit code {proc.returncode}:\n{tail}")


def tmpdir(prefix: str) -> tempfile.TemporaryDirectory:
    """A temporary directory for report dirs and op lists."""
    return tempfile.TemporaryDirectory(prefix=f"bench-{prefix}-")
