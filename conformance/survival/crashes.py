"""The xdist controller's side of a dead worker: record the test it was running, replace it, go on.

pytest-xdist (3.x, ``xdist/dsession.py``) calls ``pytest_testnodedown`` when a worker dies, then asks its
scheduler which test the worker was running (``remove_node``), calls ``pytest_handlecrashitem`` for it
and starts a new worker (``--max-worker-restart``, default 4 per worker). This module:

* writes the ``crash`` / ``timeout`` record of that test to ``records/controller.jsonl`` with the signal,
  exit status and the worker's faulthandler traceback (:mod:`neuron_conformance.conformance.survival.crash_files`), and puts the same
  text in the test's report (so the terminal, ``--junitxml`` and the report agree);
* tells a deliberate exit (the worker's device failed the canary, so it restarted itself before its next
  test) from a crash: the tests it had not started go back to the front of the queue and none is reported;
* works around the ``loadscope`` / ``loadfile`` / ``loadgroup`` schedulers, which put the crashing test
  back in the queue with the rest of its group (so that it crashes the next worker too, until
  ``--max-worker-restart`` ends the run) and requeue finished groups (a worker handed one gets no test and
  never asks for more: the run stalls): before ``remove_node`` runs, the crashing test is marked done and
  reported here, and the unfinished groups are requeued here.

When a scheduler still names a test that never started (``pytest_handlecrashitem`` after a deliberate exit
or after a crash handled here), it is put back in the queue and its report is marked ``rerun``.
"""

from __future__ import annotations

import pytest

from neuron_conformance.conformance.pytest_plugin.session import ConformanceSession
from neuron_conformance.conformance.results.records import RecordWriter
from neuron_conformance.conformance.survival.crash_files import (
    CrashInfo,
    apply_expectation,
    crash_record,
    crash_report,
    read_crash_file,
)

CONTROLLER = "controller"
UNBOUNDED_RESTARTS = 1_000_000
"""``--max-worker-restart`` when the user gave none: xdist's default (4 per worker) would end a run on a
backend with a few crashing kernels; a dead device is bounded by :data:`MAX_STARTUP_CRASHES` instead."""
MAX_STARTUP_CRASHES = 4
"""New workers in a row that die before their first test (no in-flight test in the crash file) before
the run stops: the device is dead, not one kernel."""


def raise_restart_limit(config: pytest.Config) -> bool:
    """In the xdist controller, before pytest-xdist reads it: ``--max-worker-restart`` unbounded
    (:data:`UNBOUNDED_RESTARTS`) when the user did not set it. Returns True when it was raised."""
    option = config.option
    if (
        getattr(option, "maxworkerrestart", "unset") is None
        and getattr(option, "numprocesses", None)
        and not hasattr(config, "workerinput")
    ):
        option.maxworkerrestart = str(UNBOUNDED_RESTARTS)
        return True
    return False


def guard_scheduler(sched) -> None:
    """Guard a ``loadscope``-family scheduler (pytest-xdist 3.8, ``scheduler/loadscope.py``) against two
    ways a replacement worker stalls the run after a crash:

    * it reschedules every node it knows, including a replacement worker that is ready but has not sent
      its collection: ``_assign_work_unit`` then raises ``KeyError: <WorkerController gwN>`` (an
      INTERNALERROR that ends the run). Such a worker gets its work when its collection arrives;
    * a replacement worker handed ONE test and no shutdown waits forever: an xdist worker runs a test only
      once it knows the next one (or that none follows, ``shutdown``), and the scheduler gives it more only
      when it finishes one. The initial distribution avoids this by giving each worker two units
      (xdist #277); after a reschedule the worker is topped up to two, or told that no more will come.
    """
    collections = getattr(sched, "registered_collections", None)
    original = getattr(sched, "_reschedule", None)
    if not isinstance(collections, dict) or original is None or not hasattr(sched, "_pending_of"):
        return

    def _reschedule(node):
        if node not in sched.registered_collections:
            return None
        original(node)
        if node.shutting_down or node not in sched.assigned_work:
            return None
        if sched._pending_of(sched.assigned_work[node]) < 2:
            if sched.workqueue:
                sched._assign_work_unit(node)
            else:
                node.shutdown()
        return None

    sched._reschedule = _reschedule


def _dsession(config: pytest.Config):
    return config.pluginmanager.get_plugin("dsession")


def _returncode(node, wait: float = 2.0) -> int | None:
    """Exit status of a worker's process (execnet popen gateways only), waiting up to ``wait`` seconds."""
    popen = getattr(getattr(getattr(node, "gateway", None), "_io", None), "popen", None)
    if popen is None:
        return None
    try:
        return popen.wait(timeout=wait)
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired, OSError: unknown
        return None


def _worker_id(node) -> str:
    return getattr(getattr(node, "gateway", None), "id", None) or "unknown"


