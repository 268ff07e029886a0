"""Failure classes that a conformance check raises.

Every check that finds the device wrong raises a subclass of :class:`ConformanceFailure`. It is an
``AssertionError`` (so pytest shows it like any assertion) that carries a ``failure_class``: the word that
result records, the expected-failure manifest and the reports use for the kind of failure.

The classes, and what raises them:

=============== ================================================================================
``numeric``     values differ beyond the oracle's rule (:class:`NumericFailure`)
``metadata``    dtype, shape, strides, device or aliasing differ (:class:`MetadataFailure`)
``unsupported`` the device raised ``NotImplementedError``, or said it has no kernel (classified by the plugin)
``wrong-error`` the device raised another exception than CPU, or none (:class:`WrongErrorFailure`)
``nonfinite``   NaN or inf where the reference has a finite value (:class:`NonFiniteFailure`)
``crash``       the process running the test died (classified by the plugin)
``timeout``     the test ran past its time limit (classified by the plugin)
``unexpected``  an expected failure failed with another class, or beyond its entry's bound
                (classified by the plugin: :mod:`neuron_conformance.conformance.verdict.expectations`)
``stale``       an expected failure passed: its manifest entry is stale (classified by the plugin)
``opcheck-*``   a ``torch.library.opcheck`` test of a declared custom op failed: ``opcheck-schema``,
                ``opcheck-fake`` (fake/meta kernel), ``opcheck-autograd`` (autograd registration),
                ``opcheck-aot`` (AOT dispatch) (:class:`OpcheckFailure`)
``compile-error`` ``torch.compile`` raised while compiling: Dynamo tracing or the backend compiler, for
                the forward or the backward graph (:class:`CompileFailure`; the custom-op and compile suites)
``graph-break`` Dynamo split a compiled OpInfo sample into more graphs on the device than on the CPU, or
                compiled nothing (:class:`GraphBreakFailure`)
``recompile``   a compiled sample compiled again for identical inputs, or hit Dynamo's recompile limit
                (:class:`RecompileFailure`)
``compiled-run-error`` compiled code raised while running (a forward or backward graph, or the eager code
                between graphs) on a sample that eager mode on the device ran (:class:`CompiledRunFailure`)
``error``       any other exception raised on the device
=============== ================================================================================

Not a failure class: :class:`NoReference` (the CPU gave no reference, so nothing was judged) ends a test
with the outcome ``no-reference`` (:data:`neuron_conformance.conformance.results.outcomes.NO_REFERENCE`). It is a pytest skip, so
pytest does not count the test red, and the record does not count it passed.
"""

from __future__ import annotations

import builtins

import pytest

from neuron_conformance.conformance.results.causes import BACKEND_NOT_IMPLEMENTED
from neuron_conformance.conformance.results.outcomes import (
    FAILURE_CLASSES,
    FAILURE_SEVERITY,
)  # re-exported: the one definition is in neuron_conformance.conformance.results.outcomes

__all__ = [
    "FAILURE_CLASSES",
    "OPCHECK_CLASSES",
    "CompileFailure",
    "CompiledRunFailure",
    "ConformanceFailure",
    "FallbackFailure",
    "MetadataFailure",
    "NoReference",
    "ReferenceSuspect",
    "NonFiniteFailure",
    "GraphBreakFailure",
    "NumericFailure",
    "OpcheckFailure",
    "RecompileFailure",
    "TransferError",
    "WrongErrorFailure",
    "classify_exception",
    "describe_group",
    "verdict_fields",
]

_GROUP = getattr(builtins, "BaseExceptionGroup", ())
"""``BaseExceptionGroup`` (Python >= 3.11; an empty tuple before, which no exception is an instance of)."""


class ConformanceFailure(AssertionError):
    """A check found the device under test wrong.

    Args:
        message: what differs, with the values, for a human.
        sample: index of the sample input that failed, when the check ran OpInfo samples.

    Attributes:
        failure_class: one of :data:`FAILURE_CLASSES`.
    """

    failure_class = "error"

    def __init__(self, message: str, *, sample: int | None = None, verdict=None, fields: dict | None = None):
        super().__init__(message)
        self.sample = sample
        self.verdict = verdict
        """The :class:`neuron_conformance.conformance.verdict.oracle.Verdict` that failed, when an oracle judgement raised this."""
        self.fields = dict(fields or {})
        """Record fields of a check that is not an oracle judgement (a statistical test: ``rule`` ``ks``,
        ``max_abs`` the statistic, ``atol`` its critical value)."""


