"""The one definition of test outcomes and failure classes (docs/architecture.md, "Result records").

Everything that names an outcome or a failure class -- the plugin, the failure classes of
:mod:`conformance.failures`, the manifest reasons, the reports, the model-zoo matrix -- imports it from
here. This module imports nothing, so the reports and the codemod can use it without importing torch.
"""

from __future__ import annotations

OUTCOMES = ("passed", "failed", "error", "xfailed", "xpassed", "skipped")
"""Every outcome a record can have, in the order tables show them. ``xpassed`` is written as ``failed``
with failure class ``stale`` by the plugin, but readers accept it."""

FAILING = frozenset({"failed", "error"})
"""Outcomes that make a run red."""

PASSING = frozenset({"passed", "xfailed", "xpassed"})
"""Outcomes that count as green for the baseline diff."""

RECORDED_FAILURES = ("failed", "error", "xfailed")
"""Outcomes whose record carries a ``failure_class``, a ``message`` and a ``repro``."""

OUTCOME_SEVERITY = {"skipped": 0, "passed": 1, "xfailed": 2, "xpassed": 3, "failed": 4, "error": 5}
"""Severity of an outcome when several records share a matrix cell (higher wins the colour)."""

FAILURE_CLASSES = (
    "numeric",
    "metadata",
    "unsupported",
    "wrong-error",
    "nonfinite",
    "crash",
    "timeout",
    "stale",
    "error",
)
"""Every failure class, in the order reports list them (meanings: :mod:`conformance.failures`)."""

FAILURE_SEVERITY = ("crash", "timeout", "wrong-error", "unsupported", "metadata", "nonfinite", "numeric", "stale")
"""Failure classes most severe first, used to rank failures (``error`` and unknown classes rank last)."""

__all__ = ["FAILING", "FAILURE_CLASSES", "FAILURE_SEVERITY", "OUTCOMES", "OUTCOME_SEVERITY", "PASSING",
           "RECORDED_FAILURES"]
