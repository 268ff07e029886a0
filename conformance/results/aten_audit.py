"""aten coverage audit: a disposition for every registered aten overload that has a CPU kernel.

**Which overloads.** An overload "has a CPU kernel" when the dispatcher holds a kernel registered for the
``CPU`` key, or for ``CompositeExplicitAutograd`` / ``CompositeExplicitAutogradNonFunctional`` (kernels that
serve every backend, CPU included, written once for all: ``aten/src/ATen/native/README.md``, section
"Choosing the right dispatch keyword"), tested with ``torch._C._dispatch_has_kernel_for_dispatch_key``.
``CompositeImplicitAutograd``-only overloads are left out: they have no kernel of their own and run as the
ops they decompose into, which are audited themselves. On torch 2.13: 2,179 of 3,110 registered overloads.

**Dispositions** (:func:`audit`), first match wins:

* ``excluded``: a rule of :data:`EXCLUSIONS` matches (reason and source in the table);
* ``covered``: some suite other than ``generated`` executed it on the device (``coverage.json``'s
  ``suites``; an overload whose ``out=`` variant ran counts too, :func:`neuron_conformance.conformance.results.coverage.functional_of_out`);
* ``generated``: only the ``generated`` suite (``opsuites/test_generated.py``: schema-derived inputs
  compared with the CPU kernel) executed it (traced, or named by one of its records that was not
  skipped: :func:`generated_from_records`);
* ``unknown``: everything else; :data:`SCHEMA_UNSAFE` overloads are unknown with the reason recorded.

The result (:func:`audit`) is written to ``<report-dir>/aten_audit.json`` (:func:`write`), which the
torch-free report code reads.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path

import torch

from neuron_conformance.conformance.results import coverage
from neuron_conformance.conformance.results.records import read_records, write_json_atomic

AUDIT_FILE = "aten_audit.json"
GENERATED_SUITE = "generated"
GENERATED_SUITES = (GENERATED_SUITE, "aten_replay", "random_ops", "shape_contracts")
"""Suites whose inputs are derived for overloads no OpInfo reaches: an overload only they executed is
``generated``, not ``covered`` (``generated``: schema-derived inputs; ``aten_replay``: aten calls captured
from OpInfo samples of the same or a related overload; ``random_ops``: distribution and reproducibility
checks of the random overloads; ``shape_contracts``: hand-written inputs of overloads with size contracts)."""

CPU_KERNEL_KEYS = ("CPU", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")
"""Dispatch keys whose kernel makes an overload count as having a CPU kernel (see the module docstring)."""

_BACKEND_SPECIFIC = re.compile(
    r"cudnn|miopen|_mps|mps_|mkldnn|nnpack|xnnpack|fbgemm|vulkan|onednn|_cslt|"
    r"_cufft|cuda|_triton|_cummax_helper|_cummin_helper|_flash_attention|_efficient_attention"
)
_SPARSE = re.compile(
    r"sparse|csr|csc|bsr|bsc|_coalesce|coalesced|^_?indices|^_?values|crow_indices|col_indices|ccol_indices|"
    r"row_indices|_nnz|_dimI|_dimV|_to_dense|to_dense_backward|_spdiags|_validate_compressed|^sspaddmm"
)
_QUANTIZED = re.compile(
    r"quantize|quantized|^q_|int_repr|_choose_qparams|_weight_int|_dyn_quant|"
    r"_convert_weight_to_int4pack|_make_per"
)
_FAKE_QUANT = re.compile(r"fake_quant|_fused_moving_avg_obs")
"""Fake quantization (QAT) takes and returns float tensors on any device: not excluded with quantized."""
_CPU_ONLY = re.compile(r"^from_file|_pin_memory|is_pinned|_nested")
_META = re.compile(
    r"^sym_|_has_compatible_shallow_copy_type|_assert_|^_functional_assert|_print|"
    r"_propagate_xla_data|_make_dep_token|_debug_has_internal_overlap|_jagged|_functional_sym_constrain_range"
)
_TEST_OPS = re.compile(r"^_test_optional_")
_FORWARD_AD = re.compile(r"^_make_dual|^_fw_primal_copy")
_OVERRIDEABLE = re.compile(r"_overrideable")


def base_name(name: str) -> str:
    """The op of dispatcher name ``name`` without namespace and overload (``aten::add.out`` -> ``add``)."""
    return name[len("aten::") :].split(".")[0]


_base = base_name


_ANY_CPU_KEYS = (
    "CPU",
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
    "CompositeImplicitAutograd",
)


def _out_without_cpu_functional(name: str) -> bool:
    """True for a wrapper overload with no kernel of its own for ``CPU`` whose target has no kernel the CPU
    can run (none of :data:`_ANY_CPU_KEYS`): an ``out=`` overload whose functional is CUDA-only
    (``batch_norm_stats.out``, via :func:`neuron_conformance.conformance.results.coverage.functional_of_out`), or a functional or
    ``out=`` CompositeExplicitAutograd kernel that calls an in-place overload registered for Meta and other
    backends only (``_philox_normal`` -> ``_philox_normal_``, ``_resize_output`` -> ``_resize_output_``)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    if has(name, "CPU"):
        return False
    functional = coverage.functional_of_out().get(name)
    if functional is not None and not any(has(functional, k) for k in _ANY_CPU_KEYS):
        return True
    inplace = f"aten::{_base(name)}_"
    return (
        not _base(name).endswith("_")
        and coverage._overload(inplace) is not None
        and not any(has(inplace, k) for k in _ANY_CPU_KEYS)
    )


