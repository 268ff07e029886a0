"""Surviving a backend that crashes or breaks: crash files, crash records, the device canary.

A process that runs tests (an xdist worker, the main process under ``-n 0``, an isolation child) keeps one
*crash file*, ``<report-dir>/crash/<worker>.log``:

* before each test it rewrites the first line, ``conformance-inflight {json}``, with the test's identity
  (nodeid, suite, op, dtype, variant, kind, time limit);
* :mod:`faulthandler` writes to the same file when the process dies of a fatal signal (``Fatal Python
  error: Segmentation fault`` / ``Aborted`` ...) or when the hard time limit of :mod:`neuron_conformance.conformance.survival.timeouts`
  expires (``Timeout (0:05:30)!``), each with the Python traceback of every thread;
* a process that restarts itself because its device became unusable writes ``conformance-exit poisoned
  {json}`` before it exits;
* a suite that runs several samples in one test notes each before running it (:func:`note_sample`:
  ``conformance-sample {"sample": N}``), so that a crash record names the sample in flight.

Beside it, the *breadcrumb* ``<report-dir>/crash/<worker>.op`` (:mod:`neuron_conformance.conformance.survival.breadcrumb`, cleared at
each test's start) holds the last aten op a traced test entered on the device, so that a crash record
names the aten op (``aten_op``), or says it is unknown when nothing traced the test.

Whoever sees the process die (the xdist controller in ``pytest_handlecrashitem``, or the isolation parent)
reads that file with :func:`read_crash_file` and writes the test's record: ``failure_class`` ``crash``
(with ``signal``) or ``timeout``, from :func:`crash_record`.

The *canary* (:func:`run_canary`) is a tiny op run on the device after every failing test: when it fails
the device is taken to be unusable (a "poisoned" device), the failing test's record says so
(``device_poisoned``), and the process is replaced instead of failing every later test.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal as _signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from neuron_conformance.conformance.pytest_plugin.selection import clean_nodeid, identity_from_nodeid
from neuron_conformance.conformance.results.outcomes import UNEXPECTED
from neuron_conformance.conformance.survival.breadcrumb import SUFFIX as BREADCRUMB_SUFFIX
from neuron_conformance.conformance.survival.breadcrumb import Breadcrumb, breadcrumb_path, read_breadcrumb

CRASH_DIR = "crash"
INFLIGHT = "conformance-inflight "
EXIT_POISONED = "conformance-exit poisoned "
SAMPLE = "conformance-sample "
POISONED_EXIT_CODE = 75
"""Exit status of a process that restarts itself after the canary failed (``EX_TEMPFAIL`` of sysexits.h)."""

# faulthandler's names of the fatal signals it handles (CPython Modules/faulthandler.c, faulthandler_handlers)
_FATAL_NAMES = {
    "Segmentation fault": "SIGSEGV",
    "Aborted": "SIGABRT",
    "Bus error": "SIGBUS",
    "Floating point exception": "SIGFPE",
    "Floating-point exception": "SIGFPE",
    "Illegal instruction": "SIGILL",
}
_TEXT_LIMIT = 1500


def crash_path(report_dir: str | os.PathLike, worker: str) -> Path:
    """``<report_dir>/crash/<worker>.log``."""
    return Path(report_dir) / CRASH_DIR / f"{worker}.log"


def clear_crash_files(report_dir: str | os.PathLike) -> None:
    """Remove the crash files of a previous run (called once, by the controlling process)."""
    d = Path(report_dir) / CRASH_DIR
    if d.is_dir():
        for p in [*d.glob("*.log"), *d.glob(f"*{BREADCRUMB_SUFFIX}")]:
            p.unlink()


class CrashWatch:
    """The crash file of this process, with :mod:`faulthandler` writing into it.

    Args:
        report_dir: the report directory.
        worker: this process's record-file stem (``gw0``, ``main``, ``iso1``).

    The file stays open until the process exits (faulthandler keeps writing to its descriptor).
    ``crumb`` is the process's :class:`~neuron_conformance.conformance.survival.breadcrumb.Breadcrumb` (``<worker>.op`` beside it).
    """

    current: CrashWatch | None = None
    """The crash file of this process's innermost session (:func:`note_sample` writes to it)."""

    def __init__(self, report_dir: str | os.PathLike, worker: str):
        self.path = crash_path(report_dir, worker)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(self.path, "w+", encoding="utf-8")
        faulthandler.enable(file=self.fh, all_threads=True)
        self.crumb = Breadcrumb(breadcrumb_path(self.path.parent, worker))
        CrashWatch.current = self

    def note_sample(self, index: int) -> None:
        """Append the line naming the sample the running test is about to run."""
        self.fh.write(SAMPLE + json.dumps({"sample": index}) + "\n")
        self.fh.flush()

    def start_test(self, identity: dict) -> None:
        """Replace the file's content with the in-flight line of the test about to run."""
        self.crumb.clear()
        self.fh.seek(0)
        self.fh.truncate()
        self.fh.write(INFLIGHT + json.dumps(identity, default=repr) + "\n")
        self.fh.flush()

    def note_poisoned(self, info: dict) -> None:
        """Append the line that tells the watcher this process exits because its device is unusable."""
        self.fh.write(EXIT_POISONED + json.dumps(info, default=repr) + "\n")
        self.fh.flush()


