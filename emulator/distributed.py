"""Collective backend ``neuron_gloo`` for the emulated ``neuron`` device: gloo over zero-copy CPU aliases.

``torch.distributed`` has no collective backend for a PrivateUse1 device unless one is registered. The
emulated device keeps every tensor's bytes in CPU memory, so the collectives can run on gloo: each
``neuron`` tensor handed to a collective is replaced by a CPU tensor over the *same* bytes (same storage
pointer, offset, sizes and strides), gloo reads and writes those bytes, and the caller sees the result in
its ``neuron`` tensor without a copy.

Use::

    from neuron_conformance.emulator import distributed
    distributed.register()                       # idempotent; returns "neuron_gloo"
    dist.init_process_group("neuron_gloo", ...)  # or no backend: neuron's default is neuron_gloo

How it plugs into torch 2.13 (``torch/distributed/distributed_c10d.py``):

* ``Backend.register_backend("neuron_gloo", creator, devices=["neuron", "cpu"])``. The creator is
  called as ``creator(store, group_rank, group_size, timeout)`` and returns a
  :class:`NeuronGlooProcessGroup`; ``_new_process_group_helper`` uses a returned ``ProcessGroup``
  subclass *as* the process group. ``devices`` includes ``"cpu"`` so that a group created with
  ``backend="neuron_gloo"`` also carries CPU tensors (pipelining and user code send CPU tensors too).
  Registering for ``"cpu"`` does not change CPU's default backend: ``register_backend`` only fills
  ``Backend.default_device_backend_map`` for device types that have no entry yet, and ``"cpu"`` already
  maps to ``gloo``. ``get_default_backend_for_device("neuron")`` answers ``"neuron_gloo"`` afterwards.
* C++ callers (DDP's reducer, functional collectives, DTensor) reach the Python methods through the
  pybind11 trampoline ``PyProcessGroup`` (``torch/csrc/distributed/c10d/PyProcessGroup.hpp``). It
  forwards ``allreduce``, ``allreduce_coalesced``, ``allgather``, ``all_gather_single_coalesced``,
  ``all_to_all_single``, ``barrier``, ``broadcast``, ``reduce_scatter``,
  ``reduce_scatter_single_coalesced``, ``send`` and ``recv``; Python callers
  (``dist.all_gather_into_tensor`` → ``group.all_gather_single``, ``dist.reduce_scatter_tensor`` →
  ``group.reduce_scatter_single``, ``dist.gather``/``scatter``/``reduce``) find the methods by attribute
  lookup. The group name is kept in Python (``getGroupName``/``setGroupName``) because the base class
  reads it from backends this group does not have.
* gloo has no ``ReduceOp.AVG``; FSDP2 asks for AVG on fp32/bf16 gradients
  (``_get_gradient_divide_factors`` in ``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``),
  so AVG runs as SUM followed by a division by the group size, as NCCL defines it.

Every collective waits for gloo before the work it returns reports completion: ``Work.wait()`` and
``Work.get_future()`` block until the bytes are in place, and the future's value is the caller's
(``neuron``) output tensors, as DDP's comm hooks expect. ``send``/``recv`` do not wait when posted, so a
``batch_isend_irecv`` pair cannot deadlock.

FSDP2 also frees and re-allocates unsharded parameters with ``UntypedStorage.resize_(0)`` / ``resize_(n)``;
that is the emulator's storage layer, installed by ``neuron_conformance.emulator.install()``
(``neuron_conformance.emulator.storage.storage_resize``), not this module.

Fault hook (for tests): :func:`set_fault` ``(name)``, or the environment variable
``CONFORMANCE_DIST_FAULT=name`` read when a group runs a collective, breaks one kind of collective on every
``neuron_gloo`` group, the kind of bug a device collective library can have and the scenarios must catch:
``allreduce_average`` makes every SUM ``all_reduce`` return the average instead of the sum (DDP catches it);
``allgather_swap_chunks`` makes every all-gather return the ranks' chunks in reverse rank order, and
``reduce_scatter_no_average`` makes an AVG reduce-scatter return the sum (the division by the group size
skipped); SimpleFSDP and FSDP2 gather parameters and reduce-scatter gradients with those.
"""

from __future__ import annotations

import datetime
import os
import threading

import torch
import torch.distributed as dist

BACKEND_NAME = "neuron_gloo"
"""Name of the collective backend, as passed to ``init_process_group(backend=...)``."""

DEVICE_TYPES = ("neuron", "cpu")
"""Device types a ``neuron_gloo`` group carries."""

