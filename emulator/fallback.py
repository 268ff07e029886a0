"""The boxed PrivateUse1 fallback: run any aten op on its CPU kernel over zero-copy CPU aliases.

For an op reaching the ``PrivateUse1`` key with no kernel of its own:

1. every neuron tensor argument becomes a zero-copy CPU alias (:func:`.storage.cpu_alias`), ``out=``
   tensors included (so the kernel's overlap checks see aliasing between ``out=`` and inputs); lists of
   ``out=`` tensors become fresh CPU proxies; ``device=neuron`` becomes CPU; random ops with
   ``generator=None`` get the device RNG (:func:`.rng.device_generator`, which advances its Philox offset);
2. the CPU kernel runs;
3. results map back: a returned alias is the original neuron tensor (in-place ops, with metadata changes
   such as ``t_`` replayed), a result sharing an input's storage becomes a neuron view on the same neuron
   storage, fresh memory is adopted zero-copy; mutable arguments (in-place ``self``, ``out=``) whose
   geometry the kernel changed are re-pointed; list proxies are copied back. A kernel that must grow a
   mutable argument beyond its storage raises on the alias, and the op is rerun on resizable copies
   (:func:`_run_growing_writes`), so the neuron tensor gets a new storage.

Everything that depends only on the op (schema analysis: which arguments are tensors, lists, devices,
generators, ``out=``, in-place; whether CPU tensors are allowed in a slot) is computed once per
``OpOverload`` and cached in :data:`_plans`.

Mixing neuron tensors with CPU tensors that are not 0-dim raises ``RuntimeError("Expected all tensors to be
on the same device ...")`` as a real device does; CPU tensors are allowed where CUDA allows them (index
lists ``Tensor?[]``, ``tensor_split``'s ``tensor_indices_or_sections``, the copy ops).
"""

from __future__ import annotations

import torch

from . import optracking, rng, storage

Tensor = torch.Tensor
_strided = torch.strided
_empty = torch.empty
_empty_strided = torch.empty_strided
_alias_storage = storage.alias_storage
_set_conj = torch._C._set_conj
_set_neg = torch._C._set_neg

# argument kinds
_K_TENSOR = 1
_K_OPT_TENSOR = 2
_K_TENSOR_LIST = 3
_K_OPT_TENSOR_LIST = 4
_K_DEVICE = 5
_K_GENERATOR = 6
_K_LAYOUT = 7
_K_PIN = 8
_K_STORAGE = 9

_CPU_OK_OPS = frozenset(
    {"aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize", "aten::_to_copy", "aten::copy"}
)
"""Ops whose tensor arguments may live on another device (the cross-device copy ops)."""

_CPU_OK_ARGS = frozenset(
    {
        ("aten::tensor_split", "tensor_indices_or_sections"),
        # the Tensor scalars of the foreach pointwise ops must be on the CPU on every
        # device (aten/src/ATen/native/ForeachUtils.h: "Expected scalars to be on CPU")
        *((f"aten::_foreach_{op}", "scalars") for op in ("addcdiv", "addcdiv_", "addcmul", "addcmul_")),
    }
)
"""(op, argument) pairs that must or may be CPU tensors on a device (as on CUDA)."""

_RESIZE_OPS = frozenset({"aten::resize_", "aten::resize_as_", "aten::_resize_output_"})

_UNSUPPORTED_PREFIXES = (
    ("aten::_to_sparse", "sparse layouts"),
    ("aten::to_sparse", "sparse layouts"),
    ("aten::_sparse_", "sparse layouts"),
    ("aten::sparse_", "sparse layouts"),
    ("aten::_to_dense", "sparse layouts"),
    ("aten::to_mkldnn", "mkldnn layout"),
    ("aten::_pin_memory", "pinned memory"),
    ("aten::quantize_", "quantized tensors"),
    ("aten::_make_per_", "quantized tensors"),
)

OP_COUNTS: dict[str, int] | None = None
"""When a dict, every aten overload that runs on the emulated device is counted in it, keyed by its
dispatcher name (``aten::add.Tensor``, ``aten::relu`` for a ``default`` overload); ``None`` (the default)
disables counting. Set it through :func:`neuron_conformance.emulator.opcount.count_ops`."""


