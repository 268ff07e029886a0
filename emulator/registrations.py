"""Direct PrivateUse1 kernels: the ones every mode needs, and the mirror-mode set.

A boxed backend fallback has *lower* precedence than CompositeExplicitAutograd kernels, so some ops never
reach it or reach it in a form the CPU kernels cannot run:

* ``_copy_from`` / ``_copy_from_and_resize``: ``copy_`` between devices redispatches to them
  (aten/src/ATen/native/Copy.cpp) and CPU has no kernel for them;
* ``_to_copy``: the composite kernel pins memory for ``non_blocking=True``, which has no allocator here;
* ``convolution_overrideable`` / ``convolution_backward_overrideable``: what ``aten::convolution`` calls on
  a PrivateUse1 device (aten/src/ATen/native/Convolution.cpp); redirected to the CPU convolution;
* ``record_stream``: a no-op (one synchronous stream; CPU has no kernel for it);
* ``histc`` / ``histc.out``: integer input computed with CUDA's rules (:mod:`.histc`), since library code
  (transformers' MoE routing) calls ``histc`` on ``int32`` tensors on every device but CPU and MPS;
* eval-mode batch norm (``native_batch_norm``, ``_native_batch_norm_legit``, ``_batch_norm_no_update``):
  ``save_mean`` / ``save_invstd`` of shape ``(C,)`` as on CUDA and in the meta kernels, not the CPU's
  ``(0,)`` (:mod:`.batch_norm`);
* the fused LSTM and GRU cells (``_thnn_fused_lstm_cell``, ``_thnn_fused_gru_cell`` and their backward
  kernels), which ``nn.LSTM`` / ``nn.GRU`` call on a PrivateUse1 tensor and the CPU has no kernel for
  (:mod:`.rnn_cells`);
* composite kernels that cannot run on a Python PrivateUse1 device (:data:`STUB_OPS`, each with its
  reason), registered so the whole overload runs its CPU kernel through the fallback;
* the ``set_`` overloads: metadata-only, run by the CPU kernel on the neuron tensor itself so the result
  keeps its neuron storage.

Mirror mode also registers every aten op that has both a CPU kernel and a
CompositeExplicitAutograd[NonFunctional] kernel (397 ops on torch 2.13, found with
``torch._C._dispatch_has_kernel_for_dispatch_key``), so structured ops run the CPU functional kernel
instead of decomposing into ``empty`` + ``op.out`` (bitwise equal to CPU, and about 2x less overhead),
and the 3 ops whose CPU kernel overrides a CompositeImplicitAutograd decomposition (``mish_backward``,
``silu_backward``, ``native_channel_shuffle``: CUDA and every other backend take the decomposition, whose
rounding differs from CPU's fused kernel).
"""

from __future__ import annotations

import torch
from torch._C import DispatchKey, DispatchKeySet
from torch._prims_common import compute_required_storage_length

from . import batch_norm, fallback, histc, optracking, rnn_cells, sdpa_mirror, storage

aten = torch.ops.aten
_CPU_KEYSET = DispatchKeySet(DispatchKey.CPU)

_required_lib: torch.library.Library | None = None
_fallback_lib: torch.library.Library | None = None
_mirror_lib: torch.library.Library | None = None

MIRROR_SKIP = frozenset(
    {"aten::_to_copy", "aten::set_", "aten::lift_fresh", "aten::_copy_from", "aten::_copy_from_and_resize"}
)
"""Ops left out of the mirror set because a required kernel (or the composite) already handles them."""


def _is_neuron(t: object) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == storage.NEURON0.type


def _as_cpu(t: torch.Tensor) -> torch.Tensor:
    return storage.cpu_alias(t) if _is_neuron(t) else t


