"""aten coverage: which aten overloads ran on the device under test, against all registered and core ops.

:func:`trace` counts, while a test runs, the aten overloads executed on the device under test: through
the backend's own counter when its module offers one (``CONFORMANCE_COUNT_OPS``, see
docs/architecture.md; the emulated device does), else through a :class:`CoverageMode` (a
``TorchDispatchMode`` counting every aten overload call that has a tensor on the device among its
arguments or results). The mode costs a trip through Python for every aten call of the test, CPU
reference included; a backend counter costs nothing on the CPU side. Each pytest process writes its
counts to ``<report-dir>/coverage/<worker>.json`` as ``{"executed": {"aten::add.Tensor": calls}, "suites":
{"compare_cpu": ["aten::add.Tensor"]}}`` (the suites whose tests executed each overload); the
controlling process merges them into ``<report-dir>/coverage.json``::

    {"executed": {name: calls}, "suites": {name: [suite, ...]}, "counted_by": str, "op_tracking": bool,
     "fallback_only": [names] | None, "registered_total": int, "executed_registered": int,
     "core_total": int, "core_executed": [names], "core_via_out": [names], "core_composite": [names],
     "core_missing": [names]}

A core overload counts as executed when it ran, or when its ``out=`` variant ran
(:func:`functional_of_out`; those are also listed in ``core_via_out``): a backend-side counter sees a
structured op's ``out=`` kernel where a dispatch mode sees the functional op. With a backend counter,
core overloads that PyTorch runs above the backend as other ops (a CompositeExplicitAutograd kernel and
no kernel of the backend's own: ``aten::expand``, ``aten::clone``, ``aten::add.Scalar``) cannot be seen
by name; they are listed in ``core_composite``, not in ``core_missing`` (:func:`runs_above_backend`).

When the backend has op tracking (``CONFORMANCE_OP_TRACKING``, :mod:`neuron_conformance.conformance.backend.fallbacks`) the
coverage counts native execution only: an overload that every test that ran it saw fall back to the CPU
is dropped from ``executed`` and ``suites`` and listed in ``fallback_only`` (``op_tracking`` true);
without tracking ``fallback_only`` is null: native and fallback execution cannot be told apart.

Names are dispatcher names: ``aten::<op>`` for the ``default`` overload, ``aten::<op>.<overload>``
otherwise (``torch._C._dispatch_get_all_op_names()``). "Core" means the overload carries
``torch.Tag.core`` (the Core ATen IR set of ``native_functions.yaml``; 193 overloads in torch 2.13).
Ops decomposed above the dispatcher's Python key (CompositeImplicitAutograd) appear as what they
decompose into, because that is what the device executes.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from neuron_conformance.conformance.results.records import write_json_atomic

COVERAGE_DIR = "coverage"
COVERAGE_FILE = "coverage.json"


def overload_name(func) -> str:
    """Dispatcher name of an ``OpOverload``: ``aten::relu``, ``aten::add.Tensor``."""
    name = func._schema.name
    ov = func._overloadname
    return name if ov == "default" else f"{name}.{ov}"


class CoverageMode(TorchDispatchMode):
    """Counts aten overload calls that touch a tensor on ``device_type`` (arguments or results).

    Attributes:
        counts: name -> number of calls (see :func:`overload_name`). When it has a ``crumb`` (a
            :class:`neuron_conformance.conformance.survival.breadcrumb.CountingBreadcrumb`), every overload's name is written into the
            breadcrumb before the overload runs, so a crash record can name it.
    """

    def __init__(self, device_type: str, counts: dict | None = None):
        super().__init__()
        self.device_type = device_type
        self.counts: dict[str, int] = counts if counts is not None else {}
        self.crumb = getattr(counts, "crumb", None)

    def _on_device(self, values) -> bool:
        device_type = self.device_type
        for v in values:
            if isinstance(v, torch.Tensor):
                if v.device.type == device_type:
                    return True
            elif isinstance(v, (list, tuple)):
                for t in v:  # TensorList / Tensor?[] arguments, tuple results
                    if isinstance(t, torch.Tensor) and t.device.type == device_type:
                        return True
            elif isinstance(v, dict):
                if self._on_device(v.values()):
                    return True
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _names.get(func)
        if name is None:
            name = _names[func] = overload_name(func)
        if self.crumb is not None and (self._on_device(args) or (kwargs and self._on_device(kwargs.values()))):
            self.crumb.enter(name)  # before the call: the op a crash happens in
        result = func(*args, **kwargs)
        if (
            self._on_device(args)
            or (kwargs and self._on_device(kwargs.values()))
            or self._on_device(result if isinstance(result, (list, tuple)) else (result,))
        ):
            dict.__setitem__(self.counts, name, self.counts.get(name, 0) + 1)
        return result


_names: dict = {}


def choose_method(profile, choice: str = "auto") -> tuple[str | None, str | None]:
    """``(method, reason)`` of aten coverage for ``profile`` under ``--conformance-aten-coverage choice``.

    ``method`` is ``"backend"`` (the backend's counter, ``profile.op_counter``), ``"mode"`` (a
    :class:`CoverageMode`) or None (not traced); ``reason`` says why it is not traced (None when traced).
    ``auto``: the backend's counter when it has one, else not traced, because a ``TorchDispatchMode`` is
    not transparent (under it a tensor's conj bit can be dropped, so a crash becomes a numeric failure).
    """
    counter = getattr(profile, "op_counter", None)
    if choice == "off":
        return None, "--conformance-aten-coverage off"
    if choice == "mode":
        return "mode", None
    if counter:
        return "backend", None
    if choice == "backend":
        return None, "--conformance-aten-coverage backend: the backend module has no op counter (CONFORMANCE_COUNT_OPS)"
    return None, (
        "the backend module has no op counter (CONFORMANCE_COUNT_OPS) and a TorchDispatchMode "
        "changes behaviour; --conformance-aten-coverage mode traces with one anyway"
    )


def trace(profile, counts: dict, method: str | None = None):
    """Context manager counting into ``counts`` (dispatcher name -> calls) the aten overloads executed on
    the device of ``profile`` (a :class:`neuron_conformance.conformance.backend.device.DeviceProfile`) inside the ``with`` block.

    Uses the backend's counter named by ``profile.op_counter`` (``"module:attribute"``) when there is one,
    else a :class:`CoverageMode` for ``profile.type``; ``method`` ``"mode"`` forces the mode.

    Raises:
        RuntimeError: ``profile.op_counter`` names something that cannot be imported or is not callable.
    """
    spec = getattr(profile, "op_counter", None)
    if not spec or method == "mode":
        return CoverageMode(profile.type, counts)
    counter = _counter(spec)
    return counter(counts)


@functools.lru_cache(maxsize=None)
def _counter(spec: str):
    module_name, _, attr = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise RuntimeError(f"aten coverage: the backend's op counter {spec!r} cannot be loaded: {exc}") from None
    if not callable(fn):
        raise RuntimeError(f"aten coverage: the backend's op counter {spec!r} is not callable")
    return fn


def uses_dispatch_mode(profile, method: str | None = None) -> bool:
    """True when :func:`trace` would use a :class:`CoverageMode` for ``profile`` (no backend counter, or
    ``method`` ``"mode"``)."""
    return method == "mode" or not getattr(profile, "op_counter", None)


@functools.lru_cache(maxsize=1)
def registered_overloads() -> tuple[str, ...]:
    """Every aten overload registered with the dispatcher (3,110 in torch 2.13), sorted."""
    return tuple(sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::")))


@functools.lru_cache(maxsize=1)
def core_overloads() -> tuple[str, ...]:
    """The registered aten overloads tagged ``torch.Tag.core`` (the Core ATen IR), sorted."""
    out = []
    for n in registered_overloads():
        op = _overload(n)
        if op is not None and torch.Tag.core in op.tags:
            out.append(n)
    return tuple(out)


def _overload(name: str):
    """The ``OpOverload`` of dispatcher name ``name`` (``aten::add.Tensor``), or None when Python has none."""
    base, _, ov = name[len("aten::") :].partition(".")
    try:
        return getattr(getattr(torch.ops.aten, base), ov or "default")
    except (AttributeError, RuntimeError):
        return None


def _is_out_arg(arg) -> bool:
    return bool(arg.kwarg_only and arg.alias_info is not None and arg.alias_info.is_write)


@functools.lru_cache(maxsize=1)
def functional_of_out() -> dict[str, str]:
    """``out=`` overload -> the functional overload it is the out variant of (``aten::add.out`` ->
    ``aten::add.Tensor``), matched by base name and the (name, type) list of the non-out arguments.

    A backend that implements only the ``out=`` kernel of a structured op runs the functional and in-place
    forms through it (PyTorch registers ``CompositeExplicitAutogradNonFunctional`` kernels that call the
    ``out=`` overload), so a backend-side counter sees ``aten::add.out`` where a dispatch mode above the
    backend sees ``aten::add.Tensor``. On torch 2.13, 162 of the 193 core overloads have such a variant.
    """
    functional: dict[tuple, str] = {}
    outs: list[tuple[tuple, str]] = []
    for name in registered_overloads():
        op = _overload(name)
        if op is None:
            continue
        schema = op._schema
        key = (name.split(".")[0], tuple((a.name, str(a.type)) for a in schema.arguments if not _is_out_arg(a)))
        if any(_is_out_arg(a) for a in schema.arguments):
            outs.append((key, name))
        elif not any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
            functional.setdefault(key, name)
    return {name: functional[key] for key, name in outs if key in functional}


def backend_key(profile) -> str | None:
    """The dispatch key whose kernels a backend counter sees for ``profile``'s device (``PrivateUse1`` for
    a PrivateUse1 backend, ``CUDA`` for cuda...), or None when coverage comes from a dispatch mode."""
    if uses_dispatch_mode(profile):
        return None
    if profile.type == torch._C._get_privateuse1_backend_name():
        return "PrivateUse1"
    return {"cuda": "CUDA", "xpu": "XPU", "mps": "MPS", "cpu": "CPU", "hpu": "HPU", "mtia": "MTIA"}.get(
        profile.type, "PrivateUse1"
    )


def runs_above_backend(name: str, key: str) -> bool:
    """True when overload ``name`` has no kernel of its own for dispatch key ``key`` but a
    CompositeExplicitAutograd[NonFunctional] one: PyTorch runs it above the backend as other ops
    (``aten::expand`` as ``aten::as_strided``), so a backend-side counter never sees it by name."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    try:
        return (not has(name, key)) and (
            has(name, "CompositeExplicitAutograd") or has(name, "CompositeExplicitAutogradNonFunctional")
        )
    except RuntimeError:
        return False