ASYNC_RUN = None
"""The asynchronous mode's hook (:func:`neuron_conformance.emulator.async_ops.run`), set while that mode is on:
called as ``ASYNC_RUN(plan, args, kwargs)``; it queues the op and returns its result, or returns
``NOT_QUEUED`` and :func:`run` runs the op here. None (the default): every op runs here."""


def unsupported(op_name: str, what: str) -> NotImplementedError:
    """The error raised for ops the emulator cannot run, e.g.
    ``NotImplementedError: neuron emulator: aten::_to_sparse is not supported (sparse layouts)``."""
    return NotImplementedError(f"neuron emulator: {op_name} is not supported ({what})")


def _kind(arg) -> int:
    t = str(arg.type)
    name = arg.name
    if t == "Tensor":
        return _K_TENSOR
    if t == "Optional[Tensor]":
        return _K_OPT_TENSOR
    if t == "List[Optional[Tensor]]":
        return _K_OPT_TENSOR_LIST
    if "Tensor" in t:
        return _K_TENSOR_LIST
    if "Device" in t:
        return _K_DEVICE
    if "Generator" in t:
        return _K_GENERATOR
    if t == "Storage":
        return _K_STORAGE
    if name == "layout":
        return _K_LAYOUT
    if name == "pin_memory":
        return _K_PIN
    return 0


class Plan:
    """Per-``OpOverload`` decisions for the fallback (computed once, see :func:`plan_for`).

    Attributes:
        pos: tuple of ``(index, kind, name, cpu_ok, is_write)`` for positional arguments that need work.
        kw: dict ``name -> (kind, cpu_ok, is_write, is_out)`` for keyword arguments that need work.
        gen_kw: name of a keyword-only ``Generator?`` argument, else None.
        gen_pos: ``(index, name)`` of a positional ``Generator?`` argument (``_standard_gamma``, ``poisson``,
            ``binomial``, ``rrelu_with_noise``, ...), else None: when a call leaves it out it gets the
            device RNG too (else the CPU kernel would draw from the CPU's default generator).
        name: the op's schema name (``aten::add``); overload: its dispatcher name (``aten::add.Tensor``).
        resize: True for ``resize_``-like ops (growth needs a resizable proxy).
        default_rng: a random op (``nondeterministic_seeded``) without a ``Generator?`` argument
            (``native_dropout``): its CPU kernel draws from the CPU's default generator, so the call runs with
            the device RNG standing in for it (:func:`.rng.standing_in_for_default`).
        unsupported: error text when the op can never run on the emulator, else None.
    """

    __slots__ = (
        "op",
        "call",
        "name",
        "overload",
        "packet",
        "pos",
        "kw",
        "gen_kw",
        "gen_pos",
        "resize",
        "unsupported",
        "has_write",
        "default_rng",
    )

    def __init__(self, op: torch._ops.OpOverload) -> None:
        schema = op._schema
        self.op = op
        self.call = op._op  # the C++ callable behind OpOverload.__call__
        self.name = schema.name
        ov = schema.overload_name
        self.overload = f"{self.name}.{ov}" if ov not in ("", "default") else self.name
        self.packet = op.overloadpacket
        self.unsupported = None
        for prefix, what in _UNSUPPORTED_PREFIXES:
            if self.name.startswith(prefix):
                self.unsupported = what
        all_cpu_ok = self.name in _CPU_OK_OPS
        pos = []
        kw = {}
        gen_kw = gen_pos = None
        has_write = False
        for i, arg in enumerate(schema.arguments):
            kind = _kind(arg)
            if not kind:
                continue
            cpu_ok = all_cpu_ok or kind == _K_OPT_TENSOR_LIST or (self.name, arg.name) in _CPU_OK_ARGS
            is_write = bool(arg.alias_info is not None and arg.alias_info.is_write)
            is_out = is_write and arg.kwarg_only
            has_write = has_write or is_write
            if arg.kwarg_only:
                kw[arg.name] = (kind, cpu_ok, is_write, is_out)
                if kind == _K_GENERATOR:
                    gen_kw = arg.name
            else:
                pos.append((i, kind, arg.name, cpu_ok, is_write))
                if kind == _K_GENERATOR:
                    gen_pos = (i, arg.name)
        self.pos = tuple(pos)
        self.kw = kw
        self.gen_kw = gen_kw
        self.gen_pos = gen_pos
        self.default_rng = gen_kw is None and gen_pos is None and torch.Tag.nondeterministic_seeded in op.tags
        self.resize = self.name in _RESIZE_OPS
        self.has_write = has_write