def on_node_down(config: pytest.Config, state: ConformanceSession, node, error) -> None:
    """``pytest_testnodedown`` on the controller, before xdist asks its scheduler which test crashed.

    * loadscope family: mark the crashing test done and report it here; put the dead worker's unfinished
      groups back in the queue (finished ones are dropped) so that the scheduler names no other test;
    * a poisoned worker (deliberate exit) under ``load`` / ``worksteal``: put its pending tests back at the
      front of the queue, so that none is reported as crashed.
    """
    if error is None:
        return
    dsession = _dsession(config)
    sched = getattr(dsession, "sched", None)
    worker = _worker_id(node)
    info = read_crash_file(state.report_dir, worker)
    poisoned = info.poisoned is not None
    _count_startup_crash(state, dsession, info, worker)
    work = getattr(sched, "assigned_work", None)
    if isinstance(work, dict) and node in work:
        crashitem = None
        if not poisoned and info.inflight is not None:  # the first unfinished test is the one it was running
            for unit in work[node].values():
                crashitem = next((nid for nid, done in unit.items() if not done), None)
                if crashitem is not None:
                    unit[crashitem] = True
                    break
        # requeue what is left ourselves (remove_node would requeue finished groups too: a worker handed
        # one gets no test and never asks for more, and the run stalls), so remove_node finds nothing
        for scope, unit in list(work[node].items()):
            del work[node][scope]
            if not all(unit.values()):
                sched.workqueue[scope] = unit
        if crashitem is not None:
            _report_crash(config, state, crashitem, info, node)
        return
    pending = getattr(sched, "node2pending", {}).get(node) if sched is not None else None
    if poisoned and pending and isinstance(getattr(sched, "pending", None), list):
        sched.pending[0:0] = list(pending)
        pending.clear()


def _count_startup_crash(state: ConformanceSession, dsession, info: CrashInfo, worker: str) -> None:
    """Count workers in a row that died before their first test; stop the run at
    :data:`MAX_STARTUP_CRASHES` (``stop_reason``, and xdist's restart limit reached now)."""
    if info.inflight is not None or info.poisoned is not None:
        state.reset_startup_crashes()
        return
    crashes = state.count_startup_crash()
    if crashes >= MAX_STARTUP_CRASHES and dsession is not None:
        state.stop(
            f"{crashes} workers in a row died before running a test (the last: "
            f"{worker}); the device or backend is not usable"
        )
        dsession._max_worker_restart = getattr(dsession, "_failed_nodes_count", 0)  # xdist stops after this one


def on_test_report(state: ConformanceSession, report) -> None:
    """A worker finished a test phase (controller side): the run is not stuck on dead workers."""
    if getattr(report, "node", None) is not None:
        state.reset_startup_crashes()


def _report_crash(config: pytest.Config, state: ConformanceSession, crashitem: str, info: CrashInfo, node) -> None:
    worker = _worker_id(node)
    state.crash_handled[worker] = crashitem
    rec, _text = _write_crash(state, crashitem, info, node)
    rep = crash_report(crashitem, rec)
    rep.node = node  # type: ignore[attr-defined]
    config.hook.pytest_runtest_logreport(report=rep)
    config.hook.pytest_runtest_logfinish(nodeid=crashitem, location=rep.location)


def on_crash_item(config: pytest.Config, state: ConformanceSession, crashitem: str, report, sched) -> None:
    """``pytest_handlecrashitem``: record the crash, or reschedule after a deliberate (poisoned) exit."""
    node = getattr(report, "node", None)
    worker = _worker_id(node)
    info = read_crash_file(state.report_dir, worker)
    handled = state.crash_handled.get(worker)
    if info.poisoned is not None or (handled is not None and handled != crashitem):
        # crashitem never started: the worker restarted itself (poisoned device) or crashed on another test
        try:
            sched.mark_test_pending(crashitem)
        except NotImplementedError:
            pass  # loadscope-family schedulers requeue unfinished tests themselves
        report.outcome = "rerun"
        why = (
            f"the device failed the canary after {info.poisoned.get('nodeid')}"
            if info.poisoned is not None
            else f"it crashed on {handled}"
        )
        report.longrepr = f"worker {worker} was replaced because {why}; {crashitem} will run on a new worker"
        return
    rec, text = _write_crash(state, crashitem, info, node)
    if rec["outcome"] == "xfailed":
        expected = crash_report(crashitem, rec)
        report.outcome, report.longrepr, report.wasxfail = "skipped", expected.longrepr, expected.wasxfail
    else:
        report.longrepr = text


def _write_crash(state: ConformanceSession, crashitem: str, info: CrashInfo, node) -> tuple[dict, str]:
    worker = _worker_id(node)
    rc = _returncode(node)
    rec = crash_record(crashitem, info, worker=worker, returncode=rc, fallback_identity=state.identities.get(crashitem))
    rec["repro"] = state.repro_command(crashitem, None)
    rec["worker"] = worker
    apply_expectation(rec, state.manifest)
    writer = RecordWriter(state.report_dir, worker=CONTROLLER)
    try:
        writer.write(rec)
    finally:
        writer.close()
    return rec, rec["message"]