def verdict_fields(exc: BaseException | None) -> dict:
    """The record fields (``rule``, ``max_abs``, ``max_rel``, ``max_ulp``, ``atol``, ``rtol``) of the check
    that failed, from the :class:`neuron_conformance.conformance.verdict.oracle.Verdict` or the ``fields`` an exception carries
    (``{}`` when it carries neither). The recorder writes them into a failing test's record: the failed
    check decided, whatever the test had filled in from the checks that passed before it."""
    verdict = getattr(exc, "verdict", None)
    fields = getattr(verdict, "record_fields", None)
    out = fields() if callable(fields) else {}
    out.update(getattr(exc, "fields", None) or {})
    return {k: v for k, v in out.items() if v is not None}


class NumericFailure(ConformanceFailure):
    """Values differ from the reference beyond the oracle's rule."""

    failure_class = "numeric"


class MetadataFailure(ConformanceFailure):
    """Dtype, shape, strides, device or aliasing of an output differ from the reference."""

    failure_class = "metadata"


class WrongErrorFailure(ConformanceFailure):
    """The device raised a different exception than CPU did, or did not raise when CPU did."""

    failure_class = "wrong-error"


class NonFiniteFailure(ConformanceFailure):
    """The device produced NaN or inf where the reference has a finite value."""

    failure_class = "nonfinite"


class FallbackFailure(ConformanceFailure):
    """The test passed, but aten ops it ran fell back to the CPU (the backend's op tracking says so) in a
    run that must prove native support (``--conformance-require-native``, :mod:`neuron_conformance.conformance.backend.fallbacks`)."""

    failure_class = "fallback"


OPCHECK_CLASSES = {
    "test_schema": "opcheck-schema",
    "test_faketensor": "opcheck-fake",
    "test_autograd_registration": "opcheck-autograd",
    "test_aot_dispatch_dynamic": "opcheck-aot",
}
"""``torch.library.opcheck``'s test names (its ``test_utils``) -> the failure class of each."""


class OpcheckFailure(ConformanceFailure):
    """A ``torch.library.opcheck`` test of a custom op failed; the class names which test
    (:data:`OPCHECK_CLASSES`), so a wrong fake kernel is not read as a wrong result.

    Args:
        check: the opcheck test name, a key of :data:`OPCHECK_CLASSES`.

    Raises:
        KeyError: ``check`` is not an opcheck test name.
    """

    def __init__(self, message: str, *, check: str, sample: int | None = None):
        super().__init__(message, sample=sample, fields={"rule": check})
        self.failure_class = OPCHECK_CLASSES[check]


class CompileFailure(ConformanceFailure):
    """``torch.compile`` raised while compiling (a graph break under ``fullgraph=True``, a tracing error, a
    backend compiler failure, for the forward graph or, compiled with it, the backward graph): class
    ``compile-error``, never a wrong result. An exception raised while compiled code *runs* is a
    :class:`CompiledRunFailure`."""

    failure_class = "compile-error"


class GraphBreakFailure(ConformanceFailure):
    """Dynamo broke a compiled function into more graphs on the device than it does for the same function on
    CPU tensors, or compiled no graph where the CPU compiles one (the device's tensors, Python overrides or
    fake kernels made it fall back to eager code): class ``graph-break``. Breaks the CPU shares are the op's
    under Dynamo's settings and are recorded, not failed (``opsuites/compile/capture.py``)."""

    failure_class = "graph-break"


class RecompileFailure(ConformanceFailure):
    """A compiled function compiled again when called a second time with inputs identical in every
    guarded property (Dynamo's guards on the device's tensors do not hold), or hit Dynamo's recompile
    limit (``torch._dynamo.config.recompile_limit``), past which it would run eagerly: class ``recompile``."""

    failure_class = "recompile"


class CompiledRunFailure(ConformanceFailure):
    """Compiled code raised while running (the forward graph, the backward graph, or eager code between
    graphs) on a sample that eager mode on the device runs: class ``compiled-run-error``, neither a compile
    error nor a wrong result. A kernel the compiled graph calls that the device lacks (``NotImplementedError``
    or the dispatcher's "Could not run ... backend", :func:`classify_exception`) is class ``unsupported``.

    Args:
        cause: the exception the compiled code raised.
    """

    def __init__(self, message: str, *, cause: BaseException | None = None, sample: int | None = None):
        super().__init__(message, sample=sample)
        if cause is not None and classify_exception(cause) == "unsupported":
            self.failure_class = "unsupported"

    failure_class = "compiled-run-error"


