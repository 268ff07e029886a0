"""A hostile third-party backend (``--conformance-backend-module tests.hostile.backend``): the emulated ``neuron``
device with faults a real vendor plugin has shown, switched on by ``$HOSTILE_FAULTS``.

``HOSTILE_FAULTS`` is a comma-separated list of names from :data:`FAULTS` (empty: a healthy backend).
Each fault is a small function that installs itself when this module is imported; an unknown name raises
``ValueError`` naming it. The module is not under ``neuron_conformance.emulator``, so the harness treats it as a
third-party (not ``emulated``) backend: it probes its device APIs and preflights its canary.

Faults:

* ``probe-segv``: ``torch.Tensor.pin_memory`` reads address 0 (SIGSEGV): the harness's start-up probe.
* ``no-int-scalar-add``: ``aten::add.Tensor`` raises ``NotImplementedError`` when any argument tensor has
  an integer (or bool) dtype or is a Python int (a wrapped-number scalar), as a float-only native add would;
  this breaks the default canary (``ones(2).add(1)``).
* ``conj-segv``: SIGSEGV in the PrivateUse1 kernels ``t.conj()`` reaches when it is materialised:
  ``aten::conj_physical.out`` / ``aten::_conj_physical`` (``t.conj()`` itself only sets the conj bit; the
  emulator's ``resolve_conj``/``conj_physical`` land in ``conj_physical.out``).
* ``abort-neg``: ``aten::neg`` calls ``abort()`` (SIGABRT).
* ``hang-neg``: ``aten::neg`` sleeps forever (ended by the harness's time limit).
* ``no-rng-state``, ``no-set-offset``: see :mod:`tests.hostile.faults_truth` (also installed by
  ``truth_backend.py``, the same device without a backend op counter).
* ``env-at-init``, ``no-rng-state-api``, ``own-not-implemented``: see :mod:`tests.hostile.faults_third_party`.

:func:`write_autoload_dist` makes the backend load itself on ``import torch`` (torch's
``[torch.backends]`` entry points, ``torch._import_device_backends``; off when
``TORCH_DEVICE_BACKEND_AUTOLOAD=0``).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from pathlib import Path

import torch

import neuron_conformance.emulator as emu
from neuron_conformance.emulator import faults
from neuron_conformance.emulator.opcount import count_ops
from tests.hostile.faults_third_party import FAULTS as THIRD_PARTY_FAULTS
from tests.hostile.faults_truth import FAULTS as TRUTH_FAULTS

ENV = "HOSTILE_FAULTS"
"""Environment variable naming the faults to install (comma-separated names of :data:`FAULTS`)."""
ENTRY_POINT_GROUP = "torch.backends"
"""The entry-point group torch loads on import (torch/__init__.py, ``_import_device_backends``)."""

emu.install()
CONFORMANCE_MIRRORS_CPU = True
CONFORMANCE_COUNT_OPS = count_ops
__version__ = "0.0-hostile"


def _segfault(*_args, **_kwargs):
    ctypes.string_at(0)


def _probe_segv() -> None:
    torch.Tensor.pin_memory = _segfault  # type: ignore[method-assign]


def _no_int_scalar_add() -> None:
    def add(*args, **kwargs):
        # a Python kernel gets a wrapped-number operand (``t.add(1)``) as the Python int itself
        kinds = [str(a.dtype) if isinstance(a, torch.Tensor) else type(a).__name__ for a in args[:2]]
        if any(not (k == "float" or k.startswith(("torch.float", "torch.complex", "torch.bfloat"))) for k in kinds):
            raise NotImplementedError(f"hostile backend: aten::add.Tensor has no integer kernel (operands {kinds})")
        return faults.correct("aten::add.Tensor", *args, **kwargs)

    faults.override("aten::add.Tensor", add, receives="args").install()


def _conj_segv() -> None:
    for op in ("aten::conj_physical.out", "aten::_conj_physical"):
        faults.make_segfault(op).install()


def _abort_neg() -> None:
    faults.make_abort("aten::neg").install()


def _hang_neg() -> None:
    faults.make_hang("aten::neg").install()


FAULTS: dict[str, Callable[[], None]] = {
    "probe-segv": _probe_segv,
    "no-int-scalar-add": _no_int_scalar_add,
    "conj-segv": _conj_segv,
    "abort-neg": _abort_neg,
    "hang-neg": _hang_neg,
    **TRUTH_FAULTS,  # no-rng-state, no-set-offset (tests/hostile/faults_truth.py)
    **THIRD_PARTY_FAULTS,  # env-at-init, no-rng-state-api, own-not-implemented (tests/hostile/faults_third_party.py)
}
"""Fault name -> function that installs it (module docstring)."""


def install_faults(spec: str | None) -> list[str]:
    """Install the faults named in ``spec`` (comma-separated); returns their names.

    Raises:
        ValueError: a name that is not in :data:`FAULTS`, naming it and the known ones.
    """
    names = [n.strip() for n in (spec or "").split(",") if n.strip()]
    for name in names:
        if name not in FAULTS:
            raise ValueError(f"{ENV}: unknown fault {name!r}; known: {', '.join(sorted(FAULTS))}")
    for name in names:
        FAULTS[name]()
    return names


INSTALLED = install_faults(os.environ.get(ENV))
"""The faults installed in this process."""


def autoload() -> None:
    """The ``[torch.backends]`` entry point: importing this module already installed the backend."""


def write_autoload_dist(
    folder: str | os.PathLike, name: str = "hostile", target: str = "tests.hostile.backend:autoload"
) -> Path:
    """Write ``<folder>/<name>_backend-0.0.dist-info`` with an ``entry_points.txt`` whose
    ``[torch.backends]`` entry ``name`` calls ``target`` (``module:function``) when torch is imported, with
    ``folder`` on PYTHONPATH.

    Returns the dist-info folder. The target's module must be importable too (for the default,
    ``tests.hostile.backend``, the repository root).
    """
    dist = Path(folder) / f"{name}_backend-0.0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}-backend\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{name} = {target}\n")
    return dist
