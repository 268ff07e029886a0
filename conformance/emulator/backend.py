"""Backend module for ``--backend-module conformance.emulator.backend``: importing it installs the emulator.

The mode comes from ``$CONFORMANCE_EMULATOR_MODE`` (``mirror`` by default). The harness reads the two
constants below (see docs/architecture.md, "Device under test").
"""

from __future__ import annotations

from . import get_mode, install

install()

CONFORMANCE_MIRRORS_CPU: bool = get_mode() == "mirror"
"""True in mirror mode: every op runs its CPU kernel, so results must be bitwise equal to CPU."""

CONFORMANCE_DIST_BACKEND: str = "neuron_gloo"
"""Collective backend name for ``torch.distributed`` on the emulated device (conformance.emulator.distributed)."""
