"""The result record of each test, and the canary run after a failing one.

A test fills its record through the ``conformance_record`` fixture (a :class:`Record`); when the test's
teardown report is made, :func:`on_report` builds the full record from the phase reports and writes it
with the process's :class:`~neuron_conformance.conformance.results.records.RecordWriter` (fields: docs/architecture.md, "Result
records").

How a record's ``outcome`` and ``failure_class`` are decided (:func:`outcome_of`, :func:`build_record`):

* the first phase (setup, call, teardown) that did not pass decides: an xfail is ``xfailed``, an
  unexpected pass ``xpassed``; a failed call is ``failed``, a failed setup/teardown ``error``; a skip
  ``skipped``;
* a failure's class comes from its exception (:func:`neuron_conformance.conformance.verdict.failures.classify_exception`; an
  exception group by its sub-exceptions, each listed in the message); the failed check's ``rule``,
  ``max_abs``, ``max_rel``, ``max_ulp``, ``atol``, ``rtol`` come from the exception's verdict
  (:func:`neuron_conformance.conformance.verdict.failures.verdict_fields`), so no numeric failure is written without them;
* a test skipped because it needs a capability the backend does not claim is ``not-claimed``, its
  record's ``not_claimed`` naming them (:mod:`neuron_conformance.conformance.backend.capabilities`);
* a test that raised :class:`neuron_conformance.conformance.verdict.failures.NoReference` (a pytest skip) is ``no-reference``:
  the CPU gave no reference, the device was not judged;
* a test that raised :class:`neuron_conformance.conformance.verdict.failures.ReferenceSuspect` is ``reference-suspect``: the
  device agreed with an independent float64 computation where the CPU reference did not;
* an ``xpassed`` test (a strict xfail that passed) is written as ``failed`` with class ``stale``: its
  manifest entry no longer describes the backend; unless ``--conformance-sample-budget`` left samples out: then it
  is ``expected-unreached`` (:func:`neuron_conformance.conformance.verdict.expectations.unreached`), a skip;
* an expected failure of another class, or beyond its entry's bound (:mod:`neuron_conformance.conformance.verdict.expectations`),
  is ``failed`` with class ``unexpected``; its message says what was expected and what was seen, then
  gives the failure itself.

After every failing test (except a stale one) the canary op runs on the device
(:func:`neuron_conformance.conformance.survival.crash_files.run_canary`); when it fails, the record says ``device_poisoned`` and the
process is replaced before its next test (:mod:`neuron_conformance.conformance.survival.guard`).
"""

from __future__ import annotations

import time
from typing import Callable

import pytest

from neuron_conformance.conformance.backend import capabilities
from neuron_conformance.conformance.pytest_plugin.run_state import RunState
from neuron_conformance.conformance.pytest_plugin.selection import (
    EXPECTATION_KEY,
    clean_nodeid,
    item_identity,
    record_identity,
)
from neuron_conformance.conformance.results.outcomes import (
    EXPECTED_UNREACHED,
    NO_REFERENCE,
    NOT_CLAIMED,
    RECORDED_FAILURES,
    REFERENCE_SUSPECT,
    UNEXPECTED,
)
from neuron_conformance.conformance.results.repro import save_sample_repro
from neuron_conformance.conformance.survival import crash_files as survival
from neuron_conformance.conformance.verdict.expectations import UNEXPECTED_KEY, UNREACHED_KEY, unreached
from neuron_conformance.conformance.verdict.failures import (
    NoReference,
    ReferenceSuspect,
    classify_exception,
    describe_group,
    verdict_fields,
)

RECORD_KEY = pytest.StashKey["Record"]()
"""The record a running test fills (``conformance_record``)."""
PHASES_KEY = pytest.StashKey[dict]()
"""``{when: (report, excinfo)}`` of a test's phases, gathered until its teardown report."""

MAX_REPRO_PAIRS = 500
"""Most repro .py/.pt pairs one process writes (a badly broken backend must not fill the disk)."""


class Record(dict):
    """A result record being filled by a test (see docs/architecture.md). Use ``update(**fields)``."""


def record_of(item: pytest.Item) -> Record:
    """The record of a running test item, created on first use (starting from its manifest expectation)."""
    rec = item.stash.get(RECORD_KEY, None)
    if rec is None:
        rec = Record(item.stash.get(EXPECTATION_KEY, None) or {})
        item.stash[RECORD_KEY] = rec
    return rec


def repro_saver(item: pytest.Item, session: RunState, record: Record) -> Callable[..., list[str]]:
    """``save(op_full_name, sample_index, dtype, sample) -> [paths]`` for the ``conformance_repro`` fixture.

    Writes the failing sample's repro pair with :func:`neuron_conformance.conformance.results.repro.save_sample_repro` and puts the
    paths (relative to the report dir) in the record's ``repro_files``; at most :data:`MAX_REPRO_PAIRS`
    pairs per process.
    """

    def save(op_full_name: str, sample_index: int, dtype: str, sample) -> list[str]:
        p = session.profile
        if session.repro_count >= MAX_REPRO_PAIRS or p is None:
            return []
        mode = p.emulator_mode if p.emulated and p.emulator_mode != "mirror" else None
        paths = save_sample_repro(
            session.report_dir,
            clean_nodeid(item.nodeid),
            op_full_name,
            sample_index,
            dtype,
            sample,
            device_type=p.type,
            backend_module=session.backend_module(),
            emulator_mode=mode,
        )
        if paths:
            session.count_repro()
            record["repro_files"] = paths
        return paths

    return save


