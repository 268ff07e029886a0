"""The one definition of test outcomes and failure classes (docs/architecture.md, "Result records").

Everything that names an outcome or a failure class -- the plugin, the failure classes of
:mod:`neuron_conformance.conformance.verdict.failures`, the manifest reasons, the reports, the model-zoo matrix -- imports it from
here. This module imports nothing, so the reports and the codemod can use it without importing torch.
"""

from __future__ import annotations

OUTCOMES = (
    "passed",
    "failed",
    "error",
    "xfailed",
    "xpassed",
    "expected-unreached",
    "no-reference",
    "reference-suspect",
    "not-claimed",
    "skipped",
)
"""Every outcome a record can have, in the order tables show them. ``xpassed`` is written as ``failed``
with failure class ``stale`` by the plugin, but readers accept it. ``no-reference``: the CPU gave no
reference (every sample's CPU call raised), so nothing about the device was judged; never a pass, and not
red (the device is not shown wrong; pytest reports the test as skipped). ``expected-unreached``: see
:data:`EXPECTED_UNREACHED`; ``not-claimed``: see :data:`NOT_CLAIMED`."""

EXPECTED_UNREACHED = "expected-unreached"
"""The outcome of a test a manifest entry expects to fail whose compared samples all passed while
``--conformance-sample-budget`` left samples out (:func:`neuron_conformance.conformance.verdict.expectations.unreached`): the failing sample
may be among those not compared, so the entry is not shown stale. Not red, not a pass (pytest reports
the test as skipped); the record's ``samples_left_out`` says how many were left out."""

NO_REFERENCE = "no-reference"
"""The outcome of a test whose CPU reference could not be computed (:class:`neuron_conformance.conformance.verdict.failures.NoReference`)."""

REFERENCE_SUSPECT = "reference-suspect"
"""The outcome of a test whose device result agrees with an independent float64 computation where the CPU
reference does not (:class:`neuron_conformance.conformance.verdict.failures.ReferenceSuspect`): the CPU op is suspect, not the
device. Never a pass of the device and never its failure: counted and listed apart (pytest reports the test
as skipped), naming the CPU op and how far its result is from the float64 one."""

NOT_CLAIMED = "not-claimed"
"""The outcome of a test that needs a capability the backend does not claim (:mod:`neuron_conformance.conformance.backend.capabilities`):
not run, so neither a failure, an expected failure nor a pass (pytest reports the test as skipped). It does
not change the run's exit status, and the aten audit does not count its overloads as covered."""

FAILING = frozenset({"failed", "error"})
"""Outcomes that make a run red."""

PASSING = frozenset({"passed", "xfailed", "xpassed", "expected-unreached"})
"""Outcomes that count as green for the baseline diff."""

RECORDED_FAILURES = ("failed", "error", "xfailed")
"""Outcomes whose record carries a ``failure_class``, a ``message`` and a ``repro``."""

OUTCOME_SEVERITY = {
    "skipped": 0,
    "not-claimed": 0,
    "passed": 1,
    "no-reference": 2,
    "reference-suspect": 2,
    "xfailed": 3,
    "expected-unreached": 3,
    "xpassed": 4,
    "failed": 5,
    "error": 6,
}
"""Severity of an outcome when several records share a matrix cell (higher wins the colour)."""

FAILURE_CLASSES = (
    "numeric",
    "metadata",
    "unsupported",
    "wrong-error",
    "nonfinite",
    "crash",
    "timeout",
    "unexpected",
    "stale",
    "fallback",
    "mode-difference",
    # custom-op conformance (opsuites/test_custom_ops.py): torch.library.opcheck's tests, and compilation
    "opcheck-schema",
    "opcheck-fake",
    "opcheck-autograd",
    "opcheck-aot",
    "compile-error",
    # the compile suite (opsuites/test_compile.py): how torch.compile ran an OpInfo sample
    "graph-break",
    "recompile",
    "compiled-run-error",
    "error",
)
"""Every failure class, in the order reports list them (meanings: :mod:`neuron_conformance.conformance.verdict.failures`)."""

UNEXPECTED = "unexpected"
"""The failure class of a test a manifest entry expected to fail that failed otherwise: with another
failure class, or (numeric entries with a bound) with an error beyond the entry's recorded size times
its margin (:mod:`neuron_conformance.conformance.verdict.expectations`). Red, unlike an expected failure, and not ``stale`` (the
expected failure did not pass: it got worse or changed)."""

FAILURE_SEVERITY = (
    "crash",
    "timeout",
    "wrong-error",
    "unsupported",
    "compile-error",
    "compiled-run-error",
    "opcheck-schema",
    "opcheck-fake",
    "opcheck-autograd",
    "opcheck-aot",
    "metadata",
    "nonfinite",
    "numeric",
    "graph-break",
    "recompile",
    "mode-difference",
    "unexpected",
    "stale",
    "fallback",
)
"""Failure classes most severe first, used to rank failures (``error`` and unknown classes rank last)."""

FALLBACK = "fallback"
"""The failure class of a test that passed with aten ops that fell back to the CPU, in a run that must
prove native support (``--conformance-require-native``, :mod:`neuron_conformance.conformance.backend.fallbacks`)."""

MODE_DIFFERENCE = "mode-difference"
"""The failure class of a test whose outcome or values differ between two of the backend's declared
execution modes (:mod:`neuron_conformance.conformance.backend.modes`)."""

__all__ = [
    "EXPECTED_UNREACHED",
    "FAILING",
    "FALLBACK",
    "MODE_DIFFERENCE",
    "FAILURE_CLASSES",
    "FAILURE_SEVERITY",
    "NO_REFERENCE",
    "NOT_CLAIMED",
    "REFERENCE_SUSPECT",
    "OUTCOMES",
    "OUTCOME_SEVERITY",
    "PASSING",
    "RECORDED_FAILURES",
    "UNEXPECTED",
]
