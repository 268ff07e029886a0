"""Every OpInfo sample as a function under ``torch.compile(backend=B)`` on the device, against eager CPU.

Opt-in (:mod:`neuron_conformance.opsuites.compile.selection`): ``--conformance-compile-suite``, or name this
module. ``B`` is ``--conformance-compile-backend``, else the backend registered under the device type's name
(the emulator's ``neuron``), else ``inductor``.

* ``test_compile`` (one test per OpInfo x selected dtype, variant ``compiled``; needs the capability
  ``compile``): each sample within ``--conformance-sample-budget`` is compiled with static shapes after a
  Dynamo reset, run, and checked by :func:`neuron_conformance.opsuites.compile.checks.check_sample`:
  values (the oracle), dtype and shape against eager CPU, strides against eager mode on the device, gradients through the compiled backward where the OpInfo supports autograd in the
  dtype (``supported_backward_dtypes``), a second call that must not recompile, and the graph count
  against the CPU's.
* ``test_compile_dynamic`` (one test per OpInfo in float32, variant ``dynamic``; needs ``compile`` and
  ``compile_dynamic``): forward only, up to :data:`DYNAMIC_SAMPLES` samples, each compiled with
  ``dynamic=True`` and checked as above, then its *grown* variant (every dimension of size >= 2 one
  longer: :func:`neuron_conformance.opsuites.compile.checks.grown_sample`) run through the same compiled
  function and checked against eager CPU too: a graph with symbolic shapes must be right for sizes it was
  not traced with. Whether the variant reused the graph is recorded (``graphs_reused``, ``recompiles``), not
  judged: Dynamo specializes sizes the function reads as constants, and sizes 0 and 1
  (torch/fx/experimental/symbolic_shapes.py). A variant the CPU refuses (a constant naming a size) is
  counted in ``grown_invalid``.

Values are judged as for a backend that does not mirror the CPU, whatever the device profile says: a
compiled graph is not the eager program (AOT autograd functionalizes and decomposes, inductor fuses and
reorders), so the mirror rule's bitwise equality, which holds for a backend running the CPU's kernels op
by op, does not apply. The dtype's ``torch.testing`` tolerance or the OpInfo's override, exact for
exact-class ops (:mod:`neuron_conformance.conformance.verdict.exact`), then fp64 arbitration
(:mod:`neuron_conformance.conformance.verdict.oracle`), as PyTorch compares compiled with eager results under
tolerances in its own OpInfo compile tests (test/inductor/test_torchinductor_opinfo.py).

Failure classes: ``compile-error``, ``compiled-run-error`` (``unsupported`` for a kernel the device lacks),
``recompile``, ``graph-break``, then ``metadata``, ``numeric``, ``nonfinite``; the record's ``stage`` says
``compile``, ``forward`` or ``backward``. Every record says whether each sample compiled as one graph
(``one_graph``, ``graphs``, ``graph_breaks`` per compared sample, ``break_reasons``, ``cpu_graph_breaks``).
The OpInfo's reseeding wrapper of random ops (``wrapper_set_seed``, which Dynamo cannot trace as one graph)
is bypassed in this suite: random ops are judged by metadata only, as in ``compare_cpu``.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from neuron_conformance.conformance.verdict.failures import ConformanceFailure
from neuron_conformance.opsuites.compile.capture import dynamo_settings
from neuron_conformance.opsuites.compile.checks import CompileCase, check_sample, grown_sample, judge_sample_graphs
from neuron_conformance.opsuites.compile.selection import backend_for, toolchain_problem
from neuron_conformance.opsuites.sample_selection import require_compared
from neuron_conformance.opsuites.suite_helpers import finish, parametrize_opinfos, start_case, suite_params

SUITE = "compile"
VARIANT = "compiled"
DYNAMIC_DTYPES = frozenset({torch.float32})
"""The dynamic-shape pass's dtypes (its bounded subset: one dtype, forward only)."""
DYNAMIC_SAMPLES = 2
"""Most samples a dynamic-shape test compiles (each with its grown variant)."""


def pytest_generate_tests(metafunc):
    parametrize_opinfos(metafunc)
    if {"dyn_op_name", "dyn_dtype_name"} <= set(metafunc.fixturenames):
        metafunc.parametrize(
            ("dyn_op_name", "dyn_dtype_name"),
            suite_params(
                metafunc.config,
                SUITE,
                variant="dynamic",
                dtypes_of=lambda op: DYNAMIC_DTYPES & set(op.supported_dtypes("cpu")),
            ),
        )


@pytest.fixture
def compile_with(device, compile_backend):
    """The backend name this test compiles with; skips the test, with one reason for every test, when the
    backend cannot run on this machine (:func:`neuron_conformance.opsuites.compile.selection.toolchain_problem`)."""
    backend = backend_for(device, compile_backend)
    problem = toolchain_problem(backend, device)
    if problem:
        pytest.skip(problem)
    return backend


@pytest.fixture(autouse=True)
def _plain_seeding(monkeypatch):
    """The OpInfo database's ``wrapper_set_seed`` as a plain call for this test (module docstring)."""
    from torch.testing._internal import common_methods_invocations as cmi  # deferred: the OpInfo database

    monkeypatch.setattr(cmi, "wrapper_set_seed", lambda op, *args, **kwargs: op(*args, **kwargs))