ENV_FAULT = "CONFORMANCE_DIST_FAULT"
"""Environment variable naming an injected fault (see :data:`FAULTS`); read at every collective."""

FAULTS = ("allreduce_average", "allgather_swap_chunks", "reduce_scatter_no_average")
"""Known faults: ``allreduce_average`` makes SUM ``all_reduce`` divide the sum by the group size;
``allgather_swap_chunks`` puts the ranks' chunks of every all-gather output in reverse rank order;
``reduce_scatter_no_average`` makes AVG reduce-scatters return the sum."""

_fault: str | None = None
_registered = False
_lock = threading.Lock()


def set_fault(name: str | None) -> None:
    """Inject a fault into every ``neuron_gloo`` group of this process (``None`` clears it).

    The in-process setting wins over :data:`ENV_FAULT`. Spawned ranks do not inherit it: set the
    environment variable for them (``neuron_conformance.model_zoo.distributed.launch`` passes ``env=``).

    Raises:
        ValueError: ``name`` is not ``None`` and not one of :data:`FAULTS`.
    """
    global _fault
    if name is not None and name not in FAULTS:
        accepted = ", ".join(map(repr, FAULTS))
        raise ValueError(f"neuron_gloo: unknown fault {name!r}; accepted faults are {accepted} or None")
    _fault = name


def active_fault() -> str | None:
    """The fault in force: the one set with :func:`set_fault`, else :data:`ENV_FAULT`, else ``None``.

    Raises:
        ValueError: the environment variable names an unknown fault.
    """
    if _fault is not None:
        return _fault
    name = os.environ.get(ENV_FAULT, "").strip()
    if not name:
        return None
    if name not in FAULTS:
        raise ValueError(f"neuron_gloo: {ENV_FAULT}={name!r} is not a known fault; accepted: {', '.join(FAULTS)}")
    return name


def register() -> str:
    """Register the ``neuron_gloo`` backend with ``torch.distributed`` (idempotent); return its name.

    After this, ``torch.distributed.get_default_backend_for_device("neuron") == "neuron_gloo"``, and
    ``init_process_group()`` with no backend on a machine whose accelerator is ``neuron`` uses it.

    Raises:
        RuntimeError: ``torch.distributed`` or gloo is not available in this torch build.
    """
    global _registered
    with _lock:
        if _registered or BACKEND_NAME.upper() in dist.Backend._plugins:
            _registered = True
            return BACKEND_NAME
        if not dist.is_available() or not dist.is_gloo_available():
            raise RuntimeError("neuron_gloo needs torch.distributed with gloo; this torch build has none")
        dist.Backend.register_backend(BACKEND_NAME, _create, devices=list(DEVICE_TYPES))
        _registered = True
        return BACKEND_NAME


def _create(store, rank: int, world_size: int, timeout: datetime.timedelta) -> "NeuronGlooProcessGroup":
    return NeuronGlooProcessGroup(store, rank, world_size, timeout)


def cpu_alias(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU tensor over the same bytes as ``tensor`` (zero-copy; writes are seen by both).

    A CPU tensor is returned as is. A ``neuron`` tensor gets a CPU tensor with the same dtype, sizes,
    strides and storage offset over a non-owning CPU storage at the same address: the emulator keeps a
    ``neuron`` tensor's bytes in CPU memory. The alias does not keep the memory alive: keep ``tensor``
    referenced while the alias is used. The emulator's own helper is used when it offers one.

    Raises:
        TypeError: ``tensor`` is not a tensor.
        ValueError: ``tensor`` is on another device type (its bytes are not host memory), or sparse.
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"neuron_gloo: expected a tensor, got {type(tensor).__name__}")
    if tensor.device.type == "cpu":
        return tensor
    if tensor.device.type != "neuron":
        raise ValueError(
            f"neuron_gloo carries neuron and cpu tensors; got a tensor on {tensor.device} (use that device's backend)"
        )
    if tensor.layout != torch.strided:
        raise ValueError(f"neuron_gloo: only strided tensors are supported, got layout {tensor.layout}")
    _order_on_current_stream()
    helper = _emulator_alias_helper()
    if helper is not None:
        return helper(tensor)
    storage = tensor.untyped_storage()
    cpu_storage = torch._C._construct_storage_from_data_pointer(
        storage.data_ptr(), torch.device("cpu"), storage.nbytes()
    )
    alias = torch.empty(0, dtype=tensor.dtype)
    alias.set_(cpu_storage, tensor.storage_offset(), tensor.size(), tensor.stride())
    return alias


