"""Stream-aware block pool of the asynchronous mode: reuse after the streams that used a block have passed.

The outputs of kernels queued by :mod:`.async_ops` are allocated here, at once, on the host (their bytes are
written later by a stream worker). When the last tensor over such a storage dies, its CPU block is not
released but returned to a pool, keyed by (allocating stream, size in bytes), as PyTorch's CUDA caching
allocator does (c10/cuda/CUDACachingAllocator.cpp: blocks are pooled per stream; ``recordStream`` adds a
stream to a block's ``stream_uses``, and a freed block with such uses is reused only after an event recorded
on each of those streams at free time has completed, ``insert_events`` / ``process_events``):

* a new allocation on the same stream may take the block at once (the most recently freed block of the
  size first): its jobs run after every earlier job of
  that stream, so they cannot overtake the freed tensor's last use;
* a stream named by ``Tensor.record_stream`` (:func:`record_stream`) holds the block until its worker has
  passed the position it had reached when the storage was freed.

A job keeps the CPU blocks it reads and writes alive (not the neuron storages), so a tensor freed while a
stream still uses it behaves as on a real device: without ``record_stream`` its block can be handed to the
allocating stream's next allocation while the other stream still reads it.

Fresh blocks are filled with a poison pattern (:func:`poison`): NaN for floating and complex dtypes, the
largest value for integer dtypes, ``True`` for bool, so a read of memory no kernel has written yet shows.
Reused blocks keep their old bytes (as a caching allocator's do).

The pool keeps at most :data:`POOL_LIMIT` bytes; blocks past it are released.
"""

from __future__ import annotations

import threading
import weakref

import torch

from . import storage, streams

POOL_LIMIT = 1 << 30
"""Bytes the pool may keep for reuse (1 GiB); a freed block past it is released at once."""

_lock = threading.RLock()
"""Re-entrant: a pooled storage's finalizer (:func:`_release`) can run inside :func:`_take` on the same thread,
when the garbage collector frees a tensor there; with a plain lock that thread deadlocked (4 tests of the
variants suite hung in a whole-suite async run). :func:`_take` walks its list downwards by index, so a
block :func:`_release` appends meanwhile is neither visited nor shifts an index still to visit."""
_pool: dict[tuple[int, int], list] = {}
"""(stream id, bytes) -> list of ``[cpu block, {queue: position}]`` awaiting reuse."""
_pooled = 0
_reused = 0


def poison(t: torch.Tensor) -> None:
    """Fill CPU tensor ``t`` with the poison pattern of its dtype (see the module docstring)."""
    if t.numel() == 0:
        return
    if t.dtype.is_floating_point or t.dtype.is_complex:
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(torch.iinfo(t.dtype).max)


def _take(queue: streams.WorkQueue, nbytes: int):
    """A pooled block for ``queue`` of ``nbytes`` whose recorded streams have passed, else None."""
    global _pooled, _reused
    ignore = streams.FAULTS["reuse_ignores_record_stream"]
    with _lock:
        blocks = _pool.get((queue.stream_id, nbytes))
        if not blocks:
            return None
        for i in range(len(blocks) - 1, -1, -1):  # the most recently freed block first (it is hot)
            block, marks = blocks[i]
            if ignore or all(q.passed(pos) for q, pos in marks.items()):
                del blocks[i]
                _pooled -= nbytes
                _reused += 1
                return block
    return None


def _release(block: torch.UntypedStorage, queue: streams.WorkQueue, users: set) -> None:
    """Finalizer of a pooled storage: put its CPU block back with the positions its other users had."""
    global _pooled
    nbytes = block.nbytes()
    marks = {q: q.enqueued for q in users if q is not queue}
    with _lock:
        if _pooled + nbytes > POOL_LIMIT:
            return
        _pool.setdefault((queue.stream_id, nbytes), []).append([block, marks])
        _pooled += nbytes


def allocate(nbytes: int, queue: streams.WorkQueue) -> torch.UntypedStorage:
    """A neuron ``UntypedStorage`` of ``nbytes`` bytes for work on ``queue``: a reused block, or a fresh one.

    A fresh block is not poisoned here (the caller knows the dtype: :func:`poison`); :func:`is_fresh`
    tells which.

    Raises:
        torch.OutOfMemoryError: the bytes would exceed the declared capacity (:mod:`.memory`).
    """
    block = _take(queue, nbytes)
    fresh = block is None
    if fresh:
        block = torch.UntypedStorage(nbytes, device="cpu")
    nst = storage.adopt(block)
    users: set = set()
    nst._emu_users = users
    nst._emu_fresh = fresh
    weakref.finalize(nst, _release, block, queue, users)
    return nst


def is_fresh(nst: torch.UntypedStorage) -> bool:
    """True when ``nst`` came from :func:`allocate` with a block never used before."""
    return bool(getattr(nst, "_emu_fresh", False))


def record_stream(t: torch.Tensor, queue: streams.WorkQueue) -> None:
    """``Tensor.record_stream``: ``queue`` uses ``t``'s storage; its block waits for it once freed.

    Storages not allocated by this pool (adopted CPU kernel results) need nothing: every job holds their
    memory until it has run.
    """
    users = getattr(t.untyped_storage(), "_emu_users", None)
    if users is not None:
        users.add(queue)


def stats() -> dict[str, int]:
    """``{"pooled_bytes": bytes waiting for reuse, "reused": blocks handed out again}``."""
    with _lock:
        return {"pooled_bytes": _pooled, "reused": _reused}


def empty() -> None:
    """Release every pooled block (``empty_cache``)."""
    global _pooled
    with _lock:
        _pool.clear()
        _pooled = 0