_plans: dict = {}


def plan_for(op) -> Plan:
    """The cached :class:`Plan` of ``op`` (an ``OpOverload``)."""
    plan = _plans.get(op)
    if plan is None:
        plan = _plans[op] = Plan(op)
    return plan


class _Call:
    """Per-call scratch state: aliases made, out proxies, CPU tensors seen."""

    __slots__ = ("aliases", "outs", "has_neuron", "bad_cpu", "numbers", "writes")

    def __init__(self) -> None:
        self.aliases = []  # (neuron tensor, cpu alias, storage data_ptr, neuron storage)
        self.outs = []  # (neuron tensor, cpu proxy)
        self.has_neuron = False
        self.bad_cpu = None
        self.numbers = False
        self.writes = []  # (neuron tensor, cpu alias) of in-place arguments


def _alias(call: _Call, t: Tensor) -> Tensor:
    for seen, a, _, _ in call.aliases:  # the same tensor twice (query is key is value) stays one tensor:
        if seen is t:  # CPU kernels take other paths on identity (_native_multi_head_attention's self-attention)
            return a
    nst = t.untyped_storage()
    a = _empty(0, dtype=t.dtype).set_(_alias_storage(nst), t.storage_offset(), t.size(), t.stride())
    if t.is_conj():
        _set_conj(a, True)
    if t.is_neg():
        _set_neg(a, True)
    call.aliases.append((t, a, nst.data_ptr(), nst))
    return a


def _conv_tensor(call: _Call, v, name: str, cpu_ok: bool, neuron: str):
    if isinstance(v, Tensor):
        if v.is_cpu:
            if not cpu_ok and call.bad_cpu is None and v.dim() > 0:
                call.bad_cpu = name
            return v
        if v.device.type == neuron:
            call.has_neuron = True
            return _alias(call, v)
        return v
    if v is not None and not isinstance(v, (list, tuple)):
        call.numbers = True  # a wrapped number arrives as a Python scalar
    return v


def _conv_arg(call: _Call, plan: Plan, kind: int, v, name: str, cpu_ok: bool, is_out: bool, neuron: str):
    if kind == _K_TENSOR or kind == _K_OPT_TENSOR:
        if is_out and isinstance(v, Tensor):
            if v.device.type == neuron:
                # the real bytes (so the kernel's overlap checks see aliasing with inputs); an out= that
                # must grow is rerun on a resizable copy (_run_growing_writes)
                call.has_neuron = True
                a = _alias(call, v)
                call.writes.append((v, a))
                return a
            if v.is_cpu and not cpu_ok and call.bad_cpu is None:
                call.bad_cpu = name  # a CPU out= is wrong even when 0-dim (CUDA: "Expected out tensor ...")
            return v
        return _conv_tensor(call, v, name, cpu_ok, neuron)
    if kind == _K_TENSOR_LIST or kind == _K_OPT_TENSOR_LIST:
        if v is None:
            return v
        if is_out:
            res = []
            for x in v:
                if isinstance(x, Tensor) and x.device.type == neuron:
                    call.has_neuron = True
                    proxy = _empty_strided(x.size(), x.stride(), dtype=x.dtype)
                    call.outs.append((x, proxy))
                    res.append(proxy)
                else:
                    if isinstance(x, Tensor) and x.is_cpu and not cpu_ok and call.bad_cpu is None:
                        call.bad_cpu = name
                    res.append(x)
            return res
        return [_conv_tensor(call, x, name, cpu_ok, neuron) for x in v]
    if kind == _K_DEVICE:
        if v is not None:
            dev = torch.device(v) if isinstance(v, str) else v
            if dev.type == neuron:
                if dev.index not in (None, 0):
                    raise RuntimeError(
                        f"neuron emulator: invalid device ordinal {dev.index} in {plan.name} "
                        f"(argument {name!r}): only neuron:0 exists (device_count() == 1)"
                    )
                return storage.CPU
        return v
    if kind == _K_GENERATOR:
        if v is None:
            return rng.device_generator()
        return v
    if kind == _K_LAYOUT:
        if v is not None and v != _strided:
            raise unsupported(plan.name, f"sparse layouts: layout={v}")
        return v
    if kind == _K_PIN:
        if v:
            raise unsupported(plan.name, "pinned memory")
        return v
    if kind == _K_STORAGE:
        if isinstance(v, torch.UntypedStorage) and v.device.type == neuron:
            return _alias_storage(v)
        return v
    return v


