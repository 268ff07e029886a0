"""Helpers for tests that run neuron-migrate on a source snippet in memory: every rule selected, no
configuration file. ``found`` maps ``(line, code)`` to the reported violation; ``fixed`` is the text after
``--fix --unsafe-fixes``."""

from neuron_conformance.migrate.engine import Settings, check_source
from neuron_conformance.migrate.registry import selection

ALL = selection(None, None)


def found(src: str) -> dict:
    """``{(line, code): Violation}`` for ``src``; fails the test on a tool error."""
    result = check_source(src, Settings(ALL))
    assert result.error is None, result.error
    return {(v.line, v.code): v for v in result.violations}


def codes(src: str) -> list:
    """The sorted ``(line, code)`` pairs reported for ``src``."""
    return sorted(found(src))


def tier(src: str, line: int, code: str) -> str:
    """The fix applicability (``safe``, ``unsafe``, ``report``) of the finding ``code`` on ``line``."""
    return found(src)[(line, code)].fix_applicability


def fixed(src: str) -> str:
    """``src`` after ``--fix --unsafe-fixes`` (unchanged when nothing is fixed)."""
    new = check_source(src, Settings(ALL, fix=True, unsafe_fixes=True)).new_source
    return src if new is None else new


def pairs(src: str) -> list:
    """The sorted ``(line, code)`` of every violation reported for ``src``, one per violation (two
    findings of one code on one line are listed twice); fails the test on a tool error."""
    result = check_source(src, Settings(ALL))
    assert result.error is None, result.error
    return sorted((v.line, v.code) for v in result.violations)