class TransferError(ConformanceFailure):
    """Moving a sample's inputs to the device, or reading an output back to the CPU, failed: the harness's
    own path, not the op. Names the sample (``sample``) so the record carries its repro command. Class
    ``unsupported`` when the device raised ``NotImplementedError``, else ``error``."""

    def __init__(self, message: str, *, cause: BaseException | None = None, sample: int | None = None):
        super().__init__(message, sample=sample)
        self.failure_class = "unsupported" if isinstance(cause, NotImplementedError) else "error"


class NoReference(pytest.skip.Exception):
    """The CPU gave no reference for a test (every sample's CPU call raised, or none was usable), so the
    device was not judged: outcome ``no-reference``, never ``passed``.

    A pytest skip (``pytest.skip.Exception``), so the run is not red for it: the device was not shown
    wrong, only not checked; the report counts it apart so that it is not read as green.

    Args:
        message: why there is no reference, naming the op, dtype and the CPU's first exception.
    """

    def __init__(self, message: str):
        super().__init__(msg=message)


class ReferenceSuspect(pytest.skip.Exception):
    """The device's result agrees with an independent float64 computation and the CPU reference does not
    (a CPU kernel that overflows where the true result is finite, a vectorized CPU path off by more than the
    tolerance): outcome ``reference-suspect``, never ``passed`` and never ``failed``.

    A pytest skip, like :class:`NoReference`: the device is not shown wrong, and not shown right by the
    CPU either. Raised once a test's samples are all compared (a failing sample still fails the test).

    Args:
        message: the op, the sample, and how far the CPU's and the device's results are from float64.
    """

    def __init__(self, message: str):
        super().__init__(msg=message)


def classify_exception(exc: BaseException | None, message: str = "") -> str | None:
    """Return the failure class of an exception raised by a test, or ``None`` when it passed.

    ``ConformanceFailure`` subclasses carry their own class; ``NotImplementedError`` (what PyTorch raises
    for an op with no kernel on a dispatch key), and a backend's own "not implemented for device" message
    (:data:`neuron_conformance.conformance.results.causes.BACKEND_NOT_IMPLEMENTED`), are ``unsupported``; a pytest-timeout failure is
    ``timeout``; anything else is ``error``. An exception group (``BaseExceptionGroup``, e.g.
    Hypothesis's "found 2 distinct failures") is classed by its sub-exceptions: one class when they all
    have it, else the most severe of theirs by :data:`neuron_conformance.conformance.results.outcomes.FAILURE_SEVERITY`.
    """
    if exc is None:
        return None
    group = getattr(exc, "exceptions", None)
    if isinstance(exc, _GROUP) and group:
        return _classify_group(group)
    if isinstance(exc, ConformanceFailure):
        return exc.failure_class
    if isinstance(exc, NotImplementedError):
        return "unsupported"
    text = message or str(exc)
    if type(exc).__name__ == "Failed" and "Timeout" in text:
        return "timeout"
    if "Could not run" in text and "backend" in text:
        # the dispatcher's message for an operator with no kernel for the device's dispatch key
        return "unsupported"
    if BACKEND_NOT_IMPLEMENTED.search(text):  # the backend's own refusal: "... is not implemented for device X"
        return "unsupported"
    return "error"


def _classify_group(exceptions) -> str:
    """The class of an exception group from its sub-exceptions (nested groups included)."""
    classes = {classify_exception(e, str(e)) or "error" for e in exceptions}
    if len(classes) == 1:
        return classes.pop()
    ranked = [c for c in FAILURE_SEVERITY if c in classes]
    return ranked[0] if ranked else "error"


def describe_group(exc: BaseException) -> str:
    """The message of an exception group listing each sub-exception (``type: first line``), for the
    record; other exceptions give ``str(exc)``."""
    group = getattr(exc, "exceptions", None)
    if not isinstance(exc, _GROUP) or not group:
        return str(exc)
    lines = [str(exc).splitlines()[0] if str(exc) else type(exc).__name__]
    for i, sub in enumerate(group, 1):
        text = str(sub).strip()
        lines.append(f"  [{i}] {type(sub).__name__}: {text}")
    return "\n".join(lines)
