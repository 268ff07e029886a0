"""Rule metadata, findings and violations of ``neuron-migrate``.

A *rule* has a code (``NM`` + family digit + two digits), a kebab-case name, a maximum
applicability (``safe``, ``unsafe`` or ``report``), the oldest torch release its replacement
needs, and a documentation page in fixed sections (What it does / Why is this bad? / Example /
Use instead / Fix safety / References), after ruff's rule documentation.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import libcst as cst

SAFE = "safe"
UNSAFE = "unsafe"
REPORT = "report"
APPLICABILITIES = (SAFE, UNSAFE, REPORT)

#: Family digit -> family name (the second character of a rule code).
FAMILIES = {
    "0": "accelerator-api",
    "1": "device",
    "2": "sync",
    "3": "memory",
    "4": "rng",
    "5": "amp",
    "6": "distributed",
    "7": "compile",
    "8": "backends",
    "9": "extensions",
}

DOC_SECTIONS = ("what", "why", "example", "use_instead", "fix_safety", "references")
DOC_TITLES = {
    "what": "What it does",
    "why": "Why is this bad?",
    "example": "Example",
    "use_instead": "Use instead",
    "fix_safety": "Fix safety",
    "references": "References",
}


@dataclasses.dataclass(frozen=True)
class Rule:
    """One rule: code, name, message and documentation.

    Attributes:
        code: ``NM`` + family digit + two digits, e.g. ``NM101``.
        name: kebab-case name that reads after "allow", e.g. ``cuda-is-available``.
        message: the problem, stated (``str.format`` fields filled by the finding).
        fix_title: what the fix does ("Replace ``x`` with ``y``"); empty for report-only rules.
        applicability: the best applicability any finding of this rule can have.
        min_torch: (major, minor) torch release that provides the replacement; under
            ``--target-torch`` older than this the rule is skipped.
        doc: mapping of each section in :data:`DOC_SECTIONS` to text.
    """

    code: str
    name: str
    message: str
    fix_title: str
    applicability: str
    doc: dict
    min_torch: tuple = (2, 6)

    @property
    def family(self) -> str:
        return FAMILIES[self.code[2]]

    def render_doc(self) -> str:
        """The rule's documentation as Markdown text, one ``##`` heading per section."""
        lines = [f"# {self.code} {self.name}", ""]
        lines.append(
            f"Family: {self.family}. Fix: {self.applicability}. Needs torch >= {self.min_torch[0]}.{self.min_torch[1]}."
        )
        lines.append("")
        for key in DOC_SECTIONS:
            lines += [f"## {DOC_TITLES[key]}", "", self.doc[key].strip(), ""]
        return "\n".join(lines)


@dataclasses.dataclass
class Finding:
    """What a rule handler returns for one node.

    Attributes:
        code: the rule code.
        node: the original node the finding is anchored on (its position is reported).
        fmt: fields for the rule's message template.
        fix: ``callable(updated_node) -> new_node`` or None when there is no fix.
        applicability: ``safe`` or ``unsafe`` when ``fix`` is set, else ``report``.
        stmt_fix: when True, ``fix`` replaces the enclosing simple statement line
            (``callable(updated_line) -> node | cst.RemovalSentinel``).
        guard: for a fix that widens an availability check, the region it decides
            (:func:`neuron_conformance.migrate.reach.guard_region`); the fix's applicability is then limited by
            the findings and CUDA-specific code in that region (:func:`neuron_conformance.migrate.reach.region_limit`).
        reason: why the finding is not fixed (or only with ``--unsafe-fixes``), appended to the
            message; set by the rule, or by the pass for a limited guard.
        advisory: a report-only note about what a widened check reaches (NM308): it does not
            limit the guard fixes whose region holds it (:func:`neuron_conformance.migrate.reach.region_limit`).
    """

    code: str
    node: cst.CSTNode
    fmt: dict = dataclasses.field(default_factory=dict)
    fix: Optional[Callable] = None
    applicability: str = REPORT
    stmt_fix: bool = False
    fix_on_parent: bool = False
    guard: Optional[cst.CSTNode] = None
    reason: str = ""
    advisory: bool = False


@dataclasses.dataclass(frozen=True)
class Violation:
    """A reported finding with its position (1-based line, 0-based column)."""

    path: str
    code: str
    message: str
    line: int
    column: int
    end_line: int
    end_column: int
    fix_applicability: str  # safe, unsafe or report
    fix_title: str

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)
