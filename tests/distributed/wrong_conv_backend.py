"""Backend module for the DTensor sweep's fault test: the emulated device (mirror mode) whose convolution kernel
is 1 % off (``aten::convolution`` on PrivateUse1, :func:`neuron_conformance.emulator.faults.scale_output`).

``nn.functional.conv1d`` is an expected failure of the sweep (DTensor's refusal: a convolution over a sharded
spatial dimension gives another shape); its replicated combinations still run the device's kernel, so this
wrong kernel must turn the expected failure into ``unexpected``."""

from __future__ import annotations

import neuron_conformance.emulator.backend  # noqa: F401 - installs the emulated device
from neuron_conformance.emulator import faults

CONFORMANCE_MIRRORS_CPU = True

faults.scale_output("aten::convolution", rel=1e-2).install()