def _order_on_current_stream() -> None:
    """In the emulator's asynchronous mode, wait for the current stream's queued kernels before a collective
    touches device bytes on the host (a collective runs after the stream's earlier work, as NCCL's does on
    the current stream); nothing otherwise."""
    try:
        from . import _state, async_ops  # deferred: optional, as the alias helper below
    except ImportError:  # pragma: no cover - an older emulator without the asynchronous mode
        return
    if _state.async_mode:
        async_ops.drain()


def _emulator_alias_helper():
    """The emulator's own aliasing helper (``neuron_conformance.emulator.storage.cpu_alias``), if importable."""
    try:
        from . import storage  # deferred: optional helper (ImportError below)
    except ImportError:  # pragma: no cover - an older emulator without the helper
        return None
    helper = getattr(storage, "cpu_alias", None)
    return helper if callable(helper) else None


def _aliases(tensors):
    return [cpu_alias(t) for t in tensors]


def _is(op, kind) -> bool:
    try:
        return op == kind
    except (TypeError, RuntimeError):
        return False


def _swap_chunks(outputs, world: int | None):
    """The finishing step of an all-gather under the fault ``allgather_swap_chunks``; ``None`` without it.

    ``outputs``: the all-gather's outputs (CPU aliases), each a list with one tensor per rank
    (``world=None``) or one tensor holding the ``world`` ranks' chunks along dim 0.
    """
    if active_fault() != "allgather_swap_chunks":
        return None

    def finish():
        for out in outputs:
            if world is None:
                saved = [t.clone() for t in out]
                for t, src in zip(out, reversed(saved)):
                    t.copy_(src)
            else:
                chunks = [c.clone() for c in out.chunk(world, dim=0)]
                out.copy_(torch.cat(chunks[::-1]))

    return finish


class _Work(dist.Work):
    """Work of a ``neuron_gloo`` collective: waits for gloo's works, then runs the finishing step.

    ``result`` is what ``get_future().value()`` returns: the caller's output tensors. ``keep`` holds the
    caller's tensors and the CPU aliases alive until the work is waited on.
    """

    def __init__(self, works, result, finish=None, keep=()):
        super().__init__()
        self._works = [w for w in works if w is not None]
        self._result = result
        self._finish = finish
        self._keep = keep
        self._done = False
        self._wait_lock = threading.Lock()

    def wait(self, timeout: datetime.timedelta = datetime.timedelta(0)) -> bool:
        with self._wait_lock:
            if self._done:
                return True
            for work in self._works:
                if timeout:
                    work.wait(timeout)
                else:
                    work.wait()
            if self._finish is not None:
                self._finish()
            self._done = True
            self._works = []
            self._keep = ()
            return True

    def is_completed(self) -> bool:
        return self._done

    def is_success(self) -> bool:
        return self._done

    def get_future(self) -> torch.futures.Future:
        self.wait()
        future: torch.futures.Future = torch.futures.Future()
        future.set_result(self._result)
        return future


