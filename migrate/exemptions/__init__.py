"""Code neuron-migrate leaves alone although it names CUDA, one module per concept.

=======================  ==========================================================================
``vendor_dispatch``      per-vendor chains, tests and statements whose CUDA arm is deliberate
``vendor_tables``        per-vendor tables, displays, flags and functions
``cuda_requirements``    checks stating that the code after them needs CUDA itself
``cuda_runtimes``        code that runs only with NCCL, NVTX or XLA on GPUs
``cuda_components``      CUDA-only libraries, classes, tools and options
``capability_probes``    questions only CUDA can answer, and code reached only on CUDA
``old_torch_fallbacks``  CUDA code kept for a torch older than the generic API beside it
``no_effect``            CUDA code that does nothing off CUDA
``sanity_checks``        tests asking whether CUDA itself was requested
``kernel_modules``       device tests that gate or launch a compiled kernel
``onnx_runtime``         code serving ONNX Runtime's CUDA execution provider
=======================  ==========================================================================

Shared helpers: :mod:`.names` (names, strings and operands), :mod:`.cuda_tests` (tests true only on
CUDA), :mod:`.blocks` (statements of a block). Each concept registers its exemptions with
:func:`.registry.exemption` (a name, the finding code of its examples, a ``quiet`` example and a
``near_miss``, a scope); :data:`ORDER` fixes the order the rule pass asks them in
(:meth:`neuron_conformance.migrate.rule_pass.RulePass._deliberate`): the answers kept per file (module
facts, per pair of nodes) make a finding's answer depend on the findings asked before it, so the order is
part of the behaviour.
"""

from __future__ import annotations

from neuron_conformance.migrate.exemptions import (
    capability_probes,
    cuda_components,
    cuda_requirements,
    cuda_runtimes,
    kernel_modules,
    no_effect,
    old_torch_fallbacks,
    onnx_runtime,
    sanity_checks,
    vendor_dispatch,
    vendor_tables,
)
from neuron_conformance.migrate.exemptions.registry import View, exempt, ordered, stages

#: The order in which the rule pass asks the exemptions (consecutive steps of one group are one walk of
#: the finding's path, consecutive ancestor tests one walk of its ancestors).
ORDER = (
    # once per file
    "ONNX Runtime module",
    "CUDA-specific assertion",
    "CUDA-only component scope",
    "kernel module",
    # code without effect off CUDA
    "CUDA seeding after torch.manual_seed",
    "setting CUDA_LAUNCH_BLOCKING",
    "cuDNN flag beside its generic counterpart",
    "check that only raises on CUDA",
    "guard of nothing",
    # paths only CUDA or an older torch takes
    "closed vendor chain expression",
    "old-torch fallback in an exception handler",
    "old-torch fallback after an optional import",
    "capability function",
    "closed vendor chain default",
    "CUDA-only library's requirement",
    "CUDA probe stored for a requirement",
    "early exit before a capability query",
    # CUDA arms of per-vendor code and CUDA-only components
    "capability query under a stored CUDA flag",
    "CUDA-only component named in a version",
    "default of a per-vendor table",
    "NVIDIA tool scope",
    "CUDA requirement of several statements",
    "CUDA type branch",
    "code gated on NCCL",
    "CUDA-only component branch",
    "per-vendor display element",
    "per-vendor sibling function",
    "per-vendor flag",
    "value stored for a CUDA requirement",
    "value stored for a CUDA-only component",
    "stored capability guard",
    # the finding's own path
    "reached only on CUDA",
    "CUDA-only API reached only on CUDA",
    "CUDA fallback where no accelerator exists",
    "CUDA request completed with an index",
    "per-device table entry under its vendor's test",
    "CUDA-only option",
    # each enclosing node
    "old-torch fallback beside a device-generic branch",
    "branch for a torch without torch.accelerator",
    "per-vendor statements",
    "the CUDA branch of a per-vendor chain",
    "body of a test for a CUDA-only runtime",
    "CUDA requirement",
    "guard of a CUDA-only body",
    "probe answering False without CUDA",
    "predicate named for CUDA",
    "assertion that CUDA is required",
    "CUDA sanity check",
    "test naming other accelerators",
    "ONNX Runtime device test",
    "kernel-object gate",
    "CUDA operands guarding a capability query",
)

#: Every exemption, in :data:`ORDER`.
EXEMPTIONS = tuple(ordered(ORDER))
_WALK = stages(EXEMPTIONS)


def exempt_finding(ctx, finding, ancestors: list, cache: dict) -> bool:
    """Whether ``finding`` (its node below ``ancestors``, module first) is on code one exemption leaves
    alone; ``cache`` keeps the answers for the file (one dict per rule pass)."""
    return exempt(_WALK, View(ctx, finding, ancestors, cache))


__all__ = ["EXEMPTIONS", "ORDER", "View", "exempt_finding"]
