"""The emulated device's random number generator: a CPU mt19937 stream behind a CUDA-style Philox state.

torch 2.13 cannot create a ``torch.Generator("neuron")`` from Python (a PrivateUse1 generator needs the C++
hook ``getNewGenerator``), so the device RNG is one dedicated CPU ``torch.Generator`` (mt19937). Random aten
ops that reach the fallback with ``generator=None`` get this generator (:func:`device_generator`), and ops
without a ``Generator?`` argument draw from it through :func:`standing_in_for_default`. ``torch.manual_seed(s)``
reaches it through ``torch.neuron.manual_seed_all`` (torch/random.py calls it for every registered device
module that has ``_is_in_bad_fork``), so after the same seed a neuron ``randn`` (and every later draw) is
bitwise equal to a CPU ``randn``: mirror mode's promise, which the model zoo's ``mirrors_cpu`` sampling checks
rely on.

**The state is CUDA's Philox layout**, not the mt19937 state (5,056 bytes) of the generator underneath:
:func:`get_rng_state` returns a CPU ``uint8`` tensor of 16 bytes, the seed (``uint64``) then the offset
(``int64``), both little-endian, as ``CUDAGeneratorImpl::get_state`` writes them
(aten/src/ATen/cuda/CUDAGeneratorImpl.cpp). DTensor requires it: on every device but the CPU it uses
``OffsetBasedRNGTracker`` (torch/distributed/tensor/_random.py), which reads the device state as
``_PhiloxState`` (``state[8:].view(int64)`` must be one offset, else a bare ``AssertionError``), moves the
offset to the shard's start, calls ``set_rng_state`` and expects the draws that follow to be a function of
(seed, offset): different offsets give different streams, the same (seed, offset) on two ranks the same one.

How the mt19937 stream maps onto (seed, offset):

* the **offset** counts the device's random ops since the last seeding: :func:`device_generator` and
  :func:`standing_in_for_default` advance it by :data:`OFFSET_PER_OP` (4, Philox offsets being multiples of
  4) each time they hand the stream to an op (in the asynchronous mode when the op is issued; it draws when
  it runs, and :func:`get_rng_state` waits for it);
* :func:`get_rng_state` remembers the mt19937 state for its (seed, offset) key (a bounded LRU of
  :data:`REMEMBERED` states), so ``set_rng_state(get_rng_state())`` replays exactly;
* :func:`set_rng_state` of (s, o) restores the remembered state when the key is known; else, with o == 0, it
  seeds the stream with ``s`` (what ``manual_seed(s)`` gives); else it seeds it with ``splitmix64`` of (s, o)
  (:func:`mixed_seed`), so an offset DTensor moved to gives a stream of its own, the same on every rank.

**One stream with the host** (``$CONFORMANCE_EMULATOR_RNG=host``, read at import): the device RNG *is* the
CPU's default generator, as on a device that draws its random numbers on the host. A program then draws
the same numbers in the same order whether a tensor lives on the CPU or on the device, which is what
``neuron-migrate prove`` needs to compare a script run on the CPU with its fixed copy on the device (a
dropout or a ``multinomial`` moved to the device would otherwise draw from another stream). The state
layout and the offsets are the same (each :func:`get_rng_state` also advances the offset, since draws made on
the host move the stream without one); seeding either seeds both. Program order holds in the synchronous
execution mode only: in the asynchronous one a queued random op draws when it runs.

What is approximated: a real Philox stream at offset o continues the stream at offset 0 after o/4 draws of
4 values; here a stream set to an offset nobody remembered is an independent one, and two histories that
reach the same (seed, offset) with different draws share one remembered state (the latest).
"""

from __future__ import annotations

import collections
import contextlib

import torch

from . import _state, streams

OFFSET_PER_OP = 4
"""Offset advance per random op handed the device stream (Philox offsets are multiples of 4)."""

REMEMBERED = 128
"""How many (seed, offset) -> mt19937 states :func:`get_rng_state` keeps (least recently used dropped)."""

STATE_BYTES = 16
"""Size of the state tensor: seed (uint64) then offset (int64), as CUDA's Philox generator state."""

_MASK64 = 0xFFFF_FFFF_FFFF_FFFF

HOST_STREAM = _state.rng_stream() == "host"
"""True when the device RNG is the CPU's default generator (``$CONFORMANCE_EMULATOR_RNG=host``)."""

if HOST_STREAM:
    _generator = torch.random.default_generator
else:
    _generator = torch.Generator(device="cpu")
    _generator.manual_seed(torch.initial_seed())
_seed = torch.initial_seed() & _MASK64
_offset = 0
_remembered: collections.OrderedDict[tuple[int, int], torch.Tensor] = collections.OrderedDict()


def _drain() -> None:
    """In the asynchronous mode, wait for queued kernels (they draw from the generator when they run)."""
    if _state.async_mode:
        streams.synchronize_all()


def _splitmix64(x: int) -> int:
    x = (x + 0x9E37_79B9_7F4A_7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58_476D_1CE4_E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D0_49BB_1331_11EB) & _MASK64
    return x ^ (x >> 31)


