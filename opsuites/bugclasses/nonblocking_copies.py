"""Non-blocking copies between the host and the device, read after ``torch.accelerator.synchronize()``.

``tensor.to(other_device, non_blocking=True)`` and ``dst.copy_(src, non_blocking=True)`` may return
before the bytes have landed; after ``torch.accelerator.synchronize()`` every queued copy has finished
and the destination holds the source's values. A backend whose synchronize does not wait for its copy
engine, or whose non-blocking copy from pageable memory reads the staging buffer too early, returns
zeros or stale bytes here. Each case runs a device op, the copy, a synchronize and then the read, at
several sizes (one element, a non-multiple of the vector width, 1 MiB + tail and 16 MiB).

Pinned host memory (``Tensor.pin_memory()``) is used where the backend has it; where it raises, the case
is skipped with the backend's reason (:class:`neuron_conformance.opsuites.bugclasses.case.Unsupported`). On the CPU
reference run every copy is to the CPU itself (an identity), so the expected values are the data.

Sources: PyTorch docs ``torch.Tensor.to`` (``non_blocking``: "tries to convert asynchronously with
respect to the host"), ``torch.Tensor.copy_`` (``non_blocking``), ``torch.accelerator.synchronize``
("Wait for all kernels in all streams on the given device to complete"), ``torch.Tensor.pin_memory``;
the CUDA semantics note "Use pinned memory buffers" (a non-blocking copy must be synchronized before
the host reads it).
"""

from __future__ import annotations

import torch

from neuron_conformance.opsuites.bugclasses.case import BugCase, Unsupported

BUG_CLASS = "nonblocking-copies"
DESCRIPTION = (
    "device<->host copies with non_blocking=True (pageable, pinned) read after torch.accelerator.synchronize()"
)

_SIZES = (1, 1029, (1 << 20) + 3, 1 << 22)
"""Element counts: one element, a tail past 1024, 1 Mi elements + 3 and 4 Mi elements (16 MiB in float32)."""


def _sync(device: torch.device) -> None:
    """Wait for the device under test (nothing to wait for on the CPU reference run)."""
    if device.type != "cpu":
        torch.accelerator.synchronize(device)


def _host(t: torch.Tensor, pinned: bool, device: torch.device) -> torch.Tensor:
    """A host copy of ``t`` (blocking), pinned when asked and the device is not the CPU.

    Raises:
        Unsupported: pinned memory was asked for and the backend raised (it has none).
    """
    host = t.to("cpu")
    if not pinned or device.type == "cpu":
        return host
    try:
        return host.pin_memory()
    except (RuntimeError, NotImplementedError) as exc:
        raise Unsupported(f"no pinned memory on {device}: {str(exc).splitlines()[0]}") from exc


def _source(n, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(n, generator=g).to(dtype)
    return torch.randint(-1000, 1000, (n,), generator=g, dtype=dtype)


def _to_host(pinned):
    """device op -> ``.to("cpu", non_blocking=True)`` -> synchronize -> read (``copy_`` into a pinned buffer)."""

    def fn(x, device):
        y = x * 3
        if pinned:
            out = _host(torch.empty_like(y, device="cpu"), True, device)
            out.copy_(y, non_blocking=True)
        else:
            out = y.to("cpu", non_blocking=True)
        _sync(device)
        return out

    return fn


def _to_device(pinned):
    """host buffer -> ``.to(device, non_blocking=True)`` -> device op -> synchronize -> read on the device."""

    def fn(x, device):
        src = _host(x, pinned, device)
        y = src.to(device, non_blocking=True)
        z = y + 1
        _sync(device)
        return y, z

    return fn


def _round_trip(x, device):
    """host -> device (non_blocking) -> op -> host (non_blocking) -> synchronize, with no sync in between."""
    y = x.to("cpu").to(device, non_blocking=True)
    out = (y * 2).to("cpu", non_blocking=True)
    _sync(device)
    return out


def _case(name, fn, n, dt, seed, host, semantics, needs=()):
    dtype = getattr(torch, dt)

    def build():
        return fn, (_source(n, dtype, seed),), {}

    nbytes = n * dtype.itemsize
    return BugCase(
        BUG_CLASS,
        f"{name}-n{n}",
        "to",
        dt,
        build,
        semantics,
        exact=True,
        needs_device=True,
        min_bytes=4 * nbytes,
        host_outputs=host,
        capabilities=needs,
    )


def cases() -> list[BugCase]:
    """Each copy direction x pageable/pinned x size in float32; the small sizes also in bfloat16 and int64."""
    out = []
    for n in _SIZES:
        dtypes = ("float32", "bfloat16", "int64") if n < (1 << 20) else ("float32",)
        for dt in dtypes:
            for pinned, kind in ((False, "pageable"), (True, "pinned")):
                out.append(
                    _case(
                        f"to_host-{kind}",
                        _to_host(pinned),
                        n,
                        dt,
                        n % 97,
                        True,
                        f"(x*3) copied to {kind} host memory with non_blocking=True equals x*3 after "
                        "torch.accelerator.synchronize() (Tensor.to / copy_ docs)",
                        needs=("pinned_memory",) if pinned else (),
                    )
                )
                out.append(
                    _case(
                        f"to_device-{kind}",
                        _to_device(pinned),
                        n,
                        dt,
                        n % 89,
                        False,
                        f"a {kind} host tensor copied with non_blocking=True, then used by a device op, "
                        "reads back equal after synchronize (Tensor.to docs)",
                        needs=("pinned_memory",) if pinned else (),
                    )
                )
        out.append(
            _case(
                "round_trip",
                _round_trip,
                n,
                "float32",
                n % 83,
                True,
                "host -> device -> op -> host with non_blocking=True and one synchronize at the end "
                "gives the op's values (copies and kernels are ordered on the stream; Tensor.to docs)",
            )
        )
    return out
