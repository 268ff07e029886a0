"""The emulated device's random number generator.

torch 2.13 cannot create a ``torch.Generator("neuron")`` from Python (a PrivateUse1 generator needs the C++
hook ``getNewGenerator``), so the device RNG is one dedicated CPU ``torch.Generator``. Random aten ops that
reach the fallback with ``generator=None`` get this generator. ``torch.manual_seed(s)`` reaches it through
``torch.neuron.manual_seed_all`` (torch/random.py calls it for every registered device module that has
``_is_in_bad_fork``), so with the same seed a neuron ``randn`` is bitwise equal to a CPU ``randn``.
"""

from __future__ import annotations

import contextlib

import torch

from . import _state, streams

_generator = torch.Generator(device="cpu")
_generator.manual_seed(torch.initial_seed())


def _drain() -> None:
    """In the asynchronous mode, wait for queued kernels (they draw from the generator when they run)."""
    if _state.async_mode:
        streams.synchronize_all()


def device_generator() -> torch.Generator:
    """The CPU ``torch.Generator`` that serves as the neuron device RNG."""
    return _generator


def manual_seed(seed: int) -> None:
    """Seed the device RNG with ``seed`` (int; reduced modulo 2**64 like ``torch.manual_seed``)."""
    _drain()
    _generator.manual_seed(int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def manual_seed_all(seed: int) -> None:
    """Seed every device's RNG (there is one device)."""
    manual_seed(seed)


def seed() -> int:
    """Seed the device RNG with a non-deterministic random number and return it."""
    _drain()
    return _generator.seed()


def seed_all() -> None:
    """Same as :func:`seed`, for the one device."""
    _generator.seed()


def initial_seed() -> int:
    """The seed the device RNG was last seeded with."""
    return _generator.initial_seed()


def get_rng_state(device: object = "neuron") -> torch.Tensor:
    """RNG state as a CPU ``uint8`` tensor (the CPU generator's state format, 5056 bytes)."""
    _drain()
    return _generator.get_state()


def set_rng_state(new_state: torch.Tensor, device: object = "neuron") -> None:
    """Restore a state returned by :func:`get_rng_state`.

    Raises:
        TypeError: when ``new_state`` is not a ``torch.ByteTensor``.
    """
    if not isinstance(new_state, torch.Tensor) or new_state.dtype != torch.uint8:
        raise TypeError(f"neuron emulator: set_rng_state expects a torch.uint8 tensor, got {type(new_state).__name__}")
    _drain()
    _generator.set_state(new_state.cpu())


@contextlib.contextmanager
def standing_in_for_default():
    """Within the block, the CPU's default generator draws the device RNG's stream: for random CPU kernels
    without a ``Generator?`` argument (``native_dropout``), which draw from the default generator. On exit
    the device RNG takes the advanced state and the CPU generator gets its own state back, so a device
    draw neither moves the CPU stream nor escapes the device's ``manual_seed`` / ``set_rng_state``."""
    default = torch.random.default_generator
    own = default.get_state()
    default.set_state(_generator.get_state())
    try:
        yield
    finally:
        _generator.set_state(default.get_state())
        default.set_state(own)


def get_rng_state_all() -> list[torch.Tensor]:
    """List with the one device's RNG state."""
    return [get_rng_state()]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    """Restore from a list produced by :func:`get_rng_state_all`."""
    for state in new_states:
        set_rng_state(state)