def mixed_seed(seed: int, offset: int) -> int:
    """The mt19937 seed of the stream at (``seed``, ``offset``) for an offset not remembered (``offset != 0``):
    splitmix64 of the seed, xor the offset, splitmix64 again (64 bits)."""
    return _splitmix64(_splitmix64(seed & _MASK64) ^ (offset & _MASK64))


def _reseed(seed: int) -> None:
    global _seed, _offset
    _seed, _offset = seed & _MASK64, 0
    _generator.manual_seed(_seed)


def device_generator() -> torch.Generator:
    """The CPU ``torch.Generator`` that serves as the neuron device RNG, handed to one random op: the
    offset advances by :data:`OFFSET_PER_OP`."""
    global _offset
    _offset += OFFSET_PER_OP
    return _generator


def manual_seed(seed: int) -> None:
    """Seed the device RNG with ``seed`` (int; reduced modulo 2**64 like ``torch.manual_seed``); offset 0."""
    _drain()
    _reseed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seed every device's RNG (there is one device)."""
    manual_seed(seed)


def seed() -> int:
    """Seed the device RNG with a non-deterministic random number and return it (offset 0)."""
    global _seed, _offset
    _drain()
    _seed, _offset = _generator.seed() & _MASK64, 0
    return _seed


def seed_all() -> None:
    """Same as :func:`seed`, for the one device."""
    seed()


def initial_seed() -> int:
    """The seed of the current state (what :func:`manual_seed`, :func:`seed` or :func:`set_rng_state` set)."""
    return _seed


def _pack(seed_value: int, offset: int) -> torch.Tensor:
    signed = seed_value - (1 << 64) if seed_value >= (1 << 63) else seed_value
    return torch.tensor([signed, offset], dtype=torch.int64).view(torch.uint8)


def get_rng_state(device: object = "neuron") -> torch.Tensor:
    """The RNG state as a CPU ``torch.uint8`` tensor of :data:`STATE_BYTES` (16) bytes: the seed (``uint64``)
    then the offset (``int64``, in Philox units: :data:`OFFSET_PER_OP` per random op since the seeding),
    little-endian, CUDA's ``CUDAGeneratorImpl::get_state`` layout. The mt19937 state underneath is
    remembered for this (seed, offset), so :func:`set_rng_state` of the result replays the draws."""
    global _offset
    _drain()
    if HOST_STREAM:  # host draws move the stream without an offset: give every saved state a key of its own
        _offset += OFFSET_PER_OP
    key = (_seed, _offset)
    _remembered[key] = _generator.get_state()
    _remembered.move_to_end(key)
    while len(_remembered) > REMEMBERED:
        _remembered.popitem(last=False)
    return _pack(*key)


def set_rng_state(new_state: torch.Tensor, device: object = "neuron") -> None:
    """Set the RNG state from a 16-byte Philox state (:func:`get_rng_state`'s layout): a remembered
    (seed, offset) restores its stream; offset 0 is the stream of ``manual_seed(seed)``; another offset seeds
    an independent stream with :func:`mixed_seed` (the same on every process).

    Raises:
        TypeError: ``new_state`` is not a ``torch.uint8`` tensor.
        ValueError: it does not hold 16 bytes, or the offset is negative.
    """
    global _seed, _offset
    if not isinstance(new_state, torch.Tensor) or new_state.dtype != torch.uint8:
        got = new_state.dtype if isinstance(new_state, torch.Tensor) else type(new_state).__name__
        raise TypeError(
            f"neuron emulator: set_rng_state expects a torch.uint8 tensor of {STATE_BYTES} bytes "
            f"(seed uint64, offset int64: CUDA's Philox state layout), got {got}"
        )
    if new_state.numel() != STATE_BYTES:
        raise ValueError(
            f"neuron emulator: set_rng_state expects {STATE_BYTES} bytes (seed uint64, offset int64: "
            f"CUDA's Philox state layout), got {new_state.numel()} (an mt19937 CPU state has 5056)"
        )
    words = new_state.detach().to("cpu").contiguous().view(torch.int64).tolist()
    seed_value, offset = words[0] & _MASK64, words[1]
    if offset < 0:
        raise ValueError(f"neuron emulator: set_rng_state: the offset must be >= 0, got {offset}")
    _drain()
    known = _remembered.get((seed_value, offset))
    if known is not None:
        _generator.set_state(known)
        _remembered.move_to_end((seed_value, offset))
    elif offset == 0:
        _generator.manual_seed(seed_value)
    else:
        _generator.manual_seed(mixed_seed(seed_value, offset))
    _seed, _offset = seed_value, offset


@contextlib.contextmanager
def standing_in_for_default():
    """Within the block, the CPU's default generator draws the device RNG's stream: for random CPU kernels
    without a ``Generator?`` argument (``native_dropout``), which draw from the default generator. On exit
    the device RNG takes the advanced state and the CPU generator gets its own state back, so a device
    draw neither moves the CPU stream nor escapes the device's ``manual_seed`` / ``set_rng_state``. Counts
    as one random op (the offset advances by :data:`OFFSET_PER_OP`). With one stream for host and device
    (:data:`HOST_STREAM`) the default generator already is the device RNG: the draws stay where they are."""
    if HOST_STREAM:
        device_generator()
        yield
        return
    default = torch.random.default_generator
    own = default.get_state()
    default.set_state(device_generator().get_state())
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