EXCLUSIONS: tuple[tuple[str, str, object], ...] = (
    (
        "backend-specific kernel (cuDNN, MIOpen, MPS, oneDNN/MKL-DNN, NNPACK, XNNPACK, FBGEMM, CUDA, Triton)",
        "native_functions.yaml dispatch: these names are the kernels of one vendor library",
        lambda name, op: bool(_BACKEND_SPECIFIC.search(_base(name))),
    ),
    (
        "sparse layout: the device under test claims strided tensors only",
        "torch.sparse docs; the emulator refuses sparse layouts (emulator/registrations.py)",
        lambda name, op: bool(_SPARSE.search(_base(name))),
    ),
    (
        "quantized tensors: not a layout the backend claims",
        "torch.ao.quantization docs: quantized tensors are CPU/CUDA backends of their own (QuantizedCPU)",
        lambda name, op: bool(_QUANTIZED.search(_base(name))) and not _FAKE_QUANT.search(_base(name)),
    ),
    (
        "CPU-only by design or nested tensors (file reads into CPU memory, pinned host memory, NestedTensor)",
        "torch.from_file / Tensor.pin_memory docs; NestedTensor has its own dispatch keys (NestedTensorCPU)",
        lambda name, op: bool(_CPU_ONLY.search(_base(name))),
    ),
    (
        "meta-only or debugging: answered from tensor metadata or used by tracing, no device computation",
        "torch/_subclasses/fake_tensor.py and torch/fx/experimental/symbolic_shapes.py (sym_* queries)",
        lambda name, op: bool(_META.search(_base(name))),
    ),
    (
        "no CPU kernel behind the wrapper: the out= or functional overload calls a functional or in-place "
        "overload with kernels for other backends only (CUDA, Meta), so the CPU cannot compute a reference",
        "the dispatcher: torch._C._dispatch_has_kernel_for_dispatch_key of the functional "
        "(neuron_conformance.conformance.results.coverage.functional_of_out) or of the in-place overload",
        lambda name, op: _out_without_cpu_functional(name),
    ),
    (
        "raises on the CPU by design: an entry point a PrivateUse1 backend overrides (*_overrideable); the "
        "public op it serves (convolution, scaled_dot_product_attention) is compared by the OpInfo suites",
        "aten/src/ATen/native/Convolution.cpp (convolution_overrideable) and transformers/attention.cpp: their "
        "default kernels raise NotImplementedError",
        lambda name, op: bool(_OVERRIDEABLE.search(_base(name))),
    ),
    (
        "PyTorch's own test operators (optional list arguments of the code generator)",
        "aten/src/ATen/native/TestOps.cpp",
        lambda name, op: bool(_TEST_OPS.search(_base(name))),
    ),
    (
        "forward-mode AD internals: dual tensors of torch.autograd.forward_ad, one CompositeExplicitAutograd "
        "kernel for every backend, valid only inside a dual level (or inference mode for the *_copy forms)",
        "torch/autograd/forward_ad.py; aten/src/ATen/native/VariableMethodStubs.cpp (_make_dual, _fw_primal_copy)",
        lambda name, op: bool(_FORWARD_AD.search(_base(name))),
    ),
    (
        "no Python binding: the overload cannot be called through torch.ops.aten",
        "torch/_ops.py (OpOverloadPacket.__getattr__)",
        lambda name, op: op is None,
    ),
)
"""Exclusion rules: ``(reason, source, predicate(name, op))``, first match wins."""

