"""Byte accounting for the emulated device's memory.

Every neuron storage the emulator creates is registered here with its size in bytes; a weak
reference with a callback on the storage object (storages keep their Python object alive as long as the C++
StorageImpl lives) gives the bytes back when the last tensor using it dies. The numbers are therefore the
bytes the emulator really holds, like ``torch.cuda.memory_allocated`` counts the caching allocator's
live blocks (there is no cache here, so "reserved" equals "allocated").

The device has a declared capacity (:func:`capacity`, default :data:`DEFAULT_CAPACITY`, set with
``$CONFORMANCE_EMULATOR_MEMORY`` or :func:`set_capacity`): a storage that would take the bytes held past it is
refused with ``torch.OutOfMemoryError``, as a device allocator refuses a block (``c10::OutOfMemoryError``,
raised by ``TORCH_CHECK_WITH(OutOfMemoryError, ...)`` in c10/cuda/CUDACachingAllocator.cpp), and counted in
``num_ooms``. The check runs when the CPU kernel's fresh block is adopted, so that block is released at once.
"""

from __future__ import annotations

import os
import threading
import weakref

import torch

from .sizes import format_size, parse_size

DEFAULT_CAPACITY = 16 << 30
"""Declared device memory of the emulated device (bytes): 16 GiB, the HBM share of one NeuronCore of a
Trainium1 chip (AWS Neuron documentation, Trn1 architecture: 32 GiB of HBM per chip, two NeuronCores). Override with
``$CONFORMANCE_EMULATOR_MEMORY`` (bytes or a size such as ``32GiB``)."""

CAPACITY_ENV = "CONFORMANCE_EMULATOR_MEMORY"

STRESS_BUDGET = 5 << 30
"""What the emulated device declares as the stress suite's memory budget (bytes; the backend module's
``CONFORMANCE_MEMORY_BUDGET``): 5 GiB, enough for the tests over 2^31 bytes and elements (two tensors of
2 GiB) and below the 24 GiB of the project's CI machine with two xdist workers; the tests of 2^31 float32
elements (8 GiB and more) are opt-in with ``--conformance-memory-budget``. See docs/performance.md for the timings."""


def declared_budget() -> int:
    """The stress budget the emulated device declares: :data:`STRESS_BUDGET`, capped by :func:`capacity`."""
    return min(STRESS_BUDGET, capacity())


_lock = threading.Lock()
_allocated = 0
_peak = 0
_num_alloc = 0
_num_free = 0
_active = 0
_num_ooms = 0
_capacity: int | None = None


def capacity() -> int:
    """Declared device memory (bytes): :func:`set_capacity`, else ``$CONFORMANCE_EMULATOR_MEMORY``, else
    :data:`DEFAULT_CAPACITY`.

    Raises:
        ValueError: ``$CONFORMANCE_EMULATOR_MEMORY`` is not a size (the message names the variable).
    """
    global _capacity
    if _capacity is None:
        raw = os.environ.get(CAPACITY_ENV, "").strip()
        if raw:
            try:
                _capacity = parse_size(raw)
            except ValueError as exc:
                raise ValueError(f"${CAPACITY_ENV}: {exc}") from None
        else:
            _capacity = DEFAULT_CAPACITY
    return _capacity


def set_capacity(nbytes: int | None) -> None:
    """Declare the device memory (bytes); None goes back to the environment variable or the default.

    Raises:
        ValueError: a negative size.
    """
    global _capacity
    if nbytes is not None and nbytes < 0:
        raise ValueError(f"neuron emulator: capacity {nbytes} is negative")
    _capacity = nbytes


def check_fits(nbytes: int) -> None:
    """Raise ``torch.OutOfMemoryError`` (counted in ``num_ooms``) when ``nbytes`` more would not fit
    :func:`capacity`; used before a block is allocated (the storage resize guard)."""
    with _lock:
        _check_fits(nbytes)


def _check_fits(nbytes: int) -> None:
    """Raise ``torch.OutOfMemoryError`` when ``nbytes`` more would take the bytes held past :func:`capacity`
    (call with ``_lock`` held)."""
    global _num_ooms
    cap = capacity()
    if nbytes and _allocated + nbytes > cap:
        _num_ooms += 1
        free = max(0, cap - _allocated)
        raise torch.OutOfMemoryError(
            f"neuron emulator: out of memory. Tried to allocate {format_size(nbytes)}. Device neuron:0 has a total "
            f"capacity of {format_size(cap)} of which {format_size(free)} is free; {format_size(_allocated)} is allocated by live "
            f"tensors. Free tensors, or declare more with ${CAPACITY_ENV}."
        )