class NeuronGlooProcessGroup(dist.ProcessGroup):
    """Process group running gloo's collectives on CPU aliases of ``neuron`` (and CPU) tensors.

    Args:
        store: the rendezvous store of this group (``torch.distributed.Store``).
        rank: this process's rank in the group, ``0 <= rank < world_size``.
        world_size: number of processes in the group.
        timeout: gloo's timeout for every collective (``datetime.timedelta``).

    Reduction ops: those gloo supports, plus ``ReduceOp.AVG`` (SUM then division by the group size) for
    ``all_reduce``, ``all_reduce_coalesced`` and the reduce-scatter family.
    """

    def __init__(self, store, rank: int, world_size: int, timeout: datetime.timedelta):
        super().__init__(rank, world_size)
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore(f"{BACKEND_NAME}/", store), rank, world_size, timeout)
        self._group_name = ""
        self._group_desc = ""

    #: What torch's Python side reads off a group's backend (``getattr(backend, "supports_coalescing", False)``
    #: and the like); this group posts every operation on its own.
    supports_coalescing = False
    supports_splitting = False

    def supports_tensor_alloc(self, device) -> bool:
        return False

    def _get_backend(self, device):
        """This group is its own backend for every device type it carries. torch 2.14's
        ``batch_isend_irecv`` asks ``group._get_backend(device)`` of any ``ProcessGroup`` (2.13 asked only
        when the group's type was exactly ``ProcessGroup``), and the base class knows no backend of a
        Python subclass: it raised "No backend type associated with device type neuron"."""
        return self

    # -- identity -----------------------------------------------------------------------------------
    def getBackendName(self) -> str:  # noqa: N802 - name fixed by the C++ trampoline
        return BACKEND_NAME

    def getGroupName(self) -> str:  # noqa: N802
        return self._group_name

    def setGroupName(self, name: str) -> None:  # noqa: N802
        self._group_name = name

    def getGroupDesc(self) -> str:  # noqa: N802
        return self._group_desc

    def setGroupDesc(self, desc: str) -> None:  # noqa: N802
        self._group_desc = desc

    def __repr__(self) -> str:
        return f"NeuronGlooProcessGroup(rank={self.rank()}, size={self.size()}, name={self._group_name!r})"

    # -- helpers ------------------------------------------------------------------------------------
    def _sum_options(self, opts, options_type):
        """(options for gloo, divide-by-size?) for a reduce with ``opts.reduceOp``."""
        if _is(opts.reduceOp, dist.ReduceOp.AVG):
            new = options_type()
            new.reduceOp = dist.ReduceOp.SUM
            new.timeout = opts.timeout
            return new, True
        return opts, False

    def _scatter_options(self, opts):
        """:meth:`_sum_options` for reduce-scatters; the fault ``reduce_scatter_no_average`` skips AVG's division."""
        gloo_opts, average = self._sum_options(opts, dist.ReduceScatterOptions)
        if average and active_fault() == "reduce_scatter_no_average":
            average = False  # injected fault: the sum comes back undivided
        return gloo_opts, average

    def _divide(self, tensors):
        size = self.size()

        def finish():
            for t in tensors:
                if t.is_floating_point() or t.is_complex():
                    t.div_(size)
                else:
                    t.floor_divide_(size)

        return finish

    # -- collectives --------------------------------------------------------------------------------
    def allreduce(self, tensors, opts=None):
        opts = opts if opts is not None else dist.AllreduceOptions()
        aliases = _aliases(tensors)
        gloo_opts, average = self._sum_options(opts, dist.AllreduceOptions)
        if not average and _is(opts.reduceOp, dist.ReduceOp.SUM) and active_fault() == "allreduce_average":
            average = True  # injected fault: the sum comes back divided by the group size
        work = self._gloo.allreduce(aliases, gloo_opts)
        return _Work([work], list(tensors), self._divide(aliases) if average else None, (tensors, aliases))

    def allreduce_coalesced(self, tensors, opts=None):
        opts = opts if opts is not None else dist.AllreduceCoalescedOptions()
        aliases = _aliases(tensors)
        gloo_opts, average = self._sum_options(opts, dist.AllreduceCoalescedOptions)
        work = self._gloo.allreduce_coalesced(aliases, gloo_opts)
        return _Work([work], list(tensors), self._divide(aliases) if average else None, (tensors, aliases))

    def broadcast(self, tensors, opts=None):
        opts = opts if opts is not None else dist.BroadcastOptions()
        aliases = _aliases(tensors)
        return _Work([self._gloo.broadcast(aliases, opts)], list(tensors), keep=(tensors, aliases))

    def allgather(self, output_lists, inputs, opts=None):
        opts = opts if opts is not None else dist.AllgatherOptions()
        out_aliases = [_aliases(outs) for outs in output_lists]
        in_aliases = _aliases(inputs)
        work = self._gloo.allgather(out_aliases, in_aliases, opts)
        return _Work(
            [work],
            [list(outs) for outs in output_lists],
            _swap_chunks(out_aliases, None),
            keep=(output_lists, inputs, out_aliases, in_aliases),
        )

    def all_gather_single(self, output, input, opts=None):
        opts = opts if opts is not None else dist.AllgatherOptions()
        out_alias, in_alias = cpu_alias(output), cpu_alias(input)
        work = self._gloo._allgather_base(out_alias, in_alias, opts)
        finish = _swap_chunks([out_alias], self.size())
        return _Work([work], [output], finish, keep=(output, input, out_alias, in_alias))

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        opts = opts if opts is not None else dist.AllgatherOptions()
        if len(outputs) != len(inputs):
            raise ValueError(f"neuron_gloo: {len(outputs)} outputs for {len(inputs)} inputs in a coalesced all-gather")
        works, keep = [], []
        for out, inp in zip(outputs, inputs):
            out_alias, in_alias = cpu_alias(out), cpu_alias(inp)
            works.append(self._gloo._allgather_base(out_alias, in_alias, opts))
            keep.append((out, inp, out_alias, in_alias))
        finish = _swap_chunks([k[2] for k in keep], self.size())
        return _Work(works, list(outputs), finish, keep=keep)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def reduce_scatter(self, outputs, input_lists, opts=None):
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        out_aliases = _aliases(outputs)
        in_aliases = [_aliases(ins) for ins in input_lists]
        gloo_opts, average = self._scatter_options(opts)
        work = self._gloo.reduce_scatter(out_aliases, in_aliases, gloo_opts)
        finish = self._divide(out_aliases) if average else None
        return _Work([work], list(outputs), finish, keep=(outputs, input_lists, out_aliases, in_aliases))

    def reduce_scatter_single(self, output, input, opts=None):
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        out_alias, in_alias = cpu_alias(output), cpu_alias(input)
        gloo_opts, average = self._scatter_options(opts)
        work = self._gloo._reduce_scatter_base(out_alias, in_alias, gloo_opts)
        finish = self._divide([out_alias]) if average else None
        return _Work([work], [output], finish, keep=(output, input, out_alias, in_alias))

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        if len(outputs) != len(inputs):
            raise ValueError(
                f"neuron_gloo: {len(outputs)} outputs for {len(inputs)} inputs in a coalesced reduce-scatter"
            )
        gloo_opts, average = self._scatter_options(opts)
        works, keep, out_aliases = [], [], []
        for out, inp in zip(outputs, inputs):
            out_alias, in_alias = cpu_alias(out), cpu_alias(inp)
            works.append(self._gloo._reduce_scatter_base(out_alias, in_alias, gloo_opts))
            out_aliases.append(out_alias)
            keep.append((out, inp, in_alias))
        finish = self._divide(out_aliases) if average else None
        return _Work(works, list(outputs), finish, keep=(keep, out_aliases))

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        opts = opts if opts is not None else dist.AllToAllOptions()
        out_alias, in_alias = cpu_alias(output), cpu_alias(input)
        work = self._gloo.alltoall_base(out_alias, in_alias, list(output_split_sizes), list(input_split_sizes), opts)
        return _Work([work], [output], keep=(output, input, out_alias, in_alias))

    alltoall_base = all_to_all_single

    def alltoall(self, outputs, inputs, opts=None):
        opts = opts if opts is not None else dist.AllToAllOptions()
        out_aliases, in_aliases = _aliases(outputs), _aliases(inputs)
        work = self._gloo.alltoall(out_aliases, in_aliases, opts)
        return _Work([work], list(outputs), keep=(outputs, inputs, out_aliases, in_aliases))

    def gather(self, output_lists, inputs, opts=None):
        opts = opts if opts is not None else dist.GatherOptions()
        out_aliases = [_aliases(outs) for outs in output_lists]
        in_aliases = _aliases(inputs)
        work = self._gloo.gather(out_aliases, in_aliases, opts)
        return _Work(
            [work], [list(outs) for outs in output_lists], keep=(output_lists, inputs, out_aliases, in_aliases)
        )

    def scatter(self, outputs, input_lists, opts=None):
        opts = opts if opts is not None else dist.ScatterOptions()
        out_aliases = _aliases(outputs)
        in_aliases = [_aliases(ins) for ins in input_lists]
        work = self._gloo.scatter(out_aliases, in_aliases, opts)
        return _Work([work], list(outputs), keep=(outputs, input_lists, out_aliases, in_aliases))

    def reduce(self, tensors, opts=None):
        opts = opts if opts is not None else dist.ReduceOptions()
        aliases = _aliases(tensors)
        if _is(opts.reduceOp, dist.ReduceOp.AVG):
            raise ValueError("neuron_gloo: ReduceOp.AVG is not supported by reduce(); use all_reduce")
        work = self._gloo.reduce(aliases, opts)
        return _Work([work], list(tensors), keep=(tensors, aliases))

    def barrier(self, opts=None):
        opts = opts if opts is not None else dist.BarrierOptions()
        return _Work([self._gloo.barrier(opts)], [])

    def send(self, tensors, dst_rank: int, tag: int = 0):
        aliases = _aliases(tensors)
        return _Work([self._gloo.send(aliases, dst_rank, tag)], list(tensors), keep=(tensors, aliases))

    def recv(self, tensors, src_rank: int, tag: int = 0):
        aliases = _aliases(tensors)
        return _Work([self._gloo.recv(aliases, src_rank, tag)], list(tensors), keep=(tensors, aliases))

    def recv_anysource(self, tensors, tag: int = 0):
        aliases = _aliases(tensors)
        return _Work([self._gloo.recv_anysource(aliases, tag)], list(tensors), keep=(tensors, aliases))

    def abort(self) -> None:
        self._gloo.abort()

    def shutdown(self) -> None:
        self._gloo.shutdown()
