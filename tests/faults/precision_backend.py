"""Backend module for the reduced-precision tests: ``fault_backend`` (the emulated device in the mode
``$CONFORMANCE_EMULATOR_MODE`` names, with the fault ``$CONFORMANCE_TEST_FAULT`` names) with the float32 matmul
precision set from ``$CONFORMANCE_TEST_MATMUL_PRECISION`` at import, as a user's set-up code sets it."""

from __future__ import annotations

import os

import torch
from fault_backend import CONFORMANCE_COUNT_OPS, CONFORMANCE_MIRRORS_CPU, CONFORMANCE_MODES, CONFORMANCE_OP_TRACKING  # noqa: F401 - as fault_backend's

torch.set_float32_matmul_precision(os.environ.get("CONFORMANCE_TEST_MATMUL_PRECISION", "highest"))
