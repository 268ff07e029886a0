"""Neuron storages over CPU memory: adoption, CPU aliases, tensor wrapping and the two crash guards.

A neuron tensor is a plain ``torch.Tensor`` whose storage is a neuron-typed ``UntypedStorage`` whose bytes
are CPU memory:

* :func:`adopt` turns a CPU ``UntypedStorage`` into a neuron storage over the same bytes (zero copy, via
  ``torch._C._construct_storage_from_data_pointer``). The CPU storage is kept alive as the attribute
  ``_emu_owner`` of the neuron storage object; storages keep their Python object (and its attributes) as
  long as the C++ StorageImpl lives, so the memory is freed with the last neuron tensor.
* :func:`wrap` makes a ``neuron:0`` tensor with a given dtype and geometry on a neuron storage: an empty
  PrivateUse1 tensor from ``torch._C._acc.create_empty_tensor`` is re-pointed with
  ``aten::set_.source_Storage_storage_offset`` redispatched to its CPU kernel (device-agnostic metadata
  code in aten/src/ATen/native/TensorShape.cpp).
* :func:`cpu_alias` gives the zero-copy CPU view of a neuron tensor (same bytes, strides and offset) over a
  non-owning, non-resizable CPU storage, so a CPU kernel can never reallocate device memory.

Crash guards (both were SIGSEGVs reachable from plain Python on torch 2.13, see the design notes):

1. ``torch.UntypedStorage(n, device="neuron")`` ends in ``c10::make_storage_impl`` with no PrivateUse1
   allocator. :func:`install_guards` wraps ``UntypedStorage.__new__`` to allocate on CPU and adopt.
2. ``_copy_from`` of a conj/neg view recursed through the Conjugate/Negative fallbacks. Fallthrough kernels
   on those keys for ``_copy_from`` and ``_copy_from_and_resize`` let the emulator resolve the bits.

Storage resizing (:func:`install_guards` also wraps ``UntypedStorage.resize_``): resizing a PrivateUse1
storage needs the C++ hook ``resizePrivateUse1Bytes``, which a Python backend cannot register, so torch
raises for every neuron ``storage.resize_(n)``. FSDP2 frees an unsharded parameter with
``storage.resize_(0)`` and re-allocates it with ``storage.resize_(numel * itemsize)`` before the all-gather
writes into it (``free_storage`` / ``alloc_storage`` in torch/distributed/fsdp/_fully_shard/_fsdp_param.py).
:func:`storage_resize` does exactly these two, for real: ``resize_(0)`` moves the bytes out of the storage
(``nbytes()`` becomes 0, the CPU memory is released and :mod:`.memory` stops counting it) and
``resize_(n)`` with the size it had before gives it a fresh, uninitialised block of ``n`` bytes (as a
caching allocator does; every tensor over the storage sees the new block). Both go through
``UntypedStorage._swap_data_ptr_``, which moves a data pointer between two storages of the same device.
Any other size raises ``NotImplementedError`` naming the sizes; other devices' storages keep torch's
behaviour.
"""

from __future__ import annotations

import contextlib
import operator

import torch
from torch._C import DispatchKey, DispatchKeySet

from . import memory

NEURON0: torch.device | None = None  # torch.device("neuron", 0), set lazily by neuron_device()
CPU = torch.device("cpu")

_construct = torch._C._construct_storage_from_data_pointer
_create_empty = torch._C._acc.create_empty_tensor
_CPU_KEYSET = DispatchKeySet(DispatchKey.CPU)
_set_storage = torch.ops.aten.set_.source_Storage_storage_offset
_set_redispatch = _set_storage._handle.redispatch_boxed  # OpOverload.redispatch minus one Python frame
_set_conj = torch._C._set_conj
_set_neg = torch._C._set_neg
_empty = torch.empty


def neuron_device() -> torch.device:
    """``torch.device("neuron", 0)``; valid once the backend is renamed."""
    global NEURON0
    if NEURON0 is None:
        NEURON0 = torch.device(torch._C._get_privateuse1_backend_name(), 0)
    return NEURON0


def adopt(cpu_storage: torch.UntypedStorage) -> torch.UntypedStorage:
    """Return a neuron ``UntypedStorage`` over the bytes of ``cpu_storage`` (zero copy).

    The CPU storage becomes the owner of the memory and lives as long as the neuron storage; the bytes are
    counted by :mod:`.memory` until then.
    """
    nbytes = cpu_storage.nbytes()
    nst = _construct(cpu_storage.data_ptr(), NEURON0 or neuron_device(), nbytes)
    nst._emu_owner = cpu_storage
    memory.track(nst, nbytes)
    return nst