def _copy_from(src: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    _as_cpu(dst).copy_(_as_cpu(src))
    return dst


def _copy_from_and_resize(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    if dst.size() != src.size():
        dst.resize_(src.size())
    _as_cpu(dst).copy_(_as_cpu(src))
    return dst


def _to_copy(self, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    name = "aten::_to_copy"
    if layout is not None and layout != torch.strided:
        raise fallback.unsupported(name, f"sparse layouts: layout={layout}")
    if pin_memory:
        raise fallback.unsupported(name, "pinned memory")
    neuron = storage.NEURON0.type
    target = self.device if device is None else torch.device(device)
    if target.type == neuron and target.index not in (None, 0):
        raise RuntimeError(f"neuron emulator: invalid device ordinal {target.index} in {name}: only neuron:0 exists")
    if target.type not in (neuron, "cpu"):
        # e.g. meta: let the CPU composite path handle the move from a CPU copy
        return aten._to_copy.default(_as_cpu(self).clone(), dtype=dtype, device=target, memory_format=memory_format)
    r = aten._to_copy.default(_as_cpu(self), dtype=dtype, device=storage.CPU, memory_format=memory_format)
    if target.type == neuron:
        return storage.adopt_tensor(r)
    return r


def _efficientzerotensor(size, dtype=None, layout=None, device=None, pin_memory=None):
    """``aten::_efficientzerotensor`` on neuron: a materialised zero tensor of ``size`` and ``dtype``.

    Autograd formulas return this op for gradients known to be zero (``sgn``'s on real input, see
    ``sgn_backward`` in ``torch/csrc/autograd/FunctionsManual.cpp``). CPU and CUDA build a ZeroTensor
    (dispatch key ``ZeroTensor``, storage with a null data pointer), which Python cannot create for another
    device; running the CPU kernel through the fallback would hand back a storage with no data. The values
    are the same (all zeros); only the ZeroTensor shortcuts in later ops are lost.
    """
    if layout is not None and layout != torch.strided:
        raise fallback.unsupported("aten::_efficientzerotensor", f"sparse layouts: layout={layout}")
    cpu = torch.zeros(size, dtype=dtype if dtype is not None else torch.get_default_dtype())
    return storage.adopt_tensor(cpu)


def _convolution_overrideable(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    return fallback.run(
        aten.convolution.default,
        (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups),
        {},
    )


def _convolution_backward_overrideable(
    grad_output, input, weight, stride, padding, dilation, transposed, output_padding, groups, output_mask
):
    bias_sizes = [weight.size(1) * groups] if transposed else [weight.size(0)]
    return fallback.run(
        aten.convolution_backward.default,
        (
            grad_output,
            input,
            weight,
            bias_sizes,
            stride,
            padding,
            dilation,
            transposed,
            output_padding,
            groups,
            output_mask,
        ),
        {},
    )


def _check_storage(source: object, what: str) -> None:
    if not isinstance(source, torch.UntypedStorage) and hasattr(source, "untyped_storage"):
        source = source.untyped_storage()
    if getattr(source, "device", None) is None or source.device.type != storage.NEURON0.type:
        raise RuntimeError(
            f"neuron emulator: {what}: the source storage is on {getattr(source, 'device', None)}, expected neuron:0 "
            f"(a neuron tensor cannot be set to memory of another device)"
        )


def _untyped(source):
    return source if isinstance(source, torch.UntypedStorage) else source.untyped_storage()


def _set_storage_offset(self, source, storage_offset, size, stride=()):
    _check_storage(source, "aten::set_.source_Storage_storage_offset")
    aten.set_.source_Storage_storage_offset.redispatch(
        _CPU_KEYSET, self, _untyped(source), storage_offset, size, stride
    )
    return self


def _set_storage(self, source):
    _check_storage(source, "aten::set_.source_Storage")
    st = _untyped(source)
    n = st.nbytes() // self.element_size()
    aten.set_.source_Storage_storage_offset.redispatch(_CPU_KEYSET, self, st, 0, (n,), (1,))
    return self


def _set_tensor(self, source):
    if not _is_neuron(source):
        raise RuntimeError(
            f"neuron emulator: aten::set_.source_Tensor: source is on {source.device}, expected neuron:0"
        )
    aten.set_.source_Storage_storage_offset.redispatch(
        _CPU_KEYSET, self, source.untyped_storage(), source.storage_offset(), source.size(), source.stride()
    )
    return self


def _set_tensor_offset(self, source, storage_offset, size, stride=()):
    if not _is_neuron(source):
        raise RuntimeError(f"neuron emulator: aten::set_.source_Tensor_storage_offset: source is on {source.device}")
    aten.set_.source_Storage_storage_offset.redispatch(
        _CPU_KEYSET, self, source.untyped_storage(), storage_offset, size, stride
    )
    return self


def _set_empty(self):
    nst = storage.adopt(torch.UntypedStorage(0, device="cpu"))
    aten.set_.source_Storage_storage_offset.redispatch(_CPU_KEYSET, self, nst, 0, (0,), (1,))
    return self


def _record_stream(self, s):
    # Every op runs synchronously on the host: there is no allocator reuse across streams to guard.
    return None


def _has_compatible_shallow_copy_type(self: torch.Tensor, other: torch.Tensor) -> bool:
    """Dense CPU and neuron tensors can share a TensorImpl by shallow copy (``param.data = ...``).

    ATen's default (``TensorImpl::has_compatible_shallow_copy_type``, c10/core/TensorImpl.h) only knows
    the built-in dense backends (CPU, CUDA, HIP, XPU, HPU, MPS), so without this kernel
    ``nn.Module.to("neuron")`` wraps every parameter in a new ``Parameter`` and unties tied weights
    (GPT-2's ``lm_head.weight`` and ``wte.weight``). Out-of-tree PrivateUse1 backends (torch_npu,
    torch_mlu) register the same rule for their device.
    """

    def dense(t: torch.Tensor) -> bool:
        return t.layout == torch.strided and t.device.type in ("cpu", "neuron")

    return dense(self) and dense(other)


def _lazy_clone(self):
    """``aten::_lazy_clone`` as an eager ``clone`` (a lazy clone is allowed to copy at once: same values,
    and the two tensors never share writes)."""
    return fallback.run(aten.clone.default, (self,), {})


_KAISER = (
    "the CompositeExplicitAutograd kernel calls kaiser_window_stub(device_type, ...) itself "
    "(aten/src/ATen/native/TensorFactories.cpp): a DispatchStub a Python backend cannot fill for "
    "PrivateUse1 (DispatchStub.cpp asserts 'missing kernel for neuron')"
)
_GRID_FALLBACK = (
    "the composite kernel (aten/src/ATen/native/GridSampler.cpp) reads and writes its tensors through "
    "host data pointers (TensorAccessor loops): host access to device memory, which on the emulator "
    "read memory that a queued zeros had not written yet (the op suites' sync/async comparison, "
    "grad_input all zeros); the CPU kernel runs instead"
)

STUB_OPS = {
    **{
        name: _KAISER
        for name in (
            "kaiser_window",
            "kaiser_window.periodic",
            "kaiser_window.beta",
            "kaiser_window.out",
            "kaiser_window.periodic_out",
            "kaiser_window.beta_out",
        )
    },
    "mode.values": "the composite mode_out (aten/src/ATen/native/TensorCompare.cpp) accepts CPU, CUDA and XPU "
    "tensors only; a backend provides its own kernel",
    **{name: _GRID_FALLBACK for name in ("_grid_sampler_2d_cpu_fallback", "_grid_sampler_2d_cpu_fallback_backward")},
    "_lazy_clone": "the composite copy-on-write clone (aten/src/ATen/native/TensorFactories.cpp) needs a C++ "
    "storage data-pointer context; an eager copy is a valid lazy clone (the values are the "
    "same and later writes to either tensor stay apart)",
}
"""Overloads registered in every mode, with the reason their composite kernel cannot run on the emulated
device (found by the generated suite, ``opsuites/test_generated.py``). ``_batch_norm_no_update``, whose
composite calls ``batch_norm_cpu`` (CPU tensors only; found by the shape_contracts suite), is in
:data:`REQUIRED` instead, with the other batch-norm kernels (:mod:`.batch_norm`)."""


REQUIRED = {
    "_has_compatible_shallow_copy_type": _has_compatible_shallow_copy_type,
    "record_stream": _record_stream,
    "_copy_from": _copy_from,
    "_copy_from_and_resize": _copy_from_and_resize,
    "_to_copy": _to_copy,
    "convolution_overrideable": _convolution_overrideable,
    "convolution_backward_overrideable": _convolution_backward_overrideable,
    "set_.source_Storage_storage_offset": _set_storage_offset,
    "set_.source_Storage": _set_storage,
    "set_.source_Tensor": _set_tensor,
    "set_.source_Tensor_storage_offset": _set_tensor_offset,
    "set_": _set_empty,
    "_efficientzerotensor": _efficientzerotensor,
    **histc.KERNELS,
    **batch_norm.KERNELS,
    **rnn_cells.KERNELS,
}
"""Kernels registered on PrivateUse1 in every mode (op name -> Python kernel); ``histc`` / ``histc.out``
accept integer input as CUDA does (:mod:`.histc`); ``native_batch_norm``, ``_native_batch_norm_legit``
(and their ``.out``) and ``_batch_norm_no_update`` return one statistic per channel in evaluation mode, as
CUDA and the meta kernels do (:mod:`.batch_norm`); the fused LSTM and GRU cells that recurrent modules call on
every non-CPU device are computed from aten ops on the device (:mod:`.rnn_cells`)."""


def _max_pool1d_mirror(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """``max_pool1d`` taking the branch CPU takes (mirror mode only).

    The composite (aten/src/ATen/native/MaxPooling.cpp, ``max_pool1d``) calls ``max_pool1d_with_indices``
    when the input needs a gradient, has a forward-mode tangent or is not on the CPU, else the CPU's own
    ``max_pool1d_stub``, whose output is contiguous where ``max_pool1d_with_indices`` keeps the input's
    memory order (a (2, 3, 8) input stored transposed, kernel 2: output strides (12, 4, 1) on CPU,
    (12, 1, 3) through ``max_pool1d_with_indices``; the layouts suite's transposed sample 5 of
    ``nn.functional.max_pool1d`` float32). Registered on ``AutogradPrivateUse1``; the no-gradient branch runs the
    CPU composite through the boxed fallback (no autograd graph is needed there).

    The composite also takes ``max_pool1d_with_indices`` for a tensor-subclass-like input
    (``isTensorSubclassLike``, aten/src/ATen/TensorSubclassLikeUtils.h: a ``__torch_dispatch__`` wrapper such
    as DTensor, FakeTensor or functorch's wrappers, or any input while a dispatch mode is active), and so does
    this kernel (:func:`_subclass_like`): such a wrapper on ``neuron`` reaches ``AutogradPrivateUse1`` before its
    own ``Python`` key and has no bytes to alias, so the fallback raised "Attempted to access the data pointer
    on an invalid python storage" (the DTensor op sweep's ``nn.functional.max_pool1d``, a 2-D sample).
    """
    args = (self, kernel_size, stride, padding, dilation, ceil_mode)
    if (
        (self.requires_grad and torch.is_grad_enabled())
        or torch.autograd.forward_ad._current_level >= 0
        or torch._C._dispatch_isTensorSubclassLike(self)
    ):
        # the composite itself: its input checks (and messages) come first, then max_pool1d_with_indices
        return aten.max_pool1d.default.decompose(*args)
    return fallback.run(aten.max_pool1d.default, args, {})


MIRROR_AUTOGRAD = {"scaled_dot_product_attention": sdpa_mirror.sdpa, "max_pool1d": _max_pool1d_mirror}
"""CompositeImplicitAutograd ops that branch on device type; mirror mode gives them CPU's branch."""


def mirror_op_names() -> list[str]:
    """aten ops with a CPU kernel and a CompositeExplicitAutograd[NonFunctional] kernel, or a CPU kernel
    that overrides a CompositeImplicitAutograd one and has an autograd kernel (sorted)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    names = []
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::") or name in MIRROR_SKIP:
            continue
        if not has(name, "CPU"):
            continue
        if has(name, "CompositeExplicitAutograd") or has(name, "CompositeExplicitAutogradNonFunctional"):
            names.append(name)
        elif has(name, "CompositeImplicitAutograd") and has(name, "Autograd"):
            # CPU overrides the decomposition (mish_backward, silu_backward, native_channel_shuffle); with a
            # PrivateUse1 kernel, AutogradPrivateUse1 takes the autograd kernel as AutogradCPU does
            names.append(name)
    return sorted(names)


def _overload(name: str):
    base, _, overload = name[len("aten::") :].partition(".")
    return getattr(getattr(aten, base), overload or "default")


def _sparse_fallback(op, *args, **kwargs):
    raise fallback.unsupported(op._schema.name, "sparse layouts")


def _pin_memory_cpu(self, device=None):
    """``aten::_pin_memory`` once the emulated device is the accelerator: a copy in ordinary host memory.

    torch 2.13 lets a Python backend provide none of the pinned-memory hooks (``getPinnedMemoryAllocator``,
    ``isPinnedPtr`` of ``PrivateUse1HooksInterface``), so without this kernel ``pin_memory()`` fails deep in
    ATen. Pinning only makes host-to-device copies faster and asynchronous; a pageable copy is a valid
    result for every program, which ``is_pinned()`` still tells apart (False): ``DataLoader(...,
    pin_memory=True)`` runs, and the harness's API probe reports pinned memory as missing. The copy keeps
    the input's sizes and strides, as CUDA's ``_pin_memory`` does (aten/src/ATen/native/Memory.cpp)."""
    nbytes = compute_required_storage_length(self.size(), self.stride(), 0) * self.element_size()
    out = torch.empty(0, dtype=self.dtype).set_(torch.UntypedStorage(nbytes), 0, self.size(), self.stride())
    return out.copy_(self)


SPARSE_KEYS = ("SparsePrivateUse1", "SparseCsrPrivateUse1")
"""Dispatch keys of sparse neuron tensors; a fallback there raises the emulator's clear error."""


def _counted(overload: str, fn):
    """``fn`` counting its calls in :data:`fallback.OP_COUNTS` under ``overload`` (``aten::set_.source_Storage``)
    while coverage counting is on (:mod:`.opcount`), and tracking it (:mod:`.optracking`), like the ops the
    boxed fallback runs."""
    schema_name = overload.split(".")[0]

    def kernel(*args, **kwargs):
        counts = fallback.OP_COUNTS
        if counts is not None:
            counts[overload] = counts.get(overload, 0) + 1
        optracking.note(schema_name, overload)
        return fn(*args, **kwargs)

    kernel.__name__ = getattr(fn, "__name__", "kernel")
    kernel.__doc__ = fn.__doc__
    return kernel


def install_fallback() -> None:
    """Register the boxed fallback on PrivateUse1, the sparse-key refusals, ``_pin_memory`` on CPU (an
    unpinned copy: pinned memory cannot exist once a Python PrivateUse1 backend is the accelerator) and the
    required kernels (idempotent)."""
    global _fallback_lib, _required_lib
    if _fallback_lib is None:
        lib = torch.library.Library("_", "IMPL")
        lib.fallback(fallback.boxed_fallback, "PrivateUse1")
        for key in SPARSE_KEYS:
            lib.fallback(_sparse_fallback, key)
        cpu_lib = torch.library.Library("aten", "IMPL")
        cpu_lib.impl("_pin_memory", _pin_memory_cpu, "CPU")
        _fallback_lib = (lib, cpu_lib)
    if _required_lib is None:
        lib = torch.library.Library("aten", "IMPL")
        for name, fn in REQUIRED.items():
            lib.impl(name, _counted(f"aten::{name}", fn), "PrivateUse1")
        for name in STUB_OPS:
            kernel = _lazy_clone if name == "_lazy_clone" else fallback.kernel_for(_overload(f"aten::{name}"))
            lib.impl(name, _counted(f"aten::{name}", kernel), "PrivateUse1")
        _required_lib = lib


def install_mirror() -> int:
    """Register the mirror-mode kernels; returns how many ops are registered (idempotent)."""
    global _mirror_lib
    if _mirror_lib is not None:
        return len(_mirror_names)
    lib = torch.library.Library("aten", "IMPL")
    _mirror_names.clear()
    for name in mirror_op_names():
        op = _overload(name)
        lib.impl(name[len("aten::") :], fallback.kernel_for(op), "PrivateUse1")
        _mirror_names.append(name)
    for name, fn in MIRROR_AUTOGRAD.items():
        lib.impl(name, fn, "AutogradPrivateUse1")
    _mirror_lib = lib
    return len(_mirror_names)


def uninstall_mirror() -> None:
    """Remove the mirror-mode kernels (device mode); composite ops decompose again."""
    global _mirror_lib
    if _mirror_lib is not None:
        _mirror_lib._destroy()
        _mirror_lib = None
        _mirror_names.clear()


_mirror_names: list[str] = []


def mirror_installed() -> bool:
    """True while the mirror-mode kernels are registered."""
    return _mirror_lib is not None
