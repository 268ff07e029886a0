"""Fallback-aware verdicts: which aten ops of a test ran natively, and which fell back to the CPU.

Out-of-tree backends run an op they have no kernel for on the CPU (PyTorch's boxed CPU fallback,
aten/src/ATen/native/CPUFallback.cpp), and some also retry on the CPU an op whose device execution
failed. A harness that compares with the CPU then reports a pass for an op the device never ran. A
backend module reports what happened through ``CONFORMANCE_OP_TRACKING`` (docs/architecture.md, "Device
under test"): an object (a module, a namespace or a dict) with three callables, modelled on TorchNeuron's
op tracking:

* ``clear_op_tracking()``: forget the ops tracked so far;
* ``get_executed_ops()``: the aten ops (dispatcher names, ``aten::add.Tensor``) that ran on the device
  since the last clear, natively or not;
* ``get_fallback_ops()``: those of them that ran on the CPU instead.

Around each test's call phase (:func:`tracked`) the harness clears the tracking, and afterwards writes the
fallback ops into the test's record (``fallback_ops``, a sorted list; ``[]`` when every op ran natively;
absent when the backend has no tracking: fallback was not observable). Native ops are the executed ones
that are not fallback ops; an op that ran both ways in one test counts as fallback. With
``--conformance-require-native`` a test that passed with fallback ops fails with class ``fallback``
(:class:`neuron_conformance.conformance.verdict.failures.FallbackFailure`, :func:`judge`). Per process the names are gathered
(:func:`gathered`) so that the aten coverage counts native execution only (:mod:`neuron_conformance.conformance.results.coverage`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from dataclasses import dataclass, field
from typing import Callable

import pytest

from neuron_conformance.conformance.pytest_plugin import options as opts
from neuron_conformance.conformance.pytest_plugin.recording import record_of
from neuron_conformance.conformance.pytest_plugin.run_state import RunState
from neuron_conformance.conformance.verdict.failures import FallbackFailure

HOOK = "CONFORMANCE_OP_TRACKING"
"""The backend-module attribute that offers op tracking."""

FUNCTIONS = ("clear_op_tracking", "get_executed_ops", "get_fallback_ops")
"""The three callables the hook's object must have (TorchNeuron's names)."""

NOT_OBSERVABLE = (
    f"the backend module has no op tracking ({HOOK}): whether a passing op ran natively or "
    "fell back to the CPU was not observable"
)
"""What the report says when the backend cannot tell native from fallback execution."""

SEEN_KEY = pytest.StashKey["Gathered"]()


@dataclass
class Tracker:
    """The three tracking callables of a backend (:data:`FUNCTIONS`), loaded from ``spec``."""

    spec: str
    clear: Callable[[], object]
    executed: Callable[[], object]
    fallback: Callable[[], object]


@dataclass
class Gathered:
    """The aten ops one process saw run natively (``native``) and as a CPU fallback (``fallback``)."""

    native: set = field(default_factory=set)
    fallback: set = field(default_factory=set)


def hook_spec(module) -> str | None:
    """``"module:CONFORMANCE_OP_TRACKING"`` when ``module`` defines the hook, else None."""
    return f"{module.__name__}:{HOOK}" if getattr(module, HOOK, None) is not None else None


@functools.lru_cache(maxsize=None)
def load(spec: str) -> Tracker:
    """The :class:`Tracker` named by ``spec`` (``"module:attribute"``; the attribute may be a submodule).

    Raises:
        RuntimeError: the object cannot be imported, or lacks one of :data:`FUNCTIONS` or has it not
            callable, naming ``spec`` and the function.
    """
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
        obj = getattr(module, attr) if hasattr(module, attr) else importlib.import_module(f"{module_name}.{attr}")
    except ImportError as exc:
        raise RuntimeError(f"op tracking: {spec!r} cannot be loaded: {exc}") from None
    fns = []
    for name in FUNCTIONS:
        fn = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
        if not callable(fn):
            raise RuntimeError(f"op tracking: {spec!r} has no callable {name}() (it must offer {', '.join(FUNCTIONS)})")
        fns.append(fn)
    return Tracker(spec, *fns)


def _names(value, spec: str, what: str) -> set[str]:
    try:
        return {str(n) for n in (value or ())}
    except TypeError:
        raise RuntimeError(
            f"op tracking: {spec!r} {what}() returned {type(value).__name__}, not an iterable of aten op names"
        ) from None


def gathered(config: pytest.Config) -> Gathered:
    """This process's :class:`Gathered` names (created on first use)."""
    seen = config.stash.get(SEEN_KEY, None)
    if seen is None:
        seen = config.stash[SEEN_KEY] = Gathered()
    return seen


@contextlib.contextmanager
def tracked(item: pytest.Item, session: RunState):
    """Around ``item``'s call phase: clear the backend's op tracking, then put the test's fallback ops in
    its record (``fallback_ops``) and in the process's :func:`gathered` names. Nothing without tracking."""
    spec = getattr(session.profile, "op_tracking", None) if session.profile is not None else None
    if not spec:
        yield
        return
    tracker = load(spec)
    tracker.clear()
    try:
        yield
    finally:
        executed = _names(tracker.executed(), spec, "get_executed_ops")
        fallback = _names(tracker.fallback(), spec, "get_fallback_ops")
        record_of(item).update(fallback_ops=sorted(fallback))
        seen = gathered(item.config)
        seen.native.update(executed - fallback)
        seen.fallback.update(fallback)


def judge(item: pytest.Item, session: RunState, outcome) -> None:
    """Under ``--conformance-require-native``, make a call phase that passed with fallback ops fail with a
    :class:`~neuron_conformance.conformance.verdict.failures.FallbackFailure` naming them (``outcome``: pluggy's result of
    ``pytest_runtest_call``)."""
    if outcome.exception is not None or not opts.get_option(item.config, "require_native"):
        return
    ops = record_of(item).get("fallback_ops")
    if ops:
        outcome.force_exception(
            FallbackFailure(
                f"passed, but {len(ops)} aten op(s) fell back to the CPU: {', '.join(ops)} (--conformance-require-native: "
                "a pass must be a native pass)"
            )
        )


def check_require_native(session: RunState) -> None:
    """Stop before any test when ``--conformance-require-native`` is asked of a backend without op tracking.

    Raises:
        neuron_conformance.conformance.pytest_plugin.options.OptionError: naming the option and the missing hook.
    """
    if (
        opts.get_option(session.config, "require_native")
        and session.profile is not None
        and not session.profile.op_tracking
    ):
        raise opts.OptionError(
            f"--conformance-require-native: the device under test ({session.profile.type}, "
            f"{session.profile.backend}) offers no op tracking ({HOOK}), so a native "
            "pass cannot be told from a CPU fallback"
        )


def tracking_meta(profile) -> dict:
    """``run.json``'s ``op_tracking``: ``{"by": spec or None, "reason": why not observable or None}``."""
    spec = getattr(profile, "op_tracking", None) if profile is not None else None
    return {"by": spec, "reason": None if spec else NOT_OBSERVABLE}


__all__ = [
    "FUNCTIONS",
    "Gathered",
    "HOOK",
    "NOT_OBSERVABLE",
    "Tracker",
    "check_require_native",
    "gathered",
    "hook_spec",
    "judge",
    "load",
    "tracked",
    "tracking_meta",
]
