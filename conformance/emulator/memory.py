"""Byte accounting for the emulated device's memory.

Every neuron storage the emulator creates is registered here with its size in bytes; a weak
reference with a callback on the storage object (storages keep their Python object alive as long as the C++
StorageImpl lives) gives the bytes back when the last tensor using it dies. The numbers are therefore the
bytes the emulator really holds, like ``torch.cuda.memory_allocated`` counts the caching allocator's
live blocks (there is no cache here, so "reserved" equals "allocated").
"""

from __future__ import annotations

import threading
import weakref

_lock = threading.Lock()
_allocated = 0
_peak = 0
_num_alloc = 0
_num_free = 0
_active = 0


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
    """Count ``nbytes`` as held until ``storage`` (a neuron ``UntypedStorage``) is freed."""
    global _allocated, _peak, _num_alloc, _active
    with _lock:
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
    """
    global _allocated, _peak, _num_alloc, _num_free, _active
    entry = _live.get(weakref.ref(storage))  # equal to the tracked ref while the storage lives
    if entry is None:
        return
    old, had_block = entry
    has_block = nbytes > 0
    with _lock:
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
    ``allocation.all.freed``, ``num_alloc_retries`` (always 0), ``num_ooms`` (always 0).
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
            "num_ooms": 0,
        }


def mem_get_info(device: object = None) -> tuple[int, int]:
    """(free, total) bytes of host memory as seen by ``os.sysconf``; the emulator lives in host RAM."""
    import os

    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        free = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        total, free = 0, 0
    return free, total
