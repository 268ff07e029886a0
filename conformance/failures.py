"""Failure classes that a conformance check raises.

Every check that finds the device wrong raises a subclass of :class:`ConformanceFailure`. It is an
``AssertionError`` (so pytest shows it like any assertion) that carries a ``failure_class``: the word that
result records, the expected-failure manifest and the reports use for the kind of failure.

The classes, and what raises them:

=============== ================================================================================
``numeric``     values differ beyond the oracle's rule (:class:`NumericFailure`)
``metadata``    dtype, shape, strides, device or aliasing differ (:class:`MetadataFailure`)
``unsupported`` the device raised ``NotImplementedError`` (classified by the plugin)
``wrong-error`` the device raised another exception than CPU, or none (:class:`WrongErrorFailure`)
``nonfinite``   NaN or inf where the reference has a finite value (:class:`NonFiniteFailure`)
``crash``       the process running the test died (classified by the plugin)
``timeout``     the test ran past its time limit (classified by the plugin)
``stale``       an expected failure passed: its manifest entry is stale (classified by the plugin)
``error``       any other exception raised on the device
=============== ================================================================================
"""

from __future__ import annotations

from .outcomes import FAILURE_CLASSES  # re-exported: the one definition is in conformance.outcomes

__all__ = ["FAILURE_CLASSES", "ConformanceFailure", "MetadataFailure", "NonFiniteFailure", "NumericFailure",
           "WrongErrorFailure", "classify_exception"]


class ConformanceFailure(AssertionError):
    """A check found the device under test wrong.

    Args:
        message: what differs, with the values, for a human.
        sample: index of the sample input that failed, when the check ran OpInfo samples.

    Attributes:
        failure_class: one of :data:`FAILURE_CLASSES`.
    """

    failure_class = "error"

    def __init__(self, message: str, *, sample: int | None = None):
        super().__init__(message)
        self.sample = sample


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


def classify_exception(exc: BaseException | None, message: str = "") -> str | None:
    """Return the failure class of an exception raised by a test, or ``None`` when it passed.

    ``ConformanceFailure`` subclasses carry their own class; ``NotImplementedError`` (what PyTorch raises
    for an op with no kernel on a dispatch key) is ``unsupported``; a pytest-timeout failure is
    ``timeout``; anything else is ``error``.
    """
    if exc is None:
        return None
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
    return "error"