def write_worker(
    report_dir: str | os.PathLike,
    worker: str,
    counts: dict,
    key: str | None = None,
    suites: dict | None = None,
    tracking=None,
) -> Path:
    """Write one process's counts to ``<report_dir>/coverage/<worker>.json`` (atomically); ``key`` is
    :func:`backend_key` of the run (None: counted by a dispatch mode); ``suites`` maps a suite name to the
    overloads its tests executed (the file keeps only the names: ``{"suites": {suite: [names]}}``);
    ``tracking`` is the process's :class:`neuron_conformance.conformance.backend.fallbacks.Gathered` names when the backend has op
    tracking (written as ``{"tracking": {"native": [names], "fallback": [names]}}``), else None."""
    path = Path(report_dir) / COVERAGE_DIR / f"{worker}.json"
    tracked = {"native": sorted(tracking.native), "fallback": sorted(tracking.fallback)} if tracking else None
    write_json_atomic(
        path,
        {
            "executed": dict(sorted(counts.items())),
            "backend_key": key,
            "suites": {s: sorted(c) for s, c in sorted((suites or {}).items())},
            "tracking": tracked,
        },
    )
    return path


def clear(report_dir: str | os.PathLike, *, merged: bool = False) -> None:
    """Remove per-worker coverage files of a previous run (and its ``coverage.json`` when ``merged``:
    a run that does not trace must not report the last run's coverage)."""
    if merged:
        (Path(report_dir) / COVERAGE_FILE).unlink(missing_ok=True)
    cdir = Path(report_dir) / COVERAGE_DIR
    if cdir.is_dir():
        for p in cdir.glob("*.json"):
            p.unlink()


