"""Baseline diff of two summaries: regressions, fixes, new and removed tests.

Tests are matched by pytest ``nodeid``. Outcome groups (neuron_conformance.reports.model):

* passing: ``passed``, ``xfailed``, ``xpassed``; failing: ``failed``, ``error``;
  ``skipped`` is neither.
* regression: passing before, failing now. fix: failing before, passing now.
* new / removed: the nodeid is only in the new / only in the old summary.
* changed: any other change of outcome (``passed`` -> ``skipped``, ``skipped`` ->
  ``failed``, ...), or a failing test whose failure class changed.

Used by ``python -m neuron_conformance.reports diff`` and the plugin's ``--conformance-baseline`` option.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from neuron_conformance.conformance.results.outcomes import FAILING, PASSING

from .summary import load_summary
from .to_markdown import cell, code_span


@dataclass(frozen=True)
class DiffEntry:
    """One test that differs between the two summaries (old_* is None for new tests, new_* for removed)."""

    nodeid: str
    old_outcome: str | None
    new_outcome: str | None
    op: str | None = None
    dtype: str | None = None
    suite: str | None = None
    old_failure_class: str | None = None
    new_failure_class: str | None = None
    repro: str | None = None
    message: str | None = None


@dataclass
class Diff:
    """Result of :func:`diff_summaries`; every list is sorted by nodeid."""

    regressions: list[DiffEntry] = field(default_factory=list)
    fixes: list[DiffEntry] = field(default_factory=list)
    new: list[DiffEntry] = field(default_factory=list)
    removed: list[DiffEntry] = field(default_factory=list)
    changed: list[DiffEntry] = field(default_factory=list)
    unchanged: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def has_regressions(self) -> bool:
        """True when any test went from passing to failing."""
        return bool(self.regressions)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: the lists of entries as dicts, ``unchanged`` and ``notes``."""
        return asdict(self)

    def to_text(self, *, limit: int = 50) -> str:
        """Human-readable Markdown report of the diff (at most ``limit`` entries per list)."""
        out = [
            f"## Baseline diff: {len(self.regressions)} regression(s), {len(self.fixes)} fix(es), "
            f"{len(self.new)} new, {len(self.removed)} removed, {len(self.changed)} other change(s), "
            f"{self.unchanged} unchanged",
            "",
        ]
        out += [f"> note: {cell(n)}" for n in self.notes]
        if self.notes:
            out.append("")
        for title, entries in (
            ("Regressions", self.regressions),
            ("Fixes", self.fixes),
            ("New tests", self.new),
            ("Removed tests", self.removed),
            ("Other changes", self.changed),
        ):
            if not entries:
                continue
            out += [f"### {title} ({len(entries)})", ""]
            for e in entries[:limit]:
                line = f"- {code_span(e.nodeid)}: {e.old_outcome or '-'} → {e.new_outcome or '-'}"
                cls = e.new_failure_class or e.old_failure_class
                if cls:
                    line += f" ({cell(cls)})"
                if title == "Regressions" and e.repro:
                    line += f" · repro {code_span(e.repro)}"
                out.append(line)
            if len(entries) > limit:
                out.append(f"- … and {len(entries) - limit} more")
            out.append("")
        return "\n".join(out).rstrip() + "\n"


def _entry(nodeid: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> DiffEntry:
    ref = new or old or {}
    return DiffEntry(
        nodeid=nodeid,
        old_outcome=old["outcome"] if old else None,
        new_outcome=new["outcome"] if new else None,
        op=ref.get("op"),
        dtype=ref.get("dtype"),
        suite=ref.get("suite"),
        old_failure_class=old.get("failure_class") if old else None,
        new_failure_class=new.get("failure_class") if new else None,
        repro=ref.get("repro"),
        message=(new or {}).get("message"),
    )


def _load(value: Mapping[str, Any] | Path | str) -> Mapping[str, Any]:
    return load_summary(value) if isinstance(value, (str, Path)) else value


def diff_summaries(old: Mapping[str, Any] | Path | str, new: Mapping[str, Any] | Path | str) -> Diff:
    """Compare two summaries test by test (rules in the module docstring).

    Args:
        old: the baseline: a summary dict, or the path of a summary.json / report dir.
        new: the run to judge, same forms.

    Returns:
        A :class:`Diff`. ``notes`` says when the two runs differ in torch version,
        device type or backend (the diff is still computed).

    Raises:
        ReportInputError: a path is missing, malformed, or of another schema version.
    """
    old_s, new_s = _load(old), _load(new)
    diff = Diff()
    for key, label in (("torch_version", "torch version"), ("harness_version", "harness version")):
        a, b = old_s["run"].get(key), new_s["run"].get(key)
        if a != b:
            diff.notes.append(f"{label} differs: baseline {a!r}, new {b!r}")
    for key in ("type", "backend", "backend_version"):
        a = (old_s["run"].get("device") or {}).get(key)
        b = (new_s["run"].get("device") or {}).get(key)
        if a != b:
            diff.notes.append(f"device.{key} differs: baseline {a!r}, new {b!r}")
    if not new_s["run"].get("complete"):
        diff.notes.append("the new run is incomplete: tests it did not reach are listed as removed")
    olds = {r["nodeid"]: r for r in old_s["records"]}
    news = {r["nodeid"]: r for r in new_s["records"]}
    for nodeid in sorted(set(olds) | set(news)):
        o, n = olds.get(nodeid), news.get(nodeid)
        if o is None:
            diff.new.append(_entry(nodeid, None, n))
        elif n is None:
            diff.removed.append(_entry(nodeid, o, None))
        elif o["outcome"] in PASSING and n["outcome"] in FAILING:
            diff.regressions.append(_entry(nodeid, o, n))
        elif o["outcome"] in FAILING and n["outcome"] in PASSING:
            diff.fixes.append(_entry(nodeid, o, n))
        elif o["outcome"] != n["outcome"] or (
            n["outcome"] in FAILING and o.get("failure_class") != n.get("failure_class")
        ):
            diff.changed.append(_entry(nodeid, o, n))
        else:
            diff.unchanged += 1
    return diff


def diff_json(diff: Diff) -> str:
    """The diff as indented JSON text."""
    return json.dumps(diff.to_dict(), indent=1) + "\n"