def alias_storage(nst: torch.UntypedStorage) -> torch.UntypedStorage:
    """The non-owning, non-resizable CPU storage over a neuron storage's bytes (cached on the storage)."""
    try:
        return nst._emu_alias
    except AttributeError:
        pass
    alias = _construct(nst.data_ptr(), CPU, nst.nbytes())
    try:
        nst._emu_alias = alias
    except (AttributeError, TypeError):  # pragma: no cover - storages always accept attributes on 2.13
        pass
    return alias


def wrap(nst: torch.UntypedStorage, dtype: torch.dtype, size, stride, offset: int) -> torch.Tensor:
    """A ``neuron:0`` tensor of ``dtype`` viewing ``nst`` with ``size``/``stride`` (elements) at ``offset``."""
    t = _create_empty((0,), dtype)
    _set_redispatch(_CPU_KEYSET, t, nst, offset, size, stride)
    return t


def wrap_view(nst: torch.UntypedStorage, r: torch.Tensor, base: object) -> torch.Tensor:
    """:func:`wrap` for an op's CPU result ``r`` that views neuron storage ``nst`` of tensor ``base``: an
    inference tensor exactly when ``base`` is, as a C++ view kernel's output (TensorImpl's VIEW constructor)
    whatever the mode; a view of a normal tensor made in inference mode then takes the base's version
    counter in ADInplaceOrView, which an inference tensor cannot (``nn.Linear`` under ``inference_mode``)."""
    if isinstance(base, torch.Tensor) and base.is_inference() != torch.is_inference_mode_enabled():
        with torch.inference_mode(base.is_inference()):
            return wrap(nst, r.dtype, r.size(), r.stride(), r.storage_offset())
    return wrap(nst, r.dtype, r.size(), r.stride(), r.storage_offset())


def restride(t: torch.Tensor, nst: torch.UntypedStorage, size, stride, offset: int) -> None:
    """Re-point neuron tensor ``t`` in place to ``nst`` with a new geometry (metadata only)."""
    _set_redispatch(_CPU_KEYSET, t, nst, offset, size, stride)


def cpu_alias(t: torch.Tensor) -> torch.Tensor:
    """Zero-copy CPU tensor over neuron tensor ``t``'s bytes: same dtype, sizes, strides, offset, conj/neg bits."""
    a = _empty(0, dtype=t.dtype).set_(alias_storage(t.untyped_storage()), t.storage_offset(), t.size(), t.stride())
    if t.is_conj():
        _set_conj(a, True)
    if t.is_neg():
        _set_neg(a, True)
    return a


def adopt_tensor(r: torch.Tensor) -> torch.Tensor:
    """A neuron tensor over CPU tensor ``r``'s storage (zero copy), same geometry and conj/neg bits."""
    nt = wrap(adopt(r.untyped_storage()), r.dtype, r.size(), r.stride(), r.storage_offset())
    if r.is_conj():
        _set_conj(nt, True)
    if r.is_neg():
        _set_neg(nt, True)
    return nt


# ---------------------------------------------------------------------------------------------- guards

_original_storage_new = None
_guard_lib: torch.library.Library | None = None


def _is_neuron_device(device: object) -> bool:
    if device is None:
        return False
    if isinstance(device, torch.device):
        return device.type == (NEURON0 or neuron_device()).type
    if isinstance(device, str):
        return torch.device(device).type == (NEURON0 or neuron_device()).type
    return False


def _guarded_storage_new(cls, *args, **kwargs):
    device = kwargs.get("device")
    if _is_neuron_device(device):
        dev = torch.device(device) if isinstance(device, str) else device
        if dev.index not in (None, 0):
            raise RuntimeError(f"neuron emulator: invalid device ordinal {dev.index} (device_count() is 1)")
        cpu_kwargs = dict(kwargs)
        cpu_kwargs["device"] = "cpu"
        cpu_storage = _original_storage_new(torch.UntypedStorage, *args, **cpu_kwargs)
        return adopt(cpu_storage)
    return _original_storage_new(cls, *args, **kwargs)


_original_storage_method_new = None


def _guarded_storage_method_new(self):
    # StorageBase.new() (THPStorage_new) allocates with the storage's device allocator: SIGSEGV for neuron.
    if self.device.type == (NEURON0 or neuron_device()).type:
        return adopt(_original_storage_new(torch.UntypedStorage, 0))
    return _original_storage_method_new(self)


_original_storage_resize = None
_FREED = "_emu_freed_nbytes"
"""Attribute of a neuron storage freed by ``resize_(0)``: the size in bytes it may be re-allocated to."""


