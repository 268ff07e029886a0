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

import functools

import torch
from torch._C import DispatchKey, DispatchKeySet
from torch._prims_common import compute_required_storage_length

from . import batch_norm, fallback, histc, optracking, rnn_cells, storage

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


def _sdpa_mirror(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """``scaled_dot_product_attention`` choosing its backend the way CPU does (mirror mode only).

    On a PrivateUse1 device the composite in aten/src/ATen/native/transformers/attention.cpp always takes
    the math path (``_fused_sdp_choice_stub`` has no PrivateUse1 entry). Mirror mode asks the CPU kernel
    of ``aten::_fused_sdp_choice`` and then calls the same op the CPU branch calls, so results are bitwise
    equal to CPU. Inputs of fewer than 2 dimensions raise ``RuntimeError`` as the composite's own check does. Registered on ``AutogradPrivateUse1``: the ops called below carry their own autograd.
    Under ``torch.compile`` tracing (FakeTensor inputs) there are no bytes for the CPU choice to read, so the
    math path is traced: compiled results are close to CPU's, not bitwise (transformers' static-cache ``generate``).
    Other wrappers without bytes (DTensor: :func:`_wrapper`) run the composite as any PrivateUse1 device does
    (its ops then reach the wrapper's ``__torch_dispatch__``); aliasing them raised "Attempted to access the
    data pointer on an invalid python storage".
    """
    if min(query.dim(), key.dim(), value.dim()) < 2:
        # the composite validates the ranks before choosing a backend (validate_sdpa_input,
        # aten/src/ATen/native/transformers/sdp_utils_cpp.h); _fused_sdp_choice would raise IndexError first
        raise RuntimeError(
            f"scaled_dot_product_attention: query, key and value need at least 2 dimensions, got "
            f"{query.dim()}, {key.dim()} and {value.dim()}"
        )
    if any(_wrapper(t) and not _is_traced(t) for t in (query, key, value, attn_mask)):
        # a __torch_dispatch__ wrapper (DTensor): no bytes to alias for the CPU's choice; the composite as
        # on any PrivateUse1 device (math path), its ops dispatched to the wrapper
        return aten.scaled_dot_product_attention.default.decompose(
            query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa
        )
    if (
        not any(_is_traced(t) for t in (query, key, value, attn_mask))
        and any(t.numel() == 0 for t in (query, key, value))
        and _empty_inputs_give_zeros()
    ):
        return _empty_attention(query, key, value)
    if any(_is_traced(t) for t in (query, key, value, attn_mask)):
        # Dynamo / AOT autograd trace with FakeTensors, which have no bytes to alias for the CPU choice
        # ("Cannot access data pointer of Tensor"): trace the math path, the composite's choice on
        # PrivateUse1 (every output shape is the same on both paths)
        choice = None
    else:
        choice = aten._fused_sdp_choice.default(
            *map(_choice_stand_in, (query, key, value, attn_mask)),
            dropout_p,
            is_causal,
            scale=scale,
            enable_gqa=enable_gqa,
        )
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        neg_inf = torch.scalar_tensor(float("-inf"), dtype=query.dtype, device=attn_mask.device)
        attn_mask = torch.where(attn_mask, 0.0, neg_inf)
    if choice == _SDP_FLASH:
        return _flash_for_cpu(query, key, value, attn_mask, dropout_p, is_causal, scale)
    return aten._scaled_dot_product_attention_math.default(
        query, key, value, attn_mask, dropout_p, is_causal, None, scale=scale, enable_gqa=enable_gqa
    )[0]


def _empty_attention(query, key, value):
    """The CPU composite's answer for an empty query, key or value (torch >= 2.14, before it chooses a
    kernel): zeros of the output's shape, plus the inputs' sums times 0 (so the result is NaN where an input
    holds a non-finite value, and the gradients are zeros), as 4-D for 3-D inputs, squeezed back. The flash
    kernel itself divides by zero there (SIGFPE on a zero-head input)."""
    batched = query.dim() == 3
    q, k, v = (t.unsqueeze(0) for t in (query, key, value)) if batched else (query, key, value)
    out = (
        torch.zeros((*q.shape[:-1], v.shape[-1]), dtype=query.dtype, device=query.device)
        + (q.sum() + k.sum() + v.sum()) * 0
    )
    return out.squeeze(0) if batched else out


@functools.cache
def _empty_inputs_give_zeros() -> bool:
    """Whether the running CPU composite answers an empty query, key or value with :func:`_empty_attention`
    (torch >= 2.14: it sums the inputs and adds zeros) instead of choosing a kernel (torch 2.13). Asked once,
    on CPU inputs, outside any dispatch mode active at the first call."""
    from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

    seen = []

    class _Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    with _disable_current_modes(), torch.no_grad():
        q, kv = torch.zeros(1, 1, 2, 8), torch.zeros(1, 1, 0, 8)
        with _Record():
            torch.nn.functional.scaled_dot_product_attention(q, kv, kv)
    return aten.sum.default in seen and not any("attention" in str(f) for f in seen)


def _flash_for_cpu(query, key, value, attn_mask, dropout_p, is_causal, scale):
    """The CPU composite's flash branch: ``_scaled_dot_product_flash_attention_for_cpu`` on 4-D inputs.

    Where the CPU's ``_fused_sdp_choice`` answers flash for 3-D inputs (torch >= 2.14; torch 2.13 answers
    math for them), the composite adds a leading batch dimension of 1 to query, key and value, as many
    leading 1s as the mask needs to reach 4 dimensions, and removes it from the output; the flash kernel
    itself accepts 4-D inputs only ("Accept only 4 dims inputs"). A mask together with ``is_causal`` is refused
    where the running composite refuses it (:func:`_flash_refuses_mask_with_causal`). The same views here keep
    the results and gradients bitwise the CPU's on every release, as the choice is the running CPU's.
    """
    refusal = _flash_refuses_mask_with_causal()
    if refusal and attn_mask is not None and is_causal:
        raise RuntimeError(refusal)
    batched = query.dim() == 3
    if batched:
        query, key, value = (t.unsqueeze(0) for t in (query, key, value))
        while attn_mask is not None and attn_mask.dim() < 4:
            attn_mask = attn_mask.unsqueeze(0)
    out = aten._scaled_dot_product_flash_attention_for_cpu.default(
        query, key, value, dropout_p, is_causal, attn_mask=attn_mask, scale=scale
    )[0]
    return out.squeeze(0) if batched else out


@functools.cache
def _flash_refuses_mask_with_causal() -> str | None:
    """The message of the CPU composite's refusal of a mask together with ``is_causal`` on its flash branch,
    or None where it calls the flash kernel with both (torch 2.13; torch >= 2.14 refuses, as the math path
    does). Asked once of the running torch, on CPU inputs for which the CPU's choice is flash, outside any
    dispatch mode active at the first call (a tracer or counter must not see the probe)."""
    from torch.utils._python_dispatch import _disable_current_modes  # deferred: only the first flash call

    with _disable_current_modes(), torch.no_grad():
        q = torch.zeros(1, 1, 2, 8)
        try:
            torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=torch.zeros(2, 2), is_causal=True)
        except RuntimeError as exc:
            return str(exc)
    return None