def _geometry_changed(t: Tensor, a: Tensor) -> bool:
    return a.size() != t.size() or a.stride() != t.stride() or a.storage_offset() != t.storage_offset()


def _extent_bytes(t: Tensor) -> int:
    if t.numel() == 0:
        return 0
    n = 1
    for s, st in zip(t.size(), t.stride()):
        n += (s - 1) * st
    return n * t.element_size()


def _write_back_out(v: Tensor, p: Tensor) -> None:
    if p.size() == v.size() and p.stride() == v.stride():
        if p.numel():
            storage.cpu_alias(v).copy_(p)
        return
    nst = v.untyped_storage()
    off = v.storage_offset()
    if off * p.element_size() + _extent_bytes(p) <= nst.nbytes():
        storage.restride(v, nst, p.size(), p.stride(), off)
        if p.numel():
            storage.cpu_alias(v).copy_(p)
    else:
        storage.restride(v, storage.adopt(p.untyped_storage()), p.size(), p.stride(), p.storage_offset())


def _map_result(call: _Call, r):
    if not isinstance(r, Tensor):
        if isinstance(r, (list, tuple)):
            mapped = [_map_result(call, x) for x in r]
            return tuple(mapped) if isinstance(r, tuple) else mapped
        return r
    for t, a, _ptr, _nst in call.aliases:
        if r is a:
            return t
    for t, p in call.outs:
        if r is p:
            return t
    if not r.is_cpu:
        return r
    if r.layout is not _strided:
        raise unsupported(call_op_name(call), f"layout {r.layout}")
    if r.is_quantized:
        raise unsupported(call_op_name(call), "quantized tensors")
    if r._is_zerotensor():
        # a CPU ZeroTensor has a storage without data; only its values (zeros) can be carried over
        return storage.adopt_tensor(torch.zeros(r.shape, dtype=r.dtype))
    st = r.untyped_storage()
    ptr = st.data_ptr()
    nst = base = None  # the storage r views, and the neuron tensor it belongs to
    if ptr:
        for _t, _a, aptr, ansd in call.aliases:
            if aptr == ptr:
                nst, base = ansd, _t
                break
    if nst is None:
        return storage.adopt_tensor(r)
    nt = storage.wrap_view(nst, r, base)
    if r.is_conj():
        _set_conj(nt, True)
    if r.is_neg():
        _set_neg(nt, True)
    return nt


_track = optracking.note

NOT_QUEUED = object()
"""What :data:`ASYNC_RUN` returns for an op it did not queue (this function then runs it)."""

_current_name = [""]
"""Name of the op the fallback is running (for error messages raised while mapping results)."""


def call_op_name(call: _Call) -> str:
    """The aten op name of the running call, e.g. ``"aten::_to_sparse"``."""
    return _current_name[0]


def _resizable_copy(nst: torch.UntypedStorage) -> torch.UntypedStorage:
    """A resizable (allocator-owned) CPU storage holding a copy of neuron storage ``nst``'s bytes."""
    cs = torch.UntypedStorage(nst.nbytes(), device="cpu")
    if nst.nbytes():
        cs.copy_(_alias_storage(nst))
    return cs


def _resizable_proxy(t: Tensor) -> Tensor:
    return _empty(0, dtype=t.dtype).set_(_resizable_copy(t.untyped_storage()), t.storage_offset(), t.size(), t.stride())


