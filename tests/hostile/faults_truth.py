"""Faults of real third-party backends that the harness must tell the truth about (part of
``tests/hostile/backend.py``'s ``FAULTS``; ``truth_backend.py`` installs them on a device without an op
counter).

Each value installs its fault on the already installed emulated device (:mod:`neuron_conformance.emulator`):

* ``no-rng-state``: the device module's ``get_rng_state`` / ``set_rng_state`` (and the ``_all`` forms)
  raise ``NotImplementedError``, as with torch-opencl; ``torch.testing``'s ``freeze_rng_state`` then fails
  on any call that freezes the accelerator's RNG.
* ``no-set-offset``: ``aten::set_.source_Storage_storage_offset`` raises ``NotImplementedError`` on the
  PrivateUse1 key (a backend without it), which the harness's exact sample transfer uses.
"""

from __future__ import annotations

import torch

from neuron_conformance.emulator import faults


def _no_rng_state() -> None:
    module = torch.get_device_module(torch._C._get_privateuse1_backend_name())

    def missing(*args, **kwargs):
        raise NotImplementedError("hostile backend: get_rng_state/set_rng_state are not implemented")

    for name in ("get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all"):
        setattr(module, name, missing)


def _no_set_offset() -> None:
    faults.make_raise(
        "aten::set_.source_Storage_storage_offset",
        NotImplementedError,
        "hostile backend: aten::set_.source_Storage_storage_offset has no PrivateUse1 kernel",
    ).install()


FAULTS = {"no-rng-state": _no_rng_state, "no-set-offset": _no_set_offset}
"""Fault name -> function installing it (no arguments)."""
