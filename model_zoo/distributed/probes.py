"""Rank-side probes of the collective backend: each collective once, on known values.

:func:`collectives` runs on every rank (through :func:`neuron_conformance.model_zoo.distributed.launch.run_world`) and
returns, per collective, the output moved to CPU plus facts about it (device type, whether the output kept
its storage). :func:`expected_collectives` computes the values a correct backend must produce, so a test
can compare the two exactly (every value is a small integer held in float32, so sums are exact).
"""

from __future__ import annotations

import datetime
import time

import torch
import torch.distributed as dist


def _fill(rank: int, n: int, device) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32, device=device) + 10 * (rank + 1)


def collectives(rank: int, world_size: int, device: torch.device, n: int = 4) -> dict:
    """Run every collective the scenarios rely on and return ``{name: {"value", "device", "in_place"}}``.

    Values are CPU float32 tensors. ``in_place`` is True when the output tensor kept its data pointer
    (the backend wrote into the caller's memory). ``n`` is the per-rank length, a multiple of
    ``world_size`` for the scatter family.

    Raises:
        ValueError: ``n`` is not a positive multiple of ``world_size``.
    """
    import torch.distributed._functional_collectives as funcol  # deferred: needs c10d, absent without distributed

    if n <= 0 or n % world_size:
        raise ValueError(f"n must be a positive multiple of world_size={world_size}, got {n}")
    out: dict[str, dict] = {}

    def record(name: str, tensor: torch.Tensor, ptr: int | None = None) -> None:
        out[name] = {
            "value": tensor.detach().to("cpu").clone(),
            "device": tensor.device.type,
            "in_place": ptr is None or tensor.data_ptr() == ptr,
        }

    t = _fill(rank, n, device)
    ptr = t.data_ptr()
    dist.all_reduce(t)
    record("all_reduce", t, ptr)

    t = _fill(rank, n, device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    record("all_reduce_max", t)

    t = _fill(rank, n, device)
    dist.all_reduce(t, async_op=True).wait()
    record("all_reduce_async", t)

    t = _fill(rank, n, device)
    dist.broadcast(t, src=world_size - 1)
    record("broadcast", t)

    gathered = [torch.empty(n, device=device) for _ in range(world_size)]
    dist.all_gather(gathered, _fill(rank, n, device))
    record("all_gather", torch.cat(gathered))

    big = torch.empty(n * world_size, device=device)
    ptr = big.data_ptr()
    dist.all_gather_into_tensor(big, _fill(rank, n, device))
    record("all_gather_into_tensor", big, ptr)

    small = torch.empty(n // world_size, device=device)
    ptr = small.data_ptr()
    dist.reduce_scatter_tensor(small, _fill(rank, n, device))
    record("reduce_scatter_tensor", small, ptr)

    a2a = torch.empty(n, device=device)
    dist.all_to_all_single(a2a, _fill(rank, n, device))
    record("all_to_all_single", a2a)

    if world_size > 1:
        peer_next, peer_prev = (rank + 1) % world_size, (rank - 1) % world_size
        recv = torch.empty(n, device=device)
        works = dist.batch_isend_irecv(
            [dist.P2POp(dist.isend, _fill(rank, n, device), peer_next), dist.P2POp(dist.irecv, recv, peer_prev)]
        )
        for work in works:
            work.wait()
        record("send_recv_ring", recv)

    dist.barrier()

    group = dist.group.WORLD
    record("funcol_all_reduce", funcol.all_reduce(_fill(rank, n, device), "sum", group).wait())
    record("funcol_all_gather_tensor", funcol.all_gather_tensor(_fill(rank, n, device), 0, group).wait())
    record("funcol_reduce_scatter_tensor", funcol.reduce_scatter_tensor(_fill(rank, n, device), "sum", 0, group).wait())
    record("funcol_all_to_all_single", funcol.all_to_all_single(_fill(rank, n, device), None, None, group).wait())

    cpu = _fill(rank, n, "cpu")
    dist.all_reduce(cpu)
    record("all_reduce_cpu_tensor", cpu)

    t = _fill(rank, n, device)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    record("all_reduce_avg", t)
    return out


def expected_collectives(world_size: int, n: int = 4) -> dict[int, dict[str, torch.Tensor]]:
    """What :func:`collectives` must return on each rank: ``{rank: {name: CPU float32 tensor}}``."""
    fills = [_fill(r, n, "cpu") for r in range(world_size)]
    total = torch.stack(fills).sum(0)
    chunk = n // world_size
    expected = {}
    for rank in range(world_size):
        e = {
            "all_reduce": total,
            "all_reduce_max": torch.stack(fills).amax(0),
            "all_reduce_async": total,
            "broadcast": fills[world_size - 1],
            "all_gather": torch.cat(fills),
            "all_gather_into_tensor": torch.cat(fills),
            "reduce_scatter_tensor": total[rank * chunk : (rank + 1) * chunk],
            "all_to_all_single": torch.cat([f[rank * chunk : (rank + 1) * chunk] for f in fills]),
            "funcol_all_reduce": total,
            "funcol_all_gather_tensor": torch.cat(fills),
            "funcol_reduce_scatter_tensor": total[rank * chunk : (rank + 1) * chunk],
            "funcol_all_to_all_single": torch.cat([f[rank * chunk : (rank + 1) * chunk] for f in fills]),
            "all_reduce_cpu_tensor": total,
            "all_reduce_avg": total / world_size,
        }
        if world_size > 1:
            e["send_recv_ring"] = fills[(rank - 1) % world_size]
        expected[rank] = e
    return expected


def hang(rank: int, world_size: int, device: torch.device, seconds: float = 3600.0) -> None:
    """Wait ``seconds`` (default an hour) in a sleep: a stand-in for a scenario that hangs."""
    time.sleep(seconds)


def fail_on_rank(rank: int, world_size: int, device: torch.device, failing_rank: int = 0, kind: str = "value") -> dict:
    """Raise on ``failing_rank`` (``ValueError`` for ``kind="value"``, ``NotImplementedError`` for
    ``"unsupported"``); the other ranks wait in a collective that never completes, as a real
    scenario's peers would."""
    if rank == failing_rank:
        if kind == "unsupported":
            raise NotImplementedError(f"probe: rank {rank} has no kernel")
        raise ValueError(f"probe: rank {rank} failed on purpose")
    dist.barrier()  # never completes: the failing rank does not join
    return {"params": {}}


def default_group_collectives(rank: int, world_size: int, device: torch.device, port: int) -> dict:
    """Re-join as a group created with *no* backend name and run all_reduce on a device and a CPU tensor.

    Leaves the launcher's group, then ``init_process_group(store=TCPStore(127.0.0.1:port), ...)``
    without ``backend``: torch picks the accelerator's default (``neuron_gloo`` on the emulator). Returns
    the backend name and both sums (CPU tensors) so a test can check CPU collectives still work there.
    """
    dist.destroy_process_group()
    timeout = datetime.timedelta(seconds=60)
    store = dist.TCPStore("127.0.0.1", port, world_size, False, timeout=timeout)
    dist.init_process_group(store=store, rank=rank, world_size=world_size, timeout=timeout)
    on_device = _fill(rank, 4, device)
    on_cpu = _fill(rank, 4, "cpu")
    dist.all_reduce(on_device)
    dist.all_reduce(on_cpu)
    # dist.get_backend() answers "undefined" for a group created without a backend name; ask the group
    return {"backend": dist.group.WORLD.name(), "device": on_device.cpu(), "cpu": on_cpu}
