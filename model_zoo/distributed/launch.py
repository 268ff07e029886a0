"""Run one distributed scenario in ``world_size`` spawned processes and collect what each rank returns.

The parent process:

1. starts a per-run ``torch.distributed.TCPStore`` server on ``127.0.0.1`` with port 0, so the operating
   system picks a free port and no two runs (or xdist workers) can collide;
2. spawns ``world_size`` fresh Python processes (``python -m neuron_conformance.model_zoo.distributed.launch <spec.json>
   <rank>``), each with ``torch.set_num_threads(1)``;
3. waits until every rank has exited, a rank has failed (the others are then killed after a grace period,
   since they would wait in a collective until the process-group timeout), or the whole-scenario deadline
   has passed (every rank is killed and the result is ``status="timeout"``).

Each rank loads the same device backend as the parent (the ``--conformance-backend-module`` the user named,
or the backend module an emulated device's distribution declares, which registers its collective backend
too), chooses the collective backend
(``torch.distributed.get_default_backend_for_device(device)`` where it answers, else the one the device
profile names), joins the process group with ``init_process_group(store=..., timeout=...)``, calls the
scenario function and writes its return value with ``torch.save`` to ``rank<r>.pt`` in the run folder; an
exception is written to ``rank<r>.err`` as JSON (type, message, traceback).
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

from neuron_conformance.conformance.backend import emulated
from neuron_conformance.conformance.results.peak_memory import peak_rss_mib

_PROJECT_ROOT = Path(__file__).resolve().parents[2]

DEFAULT_PG_TIMEOUT_S = 60.0
"""Process-group timeout in seconds: how long a collective may wait for a peer before gloo raises."""

FAILED_RANK_GRACE_S = 3.0
"""Seconds the other ranks get to finish after one rank failed before they are killed."""


@dataclasses.dataclass
class RankFailure:
    """An exception raised on one rank: its type name, message and formatted traceback."""

    rank: int
    type: str
    message: str
    traceback: str


@dataclasses.dataclass
class LaunchResult:
    """Outcome of one spawned run.

    Attributes:
        status: ``"ok"`` (every rank returned), ``"error"`` (a rank raised or died) or ``"timeout"``.
        results: per rank, the object the scenario function returned (``None`` for ranks that did not).
        failures: the exceptions raised by ranks, first failing rank first.
        exit_codes: per rank, the process exit code (negative: killed by that signal; ``None``: still
            running when killed at the deadline).
        wall_s: seconds from the first spawn to the last exit.
        dist_backend: the collective backend the ranks used (from rank 0's report), if known.
        logs: per rank, the last 4,000 characters of stdout and stderr together.
        peak_rss_mib: per rank, the process's peak resident set in MiB (``VmHWM`` of ``/proc/self/status``,
            read when the scenario function has returned, :mod:`neuron_conformance.conformance.results.peak_memory`;
            ``None`` where the rank did not return).
    """

    status: str
    results: list
    failures: list[RankFailure]
    exit_codes: list[int | None]
    wall_s: float
    dist_backend: str | None = None
    logs: list[str] = dataclasses.field(default_factory=list)
    peak_rss_mib: list = dataclasses.field(default_factory=list)

    def describe(self) -> str:
        """A short human-readable account of a failed run (first failure's traceback, exit codes)."""
        lines = [f"status={self.status} wall={self.wall_s:.1f}s exit_codes={self.exit_codes}"]
        for failure in self.failures[:1]:
            lines.append(f"rank {failure.rank} raised {failure.type}: {failure.message}")
            lines.append(failure.traceback.rstrip())
        if not self.failures:
            for rank, log in enumerate(self.logs):
                if log.strip():
                    lines.append(f"--- rank {rank} output (tail) ---\n{log[-1500:]}")
        return "\n".join(lines)


def run_world(
    target: str,
    world_size: int,
    *,
    device_type: str,
    backend_module: str | None = None,
    dist_backend: str | None = None,
    dist_backend_override: str | None = None,
    timeout_s: float = 300.0,
    pg_timeout_s: float = DEFAULT_PG_TIMEOUT_S,
    env: dict[str, str] | None = None,
    kwargs: dict | None = None,
    workdir: str | os.PathLike | None = None,
) -> LaunchResult:
    """Run ``target(rank=..., world_size=..., device=..., **kwargs)`` in ``world_size`` spawned processes.

    Args:
        target: ``"package.module:function"``; the function runs on every rank inside an initialised
            default process group and returns a picklable object (tensors are saved with ``torch.save``).
        world_size: number of ranks, >= 1.
        device_type: device type under test (``neuron``, ``cuda``, ``cpu``, ...). Rank ``r`` uses
            ``torch.device(device_type, r % device_count)`` (device 0 on a backend with one device).
        backend_module: module to import in every rank before anything else (the user's
            ``--conformance-backend-module``); ``None`` loads the emulated device's backend module when ``device_type`` is an emulated device.
        dist_backend: collective backend to use when ``get_default_backend_for_device`` has no answer
            (the device profile's ``dist_backend``).
        dist_backend_override: collective backend to use whatever the device's default is (tests run
            ``neuron_gloo`` on ``cpu`` tensors this way); ``"neuron_gloo"`` is registered in the ranks.
        timeout_s: whole-run deadline in seconds; past it every rank is killed and ``status="timeout"``.
        pg_timeout_s: ``init_process_group(timeout=...)`` in seconds.
        env: extra environment variables for the ranks (for example the collective fault hook).
        kwargs: keyword arguments for ``target`` (JSON-serialisable).
        workdir: folder for the run's files; a temporary folder (removed afterwards) when ``None``.

    Returns:
        A :class:`LaunchResult`; this function does not raise for failures inside the ranks.

    Raises:
        ValueError: ``target`` is not ``"module:function"``, ``world_size < 1`` or ``timeout_s <= 0``.
    """
    if not isinstance(target, str) or target.count(":") != 1:
        raise ValueError(f"target must be 'package.module:function', got {target!r}")
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    if not timeout_s or timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0 seconds, got {timeout_s!r}")
    cleanup = None
    if workdir is None:
        cleanup = tempfile.TemporaryDirectory(prefix="conformance-dist-")
        workdir = cleanup.name
    run_dir = Path(workdir)
    run_dir.mkdir(parents=True, exist_ok=True)
    store = dist.TCPStore(
        "127.0.0.1", 0, world_size, True, timeout=datetime.timedelta(seconds=pg_timeout_s), wait_for_workers=False
    )
    spec = {
        "target": target,
        "world_size": world_size,
        "device_type": device_type,
        "backend_module": backend_module,
        "dist_backend": dist_backend,
        "dist_backend_override": dist_backend_override,
        "port": store.port,
        "pg_timeout_s": pg_timeout_s,
        "env": dict(env or {}),
        "kwargs": dict(kwargs or {}),
        "run_dir": str(run_dir),
    }
    spec_path = run_dir / "spec.json"
    spec_path.write_text(json.dumps(spec))
    child_env = dict(os.environ)
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PROJECT_ROOT), child_env.get("PYTHONPATH", "")) if p)
    child_env.setdefault("OMP_NUM_THREADS", "1")
    child_env.update(spec["env"])
    start = time.monotonic()
    procs, logs = [], []
    try:
        for rank in range(world_size):
            log = open(run_dir / f"rank{rank}.log", "w+b")
            logs.append(log)
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "neuron_conformance.model_zoo.distributed.launch",
                        str(spec_path),
                        str(rank),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=child_env,
                    cwd=str(_PROJECT_ROOT),
                    start_new_session=True,
                )
            )
        status = _wait(procs, run_dir, start + timeout_s)
        wall = time.monotonic() - start
        exit_codes = [p.returncode for p in procs]
        results, failures, backend, peaks = [], [], None, []
        for rank in range(world_size):
            out, err = run_dir / f"rank{rank}.pt", run_dir / f"rank{rank}.err"
            if out.exists():
                payload = torch.load(out, weights_only=False)
                results.append(payload["result"])
                backend = backend or payload.get("dist_backend")
                peaks.append(payload.get("peak_rss_mib"))
            else:
                results.append(None)
                peaks.append(None)
            if err.exists():
                info = json.loads(err.read_text())
                failures.append(RankFailure(rank, info["type"], info["message"], info["traceback"]))
        if status == "ok" and (failures or any(code != 0 for code in exit_codes) or any(r is None for r in results)):
            status = "error"
        tails = []
        for log in logs:
            log.flush()
            log.seek(0)
            tails.append(log.read().decode(errors="replace")[-4000:])
        return LaunchResult(
            status, results, _first_failure_first(failures, run_dir), exit_codes, wall, backend, tails, peaks
        )
    finally:
        for proc in procs:
            _kill(proc)
        for log in logs:
            log.close()
        del store
        if cleanup is not None:
            cleanup.cleanup()


