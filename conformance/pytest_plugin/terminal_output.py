"""Short failure reports: pytest's traceback of a conformance failure cut to its first lines.

A backend with hundreds of failures made pytest print hundreds of long tracebacks, each ending in the
exception's whole message; for a missing kernel that message is the dispatcher's dump (``Could not run
'aten::X' with arguments from the 'PrivateUse1' backend ...`` with every registered backend and kernel
file), so 36 failing tests printed about 300 KB. The result record keeps the whole message (it is built
from the exception, not from the printed report), so the terminal only needs enough to recognise the cause.

:func:`shorten_report` replaces the ``longrepr`` of a failed setup/call report whose exception is a
:class:`neuron_conformance.conformance.verdict.failures.ConformanceFailure`, a ``NotImplementedError`` or a dispatcher ``Could not run``
error by one short entry: the crash location, the exception type, the cause
(:func:`neuron_conformance.conformance.results.causes.normalize_message`) and at most :data:`MAX_LINES` lines of the message of at most
:data:`MAX_LINE` characters each (cut at a word boundary), then a line saying how much was cut. It keeps the
report a real ``ReprExceptionInfo``, so xdist carries it and pytest's short summary still shows the first
line. Nothing is changed with ``-v``, or with ``--tb`` other than ``auto`` (the default) and ``short``
(``--tb=long`` / ``native`` show everything, ``line`` / ``no`` are short already).

A dispatcher message keeps only its first line (the rest lists every registered kernel). Once a cause
(:func:`neuron_conformance.conformance.results.causes.normalize_message`) has been printed :data:`FULL_PER_CAUSE` times in a process,
later failures of that cause print one line naming it, so hundreds of failures of a few causes stay a few
kilobytes; the report and summary.json list every test.
"""

from __future__ import annotations

import pytest
from _pytest._code.code import ReprEntry, ReprExceptionInfo, ReprFileLocation, ReprTraceback

from neuron_conformance.conformance.results.causes import normalize_message, shorten
from neuron_conformance.conformance.verdict.failures import ConformanceFailure

MAX_LINES = 6
"""Message lines kept in a shortened report."""

MAX_LINE = 240
"""Characters kept of one message line (cut at a word boundary with ``...``)."""

FULL_PER_CAUSE = 3
"""Failures of one cause printed with their message lines; later ones get one line."""

SEEN_KEY = pytest.StashKey[dict]()
"""``config.stash``: cause -> how many failures of it this process printed."""

SHORTENED_STYLES = ("auto", "short")
"""``--tb`` styles under which conformance failures are shortened."""


def is_conformance_error(exc: BaseException | None) -> bool:
    """True for the failures whose messages are long by nature: a ``ConformanceFailure``, a
    ``NotImplementedError`` or a dispatcher ``Could not run '...'`` error."""
    if exc is None:
        return False
    if isinstance(exc, (ConformanceFailure, NotImplementedError)):
        return True
    return "Could not run '" in str(exc)


def wants_full_output(config: pytest.Config) -> bool:
    """True when the user asked for the whole traceback (``-v`` or a ``--tb`` style we leave alone)."""
    return config.option.verbose > 0 or getattr(config.option, "tbstyle", "auto") not in SHORTENED_STYLES


def short_lines(exc: BaseException, *, max_lines: int = MAX_LINES, max_line: int = MAX_LINE) -> list[str]:
    """The kept lines of ``exc``'s message (cause first for a dispatcher message) and a line saying what
    was cut, if anything."""
    text = str(exc)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    out = []
    cause = normalize_message(text)
    if "Could not run '" in text:
        out.append(f"cause: {cause}")
        max_lines = 1
    kept = [shorten(ln, max_line) for ln in lines[:max_lines]]
    out += kept
    cut_lines = len(lines) - len(kept)
    cut_chars = len(text) - sum(len(k) for k in kept)
    if cut_lines > 0 or any(k != " ".join(ln.split()) for k, ln in zip(kept, lines)):
        out.append(
            f"... message cut ({cut_lines} more line(s), {max(cut_chars, 0)} characters); the result "
            f"record has all of it; --tb=long or -v prints it"
        )
    return out


def shorten_report(item: pytest.Item, report: pytest.TestReport, excinfo) -> bool:
    """Replace ``report.longrepr`` by a short entry (module docstring). Returns True when it did."""
    if report.when not in ("setup", "call") or not report.failed or excinfo is None:
        return False
    if wants_full_output(item.config) or not is_conformance_error(excinfo.value):
        return False
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is None:
        return False
    exc = excinfo.value
    name = type(exc).__name__
    seen = item.config.stash.setdefault(SEEN_KEY, {})
    cause = normalize_message(str(exc))
    seen[cause] = seen.get(cause, 0) + 1
    if seen[cause] > FULL_PER_CAUSE:
        lines = [
            f"{shorten(cause, MAX_LINE)} (failure {seen[cause]} of this cause here; shown in full "
            f"{FULL_PER_CAUSE} times above; --tb=long or -v prints it)"
        ]
    else:
        lines = short_lines(exc)
    first = lines[0] if lines else ""
    entry = ReprEntry(
        [f"E   {name}: {ln}" if i == 0 else f"E   {ln}" for i, ln in enumerate(lines)] or [f"E   {name}"],
        None,
        None,
        ReprFileLocation(crash.path, crash.lineno, name),
        "short",
    )
    report.longrepr = ReprExceptionInfo(
        ReprTraceback([entry], None, "short"), ReprFileLocation(crash.path, crash.lineno, f"{name}: {first}")
    )
    return True


__all__ = ["MAX_LINE", "MAX_LINES", "is_conformance_error", "short_lines", "shorten_report", "wants_full_output"]