def note_sample(index: int) -> None:
    """Tell the crash file that the running test starts sample ``index`` (a no-op outside a conformance
    process that runs tests). Cost: one short write and flush, no fsync."""
    watch = CrashWatch.current
    if watch is not None and not watch.fh.closed:
        watch.note_sample(int(index))


@dataclass
class CrashInfo:
    """What a dead process's crash file says (see the module docstring). ``aten_op``: the breadcrumb's
    last aten op entered on the device (None: unknown); ``traced``: the test in flight was traced."""

    inflight: dict | None = None
    poisoned: dict | None = None
    timeout: bool = False
    signal: str | None = None
    sample: int | None = None
    text: str = ""
    exists: bool = False
    aten_op: str | None = None
    traced: bool = False
    extra: dict = field(default_factory=dict)


def read_crash_file(report_dir: str | os.PathLike, worker: str) -> CrashInfo:
    """Parse ``<report_dir>/crash/<worker>.log`` (a missing file gives an empty :class:`CrashInfo`)."""
    path = crash_path(report_dir, worker)
    info = CrashInfo()
    try:
        raw = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return info
    info.exists = True
    info.traced, info.aten_op = read_breadcrumb(path.parent, worker)
    rest = []
    for line in raw.splitlines():
        if line.startswith(INFLIGHT):
            info.inflight = _json_or_none(line[len(INFLIGHT) :])
        elif line.startswith(SAMPLE):
            info.sample = (_json_or_none(line[len(SAMPLE) :]) or {}).get("sample", info.sample)
        elif line.startswith(EXIT_POISONED):
            info.poisoned = _json_or_none(line[len(EXIT_POISONED) :]) or {}
        else:
            rest.append(line)
            if line.startswith("Timeout (") and line.rstrip().endswith(")!"):
                info.timeout = True
            elif line.startswith("Fatal Python error: "):
                name = line[len("Fatal Python error: ") :].strip()
                info.signal = _FATAL_NAMES.get(name, info.signal)
    info.text = "\n".join(rest).strip()
    return info