def _first_failure_first(failures: list[RankFailure], run_dir: Path) -> list[RankFailure]:
    """Order failures by the time their ``.err`` file was written: the first rank that failed first."""

    def when(failure: RankFailure) -> float:
        try:
            return (run_dir / f"rank{failure.rank}.err").stat().st_mtime
        except OSError:
            return float("inf")

    return sorted(failures, key=when)


def _wait(procs, run_dir: Path, deadline: float) -> str:
    failed_at = None
    while True:
        codes = [p.poll() for p in procs]
        if all(code is not None for code in codes):
            return "ok"
        now = time.monotonic()
        if now >= deadline:
            for proc in procs:
                _kill(proc)
            return "timeout"
        if failed_at is None and (any(code not in (None, 0) for code in codes) or any(run_dir.glob("rank*.err"))):
            failed_at = now
        if failed_at is not None and now - failed_at > FAILED_RANK_GRACE_S:
            for proc in procs:
                _kill(proc)
            return "error"
        time.sleep(0.05)


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the rank and anything it started (own session)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not get ignored
        pass


# ------------------------------------------------------------------------------------------------
# rank side


def load_device_backend(device_type: str, backend_module: str | None) -> None:
    """Make ``device_type`` usable in this process: import ``backend_module``, or, for an emulated device
    (:mod:`neuron_conformance.conformance.backend.emulated`), the backend module its distribution declares.

    A backend module may name its collective backend with ``CONFORMANCE_DIST_BACKEND`` (see
    ``docs/architecture.md``); it must register that backend when imported.

    Raises:
        ImportError: ``backend_module`` cannot be imported.
    """
    module = backend_module or emulated.backend_module(device_type)
    if module:
        importlib.import_module(module)