def _resize_output(args, kwargs):
    """``aten::_resize_output_(self, size, device)``: ``at::native::resize_output`` (no CPU kernel exists).

    As aten/src/ATen/native/Resize.cpp: the device must be ``self``'s, a tensor of another shape is
    resized (with the deprecation warning when it had elements; ``_resize_output_check`` in
    torch/_prims_common/wrappers.py gives the same warning for Python references).
    """
    from torch._prims_common.wrappers import _resize_output_check

    names = ("self", "size", "device")
    given = dict(zip(names, args))
    given.update(kwargs)
    self_t, size, device = given["self"], given["size"], torch.device(given["device"])
    if device.type != self_t.device.type or device.index not in (None, self_t.device.index):
        raise RuntimeError(f"out Tensor doesn't have the correct device set: {self_t.device}, expected {device}")
    if _resize_output_check(self_t, size):
        self_t.resize_(size)
    return self_t


def _run_resize(plan: Plan, args, kwargs):
    """``resize_``-like ops: run on a resizable CPU copy, then re-point the neuron tensor."""
    if plan.name == "aten::_resize_output_":
        return _resize_output(args, kwargs)
    self_t = args[0]
    proxy = _resizable_proxy(self_t)
    rest = list(args[1:])
    call = _Call()
    if rest and isinstance(rest[0], Tensor) and not rest[0].is_cpu:
        rest[0] = _alias(call, rest[0])
    plan.op(proxy, *rest, **kwargs)
    old = self_t.untyped_storage()
    pst = proxy.untyped_storage()
    if pst.nbytes() <= old.nbytes():
        storage.restride(self_t, old, proxy.size(), proxy.stride(), proxy.storage_offset())
    else:
        storage.restride(self_t, storage.adopt(pst), proxy.size(), proxy.stride(), proxy.storage_offset())
    return self_t


NOT_RESIZABLE = "Trying to resize storage that is not resizable"
"""The CPU error (c10/core/StorageImpl.h) raised when a kernel grows a tensor over a CPU alias."""


def _copy_bytes(dst: torch.UntypedStorage, src: torch.UntypedStorage, nbytes: int) -> None:
    d = _empty(0, dtype=torch.uint8).set_(dst, 0, (nbytes,), (1,))
    d.copy_(_empty(0, dtype=torch.uint8).set_(src, 0, (nbytes,), (1,)))


def _run_growing_writes(plan: Plan, args, kwargs):
    """Rerun an op whose CPU kernel resized a mutable (``Tensor(a!)``) positional argument.

    The first run handed the kernel zero-copy aliases, whose CPU storages cannot grow, so the kernel raised
    :data:`NOT_RESIZABLE` while resizing (e.g. ``addbmm_`` resizes ``self`` from ``(1,)`` to ``(n, p)``,
    aten/src/ATen/native/LinearAlgebra.cpp ``addbmm_impl_``: ``result.resize_as_(self)``; CPU kernels resize
    before they write). Here every neuron storage behind a mutable argument becomes one resizable CPU copy
    (all arguments over that storage view the copy, so aliasing between arguments is kept); after the kernel
    the bytes go back into the neuron storage when they fit, else the copy is adopted as the tensor's new
    storage, as ``out=`` arguments and ``resize_`` do (other views of the old storage do not see the
    reallocation: README, "Limits"). Mutable arguments are then re-pointed to the geometry the kernel gave
    them.
    """
    neuron = storage.NEURON0.type
    call = _Call()
    args, kwargs = _convert(call, plan, list(args), kwargs, neuron)
    copies = {}  # StorageImpl address -> (neuron storage, resizable CPU copy)
    for t, _a in call.writes:
        nst = t.untyped_storage()
        if nst._cdata not in copies:
            copies[nst._cdata] = (nst, _resizable_copy(nst))
    for _t, a, _ptr, nst in call.aliases:
        entry = copies.get(nst._cdata)
        if entry is not None:
            a.set_(entry[1], a.storage_offset(), a.size(), a.stride())
    ret = plan.packet(*args, **kwargs) if call.numbers else plan.call(*args, **kwargs)
    targets = {}
    for key, (nst, cs) in copies.items():
        n = cs.nbytes()
        if n <= nst.nbytes():
            if n:
                _copy_bytes(_alias_storage(nst), cs, n)
            targets[key] = nst
        else:
            targets[key] = storage.adopt(cs)
    for t, a in call.writes:
        storage.restride(t, targets[t.untyped_storage()._cdata], a.size(), a.stride(), a.storage_offset())
    for t, p in call.outs:
        _write_back_out(t, p)
    if ret is None:
        return None
    return _map_result(call, ret)