def _json_or_none(text: str):
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def signal_name(returncode: int | None) -> str | None:
    """``-11`` -> ``"SIGSEGV"``: the signal that killed a subprocess (``Popen.returncode`` < 0), else None."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return _signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def crash_record(
    nodeid: str, info: CrashInfo, *, worker: str, returncode: int | None = None, fallback_identity: dict | None = None
) -> dict:
    """The result record of a test whose process died while running it.

    Args:
        nodeid: the test that was running.
        info: the process's crash file (:func:`read_crash_file`).
        worker: the dead process's id (``gw1``, ``iso0``).
        returncode: the process's exit status when known (negative: killed by that signal).
        fallback_identity: identity to use when the crash file has none for ``nodeid``.

    Returns:
        A record (docs/architecture.md) with ``outcome`` ``failed``, ``failure_class`` ``timeout`` (the hard
        time limit killed it) or ``crash``, ``signal`` (e.g. ``SIGSEGV``, or null), ``exit_code``,
        ``aten_op`` (the breadcrumb's last aten op entered on the device, or null: unknown) and the crash
        file's traceback in ``message``, whose second line names the aten op or says it is unknown.
    """
    ident = dict(fallback_identity or identity_from_nodeid(nodeid))
    sample = aten_op = None
    if info.inflight and info.inflight.get("nodeid") == nodeid:
        sample, aten_op = info.sample, info.aten_op
        ident.update({k: v for k, v in info.inflight.items() if k in ("suite", "kind", "op", "dtype", "variant")})
    sig = info.signal or signal_name(returncode)
    limit = (info.inflight or {}).get("timeout")
    if info.timeout:
        cls = "timeout"
        head = (
            f"Timeout: {nodeid} did not finish within its hard time limit"
            f"{f' ({limit:g} s + grace)' if isinstance(limit, (int, float)) else ''}"
            f"{f' in sample {sample}' if sample is not None else ''} and could not be "
            f"interrupted; worker {worker} was killed and replaced"
        )
    else:
        cls = "crash"
        how = f"killed by {sig}" if sig else (f"exited with status {returncode}" if returncode is not None else "died")
        head = (
            f"worker {worker} {how} while running {nodeid}"
            f"{f' (sample {sample})' if sample is not None else ''}; the worker was replaced"
        )
    text = summarize_traceback(info.text)
    head += "\n" + aten_op_line(aten_op, info.traced)
    rec = {
        "nodeid": clean_nodeid(nodeid),
        "suite": ident.get("suite"),
        "kind": ident.get("kind") or "op",
        "op": ident.get("op"),
        "dtype": ident.get("dtype"),
        "variant": ident.get("variant"),
        "sample": sample,
        "outcome": "failed",
        "failure_class": cls,
        "signal": sig,
        "exit_code": returncode,
        "aten_op": aten_op,
        "message": head + (f"\n{text}" if text else ""),
        "duration": _inflight_duration(info),
        "time": time.time(),
    }
    return rec


def aten_op_line(aten_op: str | None, traced: bool) -> str:
    """The crash message's line about the aten op: named from the breadcrumb, or unknown and why."""
    if aten_op:
        return f"last aten op entered on the device: {aten_op}"
    if traced:
        return "aten op: unknown (the test's trace entered no aten op on the device before it died)"
    return "aten op: unknown (the test was not traced: --conformance-aten-coverage off, or no backend op counter)"


def apply_expectation(rec: dict, manifest) -> bool:
    """Judge a crash/timeout record against the manifest (``Manifest.match``): when an entry covers the
    test, the record names it (``expected_failure``, ``manifest_entry``); when the entry's reason is the
    record's failure class (``crash``, ``timeout``) the record becomes ``xfailed``. Returns True then.

    A mismatched class is a failure of class ``unexpected`` (:data:`neuron_conformance.conformance.results.outcomes.UNEXPECTED`, as
    :func:`neuron_conformance.conformance.verdict.expectations.unexpected` rules for in-process failures): an entry ``numeric`` or
    ``crash`` does not excuse a ``timeout``; the message names the entry, what it expects and what was
    seen, then the crash itself. ``signal`` and ``exit_code`` stay in the record."""
    if not rec.get("op"):
        return False
    entry = manifest.match(op=rec["op"], dtype=rec.get("dtype"), variant=rec.get("variant"), suite=rec.get("suite"))
    if entry is None:
        return False
    rec["expected_failure"] = entry.reason
    rec["manifest_entry"] = entry.source
    seen = rec.get("failure_class")
    if entry.reason != seen:
        rec["failure_class"] = UNEXPECTED
        rec["message"] = (
            f"unexpected failure: manifest entry {entry.source} expects a {entry.reason} "
            f"failure; seen: {seen}\n{rec['message']}"
        )
        return False
    rec["outcome"] = "xfailed"
    return True


def crash_report(nodeid: str, rec: dict, location=None):
    """The pytest report of a test whose process died: failed, or xfailed (``wasxfail``) when
    :func:`apply_expectation` found it expected."""
    fspath = nodeid.split("::")[0]
    location = location or (fspath, None, fspath)
    if rec.get("outcome") == "xfailed":
        rep = pytest.TestReport(
            nodeid=nodeid,
            location=location,
            keywords={},
            outcome="skipped",
            longrepr=(fspath, None, rec["message"]),
            when="call",
        )
        rep.wasxfail = f"[{rec['expected_failure']}] ({rec['manifest_entry']})"  # type: ignore[attr-defined]
        return rep
    return pytest.TestReport(
        nodeid=nodeid, location=location, keywords={}, outcome="failed", longrepr=rec["message"], when="call"
    )


_NOISE = ("/_pytest/", "/pluggy/", "/execnet/", "/xdist/")


def summarize_traceback(text: str, max_frames: int = 12) -> str:
    """The useful part of a faulthandler dump: its first line and the test thread's frames.

    faulthandler lists every thread (``Current thread 0x... (most recent call first):`` for the thread that
    received the signal); the block kept is the current thread's, else (a ``Timeout`` dump, written from a
    C thread) the block with the most frames outside pytest, pluggy, execnet and xdist. Frames from those
    packages are dropped; at most ``max_frames`` frames are kept, most recent first.
    """
    if not text:
        return ""
    lines = text.splitlines()
    head = [ln for ln in lines[:1] if not ln.startswith(("Thread ", "Current thread "))]
    blocks: list[list[str]] = []
    for ln in lines:
        if ln.startswith(("Thread ", "Current thread ")):
            blocks.append([ln])
        elif blocks and ln.startswith("  File "):
            blocks[-1].append(ln)
    if not blocks:
        return text[:_TEXT_LIMIT]

    def useful(block):
        return [ln for ln in block[1:] if not any(n in ln for n in _NOISE)]

    current = [b for b in blocks if b[0].startswith("Current thread ")]
    block = current[0] if current else max(blocks, key=lambda b: len(useful(b)))
    frames = useful(block)[:max_frames]
    return "\n".join(head + [block[0]] + frames)[:_TEXT_LIMIT]


def _inflight_duration(info: CrashInfo) -> float:
    started = (info.inflight or {}).get("started")
    if isinstance(started, (int, float)):
        return max(0.0, time.time() - started)
    return 0.0


CANARIES = {
    "default": (
        "torch.ones(2, device=dev).add(1).cpu() == [2, 2]",
        lambda dev: torch.ones(2, device=dev).add(1).cpu(),
        [2.0, 2.0],
    ),
    "float": (
        "(torch.ones(2, device=dev) + torch.ones(2, device=dev)).cpu() == [2, 2]",
        lambda dev: (torch.ones(2, device=dev) + torch.ones(2, device=dev)).cpu(),
        [2.0, 2.0],
    ),
    "copy": (
        "torch.tensor([1., 2.]).to(dev).cpu() == [1, 2]",
        lambda dev: torch.tensor([1.0, 2.0]).to(dev).cpu(),
        [1.0, 2.0],
    ),
}
"""Canary variant -> (source shown in messages, fn(device) -> CPU tensor, expected values). The start-up
preflight (:mod:`neuron_conformance.conformance.backend.probe`) picks the first that works on a fresh device: ``default`` (a factory,
an elementwise kernel with an integer scalar, a device-to-host copy), else ``float`` (float operands
only), else ``copy`` (a host-to-device-to-host round trip)."""
CANARY_SOURCE = CANARIES["default"][0]


def run_canary(device, variant: str = "default") -> str | None:
    """Run canary ``variant`` of :data:`CANARIES` on ``device``; return None when it works, else what went
    wrong.

    The default canary, ``torch.ones(2, device=dev).add(1).cpu()`` compared with ``[2., 2.]``, touches a
    factory, an elementwise kernel and a device-to-host copy: three things every later test needs.
    Never raises (a hung canary is stopped by the test's hard time limit).

    Raises:
        KeyError: ``variant`` is not a key of :data:`CANARIES`.
    """
    _source, fn, expected = CANARIES[variant]
    try:
        got = fn(device)
        if not torch.equal(got, torch.tensor(expected)):
            return f"the canary op gave {got.tolist()} instead of {expected}"
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - anything at all means the device is not usable
        return f"the canary op raised {type(exc).__name__}: {str(exc)[:300]}"
    return None