def choose_dist_backend(device_type: str, fallback: str | None) -> str:
    """The collective backend for ``device_type``: torch's default for the device, else ``fallback``.

    Source: ``torch.distributed.get_default_backend_for_device`` (torch >= 2.6) answers from
    ``Backend.default_device_backend_map``, which ``register_backend(..., devices=[...])`` fills.

    Raises:
        RuntimeError: torch has no default for the device and no ``fallback`` was given.
    """
    getter = getattr(dist, "get_default_backend_for_device", None)
    if getter is not None:
        try:
            return getter(device_type)
        except (ValueError, RuntimeError, KeyError):
            pass
    if fallback:
        return fallback
    raise RuntimeError(
        f"no collective backend for device type {device_type!r}: torch.distributed has no default for it and the "
        "device profile names none (set CONFORMANCE_DIST_BACKEND in the backend module)"
    )


def rank_device(device_type: str, rank: int) -> torch.device:
    """The device rank ``rank`` computes on: index ``rank % device_count`` (``cpu`` has no index)."""
    if device_type == "cpu":
        return torch.device("cpu")
    module = getattr(torch, device_type, None)
    count = module.device_count() if module is not None and hasattr(module, "device_count") else 1
    index = rank % max(int(count), 1)
    if module is not None and hasattr(module, "set_device"):
        module.set_device(index)
    return torch.device(device_type, index)


def _rank_main(spec_path: str, rank: int) -> int:
    spec = json.loads(Path(spec_path).read_text())
    run_dir = Path(spec["run_dir"])
    os.environ.update(spec["env"])
    torch.set_num_threads(1)
    try:
        load_device_backend(spec["device_type"], spec["backend_module"])
        backend = spec.get("dist_backend_override")
        backend = backend or choose_dist_backend(spec["device_type"], spec["dist_backend"])
        device = rank_device(spec["device_type"], rank)
        timeout = datetime.timedelta(seconds=spec["pg_timeout_s"])
        store = dist.TCPStore("127.0.0.1", spec["port"], spec["world_size"], False, timeout=timeout)
        dist.init_process_group(backend, store=store, rank=rank, world_size=spec["world_size"], timeout=timeout)
        module_name, func_name = spec["target"].split(":")
        func = getattr(importlib.import_module(module_name), func_name)
        result = func(rank=rank, world_size=spec["world_size"], device=device, **spec["kwargs"])
        dist.barrier()
        tmp = run_dir / f"rank{rank}.pt.tmp"
        torch.save({"result": result, "dist_backend": backend, "peak_rss_mib": peak_rss_mib()}, tmp)
        tmp.replace(run_dir / f"rank{rank}.pt")
        dist.destroy_process_group()
        return 0
    except BaseException as exc:  # report everything, then exit non-zero
        info = {"type": type(exc).__name__, "message": str(exc)[:2000], "traceback": traceback.format_exc()[-8000:]}
        tmp = run_dir / f"rank{rank}.err.tmp"
        tmp.write_text(json.dumps(info))
        tmp.replace(run_dir / f"rank{rank}.err")
        return 1


if __name__ == "__main__":
    sys.stdout.flush()
    code = _rank_main(sys.argv[1], int(sys.argv[2]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown: gloo threads can make a normal exit hang
