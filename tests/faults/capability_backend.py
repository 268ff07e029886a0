"""Backend module for the capability tests: ``fault_backend`` (the emulated device, with the fault
``$CONFORMANCE_TEST_FAULT`` names, if any) plus a ``CONFORMANCE_CAPABILITIES`` declaration read from
``$CONFORMANCE_TEST_CAPABILITIES``.

``CONFORMANCE_TEST_CAPABILITIES="streams=0,float64=0,events=1"`` sets those names over the emulator's own
declaration (:data:`neuron_conformance.emulator.CAPABILITIES`); a name outside the vocabulary is passed on as it
is, so the harness's check of the declaration can be tested.
"""

from __future__ import annotations

import os

from fault_backend import (  # noqa: F401 - as fault_backend's
    CONFORMANCE_COUNT_OPS,
    CONFORMANCE_MIRRORS_CPU,
    CONFORMANCE_MODES,
    CONFORMANCE_OP_TRACKING,  # noqa: F401 - as fault_backend's
)

from neuron_conformance.emulator import CAPABILITIES


def _declared(text: str) -> dict[str, bool]:
    """``"a=0,b=1"`` -> ``{"a": False, "b": True}``."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        out[name] = value.strip() not in ("0", "false", "no")
    return out


CONFORMANCE_CAPABILITIES = {**CAPABILITIES, **_declared(os.environ.get("CONFORMANCE_TEST_CAPABILITIES", ""))}
"""The emulator's declaration with the environment's names set over it."""