def _backward(op, dtype: torch.dtype) -> bool:
    return bool(op.supports_autograd) and dtype in op.supported_backward_dtypes("cpu")


class _Stats:
    """The record's compile fields, gathered sample by sample."""

    def __init__(self):
        self.graphs: list[int] = []
        self.breaks: list[int] = []
        self.cpu_breaks: list = []
        self.reasons: list[str] = []
        self.recompiles = 0
        self.reused = 0

    def add(self, run, reused: bool) -> None:
        counts = run.counts
        if reused:  # served by an earlier sample's graphs: no graph of its own to count
            self.reused += 1
            return
        self.graphs.append(counts.graphs)
        self.breaks.append(counts.breaks)
        self.cpu_breaks.append(counts.reference.breaks if counts.reference is not None else None)
        self.reasons.extend(r for r in counts.reasons if r not in self.reasons)

    def fields(self) -> dict:
        one = all(g == 1 for g in self.graphs) and not any(self.breaks) if self.graphs else None  # None: none compared
        return dict(
            one_graph=one,
            graphs=self.graphs,
            graph_breaks=self.breaks,
            cpu_graph_breaks=self.cpu_breaks,
            break_reasons=self.reasons[:4],
            recompiles=self.recompiles,
            graphs_reused=self.reused,
        )


def _run(case: CompileCase, selection, record, what: str) -> None:
    """Check every handed-out sample of ``selection``, each compiled afresh (dynamic: then its grown variant
    through the same compiled function), and fill ``record``: compile fields, sample counts, errors."""
    stats, index = _Stats(), None
    record.update(compile_backend=str(case.backend), dynamic=case.dynamic)
    try:
        with dynamo_settings(backward=case.backward):
            for index, sample in selection:
                where = f"{what} sample {index}"
                run = check_sample(case, index, sample, where)
                if isinstance(run, str):
                    selection.leave_out(run)
                    continue
                runs = [(run, where, False)]
                if case.dynamic:
                    grown = check_sample(case, index, grown_sample(sample), f"{where} grown", reuse=run.compiled)
                    if isinstance(grown, str):
                        record["grown_invalid"] = record.get("grown_invalid", 0) + 1
                    else:
                        runs.append((grown, f"{where} grown", grown.counts.frames == 0))
                        stats.recompiles += grown.counts.frames > 0
                for each, label, reused in runs:  # after every call: the reference compile resets Dynamo
                    try:
                        if not reused:
                            judge_sample_graphs(case, each, label)
                    finally:
                        stats.add(each, reused)
    except ConformanceFailure as exc:
        exc.sample = exc.sample if exc.sample is not None else index
        record.update(stats.fields())
        finish(record, case.tally, selection, failed=True)
        raise
    record.update(stats.fields())
    record.pop("stage", None)
    finish(record, case.tally, selection, policy=case.policy)
    require_compared(selection, what)
    if stats.graphs and not any(stats.graphs) and not any(stats.breaks):
        pytest.skip(
            f"{what}: Dynamo compiled no graph and broke none for any compared sample (the frames ran "
            f"eagerly, on the CPU too): nothing compiled was judged"
        )


def _case(op_name, dtype_name, device, profile, record, sample_index, budget, backend, *, dynamic: bool):
    """``(case, selection)`` of one test (:func:`neuron_conformance.opsuites.suite_helpers.start_case`)."""
    from neuron_conformance.opsuites.suite_helpers import opinfo  # deferred: the OpInfo database

    backward = not dynamic and _backward(opinfo(op_name), getattr(torch, dtype_name))
    profile = dataclasses.replace(profile, mirrors_cpu=False)  # compiled code is not the eager kernels
    op, dtype, tol, policy, tally, selection = start_case(
        op_name,
        dtype_name,
        device,
        profile,
        record,
        sample_index,
        budget=budget,
        requires_grad=backward,
        limit=DYNAMIC_SAMPLES if dynamic else None,
    )
    return CompileCase(
        op, dtype, device, profile, tol, policy, tally, backend, dynamic=dynamic, backward=backward, record=record
    ), selection


@pytest.mark.capability("compile")
def test_compile(
    op_name, dtype_name, device, device_profile, conformance_record, sample_index, sample_budget, compile_with
):
    case, selection = _case(
        op_name,
        dtype_name,
        device,
        device_profile,
        conformance_record,
        sample_index,
        sample_budget,
        compile_with,
        dynamic=False,
    )
    _run(case, selection, conformance_record, f"{op_name} {dtype_name} (compiled, backend {compile_with})")


@pytest.mark.capability("compile", "compile_dynamic")
def test_compile_dynamic(
    dyn_op_name, dyn_dtype_name, device, device_profile, conformance_record, sample_index, sample_budget, compile_with
):
    case, selection = _case(
        dyn_op_name,
        dyn_dtype_name,
        device,
        device_profile,
        conformance_record,
        sample_index,
        sample_budget,
        compile_with,
        dynamic=True,
    )
    _run(
        case,
        selection,
        conformance_record,
        f"{dyn_op_name} {dyn_dtype_name} (compiled, dynamic=True, backend {compile_with})",
    )