def on_report(item: pytest.Item, session: RunState, report: pytest.TestReport, excinfo) -> None:
    """Gather a phase report; after the teardown report, build and write the test's record."""
    if report.when == "call":
        unreached(item, report, item.stash.get(RECORD_KEY, None))  # a budget-limited xpass is not stale
    phases = item.stash.setdefault(PHASES_KEY, {})
    phases[report.when] = (report, excinfo)
    if report.when == "teardown":
        rec = build_record(item, session, phases)
        if rec["outcome"] in RECORDED_FAILURES and rec.get("failure_class") != "stale":
            canary_after_failure(item, session, rec)
        session.record_writer().write(rec)


def outcome_of(phases: dict) -> tuple[str, object, object]:
    """``(outcome, deciding report, excinfo)`` of a test from its phase reports (module docstring)."""
    for when in ("setup", "call", "teardown"):
        if when not in phases:
            continue
        rep, exc = phases[when]
        if hasattr(rep, "wasxfail"):
            if rep.skipped:
                return "xfailed", rep, exc
            if rep.passed:
                return "xpassed", rep, exc
        if rep.failed:
            if when == "call" and "[XPASS(strict)]" in str(rep.longrepr):
                return "xpassed", rep, exc
            return ("failed" if when == "call" else "error"), rep, exc
        if rep.skipped:
            return "skipped", rep, exc
    return "passed", phases.get("call", phases["setup"])[0], None


def build_record(item: pytest.Item, session: RunState, phases: dict) -> dict:
    """The result record of a finished test item (identity, the test's own fields, outcome, message)."""
    outcome, rep, excinfo = outcome_of(phases)
    rec = dict(item_identity(item))
    rec.update(item.stash.get(RECORD_KEY, None) or item.stash.get(EXPECTATION_KEY, None) or {})
    for key, value in record_identity(item).items():
        if key in ("suite", "kind", "op"):
            rec.setdefault(key, value)
    rec["nodeid"] = clean_nodeid(item.nodeid)
    rec["outcome"] = outcome
    exc = excinfo.value if excinfo is not None else None
    message = ""
    unclaimed = capabilities.outcome_of(item, outcome)
    if unclaimed:
        outcome = rec["outcome"] = NOT_CLAIMED
        rec["not_claimed"] = unclaimed
        lr = rep.longrepr
        message = (lr[2] if isinstance(lr, tuple) and len(lr) == 3 else str(lr or "")).removeprefix("Skipped: ")
    elif outcome == "skipped" and item.stash.get(UNREACHED_KEY, None) is not None:
        outcome = rec["outcome"] = EXPECTED_UNREACHED
        message = item.stash[UNREACHED_KEY]
    elif outcome == "skipped" and isinstance(exc, NoReference):
        outcome = rec["outcome"] = NO_REFERENCE
        message = str(exc.msg)
    elif outcome == "skipped" and isinstance(exc, ReferenceSuspect):
        outcome = rec["outcome"] = REFERENCE_SUSPECT
        message = str(exc.msg)
    elif outcome in RECORDED_FAILURES:
        message = describe_group(exc) if exc is not None else str(getattr(rep, "longreprtext", ""))
        rec["failure_class"] = classify_exception(exc, message) if exc is not None else "error"
        rec.update(verdict_fields(exc))
        if exc is not None and getattr(exc, "sample", None) is not None:
            rec["sample"] = exc.sample
        problem = item.stash.get(UNEXPECTED_KEY, None)
        if problem is not None and outcome == "failed":
            rec["failure_class"] = UNEXPECTED
            message = f"{problem}\n{message}"
    elif outcome == "xpassed":
        rec["failure_class"] = "stale"
        message = (
            f"expected failure ({rec.get('expected_failure')}) passed: the manifest entry "
            f"{rec.get('manifest_entry')} is stale; remove it"
        )
    elif outcome == "skipped":
        lr = rep.longrepr
        message = lr[2] if isinstance(lr, tuple) and len(lr) == 3 else str(lr or "")
    if outcome == "xpassed":
        rec["outcome"] = "failed"
    rec["message"] = message
    rec.setdefault("dtype", None)
    rec.setdefault("variant", None)
    rec.setdefault("sample", None)
    if rec["outcome"] in RECORDED_FAILURES:
        rec["repro"] = session.repro_command(item.nodeid, rec.get("sample"))
    rec["duration"] = sum(r.duration for r, _ in phases.values())
    rec["time"] = time.time()
    return rec


def canary_after_failure(item: pytest.Item, session: RunState, rec: dict) -> None:
    """Run the canary op after a failing test; a failing canary marks the device poisoned."""
    if (
        session.canary_variant is None
        or session.profile is None
        or session.profile.type == "cpu"
        or session.watch is None
    ):
        return
    problem = survival.run_canary(session.profile.device, session.canary_variant)
    if problem is None:
        return
    session.mark_poisoned(item.nodeid, problem)
    rec["device_poisoned"] = True
    restart = (
        "this worker restarts"
        if session.is_worker or session.isolation_child
        else "the run stops (use -n N or --conformance-isolate to restart and go on)"
    )
    rec["message"] = (
        f"{rec.get('message') or ''}\n[conformance] the device is unusable after this test: "
        f"{problem} ({survival.CANARIES[session.canary_variant][0]}); {restart}"
    ).strip()
