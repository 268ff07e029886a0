"""Random aten overloads on the device under test: metadata, documented distribution, reproducibility.

One test per overload the aten audit counts as random (:func:`neuron_conformance.conformance.results.aten_audit.random_targets`:
tagged ``nondeterministic_seeded`` in ``native_functions.yaml``, with a CPU kernel and no other exclusion
rule) and dtype its CPU kernel draws in, among those ``--conformance-dtypes`` selects (floating dtypes, and the
integer ones where the values are integers), called as ``torch.ops.aten.<op>.<overload>`` so that overload
itself runs. Its case (:mod:`neuron_conformance.opsuites.randomops.cases`, :mod:`neuron_conformance.opsuites.randomops.factory_cases`,
:mod:`neuron_conformance.opsuites.randomops.nn_cases`) says how. Checked, in order:

1. metadata: the CPU kernel runs the same arguments (its values are not used: vendors' generators,
   Philox and others, differ from the CPU's mt19937); every output and written argument on the device has
   the CPU's device type, dtype and shape. When the CPU kernel raises, nothing is judged
   (``no-reference``).
2. semantics: the case's support and distribution checks on the values read back (KS or z-test at a
   level of 1e-6, :mod:`neuron_conformance.opsuites.randomops.stats`); ``deterministic`` cases are compared with the CPU kernel.
3. reproducibility (``rule`` ``seeded-reproducible``): the same ``torch.manual_seed`` twice gives
   bitwise the same values; another seed gives other values.
4. generator state: the device module's ``get_rng_state`` / ``set_rng_state`` round trip replays the
   values, and a device draw leaves the CPU's default generator where it was (field ``rng_state``:
   ``checked``, or ``missing`` when the device module lacks them).
5. explicit generator, for overloads taking one: ``torch.Generator(device=<type>)`` seeded twice with
   the same seed gives the same values whatever the default generator's state (field ``generator``:
   ``checked``, ``not-claimed`` when the backend does not claim the ``generators`` capability
   (:mod:`neuron_conformance.conformance.backend.capabilities`; the emulated device: torch 2.13 has no Python hook for a PrivateUse1
   generator), or ``missing`` when a backend that claims it cannot create a device generator; in either
   of the last two cases only the default generator is checked).

Records: suite ``random_ops``, op = the dispatcher name (``aten::uniform_``), the case's dtype, variant
``random``; the
passing record carries the last statistic (``rule``, ``max_abs`` = statistic, ``atol`` = its bound).
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._pytree import tree_map

from neuron_conformance.conformance.pytest_plugin.options import selected_dtypes
from neuron_conformance.conformance.pytest_plugin.seeding import manual_seed
from neuron_conformance.conformance.results import aten_audit, coverage
from neuron_conformance.conformance.survival.crash_files import note_sample
from neuron_conformance.conformance.verdict.compare import ErrorTally, compare_outputs
from neuron_conformance.conformance.verdict.failures import MetadataFailure, NoReference, NumericFailure
from neuron_conformance.conformance.verdict.tolerances import tolerance_for
from neuron_conformance.opsuites.randomops import cases as random_cases
from neuron_conformance.opsuites.randomops import factory_cases as random_factory_cases
from neuron_conformance.opsuites.randomops import nn_cases as random_nn_cases
from neuron_conformance.opsuites.suite_helpers import annotate, call, tensor_leaves

SUITE = "random_ops"
VARIANT = "random"
SEED, OTHER_SEED, GEN_SEED = 1234, 4321, 99


def all_cases() -> dict[tuple[str, str], random_cases.RandomCase]:
    """``(overload name, dtype name)`` -> its case (every case module), for the overloads the running torch
    registers (the case modules also hold cases of overloads other releases have: ``rand.names`` before 2.13)."""
    return {
        (c.overload, c.dtype): c
        for c in (*random_cases.cases(), *random_factory_cases.cases(), *random_nn_cases.cases())
        if coverage._overload(c.overload) is not None
    }


def _params(selected) -> list:
    """One ``pytest.param`` per random target and case dtype in ``selected``; a target without any case
    keeps a float32 param, which fails (no case) instead of leaving the overload untested."""
    by_op: dict[str, list[str]] = {}
    for overload, dtype in all_cases():
        by_op.setdefault(overload, []).append(dtype)
    params = []
    for n in aten_audit.random_targets():
        for dt in by_op.get(n, ["float32"]):
            if dt in selected:
                params.append(
                    pytest.param(
                        n,
                        dt,
                        id=f"{n}-{dt}",
                        marks=[
                            pytest.mark.xdist_group(n),
                            pytest.mark.conformance(op=n, dtype=dt, variant=VARIANT, suite=SUITE),
                        ],
                    )
                )
    return params


def pytest_generate_tests(metafunc):
    if "random_overload" in metafunc.fixturenames:
        metafunc.parametrize(("random_overload", "random_dtype"), _params(set(selected_dtypes(metafunc.config))))


def _cpu(value):
    return tree_map(lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x, value)


def _written(op) -> list[int | str]:
    """Positions / names of the arguments ``op``'s schema marks as written (``Tensor(a!)``)."""
    out = []
    for i, a in enumerate(op._schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            out.append(a.name if a.kwarg_only else i)
    return out


class _Run:
    """One call of a case's overload on one device: result, arguments, their CPU copies."""

    def __init__(self, case, op, device, gen=None):
        self.args, self.kwargs = case.build(device, gen)
        self.result = op(*self.args, **self.kwargs)
        self.written = [self.kwargs.get(w) if isinstance(w, str) else self.args[w] for w in _written(op)]
        self.cpu_result, self.cpu_args, self.cpu_kwargs = _cpu(self.result), _cpu(self.args), _cpu(self.kwargs)
        self.values = tensor_leaves((self.cpu_result, _cpu(self.written)))


def _device_run(case, op, device, where, seed=None, gen=None) -> _Run:
    try:
        if seed is not None:
            manual_seed(seed)  # seeds the device RNG too: its failure is the device's
        return _Run(case, op, device, gen)
    except (MetadataFailure, NumericFailure):
        raise
    except Exception as exc:  # noqa: BLE001 - the CPU kernel accepted these arguments: the device must too
        raise annotate(exc, where, 0) from None


def _same(a: _Run, b: _Run) -> bool:
    return len(a.values) == len(b.values) and all(
        x.shape == y.shape and torch.equal(x, y) for x, y in zip(a.values, b.values)
    )


def _check_metadata(run: _Run, ref: _Run, device, where) -> None:
    got, want = (
        tensor_leaves((run.result, run.written)),
        tensor_leaves((ref.result, ref.written)),
    )  # outputs, written args
    if len(got) != len(want):
        raise MetadataFailure(f"{where}: {len(got)} tensors on the device, {len(want)} on the CPU")
    for i, (a, e) in enumerate(zip(got, want)):
        if (a.device.type, a.dtype, tuple(a.shape)) != (device.type, e.dtype, tuple(e.shape)):
            raise MetadataFailure(
                f"{where}, tensor {i}: {a.device.type} {a.dtype} {tuple(a.shape)}, expected "
                f"{device.type} {e.dtype} {tuple(e.shape)} (CPU kernel)"
            )


def _reproducible(case, op, device, where, first: _Run) -> None:
    again = _device_run(case, op, device, where, seed=SEED)
    if not _same(first, again):
        raise NumericFailure(
            f"{where}: torch.manual_seed({SEED}) twice gave different values on the device",
            fields={"rule": "seeded-reproducible"},
        )
    other = _device_run(case, op, device, where, seed=OTHER_SEED)
    if _same(first, other):
        raise NumericFailure(
            f"{where}: torch.manual_seed({SEED}) and ({OTHER_SEED}) gave the same values: the "
            "generator ignores the seed",
            fields={"rule": "seeded-reproducible"},
        )


def _state_call(fn, where, *args):
    """``fn(*args)`` for the device module's ``get_rng_state`` / ``set_rng_state``; an exception is re-raised
    with the same type (``NotImplementedError`` stays class ``unsupported``) naming the API."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - re-raised, named
        raise annotate(exc, f"{where}: {getattr(fn, '__name__', 'rng state')}", 0) from None


def _rng_state_round_trip(case, op, device, where) -> str:
    mod = torch if device.type == "cpu" else getattr(torch, device.type, None)
    get, put = getattr(mod, "get_rng_state", None), getattr(mod, "set_rng_state", None)
    if get is None or put is None:
        return "missing"
    manual_seed(OTHER_SEED)
    state, cpu_state = _state_call(get, where), torch.random.get_rng_state()
    a = _device_run(case, op, device, where)
    if device.type != "cpu" and not torch.equal(cpu_state, torch.random.get_rng_state()):
        raise NumericFailure(
            f"{where}: drawing on the device advanced the CPU's default generator (the device "
            "draws from the CPU stream, not from its own)",
            fields={"rule": "seeded-reproducible"},
        )
    _state_call(put, where, state)
    b = _device_run(case, op, device, where)
    if not _same(a, b):
        raise NumericFailure(
            f"{where}: set_rng_state(get_rng_state()) did not replay the values", fields={"rule": "seeded-reproducible"}
        )
    return "checked"


def _explicit_generator(case, op, device, where, claimed: bool = True) -> str | None:
    if not any("Generator" in str(a.type) for a in op._schema.arguments):
        return None
    if not claimed:
        return "not-claimed"
    gen, exc = call(torch.Generator, device=device.type)
    if exc is not None:
        return "missing"
    runs = []
    for default_seed in (SEED, OTHER_SEED):  # the default generator's state must not matter
        manual_seed(default_seed)
        gen.manual_seed(GEN_SEED)
        runs.append(_device_run(case, op, device, where, gen=gen))
    if not _same(*runs):
        raise NumericFailure(
            f"{where}: torch.Generator(device={device.type!r}).manual_seed({GEN_SEED}) twice gave different values",
            fields={"rule": "seeded-reproducible"},
        )
    return "checked"


def test_random_op(random_overload, random_dtype, device, device_profile, conformance_record, claimed_capabilities):
    case = all_cases()[random_overload, random_dtype]
    op = aten_audit.overload_of(random_overload)
    where = f"{random_overload} [{case.dtype}]"
    conformance_record.update(dtype=case.dtype, samples=1)
    note_sample(0)
    torch.random.default_generator.manual_seed(SEED)  # the CPU reference seeds the CPU only
    ref, cpu_exc = call(_Run, case, op, torch.device("cpu"))
    if cpu_exc is not None:
        raise NoReference(
            f"{where}: the CPU kernel raised {type(cpu_exc).__name__}: "
            f"{(str(cpu_exc).splitlines() or [''])[0][:200]}; the device was not judged"
        )
    run = _device_run(case, op, device, where, seed=SEED)
    _check_metadata(run, ref, device, where)
    if case.deterministic:
        tol = tolerance_for(torch.float32, mirrors_cpu=device_profile.mirrors_cpu, device_type=device.type)
        tally = ErrorTally()
        # an integer result (the SDPBackend _fused_sdp_choice picks) is the device's own choice: judged by the case
        for v in compare_outputs(
            run.result, ref.result, device_type=device.type, tolerance=tol, integer_values=False, where=where
        ):
            tally.add(v, 0)
        conformance_record.update(sample=0, **tally.record_fields())
        conformance_record.update(case.check(run.cpu_result, run.cpu_args, run.cpu_kwargs))  # its own rule decided
        return
    fields = case.check(run.cpu_result, run.cpu_args, run.cpu_kwargs)
    _reproducible(case, op, device, where, run)
    generator = _explicit_generator(case, op, device, where, "generators" in claimed_capabilities)
    conformance_record.update(
        sample=0, rng_state=_rng_state_round_trip(case, op, device, where), generator=generator, **fields
    )
