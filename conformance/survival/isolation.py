"""Isolation mode without xdist (``--conformance-isolate``): tests run in child processes that are replaced on a crash.

Under ``-n 0`` (or ``-p no:xdist``) a kernel that segfaults would end the whole run. With ``--conformance-isolate`` the
main process collects as usual but runs no test itself; it starts a child ``pytest`` with the same
arguments (plus ``-n 0 -p no:cacheprovider``, without ``--junitxml``) that runs a list of node ids, and:

* ``process``: one child runs every test; when it dies, the test it was running is recorded as ``crash``
  (or ``timeout``) and a new child runs the tests after it. One crash costs one test and one restart.
* ``op``: a fresh child per op (the ``conformance`` marker's ``op``), restarted the same way.
* ``test``: a fresh child per test (the strongest isolation, and the slowest: each child imports torch).

The child tells the parent, through a pipe (fd in ``$CONFORMANCE_ISOLATION_CHILD``), when each test starts
and finishes and sends its pytest reports (serialized as pytest-xdist does), so the parent's terminal
output, ``--junitxml`` and exit status are those of a normal run. Children write their records to
``records/iso<N>.jsonl``; their output goes to ``isolation/iso<N>.log``; the parent writes crash records to
``records/controller.jsonl``. A child whose device fails the canary exits before its next test and is
replaced like a crashed one, without a crash record.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from neuron_conformance.conformance.backend.probe import ENV as PREFLIGHT_ENV
from neuron_conformance.conformance.pytest_plugin.selection import NODEIDS_ENV, item_identity
from neuron_conformance.conformance.pytest_plugin.session import ISOLATION_CHILD_ENV, WORKER_ENV, ConformanceSession
from neuron_conformance.conformance.results.records import RecordWriter
from neuron_conformance.conformance.survival.crash_files import (
    apply_expectation,
    crash_record,
    crash_report,
    read_crash_file,
)

_STRIP_WITH_VALUE = (
    "--junitxml",
    "--junit-xml",
    "--conformance-baseline",
    "--conformance-shard-durations",
    "--conformance-shard-id",
    "--conformance-num-shards",
)
_STRIP_FLAGS = (
    "--conformance-fail-on-regression",
    "--conformance-fail-on-unknown",
    "--lf",
    "--last-failed",
    "--ff",
    "--failed-first",
    "--sw",
    "--stepwise",
)


def groups_of(items: list, mode: str, op_of) -> list[list[str]]:
    """Node ids in run order, split into the groups that each start a fresh child.

    Args:
        items: the collected test items.
        mode: ``process`` (one group), ``op`` (one per op, in first-seen order) or ``test`` (one each).
        op_of: item -> op name (or None: the test is its own group in ``op`` mode).
    """
    ids = [i.nodeid for i in items]
    if mode == "process":
        return [ids] if ids else []
    if mode == "test":
        return [[n] for n in ids]
    groups: dict[str, list[str]] = {}
    for item in items:
        groups.setdefault(op_of(item) or item.nodeid, []).append(item.nodeid)
    return list(groups.values())


def child_args(args: list[str], xdist_loaded: bool) -> list[str]:
    """The parent's command-line arguments for a child: report-only options removed, ``-n 0`` added."""
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in _STRIP_WITH_VALUE:
            skip = True
            continue
        if a.startswith(tuple(f"{o}=" for o in _STRIP_WITH_VALUE)) or a in _STRIP_FLAGS:
            continue
        out.append(a)
    out += ["-p", "no:cacheprovider", "--conformance-isolate", "off"]
    if xdist_loaded:
        out += ["-n", "0"]
    return out