SCHEMA_UNSAFE = {
    "aten::_batch_norm_no_update": "segfault",
    "aten::_batch_norm_no_update.out": "segfault",
    "aten::_embedding_bag_forward_only": "segfault",
    "aten::_embedding_bag_forward_only.out": "segfault",
    "aten::_native_batch_norm_legit.no_stats": "segfault",
    "aten::_native_batch_norm_legit.no_stats_out": "segfault",
    "aten::_nnpack_spatial_convolution": "segfault",
    "aten::_nnpack_spatial_convolution.out": "segfault",
    "aten::_slow_conv2d_backward.grad_input": "segfault",
    "aten::batch_norm_backward": "segfault",
    "aten::fractional_max_pool2d_backward": "segfault",
    "aten::fractional_max_pool2d_backward.grad_input": "segfault",
    "aten::fractional_max_pool3d_backward": "segfault",
    "aten::fractional_max_pool3d_backward.grad_input": "segfault",
    "aten::native_batch_norm": "segfault",
    "aten::native_batch_norm.out": "segfault",
    "aten::native_batch_norm_backward": "segfault",
    "aten::native_batch_norm_backward.out": "segfault",
    "aten::native_group_norm": "segfault",
    "aten::native_group_norm.out": "segfault",
    "aten::native_group_norm_backward": "segfault",
    "aten::native_group_norm_backward.out": "segfault",
    "aten::_compute_linear_combination": "out-of-bounds read",
    "aten::_compute_linear_combination.out": "out-of-bounds read",
    # the norms output is read from memory the kernel never wrote when g's shape does not match v's
    # (values like 4.5e-44 on the CPU, different on the device: a device-mode main job)
    "aten::_weight_norm_interface": "out-of-bounds read",
    "aten::_weight_norm_interface.out": "out-of-bounds read",
    "aten::_weight_norm_interface_backward": "out-of-bounds read",
    "aten::_weight_norm_interface_backward.out": "out-of-bounds read",
}
"""Overloads whose kernel crashed the process, or read memory out of bounds (results differing run to
run), on schema-derived inputs (measured by running :func:`neuron_conformance.opsuites.generated_inputs.first_accepted` over
every overload in a child process, and the generated suite in both emulator modes): they do not validate
argument sizes against each other (``N``, ``C``, ``HxW``, running statistics), so they need hand-written
inputs and stay ``unknown``."""


def overload_of(name: str):
    """The ``OpOverload`` of dispatcher name ``name`` (``aten::add.Tensor``).

    Raises:
        KeyError: Python has no binding for ``name``.
    """
    op = coverage._overload(name)
    if op is None:
        raise KeyError(f"aten overload {name!r} has no torch.ops.aten binding")
    return op


@functools.lru_cache(maxsize=1)
def cpu_kernel_overloads() -> tuple[str, ...]:
    """Registered aten overloads with a kernel for a key of :data:`CPU_KERNEL_KEYS`, sorted (2,179 on torch
    2.13)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return tuple(n for n in coverage.registered_overloads() if any(has(n, k) for k in CPU_KERNEL_KEYS))


def exclusion(name: str) -> tuple[str, str] | None:
    """``(reason, source)`` of the first :data:`EXCLUSIONS` rule matching overload ``name``, or None."""
    op = coverage._overload(name)
    for reason, source, rule in EXCLUSIONS:
        if rule(name, op):
            return reason, source
    return None


def is_random(name: str) -> bool:
    """True when overload ``name`` is tagged ``nondeterministic_seeded`` (``native_functions.yaml``,
    ``tags.yaml``: its values depend on the generator state), so its values are not compared with the CPU
    kernel's: ``opsuites/test_random_ops.py`` judges them by distribution and reproducibility."""
    op = coverage._overload(name)
    return op is not None and torch.Tag.nondeterministic_seeded in op.tags


@functools.lru_cache(maxsize=1)
def generated_targets() -> tuple[str, ...]:
    """Overloads the generated suite tests: CPU kernel, no exclusion rule, not :data:`SCHEMA_UNSAFE`, not
    random (:func:`is_random`: the ``random_ops`` suite judges those; a value comparison with the CPU kernel
    would hold only for a backend that shares the CPU's generator)."""
    return tuple(
        n for n in cpu_kernel_overloads() if n not in SCHEMA_UNSAFE and exclusion(n) is None and not is_random(n)
    )


