"""Allocator stress: rapid allocation and free, and out-of-memory then recovery, through ``torch.accelerator``.

What a device allocator owes its users (the contract ``torch.cuda``'s caching allocator keeps, documented in
PyTorch's "CUDA semantics: Memory management" note and read back through ``torch.accelerator.memory_*``):

* ``memory_allocated()`` counts the bytes of live tensors: after every tensor of a loop iteration is freed it
  is back at its value before the iteration, exactly; a block that is never given back shows as growth.
* ``memory_reserved()`` may keep freed blocks for reuse, but a loop that frees what it allocates must reuse
  them: it grows by no more than one iteration's peak (:data:`RESERVED_SLACK` times it).
* live blocks do not overlap: each tensor of an iteration keeps the value it was filled with.
* an allocation past the free memory (``torch.accelerator.get_memory_info``) raises
  ``torch.OutOfMemoryError`` (``torch.cuda.OutOfMemoryError`` is the same class), and afterwards the device
  allocates and computes normally.
"""

from __future__ import annotations

import gc

import torch

from neuron_conformance.conformance.verdict.failures import MetadataFailure, NumericFailure, WrongErrorFailure

ITERATIONS = 60
SMALL_PER_ITERATION = 40
LARGE_BYTES = 32 << 20
"""Bytes of the large tensor of every tenth iteration (32 MiB)."""
RESERVED_SLACK = 2
PAST_FREE = 64 << 20
"""Bytes asked for beyond the free memory in the out-of-memory check (64 MiB)."""


class MissingApi(Exception):
    """The backend lacks a ``torch.accelerator`` memory API the check needs (the test is then skipped)."""


def _api(name: str):
    fn = getattr(torch.accelerator, name, None)
    if fn is None:
        raise MissingApi(f"torch.accelerator.{name} does not exist in torch {torch.__version__}")
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - a backend without the API: skipped with the reason
        raise MissingApi(
            f"torch.accelerator.{name}() raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        ) from None


def _iteration(device, i: int) -> int:
    """Allocate, fill, check and free one iteration's tensors; return the bytes they held."""
    sizes = [1 + (37 * k + i) % 4099 for k in range(SMALL_PER_ITERATION)]
    live = [torch.empty(n, dtype=torch.float32, device=device).fill_(k + 1) for k, n in enumerate(sizes)]
    held = sum(4 * n for n in sizes)
    if i % 10 == 0:
        live.append(torch.full((LARGE_BYTES // 4,), float(len(live) + 1), device=device))
        held += LARGE_BYTES
    sums = torch.stack([t.sum() for t in live]).cpu()
    want = torch.tensor([float((k + 1) * t.numel()) for k, t in enumerate(live)])
    if not torch.equal(sums, want):
        k = int((sums - want).abs().argmax())
        raise NumericFailure(
            f"allocation churn, iteration {i}: tensor {k} of {live[k].numel()} elements sums to "
            f"{float(sums[k])}, filled with {k + 1} it must sum to {float(want[k])} (overlapping "
            f"blocks?)",
            fields={"rule": "exact", "max_abs": float((sums - want).abs().max()), "atol": 0.0, "rtol": 0.0},
        )
    del live, sums
    return held


def give_back() -> None:
    """Return what a check took: collect its garbage, wait for the device, and release the allocator's cache
    (``torch.accelerator.empty_cache``, torch >= 2.8; skipped where the backend lacks it)."""
    gc.collect()
    for name in ("synchronize", "empty_cache"):
        fn = getattr(torch.accelerator, name, None)
        if fn is None:
            continue
        try:
            fn()
        except Exception:  # noqa: BLE001 - a backend without the API: nothing more to give back
            pass


def check_churn(device) -> dict:
    """Allocate and free :data:`ITERATIONS` rounds of small tensors (and a large one every tenth round).

    Returns:
        Record fields: ``iterations``, ``allocated_growth`` (bytes, 0 when correct), ``reserved_growth``.

    Raises:
        MissingApi: no ``memory_allocated``/``memory_reserved``/``synchronize``.
        MetadataFailure: ``memory_allocated`` not back at its start after an iteration, or reserved memory
            growing past :data:`RESERVED_SLACK` x the largest iteration.
        NumericFailure: a tensor lost its fill value.
    """
    _api("synchronize")
    _iteration(device, 0)  # warm-up: workspaces a backend allocates once stay out of the counts
    _api("synchronize")
    start, reserved0 = _api("memory_allocated"), _api("memory_reserved")
    peak_iteration = 0
    for i in range(ITERATIONS):
        peak_iteration = max(peak_iteration, _iteration(device, i))
        _api("synchronize")
        now = _api("memory_allocated")
        if now != start:
            raise MetadataFailure(
                f"allocation churn: memory_allocated() is {now} bytes after iteration {i} freed "
                f"every tensor it made, {start} before the loop ({now - start:+d} bytes: a block "
                f"not given back)"
            )
    reserved = _api("memory_reserved")
    if reserved - reserved0 > RESERVED_SLACK * peak_iteration:
        raise MetadataFailure(
            f"allocation churn: memory_reserved() grew by {reserved - reserved0} bytes over "
            f"{ITERATIONS} iterations that each held at most {peak_iteration} bytes: freed "
            f"blocks are not reused"
        )
    return {"iterations": ITERATIONS, "allocated_growth": 0, "reserved_growth": reserved - reserved0}


def check_oom_recovery(device) -> dict:
    """Ask for :data:`PAST_FREE` bytes more than the free memory, expect ``torch.OutOfMemoryError``, then
    allocate and compute.

    Returns:
        Record fields: ``free_bytes`` (before), ``requested_bytes``.

    Raises:
        MissingApi: no ``get_memory_info`` (the free memory to exceed is unknown) or ``memory_allocated``.
        MetadataFailure: the allocation succeeded, or ``memory_allocated`` did not come back.
        WrongErrorFailure: another exception than ``torch.OutOfMemoryError``.
        NumericFailure: the op after the out-of-memory error computed a wrong value.
    """
    free, _total = _api("get_memory_info")
    start = _api("memory_allocated")
    request = int(free) + PAST_FREE
    try:
        big = torch.empty(request, dtype=torch.uint8, device=device)
    except torch.OutOfMemoryError:
        pass
    except Exception as exc:  # noqa: BLE001 - the exception type is what is checked
        raise WrongErrorFailure(
            f"allocating {request} bytes ({PAST_FREE} past the {free} free) raised "
            f"{type(exc).__name__}: {exc}; expected torch.OutOfMemoryError"
        ) from None
    else:
        del big
        raise MetadataFailure(
            f"allocating {request} bytes, {PAST_FREE} more than get_memory_info() reports "
            f"free ({free}), succeeded; expected torch.OutOfMemoryError"
        )
    empty_cache = getattr(torch.accelerator, "empty_cache", None)
    if empty_cache is not None:
        empty_cache()
    after = _api("memory_allocated")
    if after != start:
        raise MetadataFailure(
            f"after the out-of-memory error memory_allocated() is {after} bytes, {start} before: "
            f"the failed allocation kept memory"
        )
    x = torch.full((1 << 20,), 2.0, device=device)  # a normal allocation and op after the error
    got = float((x * 3).sum().cpu())
    if got != 6.0 * (1 << 20):
        raise NumericFailure(
            f"after the out-of-memory error (x * 3).sum() of 2^20 twos gave {got}, expected {6.0 * (1 << 20)}",
            fields={"rule": "exact", "max_abs": abs(got - 6.0 * (1 << 20)), "atol": 0.0, "rtol": 0.0},
        )
    return {"free_bytes": int(free), "requested_bytes": request}