class Child:
    """One child pytest process and its event pipe."""

    def __init__(self, config: pytest.Config, state: ConformanceSession, number: int, nodeids: list[str]):
        self.worker = f"iso{number}"
        self.dir = state.report_dir / "isolation"
        self.dir.mkdir(parents=True, exist_ok=True)
        ids_file = self.dir / f"{self.worker}.nodeids"
        ids_file.write_text("\n".join(nodeids) + "\n", encoding="utf-8")
        read_fd, write_fd = os.pipe()
        env = dict(os.environ)
        env[ISOLATION_CHILD_ENV] = str(write_fd)
        env[WORKER_ENV] = self.worker
        env[NODEIDS_ENV] = str(ids_file)
        env["CONFORMANCE_REPORT_DIR"] = str(state.report_dir)
        if state.preflight is not None:
            env[PREFLIGHT_ENV] = state.preflight.to_json()
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            *child_args(list(config.invocation_params.args), config.pluginmanager.has_plugin("xdist")),
        ]
        self.log = open(self.dir / f"{self.worker}.log", "w", encoding="utf-8")
        self.proc = subprocess.Popen(
            cmd,
            cwd=str(config.invocation_params.dir),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            pass_fds=(write_fd,),
        )
        os.close(write_fd)
        self.events = os.fdopen(read_fd, "r", encoding="utf-8")

    def close(self) -> int:
        self.events.close()
        rc = self.proc.wait()
        self.log.close()
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.close()


def run(session: pytest.Session, state: ConformanceSession) -> None:
    """Run the session's items in isolated children (``pytest_runtestloop`` of the parent)."""
    config = session.config
    by_id = {i.nodeid: i for i in session.items}
    number = 0
    for group in groups_of(session.items, state.isolate, lambda i: item_identity(i).get("op")):
        remaining = list(group)
        while remaining:
            if session.shouldfail or session.shouldstop:
                return
            child = Child(config, state, number, remaining)
            number += 1
            started: list[str] = []
            finished: set[str] = set()
            try:
                for line in child.events:
                    _handle_event(config, json.loads(line), started, finished, by_id)
            except BaseException:
                child.kill()
                raise
            rc = child.close()
            inflight = [n for n in started if n not in finished]
            poisoned = read_crash_file(state.report_dir, child.worker).poisoned is not None
            if inflight:
                _record_crash(config, state, child.worker, inflight[0], rc, by_id)
                finished.add(inflight[0])
            elif not poisoned:
                left = [n for n in remaining if n not in finished]
                if left:
                    # the child ended on its own (an error before its tests, -x, a pytest.exit): do not loop
                    sys.stderr.write(
                        f"conformance --conformance-isolate: child {child.worker} exited with status {rc} "
                        f"without running {len(left)} test(s); see {child.log.name}\n"
                    )
                    state.stop(f"isolation child {child.worker} exited with status {rc}", unless_stopped=True)
                    session.shouldstop = f"conformance: isolation child {child.worker} exited with status {rc}"
                    return
            done = set(started) | finished
            remaining = [n for n in remaining if n not in done]


def _handle_event(config: pytest.Config, event: dict, started: list, finished: set, by_id: dict) -> None:
    kind = event.get("event")
    nodeid = event.get("nodeid")
    item = by_id.get(nodeid)
    location = item.location if item is not None else (nodeid.split("::")[0], None, nodeid)
    if kind == "start":
        started.append(nodeid)
        config.hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
    elif kind == "report":
        rep = config.hook.pytest_report_from_serializable(config=config, data=event["data"])
        config.hook.pytest_runtest_logreport(report=rep)
    elif kind == "finish":
        finished.add(nodeid)
        config.hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)


def _record_crash(
    config: pytest.Config, state: ConformanceSession, worker: str, nodeid: str, rc: int, by_id: dict
) -> None:
    info = read_crash_file(state.report_dir, worker)
    rec = crash_record(nodeid, info, worker=worker, returncode=rc, fallback_identity=state.identities.get(nodeid))
    rec["repro"] = state.repro_command(nodeid, None)
    apply_expectation(rec, state.manifest)
    writer = RecordWriter(state.report_dir, worker="controller")
    try:
        writer.write(rec)
    finally:
        writer.close()
    item = by_id.get(nodeid)
    location = item.location if item is not None else (nodeid.split("::")[0], None, nodeid)
    rep = crash_report(nodeid, rec, location)
    config.hook.pytest_runtest_logreport(report=rep)
    config.hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)


class ChildChannel:
    """The child's end of the pipe: one JSON line per event, flushed at once."""

    def __init__(self, fd: int):
        self.fh = os.fdopen(fd, "w", encoding="utf-8")

    def send(self, event: str, nodeid: str, **fields) -> None:
        self.fh.write(json.dumps({"event": event, "nodeid": nodeid, **fields}, default=repr) + "\n")
        self.fh.flush()
