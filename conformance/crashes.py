"""The xdist controller's side of a dead worker: record the test it was running, replace it, go on.

pytest-xdist (3.x, ``xdist/dsession.py``) calls ``pytest_testnodedown`` when a worker dies, then asks its
scheduler which test the worker was running (``remove_node``), calls ``pytest_handlecrashitem`` for it
and starts a new worker (``--max-worker-restart``, default 4 per worker). This module:

* writes the ``crash`` / ``timeout`` record of that test to ``records/controller.jsonl`` with the signal,
  exit status and the worker's faulthandler traceback (:mod:`conformance.survival`), and puts the same
  text in the test's report (so the terminal, ``--junitxml`` and the report agree);
* tells a deliberate exit (the worker's device failed the canary, so it restarted itself before its next
  test) from a crash: that next test never ran, so it is put back in the queue and its report is marked
  ``rerun`` instead of failed;
* works around the ``loadscope`` / ``loadfile`` / ``loadgroup`` schedulers, which put the crashing test
  back in the queue with the rest of its group, so that it crashes the next worker too until
  ``--max-worker-restart`` ends the run: before ``remove_node`` runs, the crashing test is marked done
  and reported here.
"""

from __future__ import annotations

import pytest

from .records import RecordWriter
from .survival import CrashInfo, crash_record, read_crash_file

CONTROLLER = "controller"


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


def on_node_down(config: pytest.Config, state, node, error) -> None:
    """``pytest_testnodedown`` on the controller: handle a crash under a loadscope-family scheduler."""
    if error is None:
        return
    ds = _dsession(config)
    sched = getattr(ds, "sched", None)
    work = getattr(sched, "assigned_work", None)
    if not isinstance(work, dict) or node not in work:
        return  # LoadScheduling / WorkStealing: remove_node reports the right test and does not rerun it
    worker = _worker_id(node)
    info = read_crash_file(state.report_dir, worker)
    crashitem = None
    if info.poisoned is None:  # a crash (a poisoned worker's pending test never ran: it is requeued as is)
        for unit in work[node].values():
            for nodeid, done in unit.items():
                if not done:
                    crashitem = nodeid
                    unit[nodeid] = True  # keep remove_node from requeueing the test that crashes
                    break
            if crashitem:
                break
    # remove_node requeues every unit of the dead worker, finished ones too; a worker handed a finished
    # unit gets no test and never asks for more, so the run would stall with work left in the queue
    for scope in [sc for sc, unit in work[node].items() if all(unit.values())]:
        del work[node][scope]
    if crashitem is None:
        return
    state.crash_handled[worker] = crashitem
    rec, text = _write_crash(state, crashitem, info, node)
    fspath = crashitem.split("::")[0]
    rep = pytest.TestReport(nodeid=crashitem, location=(fspath, None, fspath), keywords={}, outcome="failed",
                            longrepr=text, when="call")
    rep.node = node  # type: ignore[attr-defined]
    config.hook.pytest_runtest_logreport(report=rep)
    config.hook.pytest_runtest_logfinish(nodeid=crashitem, location=rep.location)


def on_crash_item(config: pytest.Config, state, crashitem: str, report, sched) -> None:
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
        why = (f"the device failed the canary after {info.poisoned.get('nodeid')}"
               if info.poisoned is not None else f"it crashed on {handled}")
        report.longrepr = f"worker {worker} was replaced because {why}; {crashitem} will run on a new worker"
        return
    _rec, text = _write_crash(state, crashitem, info, node)
    report.longrepr = text


def _write_crash(state, crashitem: str, info: CrashInfo, node) -> tuple[dict, str]:
    worker = _worker_id(node)
    rc = _returncode(node)
    rec = crash_record(crashitem, info, worker=worker, returncode=rc,
                       fallback_identity=state.identities.get(crashitem))
    rec["repro"] = state.repro_command(crashitem, None)
    rec["worker"] = worker
    writer = RecordWriter(state.report_dir, worker=CONTROLLER)
    try:
        writer.write(rec)
    finally:
        writer.close()
    return rec, rec["message"]
