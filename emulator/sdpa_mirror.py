"""Mirror mode's ``scaled_dot_product_attention``: the backend the CPU composite chooses, bitwise.

Registered on ``AutogradPrivateUse1`` by :mod:`.registrations` (``MIRROR_AUTOGRAD``); see :func:`sdpa`.
"""

from __future__ import annotations

import functools

import torch
from torch._C import DispatchKey

from . import storage

aten = torch.ops.aten


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
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
            *map(choice_stand_in, (query, key, value, attn_mask)),
            dropout_p,
            is_causal,
            scale=scale,
            enable_gqa=enable_gqa,
        )
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        neg_inf = torch.scalar_tensor(float("-inf"), dtype=query.dtype, device=attn_mask.device)
        attn_mask = torch.where(attn_mask, 0.0, neg_inf)
    if choice == SDP_FLASH:
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


def choice_stand_in(t):
    """A CPU alias of neuron tensor ``t`` carrying its ``requires_grad`` flag (None stays None).

    The CPU kernel of ``aten::_fused_sdp_choice`` (``select_sdp_backend_cpp``, aten/src/ATen/native/
    transformers/sdp_utils_cpp.cpp) reads ``requires_grad``: for the SDPA OpInfo's sample 24 (float32, an
    ``attn_mask`` of shape (3, 6) that requires grad) it answers math (0), and flash (1) for the same mask
    detached. Reached through the boxed fallback it would see detached aliases and pick flash, whose
    autograd then refuses the mask ("not differentiable with respect to argument 'attn_mask'"). The
    choice reads only metadata, so a zero-copy alias is enough.
    """
    if not isinstance(t, torch.Tensor) or not t.device.type == storage.NEURON0.type:
        return t
    alias = storage.cpu_alias(t)
    return alias.requires_grad_(True) if t.requires_grad else alias


SDP_FLASH = 1
"""``sdp::SDPBackend::flash_attention`` (aten/src/ATen/native/transformers/sdp_utils_cpp.h)."""