@functools.lru_cache(maxsize=1)
def random_targets() -> tuple[str, ...]:
    """Overloads the ``random_ops`` suite tests: CPU kernel, no exclusion rule, :func:`is_random` (99 on
    torch 2.13)."""
    return tuple(n for n in cpu_kernel_overloads() if exclusion(n) is None and is_random(n))


def generated_from_records(records) -> set[str]:
    """Overloads the generated suite compared on the device: ops of its records that were not skipped
    (a passed, failed or errored test called the overload on the device; a ``no-reference`` test, whose CPU
    kernel raised, judged nothing; a ``not-claimed`` test did not run). The suite knows which overload
    it called, so this holds also for overloads PyTorch runs above the backend as other ops (``out=``
    wrappers of CompositeExplicitAutograd kernels), which a backend counter cannot see by name."""
    return {
        str(r.get("op"))
        for r in records
        if r.get("suite") in GENERATED_SUITES
        and r.get("outcome") not in ("skipped", "no-reference", "not-claimed", None)
        and str(r.get("op", "")).startswith("aten::")
    }


def audit(cov: dict | None, generated_ran: set[str] | frozenset = frozenset()) -> dict:
    """The audit of one run from its merged ``coverage.json`` content (None: not traced) and the overloads
    the generated suite compared (``generated_ran``, :func:`generated_from_records`).

    Returns ``{"rule": str, "total": int, "counts": {disposition: n}, "percent_reached": float,
    "covered": {name: [suites]}, "generated": [names], "excluded": {reason: {"source": str, "overloads":
    [names]}}, "unknown": [names], "unknown_reasons": {name: reason}, "core": {"total", "reached",
    "missing"}}`` where ``percent_reached`` is 100 * (covered + generated) / total and
    ``percent_of_relevant`` is 100 * (covered + generated) / (total - excluded): the share of the overloads
    a backend of dense strided tensors is expected to implement (the excluded ones are another vendor's
    kernels, sparse, quantized or nested layouts, CPU-only, metadata-only or unbindable; the way TorchCTS
    counts "backend-relevant" overloads). ``core`` counts a core overload (``torch.Tag.core``) reached when
    it is covered or generated, or when any suite executed it on the device (in ``cov``'s ``suites`` or in
    ``generated_ran``) even though an exclusion rule matches it or it has no CPU kernel (``sym_*``).
    """
    cov = cov or {}
    suites: dict[str, set] = {n: set(s) for n, s in (cov.get("suites") or {}).items()}
    for name in generated_ran:
        suites.setdefault(name, set()).add(GENERATED_SUITE)
    for out_name, functional in coverage.functional_of_out().items():
        if out_name in suites:
            suites.setdefault(functional, set()).update(suites[out_name])
    covered, generated, unknown, reasons = {}, [], [], {}
    excluded: dict[str, dict] = {}
    for name in cpu_kernel_overloads():
        rule = exclusion(name)
        ran = suites.get(name, set())
        if rule is not None:
            excluded.setdefault(rule[0], {"source": rule[1], "overloads": []})["overloads"].append(name)
        elif ran - set(GENERATED_SUITES):
            covered[name] = sorted(ran - set(GENERATED_SUITES))
        elif ran:
            generated.append(name)
        else:
            unknown.append(name)
            if name in SCHEMA_UNSAFE:
                reasons[name] = (
                    f"kernel unsafe on schema-derived inputs ({SCHEMA_UNSAFE[name]}): needs hand-written inputs"
                )
    total = len(cpu_kernel_overloads())
    reached = set(covered) | set(generated)
    core = [n for n in coverage.core_overloads()]
    # a core overload a suite executed on the device counts even when an exclusion rule matches or it has
    # no CPU kernel of its own: the core line asks whether the Core ATen IR runs, and the sym_* queries
    # (CompositeImplicitAutograd, answered from metadata) are compared by the shape_contracts suite
    core_reached = reached | {n for n in core if suites.get(n)}
    n_excluded = sum(len(e["overloads"]) for e in excluded.values())
    return {
        "rule": "has a kernel for CPU, CompositeExplicitAutograd or CompositeExplicitAutogradNonFunctional",
        "total": total,
        "counts": {
            "covered": len(covered),
            "generated": len(generated),
            "excluded": n_excluded,
            "unknown": len(unknown),
        },
        "percent_reached": round(100.0 * len(reached) / total, 2) if total else 0.0,
        "percent_of_relevant": round(100.0 * len(reached) / (total - n_excluded), 2) if total > n_excluded else 0.0,
        "covered": covered,
        "generated": generated,
        "excluded": excluded,
        "unknown": unknown,
        "unknown_reasons": reasons,
        "core": {
            "total": len(core),
            "reached": sum(1 for n in core if n in core_reached),
            "missing": [n for n in core if n not in core_reached],
        },
    }