_live: dict = {}
"""weakref to a live neuron storage -> ``[bytes held, holds a block]`` (the refs' callbacks give the bytes
back). A storage freed by ``resize_(0)`` (see :func:`resized`) stays here with ``[0, False]``."""


def _release(ref) -> None:
    global _allocated, _num_free, _active
    entry = _live.pop(ref, None)
    if entry is None:
        return
    nbytes, holds_block = entry
    with _lock:
        _allocated -= nbytes
        if holds_block:
            _num_free += 1
            _active -= 1


def track(storage: object, nbytes: int) -> None:
    """Count ``nbytes`` as held until ``storage`` (a neuron ``UntypedStorage``) is freed.

    Raises:
        torch.OutOfMemoryError: the bytes held would exceed :func:`capacity`; nothing is counted.
    """
    global _allocated, _peak, _num_alloc, _active
    with _lock:
        _check_fits(nbytes)
        _allocated += nbytes
        _num_alloc += 1
        _active += 1
        if _allocated > _peak:
            _peak = _allocated
    _live[weakref.ref(storage, _release)] = [nbytes, True]


def resized(storage: object, nbytes: int) -> None:
    """Record that live ``storage`` now holds ``nbytes`` bytes (``0``: its block was freed; then a new block).

    Used by the storage resize guard (:mod:`.storage`, FSDP2's ``resize_(0)`` and re-allocation): a free
    counts in ``allocation.all.freed`` and a re-allocation in ``allocation.all.allocated``, as with a
    caching allocator's blocks. Untracked storages are ignored.

    Raises:
        torch.OutOfMemoryError: growing would exceed :func:`capacity`; nothing is changed.
    """
    global _allocated, _peak, _num_alloc, _num_free, _active
    entry = _live.get(weakref.ref(storage))  # equal to the tracked ref while the storage lives
    if entry is None:
        return
    old, had_block = entry
    has_block = nbytes > 0
    with _lock:
        _check_fits(nbytes - old)
        _allocated += nbytes - old
        if _allocated > _peak:
            _peak = _allocated
        if had_block and not has_block:
            _num_free += 1
            _active -= 1
        elif has_block and not had_block:
            _num_alloc += 1
            _active += 1
    entry[0], entry[1] = nbytes, has_block


def memory_allocated(device: object = None) -> int:
    """Bytes currently held by live neuron storages (int, bytes)."""
    return _allocated


def max_memory_allocated(device: object = None) -> int:
    """Highest value of :func:`memory_allocated` since start or the last :func:`reset_peak_memory_stats` (bytes)."""
    return _peak


def memory_reserved(device: object = None) -> int:
    """Bytes reserved; equals :func:`memory_allocated` because the emulator has no caching allocator."""
    return _allocated


def max_memory_reserved(device: object = None) -> int:
    """Peak of :func:`memory_reserved` (bytes)."""
    return _peak


def reset_peak_memory_stats(device: object = None) -> None:
    """Set the peak to the current allocation."""
    global _peak
    with _lock:
        _peak = _allocated


def reset_accumulated_memory_stats(device: object = None) -> None:
    """Zero the allocation and free counters."""
    global _num_alloc, _num_free
    with _lock:
        _num_alloc = 0
        _num_free = 0


def empty_cache() -> None:
    """No-op: nothing is cached, freed storages return their memory at once."""


def memory_stats(device: object = None) -> dict[str, int]:
    """A dict shaped like ``torch.cuda.memory_stats`` keys (subset): bytes and counts.

    Keys: ``allocated_bytes.all.current``, ``allocated_bytes.all.peak``, ``reserved_bytes.all.current``,
    ``reserved_bytes.all.peak``, ``active.all.current``, ``allocation.all.allocated``,
    ``allocation.all.freed``, ``num_alloc_retries`` (always 0), ``num_ooms`` (allocations refused by
    :func:`capacity`).
    """
    with _lock:
        return {
            "allocated_bytes.all.current": _allocated,
            "allocated_bytes.all.peak": _peak,
            "reserved_bytes.all.current": _allocated,
            "reserved_bytes.all.peak": _peak,
            "active.all.current": _active,
            "allocation.all.allocated": _num_alloc,
            "allocation.all.freed": _num_free,
            "num_alloc_retries": 0,
            "num_ooms": _num_ooms,
        }


def mem_get_info(device: object = None) -> tuple[int, int]:
    """(free, total) bytes of the declared device: total is :func:`capacity`, free what is left of it.

    The blocks live in host RAM, which may hold less than the declared free memory; the capacity is what
    the allocator enforces (so an allocation past ``free`` is refused the same way on every host).
    """
    cap = capacity()
    return max(0, cap - _allocated), cap