_WRAPPER_KEYS = (
    DispatchKey.Python,
    DispatchKey.Functionalize,
    DispatchKey.FuncTorchGradWrapper,
    DispatchKey.FuncTorchBatched,
)
"""The tensor-subclass-like keys of ``isTensorSubclassLike`` (aten/src/ATen/TensorSubclassLikeUtils.h) that mark
a tensor wrapping others, without bytes of its own (the sparse and meta ones never reach these kernels)."""


def _wrapper(t) -> bool:
    """Whether ``t`` is a tensor without bytes of its own that its dispatch keys route elsewhere: a
    ``__torch_dispatch__`` subclass (DTensor, FakeTensor), a functionalized or functorch-wrapped tensor. Unlike
    ``torch._C._dispatch_isTensorSubclassLike``, an active dispatch mode does not count (a plain neuron tensor
    under a mode still has bytes, and the CPU's SDPA choice stays the CPU's)."""
    if not isinstance(t, torch.Tensor):
        return False
    keys = torch._C._dispatch_keys(t)
    return any(keys.has(k) for k in _WRAPPER_KEYS)


def _is_traced(t) -> bool:
    """Whether ``t`` is a tensor without real bytes: a FakeTensor (also under a functional wrapper), as
    ``torch.compile`` passes while tracing (``torch._subclasses.fake_tensor.is_fake``)."""
    from torch._subclasses.fake_tensor import is_fake  # deferred: torch's fake-tensor module, only here

    return isinstance(t, torch.Tensor) and is_fake(t)


def _choice_stand_in(t):
    """A CPU alias of neuron tensor ``t`` carrying its ``requires_grad`` flag (None stays None).

    The CPU kernel of ``aten::_fused_sdp_choice`` (``select_sdp_backend_cpp``, aten/src/ATen/native/
    transformers/sdp_utils_cpp.cpp) reads ``requires_grad``: for the SDPA OpInfo's sample 24 (float32, an
    ``attn_mask`` of shape (3, 6) that requires grad) it answers math (0), and flash (1) for the same mask
    detached. Reached through the boxed fallback it would see detached aliases and pick flash, whose
    autograd then refuses the mask ("not differentiable with respect to argument 'attn_mask'"). The
    choice reads only metadata, so a zero-copy alias is enough.
    """
    if not isinstance(t, torch.Tensor) or not _is_neuron(t):
        return t
    alias = storage.cpu_alias(t)
    return alias.requires_grad_(True) if t.requires_grad else alias


_SDP_FLASH = 1
"""``sdp::SDPBackend::flash_attention`` (aten/src/ATen/native/transformers/sdp_utils_cpp.h)."""


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


MIRROR_AUTOGRAD = {"scaled_dot_product_attention": _sdpa_mirror, "max_pool1d": _max_pool1d_mirror}
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