def _convert(call: _Call, plan: Plan, args: list, kwargs, neuron: str):
    """Replace the arguments of one call in place of ``args`` (a list); returns ``(args, kwargs)``."""
    n = len(args)
    for i, kind, name, cpu_ok, is_write in plan.pos:
        if i >= n:
            break
        v = args[i]
        c = _conv_arg(call, plan, kind, v, name, cpu_ok, False, neuron)
        if is_write and c is not v and isinstance(v, Tensor):
            call.writes.append((v, c))
        args[i] = c
    if plan.kw:
        kwargs = dict(kwargs)
        for name, (kind, cpu_ok, is_write, is_out) in plan.kw.items():
            if name in kwargs:
                kwargs[name] = _conv_arg(call, plan, kind, kwargs[name], name, cpu_ok, is_out, neuron)
        if plan.gen_kw is not None and kwargs.get(plan.gen_kw) is None:
            kwargs[plan.gen_kw] = rng.device_generator()
    if plan.gen_pos is not None and plan.gen_pos[0] >= n and kwargs.get(plan.gen_pos[1]) is None:
        kwargs = dict(kwargs)  # a positional generator left out (or passed as None by keyword): the device RNG
        kwargs[plan.gen_pos[1]] = rng.device_generator()
    if call.bad_cpu is not None and call.has_neuron:
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, neuron:0 and cpu! "
            f"(when checking argument {call.bad_cpu!r} of {plan.name}; the neuron emulator accepts CPU "
            f"tensors only as 0-dim scalars and index arguments, like a real device)"
        )
    return args, kwargs


def run(op, args, kwargs):
    """Run ``op`` (an ``OpOverload``) for neuron arguments on the CPU kernel and map results back.

    A mutable positional argument (``Tensor(a!)``, e.g. ``self`` of an in-place op) that the CPU kernel
    grows is handled like an ``out=`` argument (see :func:`_run_growing_writes`).

    Raises:
        NotImplementedError: for ops the emulator cannot run (sparse, quantized, pinned memory), naming
            the op.
        RuntimeError: for neuron tensors mixed with non-scalar CPU tensors, or a device other than
            ``neuron:0``.
    """
    plan = _plans.get(op)
    if plan is None:
        plan = plan_for(op)
    if OP_COUNTS is not None:
        OP_COUNTS[plan.overload] = OP_COUNTS.get(plan.overload, 0) + 1
    _track(plan.name, plan.overload)  # op tracking: native or fallback (optracking.py)
    if plan.unsupported is not None:
        raise unsupported(plan.name, plan.unsupported)
    if ASYNC_RUN is not None:
        queued = ASYNC_RUN(plan, args, kwargs)
        if queued is not NOT_QUEUED:
            return queued
    _current_name[0] = plan.name
    if plan.default_rng:
        with rng.standing_in_for_default():
            return _run_planned(plan, args, kwargs)
    return _run_planned(plan, args, kwargs)


def _run_planned(plan: Plan, args, kwargs):
    if plan.resize:
        return _run_resize(plan, args, kwargs)
    call = _Call()
    given_args, given_kwargs = args, kwargs
    args, kwargs = _convert(call, plan, list(args), kwargs, storage.NEURON0.type)
    try:
        if call.numbers:
            ret = plan.packet(*args, **kwargs)
        else:
            ret = plan.call(*args, **kwargs)
    except RuntimeError as exc:
        if not call.writes or NOT_RESIZABLE not in str(exc):
            raise
        return _run_growing_writes(plan, given_args, given_kwargs)
    for t, a in call.writes:
        if _geometry_changed(t, a):
            storage.restride(t, t.untyped_storage(), a.size(), a.stride(), a.storage_offset())
    for t, p in call.outs:
        _write_back_out(t, p)
    if ret is None:
        return None
    return _map_result(call, ret)


def boxed_fallback(op, *args, **kwargs):
    """The function registered with ``Library("_", "IMPL").fallback(..., "PrivateUse1")``."""
    return run(op, args, kwargs)


def kernel_for(op):
    """A Python kernel for ``op`` that runs it through :func:`run` (used for direct registrations)."""

    def kernel(*args, **kwargs):
        return run(op, args, kwargs)

    kernel.__name__ = f"neuron_emulator_{op._schema.name.split('::')[-1]}"
    return kernel
