"""One bug-class case: a small program with inputs aimed at a kernel branch where backends go wrong.

OpInfo's sample inputs are where the op suites start; the bug classes (:mod:`neuron_conformance.opsuites.bugclasses`) add
inputs those samples rarely contain (duplicate indices, all ``-inf`` rows, ties, strided reductions,
tile-edge sizes, special values, ...). Each case is a device-agnostic callable and its CPU inputs: the
suite (:mod:`neuron_conformance.opsuites.test_bug_classes`) moves the inputs to the device under test keeping their layout
(:func:`neuron_conformance.conformance.backend.transfer.to_device_exact`), calls the callable on both, and judges the device result
against the CPU result with :func:`neuron_conformance.conformance.verdict.compare.compare_outputs` (the oracle's rules). The CPU
result is the reference; each case names the documented semantics it checks (``semantics``), so a
reader can tell why the CPU answer is the right one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class BugCase:
    """A bug-class case.

    Attributes:
        bug_class: the class's name (``duplicate-indices``, ``masked-rows``, ...): the report's group.
        name: the case's name, unique within its class (part of the test id).
        op: the op under test as OpInfo names it (``index_put``, ``softmax``, ``sum``): the record's
            ``op``, matched by ``--conformance-ops``.
        dtype: dtype name of the inputs (``float32``): the record's ``dtype``, matched by ``--conformance-dtypes``.
        build: ``() -> (fn, args, kwargs)``: ``fn`` is called as ``fn(*args, **kwargs)`` with ``args`` and
            ``kwargs`` as built (CPU tensors; the reference) and again with every tensor moved to the
            device under test (same strides, storage offset and aliasing). ``fn`` must be device-agnostic:
            what it creates it creates on its inputs' device. Built lazily (collection builds nothing).
        semantics: the documented behaviour the case checks, with its source (a PyTorch doc or file).
        exact: values must be bit-identical to the CPU's (integer results, indices, copies), whatever the
            backend's tolerance.
        fp64: allow the oracle's fp64 arbitration (rule 5) for floating results; False where a float64
            reference would not have the same special values (overflow, underflow cases).
        expects_error: the CPU raises by documented semantics; the device must raise the same type.
        needs_device: ``fn`` also receives ``device=`` (the device its inputs are on).
        min_bytes: memory the case needs on the device, in bytes (for budget gating; 0: small).
        host_outputs: ``fn`` returns CPU tensors on both runs (copies back to the host): its outputs are
            judged as CPU tensors; mutated inputs are still judged on the device.
        capabilities: capability names the case needs (``pinned_memory``, ...;
            :data:`neuron_conformance.conformance.backend.capabilities.CAPABILITIES`): on a backend that does not claim one the case is
            ``not-claimed``.
    """

    bug_class: str
    name: str
    op: str
    dtype: str
    build: Callable[[], tuple]
    semantics: str
    exact: bool = False
    fp64: bool = True
    expects_error: bool = False
    needs_device: bool = False
    min_bytes: int = 0
    host_outputs: bool = False
    tags: tuple = field(default=())
    capabilities: tuple = field(default=())

    @property
    def case_id(self) -> str:
        """``<bug_class>::<name>``: the test id's stem and the record's ``case``."""
        return f"{self.bug_class}::{self.name}"


class Unsupported(Exception):
    """Raised by a case's ``fn`` when the device under test lacks a capability the case needs (pinned
    memory, ...): the suite skips the case with this message as the reason instead of judging it."""
