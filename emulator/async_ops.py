"""Asynchronous execution of the emulated device's kernels ($CONFORMANCE_EMULATOR_ASYNC=1).

:func:`run` is the fallback's hook (:data:`neuron_conformance.emulator.fallback.ASYNC_RUN`). For an aten op on
neuron tensors it either queues the op on the current stream's :class:`.streams.WorkQueue` and returns at
once, or tells the fallback to run it on the calling thread:

* **queued**: ops whose returns are fresh tensors or the mutated arguments themselves (``Tensor(a!)``),
  whose meta kernel accepts the arguments (the host-side shape checks run there, so a shape error is
  raised at the call, as on CUDA) and whose mutated arguments keep their geometry. The outputs are allocated
  at once from :mod:`.caching` with the meta kernel's sizes, strides and dtype, and poisoned; the stream
  worker runs the CPU kernel over zero-copy aliases and copies its results into them. CPU tensor arguments
  that are read (index lists, 0-dim scalars) are copied at the call, as a device copies host arguments at
  launch.
* **run now, no wait**: view ops (a return aliasing an input without writing it): they change metadata only.
* **run now, after the current stream's queue has drained**: everything else (ops returning host values
  such as ``_local_scalar_dense``, data-dependent shapes such as ``nonzero``, ops the meta kernel rejects,
  ops that resize their ``out=`` or write arguments sharing a storage, ``resize_``, and the calls whose CPU
  kernel decides from something the meta kernel does not see: :mod:`.async_rules`), so their result and error
  are the CPU kernel's, at the call.

The copy kernels (:func:`copy_from`, :func:`to_copy`) follow CUDA's rules for pageable memory: a copy to the
device reads the host source at the call (a staging copy) and is queued; a blocking copy to the host waits
for the current stream; ``non_blocking=True`` to the host queues the copy and returns (the destination
is written by the worker; a fresh destination is poisoned until then).
"""

from __future__ import annotations

import contextlib
import threading

import torch
import torch._prims_common as _prims

from . import async_rules, caching, fallback, registrations, storage, streams
from .async_rules import has_numbers as _has_numbers
from .async_rules import tensor_leaves as _tensor_leaves

aten = torch.ops.aten
NOT_QUEUED = fallback.NOT_QUEUED
"""Returned by :func:`run` when the fallback must run the op itself (the queue was drained if needed)."""

_UNINITIALISED = frozenset(
    {"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty", "aten::new_empty_strided"}
)
"""Factories whose values are unspecified: their job has nothing to compute (the block stays poisoned)."""

_SYNC, _VIEW, _QUEUE = 0, 1, 2
_kinds: dict = {}


