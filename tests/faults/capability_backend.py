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


def _op_dtypes(text: str) -> dict[str, list[str]]:
    """``"mv=float32+bfloat16;add=int32"`` -> ``{"mv": ["float32", "bfloat16"], "add": ["int32"]}``."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        glob, _, names = part.partition("=")
        out[glob] = [n for n in names.split("+") if n]
    return out


if os.environ.get("CONFORMANCE_TEST_OP_DTYPES"):
    CONFORMANCE_OP_DTYPES = _op_dtypes(os.environ["CONFORMANCE_TEST_OP_DTYPES"])
    """Per-op dtype claims from the environment (``$CONFORMANCE_TEST_OP_DTYPES``), when set."""

CONFORMANCE_CAPABILITIES = {**CAPABILITIES, **_declared(os.environ.get("CONFORMANCE_TEST_CAPABILITIES", ""))}
"""The emulator's declaration with the environment's names set over it."""