def _swap_in(nst: torch.UntypedStorage, ptr: int, nbytes: int) -> None:
    """Give ``nst`` (whose bytes are moved out first) the data pointer ``ptr`` of ``nbytes`` bytes."""
    other = _construct(ptr, nst.device, nbytes)
    nst._swap_data_ptr_(other)  # both storages: same device; one of them has 0 bytes
    try:
        del nst._emu_alias  # the cached CPU alias points at the old bytes
    except AttributeError:
        pass


def storage_resize(nst: torch.UntypedStorage, size) -> torch.UntypedStorage:
    """``UntypedStorage.resize_`` for a neuron storage: free (``0``) and re-allocate to its previous size.

    Args:
        nst: a neuron ``UntypedStorage``.
        size: new size in bytes (int).

    Returns:
        ``nst`` (as ``resize_`` does).

    Raises:
        TypeError: ``size`` is not an integer.
        NotImplementedError: any size other than ``0``, the current size (no-op) or, for a storage freed by
            ``resize_(0)``, the size it had (the message names both sizes).
    """
    try:
        size = operator.index(size)
    except TypeError:
        raise TypeError(f"resize_(): argument 'size' must be int, not {type(size).__name__}") from None
    current = nst.nbytes()
    if size == current:
        return nst
    if size == 0:
        _swap_in(nst, 0, 0)
        setattr(nst, _FREED, current)
        try:
            del nst._emu_owner  # releases the CPU memory unless something else still holds it
        except AttributeError:
            pass
        memory.resized(nst, 0)
        return nst
    freed = getattr(nst, _FREED, None)
    if current == 0 and size == freed:
        memory.check_fits(size)  # torch.OutOfMemoryError before the block exists, like a refused cudaMalloc
        owner = _original_storage_new(torch.UntypedStorage, size)  # CPU block, uninitialised like cudaMalloc
        _swap_in(nst, owner.data_ptr(), size)
        nst._emu_owner = owner
        delattr(nst, _FREED)
        memory.resized(nst, size)
        return nst
    allowed = f"0 or the current size ({current})"
    if current == 0 and freed is not None:
        allowed += f" or the size it had before resize_(0) ({freed})"
    raise NotImplementedError(
        f"neuron emulator: UntypedStorage.resize_({size}) on a neuron storage of {current} bytes is not supported: "
        f"a Python PrivateUse1 backend cannot provide torch's resizePrivateUse1Bytes hook; only the free and "
        f"re-allocation FSDP2 uses are emulated (resize_ to {allowed}). Use tensor.resize_() instead."
    )


def _guarded_storage_resize(self, size):
    if self.device.type == (NEURON0 or neuron_device()).type:
        return storage_resize(self, size)
    return _original_storage_resize(self, size)


@contextlib.contextmanager
def resize_guard_disabled():
    """Temporarily restore torch's own ``UntypedStorage.resize_`` (used by :mod:`.support` to tell
    ``native`` from patched behaviour); a no-op before :func:`install_guards`."""
    if _original_storage_resize is None:
        yield
        return
    torch.UntypedStorage.resize_ = _original_storage_resize  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.UntypedStorage.resize_ = _guarded_storage_resize  # type: ignore[method-assign]


def install_guards() -> None:
    """Install the crash guards and the storage resize described in the module docstring (idempotent).

    Besides ``UntypedStorage.__new__`` this also wraps ``UntypedStorage.new()`` (found by probing: it
    reaches the same missing allocator and segfaulted) and ``UntypedStorage.resize_`` (:func:`storage_resize`).
    """
    global _original_storage_new, _original_storage_method_new, _guard_lib, _original_storage_resize
    if _original_storage_new is None:
        _original_storage_new = torch.UntypedStorage.__new__
        torch.UntypedStorage.__new__ = _guarded_storage_new  # type: ignore[method-assign]
        _original_storage_method_new = torch.UntypedStorage.new
        torch.UntypedStorage.new = _guarded_storage_method_new  # type: ignore[method-assign]
    if _original_storage_resize is None:
        _original_storage_resize = torch.UntypedStorage.resize_
        _guarded_storage_resize.__doc__ = _original_storage_resize.__doc__
        torch.UntypedStorage.resize_ = _guarded_storage_resize  # type: ignore[method-assign]
    if _guard_lib is None:
        lib = torch.library.Library("aten", "IMPL")
        for name in ("_copy_from", "_copy_from_and_resize"):
            for key in ("Conjugate", "Negative"):
                lib.impl(name, torch.library.fallthrough_kernel, key)
        _guard_lib = lib
