"""Faults of third-party backends seen in the wild (part of ``tests/hostile/backend.py``'s ``FAULTS``), each
installed on the already installed emulated device:

* ``env-at-init``: the backend sets up a runtime once per process and marks it in the process environment
  (:data:`OWNER_ENV` = its process id) when it is imported. A process that inherits another process's mark
  takes the runtime for set up, and its kernel builds fail: ``aten::logical_and`` raises a two-line
  message whose first line only announces the reason (``kernel build failed for logic_ops (<path>):``).
  Alone, or in processes that load the backend themselves with a clean environment, every op works.
* ``no-rng-state-api``: the device module has no ``get_rng_state`` / ``set_rng_state`` (the attributes are
  absent, not raising); every kernel works.
* ``own-not-implemented``: :data:`REFUSED` raise the backend's own ``RuntimeError("Operator 'aten::X' is
  not implemented for device neuron ...")`` instead of a ``NotImplementedError``.
"""

from __future__ import annotations

import os

import torch

from neuron_conformance.emulator import faults

OWNER_ENV = "HOSTILE_RUNTIME_OWNER"
"""Set by ``env-at-init`` to the id of the process that set its runtime up."""
BUILD_FAILED = "kernel build failed for logic_ops"
"""The first line of ``env-at-init``'s failure, which only announces the reason on the next line."""
BUILD_REASON = "the runtime was set up by another process"
"""The reason line of ``env-at-init``'s failure."""
REFUSED = ("aten::neg", "aten::neg.out", "aten::exp", "aten::exp.out", "aten::abs", "aten::abs.out")
"""The overloads ``own-not-implemented`` refuses."""


def _env_at_init() -> None:
    owner = os.environ.get(OWNER_ENV)
    if owner is not None and owner != str(os.getpid()):
        message = (
            f"{BUILD_FAILED} (/var/cache/hostile/logic_ops.kernel):\n"
            f"  {BUILD_REASON} (pid {owner}, {OWNER_ENV}); this process (pid {os.getpid()}) cannot use it"
        )
        for op in ("aten::logical_and", "aten::logical_and.out", "aten::logical_and_"):
            faults.make_raise(op, RuntimeError, message).install()
    os.environ[OWNER_ENV] = str(os.getpid())


def _no_rng_state_api() -> None:
    module = torch.get_device_module(torch._C._get_privateuse1_backend_name())
    for name in ("get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all"):
        if hasattr(module, name):
            delattr(module, name)


def _own_not_implemented() -> None:
    device = torch._C._get_privateuse1_backend_name()
    for op in REFUSED:
        name = op.split(".")[0]
        faults.make_raise(
            op, RuntimeError, f"Operator '{name}' is not implemented for device {device} (hostile backend 0.1)"
        ).install()


FAULTS = {
    "env-at-init": _env_at_init,
    "no-rng-state-api": _no_rng_state_api,
    "own-not-implemented": _own_not_implemented,
}
"""Fault name -> function installing it (no arguments)."""