def write(report_dir: str | os.PathLike, cov: dict | None, generated_ran=frozenset()) -> dict:
    """Compute :func:`audit` and write it to ``<report_dir>/aten_audit.json``; returns it."""
    data = audit(cov, generated_ran)
    write_json_atomic(Path(report_dir) / AUDIT_FILE, data)
    return data


def gate_line(data: dict, first: int = 10) -> str | None:
    """The one line ``--conformance-fail-on-unknown`` fails the run with, or None when no overload is unknown."""
    unknown = data.get("unknown") or []
    if not unknown:
        return None
    more = f", ... ({len(unknown) - first} more)" if len(unknown) > first else ""
    return (
        f"conformance: {len(unknown)} aten overload(s) with a CPU kernel have no disposition "
        f"(--conformance-fail-on-unknown): {', '.join(unknown[:first])}{more}"
    )


def merge_coverages(paths: list[str | os.PathLike]) -> dict:
    """The ``suites`` and ``executed`` of several ``coverage.json`` files combined (call counts summed,
    suite lists joined): the coverage of runs that executed different suites.

    Raises:
        ValueError: a file cannot be read or is not a JSON object (the message names it).
    """
    executed: dict[str, int] = {}
    suites: dict[str, set] = {}
    for path in paths:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"aten audit: coverage file {str(path)!r} cannot be read: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError(f"aten audit: coverage file {str(path)!r} is not a JSON object")
        for name, calls in (data.get("executed") or {}).items():
            executed[name] = executed.get(name, 0) + int(calls)
        for name, names in (data.get("suites") or {}).items():
            suites.setdefault(name, set()).update(names)
    return {"executed": executed, "suites": {n: sorted(v) for n, v in suites.items()}}


def main(argv: list[str] | None = None) -> int:
    """``python -m neuron_conformance.conformance.results.aten_audit COVERAGE.json... [--write DIR]``: the audit of the merged
    coverage files, printed as counts, exclusions by reason and the first unknown overloads."""
    import argparse  # deferred: only the command line needs it

    parser = argparse.ArgumentParser(
        prog="python -m neuron_conformance.conformance.results.aten_audit", description=main.__doc__
    )
    parser.add_argument("coverage", nargs="+", help="coverage.json files of one or more runs")
    parser.add_argument("--write", metavar="DIR", help="also write DIR/aten_audit.json")
    parser.add_argument(
        "--records",
        metavar="DIR",
        action="append",
        default=[],
        help="a report dir whose generated-suite records count as generated (repeatable)",
    )
    ns = parser.parse_args(argv)
    try:
        cov = merge_coverages(ns.coverage)
    except ValueError as exc:
        parser.error(str(exc))
    ran: set[str] = set()
    for d in ns.records:
        ran |= generated_from_records(read_records(d))
    data = write(ns.write, cov, ran) if ns.write else audit(cov, ran)
    c = data["counts"]
    print(
        f"{c['covered'] + c['generated']} of {data['total']} overloads with a CPU kernel reached "
        f"({data['percent_reached']}%; {data['percent_of_relevant']}% of those not excluded): covered {c['covered']}, generated {c['generated']}, excluded "
        f"{c['excluded']}, unknown {c['unknown']}; core {data['core']['reached']} of {data['core']['total']}"
    )
    for reason, e in sorted(data["excluded"].items(), key=lambda kv: -len(kv[1]["overloads"])):
        print(f"  excluded {len(e['overloads']):4d}  {reason}")
    print(f"  core not reached: {', '.join(data['core']['missing']) or '-'}")
    print(f"  unknown (first 40): {', '.join(data['unknown'][:40])}")
    return 0


__all__ = [
    "AUDIT_FILE",
    "CPU_KERNEL_KEYS",
    "EXCLUSIONS",
    "SCHEMA_UNSAFE",
    "audit",
    "base_name",
    "cpu_kernel_overloads",
    "exclusion",
    "gate_line",
    "generated_from_records",
    "generated_targets",
    "is_random",
    "main",
    "merge_coverages",
    "overload_of",
    "random_targets",
    "write",
]


if __name__ == "__main__":
    raise SystemExit(main())