def merge(report_dir: str | os.PathLike) -> dict:
    """Merge ``<report_dir>/coverage/*.json`` and return the ``coverage.json`` content (see the module).

    Unreadable worker files are skipped (a worker that crashed mid-write leaves none: writes are atomic).
    """
    executed: dict[str, int] = {}
    suites: dict[str, set] = {}
    keys: set = set()
    native: set = set()
    fell_back: set | None = None
    cdir = Path(report_dir) / COVERAGE_DIR
    for p in sorted(cdir.glob("*.json")) if cdir.is_dir() else ():
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for name, calls in (data.get("executed") or {}).items():
            executed[name] = executed.get(name, 0) + int(calls)
        for suite, names in (data.get("suites") or {}).items():
            for name in names:
                suites.setdefault(name, set()).add(str(suite))
        keys.add(data.get("backend_key"))
        tracked = data.get("tracking")
        if tracked is not None:
            native.update(tracked.get("native") or ())
            fell_back = (fell_back or set()) | set(tracked.get("fallback") or ())
    fallback_only = sorted(fell_back - native) if fell_back is not None else None
    for name in fallback_only or ():  # native execution only: an op that only ever fell back is not covered
        executed.pop(name, None)
        suites.pop(name, None)
    core = core_overloads()
    via_out = {functional_of_out().get(n) for n in executed} - {None}
    registered = set(registered_overloads())
    key = next(iter(keys)) if len(keys) == 1 else None
    unseen = [n for n in core if n not in executed and n not in via_out]
    composite = [n for n in unseen if runs_above_backend(n, key)] if key else []
    composite_set = set(composite)
    return {
        "executed": dict(sorted(executed.items())),
        "suites": {n: sorted(suites[n]) for n in sorted(suites)},
        "counted_by": f"backend ({key} kernels)" if key else "dispatch mode",
        "op_tracking": fell_back is not None,
        "fallback_only": fallback_only,
        "registered_total": len(registered),
        "executed_registered": sum(1 for n in executed if n in registered),
        "core_total": len(core),
        "core_executed": [n for n in core if n in executed or n in via_out],
        "core_via_out": [n for n in core if n not in executed and n in via_out],
        "core_composite": composite,
        "core_missing": [n for n in unseen if n not in composite_set],
    }


def write_merged(report_dir: str | os.PathLike) -> dict:
    """Merge the per-worker files and write ``<report_dir>/coverage.json``; returns its content."""
    data = merge(report_dir)
    write_json_atomic(Path(report_dir) / COVERAGE_FILE, data)
    return data


__all__ = [
    "COVERAGE_FILE",
    "CoverageMode",
    "backend_key",
    "clear",
    "core_overloads",
    "functional_of_out",
    "merge",
    "overload_name",
    "registered_overloads",
    "runs_above_backend",
    "trace",
    "uses_dispatch_mode",
    "write_merged",
    "write_worker",
]