def _classify(op) -> tuple:
    """``(_SYNC,)``, ``(_VIEW,)`` or ``(_QUEUE, returns)`` for ``op`` from its schema (cached).

    ``returns`` has one entry a return: ``("fresh", is_list)`` or ``("arg", kwarg_only, index, name)``.
    """
    kind = _kinds.get(op)
    if kind is not None:
        return kind
    schema = op._schema
    rets = []
    kind = (_SYNC,) if schema.name in async_rules.SCHEMA_RULES else None
    for r in schema.returns if kind is None else ():
        t = str(r.type)
        ai = r.alias_info
        if ai is not None and not ai.is_write:
            kind = (_VIEW,)
            break
        if t not in ("Tensor", "List[Tensor]"):
            kind = (_SYNC,)
            break
        if ai is None:
            rets.append(("fresh", t == "List[Tensor]"))
            continue
        src = [
            (a.kwarg_only, i, a.name)
            for i, a in enumerate(schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write and a.alias_info.before_set == ai.before_set
        ]
        if len(src) != 1 or t != "Tensor":
            kind = (_SYNC,)
            break
        rets.append(("arg", *src[0]))
    if kind is None:
        for a in schema.arguments:
            if a.alias_info is not None and a.alias_info.is_write and a.kwarg_only and str(a.type) != "Tensor":
                kind = (_SYNC,)  # out= lists: the fallback's proxies are written back on the host
                break
    if kind is None:
        kind = (_QUEUE, tuple(rets))
    _kinds[op] = kind
    return kind


def _meta(v, neuron: str):
    """A meta tensor with ``v``'s geometry for a neuron (or non-0-dim CPU) tensor; lists mapped; else ``v``."""
    if isinstance(v, torch.Tensor):
        if v.device.type != neuron and not (v.is_cpu and v.dim() > 0):
            return v
        if v.storage_offset() == 0:
            m = torch.empty_strided(v.size(), v.stride(), dtype=v.dtype, device="meta")
        else:
            n = v.storage_offset() + fallback._extent_bytes(v) // max(v.element_size(), 1)
            m = torch.empty(n, dtype=v.dtype, device="meta").as_strided(v.size(), v.stride(), v.storage_offset())
        if v.is_conj():
            torch._C._set_conj(m, True)
        if v.is_neg():
            torch._C._set_neg(m, True)
        return m
    if isinstance(v, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in v):
        return [_meta(x, neuron) for x in v]
    return v


def _meta_args(plan, args, kwargs, neuron):
    return async_rules.map_arguments(plan, args, kwargs, lambda kind, v: _meta_value(kind, v, neuron))


def _meta_value(kind, v, neuron):
    if kind == fallback._K_DEVICE:
        return torch.device("meta") if v is not None else v
    if kind == fallback._K_GENERATOR:
        return None
    if kind == fallback._K_STORAGE:
        raise TypeError("storage argument")
    return _meta(v, neuron)


def _geometry(t: torch.Tensor) -> tuple:
    return (tuple(t.size()), tuple(t.stride()), t.storage_offset())


def _shares_storage(tensors) -> bool:
    seen = set()
    for t in tensors:
        key = t.untyped_storage()._cdata
        if key in seen:
            return True
        seen.add(key)
    return False


def _poisoned_output(meta_r: torch.Tensor, q: streams.WorkQueue) -> torch.Tensor:
    """A neuron tensor with ``meta_r``'s geometry on a pooled block, poisoned when the block is fresh."""
    nbytes = meta_r.untyped_storage().nbytes()
    nst = caching.allocate(nbytes, q)
    if caching.is_fresh(nst) and nbytes:
        itemsize = meta_r.element_size()
        flat = torch.empty(0, dtype=meta_r.dtype).set_(storage.alias_storage(nst), 0, (nbytes // itemsize,), (1,))
        caching.poison(flat)
    return storage.wrap(nst, meta_r.dtype, meta_r.size(), meta_r.stride(), meta_r.storage_offset())


def _owner(nst):
    return getattr(nst, "_emu_owner", nst)


def _snapshot(v, aliases: set):
    """Host CPU tensors that are read (not the zero-copy aliases) are copied now (a launch-time copy)."""
    if isinstance(v, torch.Tensor):
        return v.clone() if v.is_cpu and id(v) not in aliases else v
    if isinstance(v, list):
        return [_snapshot(x, aliases) for x in v]
    return v


def drain() -> None:
    """Wait until the current stream's queue is empty (before an op runs on the calling thread)."""
    streams.current().synchronize()


_host = threading.local()


@contextlib.contextmanager
def host_ordered():
    """Run the block on the calling thread in stream order: drain the current stream first, and run every
    op issued inside it at once instead of queueing it (nested blocks are allowed).

    For code that reads or writes device bytes on the host through ``storage.cpu_alias`` rather than through
    aten ops: a collective of ``distributed.py`` (ordered on the current stream, as NCCL orders a collective
    after the stream's earlier kernels) and a fault kernel of ``faults.py``. Without it, such code would
    read a queued output's poison, or write into an output its queued kernel then overwrites.
    """
    drain()
    _host.depth = getattr(_host, "depth", 0) + 1
    try:
        yield
    finally:
        _host.depth -= 1


def run(plan, args, kwargs):
    """Queue ``plan.op`` on the current stream, or return :data:`NOT_QUEUED` (module docstring).

    Raises:
        RuntimeError: the same-device errors of the fallback's argument conversion, at the call.
    """
    kind = _classify(plan.op)
    if kind[0] == _VIEW:
        return NOT_QUEUED
    if getattr(_host, "depth", 0):  # inside host_ordered(): the stream is drained, the op runs now
        drain()
        return NOT_QUEUED
    if kind[0] == _SYNC or plan.resize or async_rules.runs_at_the_call(plan, args, kwargs):
        drain()
        return NOT_QUEUED
    neuron = storage.NEURON0.type
    try:
        margs, mkw = _meta_args(plan, args, kwargs, neuron)
        written = [(m, a) for m, a in _written(plan, margs, mkw, args, kwargs)]
        before = [_geometry(m) for m, _a in written]
        mret = plan.packet(*margs, **mkw) if _has_numbers(plan, args) else plan.call(*margs, **mkw)
    except Exception:  # the meta kernel refused: the CPU kernel decides (its result or its error)
        drain()
        return NOT_QUEUED
    if (
        any(_geometry(m) != g for (m, _a), g in zip(written, before))
        or any(not isinstance(a, torch.Tensor) or a.device.type != neuron or _internal_overlap(a) for _m, a in written)
        or _out_of_another_dtype(plan, args, kwargs)
        or (written and _shares_storage(t for t in _tensor_leaves((args, kwargs)) if t.device.type == neuron))
    ):
        drain()
        return NOT_QUEUED
    if not _meta_outputs_queueable(kind[1], mret, args, kwargs):
        drain()
        return NOT_QUEUED
    return _enqueue(plan, kind[1], args, kwargs, mret, neuron)


def _internal_overlap(t: torch.Tensor) -> bool:
    """True when a written argument has elements sharing one memory location: a dimension of two or more
    elements with stride 0 (``at::has_internal_overlap`` answers ``MemOverlap::Yes`` exactly then,
    aten/src/ATen/MemoryOverlap.cpp). CPU kernels refuse to write such a tensor
    (``assert_no_internal_overlap``: "more than one element of the written-to tensor refers to a single
    memory location"), a host-side check that CUDA makes at the launch too, but not every meta kernel makes
    it (``embedding_renorm_``'s accepts an expanded weight). Queued, the error came from the worker and was
    reported at a later synchronising call, inside the next test case (the op suites' sync/async comparison,
    ``embedding`` with ``max_norm`` of an expanded weight); the op runs on the calling thread instead."""
    return any(st == 0 and n > 1 for n, st in zip(t.size(), t.stride()))


def _out_of_another_dtype(plan, args, kwargs) -> bool:
    """True when an ``out=`` tensor has a dtype no other tensor argument has. Whether such an ``out=`` is
    allowed is the CPU kernel's check (``linalg_solve_triangular.out`` refuses an int64 ``out`` for float32
    inputs: "expected scalar type Float but found Long"), which not every meta kernel makes; queued, the
    error came from the worker at a later call and the call itself returned (the variants suite's
    ``test_out``). Such calls are rare outside contract tests, so they run on the calling thread."""
    outs = [
        kwargs[name]
        for name, (_k, _c, is_write, is_out) in plan.kw.items()
        if is_out and isinstance(kwargs.get(name), torch.Tensor)
    ]
    if not outs:
        return False
    ids = {id(o) for o in outs}
    dtypes = {t.dtype for t in _tensor_leaves((args, kwargs)) if id(t) not in ids}
    return any(o.dtype not in dtypes for o in outs)


def _meta_outputs_queueable(rets, mret, args, kwargs) -> bool:
    """False when a fresh output of the meta kernel may not be what the CPU kernel returns, so queueing the
    op (its outputs allocated from the meta kernel) would give later kernels another tensor than the
    synchronous mode does; the op then runs on the calling thread. Two cases, both found by a sync/async
    comparison of the op suites:

    * an output that is not non-overlapping and dense (``torch._prims_common``): the meta kernel kept a
      stride-0 or gapped layout of an argument (``embedding`` of an expanded weight), which a copy into it
      refuses (internal overlap) and the CPU kernel does not return;
    * a floating output of a dtype no floating argument has: the meta kernel follows CUDA's accumulation
      dtype (``native_layer_norm``'s mean/rstd are float32 for a bfloat16 input on meta, bfloat16 on the
      CPU).
    """
    mitems = (mret,) if len(rets) == 1 else tuple(mret or ())
    arg_floats = {t.dtype for t in _tensor_leaves((args, kwargs)) if t.dtype.is_floating_point}
    for spec, m in zip(rets, mitems):
        if spec[0] != "fresh":
            continue
        for x in _tensor_leaves(m):
            if not _prims.is_non_overlapping_and_dense_or_false(x):
                return False
            if x.dtype.is_floating_point and arg_floats and x.dtype not in arg_floats:
                return False
    return True


def _written(plan, margs, mkw, args, kwargs):
    for i, _kind, _name, _cpu_ok, is_write in plan.pos:
        if is_write and i < len(args):
            if isinstance(args[i], (list, tuple)):
                yield from zip(margs[i], args[i])
            elif args[i] is not None:
                yield margs[i], args[i]
    for name, (_kind, _c, is_write, _o) in plan.kw.items():
        if is_write and kwargs.get(name) is not None:
            yield mkw[name], kwargs[name]


def _enqueue(plan, rets, args, kwargs, mret, neuron):
    q = streams.current()
    call = fallback._Call()
    cargs, ckw = fallback._convert(call, plan, list(args), kwargs, neuron)
    aliases = {id(a) for _t, a, _p, _n in call.aliases}
    cargs = [_snapshot(v, aliases) for v in cargs]
    ckw = {k: _snapshot(v, aliases) for k, v in ckw.items()}
    mitems = (mret,) if len(rets) == 1 else tuple(mret or ())
    results, outs = [], []
    for spec, m in zip(rets, mitems):
        if spec[0] == "fresh":  # an optional output the meta kernel left out (None) stays None
            made = (
                [None if x is None else _poisoned_output(x, q) for x in m]
                if spec[1]
                else (None if m is None else _poisoned_output(m, q))
            )
            results.append(made)
            outs.extend(t for t in (made if spec[1] else [made]) if t is not None)
        else:
            results.append(kwargs[spec[3]] if spec[1] else args[spec[2]])
    out_aliases = [storage.cpu_alias(t) for t in outs]
    owners = [_owner(n) for _t, _a, _p, n in call.aliases] + [_owner(t.untyped_storage()) for t in outs]
    fn = plan.packet if call.numbers else plan.call
    uninitialised = plan.name in _UNINITIALISED
    name = plan.overload

    def job(keep=owners):
        if uninitialised:
            return
        ret = fn(*cargs, **ckw)
        items = (ret,) if len(rets) == 1 else tuple(ret or ())
        dst = iter(out_aliases)
        for spec, r in zip(rets, items):
            if spec[0] == "fresh":
                for x in r if spec[1] else (r,):
                    if x is None:
                        continue
                    d = next(dst)
                    if x.shape != d.shape:
                        raise RuntimeError(
                            f"neuron emulator: {name} gave shape {tuple(x.shape)} on the CPU but "
                            f"its meta kernel {tuple(d.shape)}"
                        )
                    d.copy_(x)

    q.submit(job)
    if not rets:
        return None
    return results[0] if len(rets) == 1 else tuple(results)


# ------------------------------------------------------------------------------------------ copy kernels


def _is_neuron(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == storage.NEURON0.type


def copy_from(src: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """``aten::_copy_from`` in asynchronous mode (module docstring); returns ``dst``."""
    q = streams.current()
    if _is_neuron(dst) and _is_neuron(src) and dst.untyped_storage()._cdata == src.untyped_storage()._cdata:
        q.synchronize()
        return registrations._copy_from(src, dst, non_blocking)
    if _is_neuron(src) and not _is_neuron(dst) and not non_blocking:
        q.synchronize()  # a blocking copy to the host waits for the stream's earlier kernels
        return registrations._copy_from(src, dst, non_blocking)
    s = storage.cpu_alias(src) if _is_neuron(src) else src.clone()  # host source: staged at the call
    d = storage.cpu_alias(dst) if _is_neuron(dst) else dst
    keep = [x for x in (src, dst) if not _is_neuron(x)] + [
        _owner(x.untyped_storage()) for x in (src, dst) if _is_neuron(x)
    ]

    def job(keep=keep):
        d.copy_(s)

    pos = q.submit(job)
    if _is_neuron(dst) and not _is_neuron(src) and not non_blocking:
        q.wait_for(pos)  # a blocking copy to the device returns once it has landed
    return dst


def copy_from_and_resize(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """``aten::_copy_from_and_resize``: drains the current stream, then copies on the host."""
    drain()
    return registrations._copy_from_and_resize(src, dst)


def to_copy(self, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    """``aten::_to_copy`` in asynchronous mode: neuron -> neuron queued, neuron -> host queued with
    ``non_blocking=True`` (into a fresh, poisoned host tensor) else after a drain, host -> neuron at once."""
    neuron = storage.NEURON0.type
    target = self.device if device is None else torch.device(device)
    plain = (layout in (None, torch.strided)) and not pin_memory
    valid = target.type == "cpu" or (target.type == neuron and target.index in (None, 0))
    if not (_is_neuron(self) and plain and valid) or (target.type == "cpu" and not non_blocking):
        if _is_neuron(self):
            drain()
        return registrations._to_copy(
            self,
            dtype=dtype,
            layout=layout,
            device=device,
            pin_memory=pin_memory,
            non_blocking=non_blocking,
            memory_format=memory_format,
        )
    m = aten._to_copy.default(_meta(self, neuron), dtype=dtype, device="meta", memory_format=memory_format)
    q = streams.current()
    if target.type == neuron:
        out = _poisoned_output(m, q)
        d = storage.cpu_alias(out)
        keep = [_owner(self.untyped_storage()), _owner(out.untyped_storage())]
    else:
        out = torch.empty_strided(m.size(), m.stride(), dtype=m.dtype)
        caching.poison(out)
        d = out
        keep = [_owner(self.untyped_storage()), out]
    s = storage.cpu_alias(self)

    def job(keep=keep):
        d.copy_(s)

    q.submit(job)
    return out


def record_stream(self: torch.Tensor, s) -> None:
    """``aten::record_stream``: the stream ``s`` (a ``torch.Stream`` carrying an emulated stream id) uses
    ``self``'s memory (:func:`.caching.record_stream`).

    Raises:
        ValueError: ``s`` names no emulated stream.
    """
    caching.record_stream(self, streams.queue_by_id(s.stream_id))


def drained(fn):
    """``fn`` run after the current stream has drained (kernels that read device bytes on the host)."""

    def kernel(*args, **kwargs):
        drain()
        return fn(*args, **kwargs)

    kernel.__name__ = getattr(fn, "__name__", "kernel")
    return kernel
