"""The emulator modes the zoo fault tests run in, and the context that switches to one of them."""

from __future__ import annotations

import contextlib

from neuron_conformance import emulator
from neuron_conformance.model_zoo.case import clear_cache

MODES = ("mirror", "device")
"""Both numeric modes of the emulated device: a fault must be caught in each."""


@contextlib.contextmanager
def emulator_mode(mode: str):
    """Install the emulated device, switch it to ``mode`` (``"mirror"`` or ``"device"``) with an empty model
    cache, and restore the previous mode (cache emptied again) on exit."""
    emulator.install()
    before = emulator.get_mode()
    emulator.set_mode(mode)
    clear_cache()
    try:
        yield
    finally:
        emulator.set_mode(before)
        clear_cache()
