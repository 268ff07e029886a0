"""FlexAttention on the emulated device, the way an out-of-tree vendor runs it: through ``torch.compile``.

torch 2.13 refuses a PrivateUse1 device in ``torch.nn.attention.flex_attention.flex_attention``: its
``_validate_device`` accepts only ``cuda``, ``cpu``, ``xpu``, ``hpu`` and ``mps`` (``ValueError:
FlexAttention is only supported on CUDA, CPU, HPU, or MPS devices``), and Dynamo inlines that check when
it traces ``flex_attention`` (the module is in ``LEGACY_MOD_INLINELIST`` of ``torch/_dynamo/trace_rules.py``),
so ``torch.compile`` raises it too. :func:`install` makes the emulated device work under compile only:

1. ``flex_attention``'s ``_validate_device`` is replaced by :func:`_validate_device`, which lets a
   ``neuron`` query through while Dynamo traces (``torch.compiler.is_dynamo_compiling()``) and calls
   torch's own check otherwise, so eager FlexAttention on ``neuron`` is still refused exactly as torch
   refuses it (the model zoo records that as ``unsupported``). It is decorated with
   ``torch._dynamo.dont_skip_tracing`` because the emulator's folder is in Dynamo's skip list
   (:func:`neuron_conformance.emulator.compile.register_backend`).
2. The ``flex_attention`` and ``flex_attention_backward`` higher-order operators get a PrivateUse1
   kernel (``HigherOrderOperator.py_impl``): the ``neuron`` compile backend (AOT autograd, then the graph
   run eagerly) calls them with ``neuron`` tensors. The forward, :func:`block_sparse_forward`, honours the
   block mask the way a fused kernel does (blocks absent from the ``BlockMask`` are skipped, *full* blocks
   are taken without calling ``mask_mod``, ``mask_mod`` is evaluated only in *partial* blocks); the
   backward is torch's dense reference (``sdpa_dense_backward`` of ``torch/_higher_order_ops/flex_attention.py``),
   which replays ``score_mod`` and ``mask_mod`` everywhere.

Both kernels are looked up in :data:`KERNELS` at each call, so a fault backend (tests/faults/) can swap in
a wrong one with :func:`set_kernels`.

Semantics kept from torch's math reference (``math_attention``): scores in float32 (float64 for float64
inputs), ``score_mod`` applied to ``scale * q @ k^T``, probabilities cast to the input dtype before the
product with ``value``; a query row with every key masked gives an output of zeros and a log-sum-exp of
``-inf``; the log-sum-exp is returned in base 2 (``flex_attention`` multiplies it by ``ln 2``).
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch._dynamo  # for dont_skip_tracing; install() runs after compile.register_backend imported it anyway

from . import _state

_original_validate = None
KERNELS: dict[str, Callable] = {}
"""``"forward"`` / ``"backward"`` -> the PrivateUse1 kernel of the ``flex_attention`` /
``flex_attention_backward`` higher-order op (set by :func:`install`; swapped by :func:`set_kernels`)."""


@torch._dynamo.dont_skip_tracing
def _validate_device(query, key, value):
    """``flex_attention``'s device check with the emulated device accepted under ``torch.compile``.

    Raises:
        ValueError, NotImplementedError: what torch's own check raises, for every call outside Dynamo
            tracing and for every other device.
    """
    if torch.compiler.is_dynamo_compiling() and query.device.type == _state.BACKEND_NAME:
        return None
    return _original_validate(query, key, value)


def _block_states(block_mask: tuple, shape: tuple[int, int, int, int]) -> torch.Tensor:
    """Per-position block state of a ``BlockMask`` tuple (``BlockMask.as_tuple()``, torch 2.13 order):
    an int8 tensor of ``shape`` ``(B, H, Q_LEN, KV_LEN)``: 0 = block absent (masked), 1 = partial block
    (``mask_mod`` decides), 2 = full block (every position attends)."""
    batch, heads, q_len, kv_len = shape
    q_block, kv_block = block_mask[-3], block_mask[-2]
    n_kv_blocks = -(-kv_len // kv_block)

    def dense(num, idx):
        # idx: (B', H', QB, K) of kv block indices, the first num[..., q] of each row valid
        width = max(n_kv_blocks, idx.shape[-1])
        cols = torch.arange(idx.shape[-1], device=idx.device)
        valid = cols < num.unsqueeze(-1)
        target = torch.where(valid, idx.long(), torch.full_like(idx, width, dtype=torch.long))
        out = torch.zeros((*idx.shape[:-1], width + 1), dtype=torch.int8, device=idx.device)
        out.scatter_(-1, target, torch.ones_like(target, dtype=torch.int8))
        return out[..., :n_kv_blocks]

    states = dense(block_mask[2], block_mask[3])
    if block_mask[4] is not None:
        states = torch.where(dense(block_mask[4], block_mask[5]) > 0, torch.full_like(states, 2), states)
    # position -> its block (no repeat_interleave: the no-mask BlockMask has blocks of 2**30 positions)
    rows = torch.div(torch.arange(q_len, device=states.device), q_block, rounding_mode="floor")
    cols = torch.div(torch.arange(kv_len, device=states.device), kv_block, rounding_mode="floor")
    states = states.index_select(-2, rows).index_select(-1, cols)
    return states.expand(batch, heads, q_len, kv_len)


def _indices(scores: torch.Tensor):
    return tuple(torch.arange(n, device=scores.device) for n in scores.shape)


def block_sparse_forward(
    query,
    key,
    value,
    score_mod,
    block_mask,
    scale,
    kernel_options,
    score_mod_other_buffers=(),
    mask_mod_other_buffers=(),
    *,
    partial_blocks: bool = True,
):
    """The emulated device's FlexAttention forward (the ``flex_attention`` HOP's PrivateUse1 kernel).

    Args:
        query: ``(B, Hq, L, E)``; key ``(B|1, Hkv, S, E)``, value ``(B|1, Hkv, S, Ev)``, ``Hq % Hkv == 0``.
        score_mod: ``(score, b, h, q_idx, kv_idx, *buffers) -> score`` (a graph module under compile).
        block_mask: ``BlockMask.as_tuple()``; its last entry is ``mask_mod``.
        scale: the factor of ``q @ k^T``.
        partial_blocks: evaluate ``mask_mod`` in partial blocks (False only in the fault tests: a kernel
            that treats partial blocks as full).

    Returns:
        ``(out (B, Hq, L, Ev) in the query's dtype, logsumexp / ln 2 (B, Hq, L) float32, max score / ln 2)``.
    """
    from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex
    from torch.nn.attention.flex_attention import _vmap_for_bhqkv

    group = query.size(1) // key.size(1)
    key = torch.repeat_interleave(key, group, dim=1).expand(query.size(0), -1, -1, -1)
    value = torch.repeat_interleave(value, group, dim=1).expand(query.size(0), -1, -1, -1)
    work = torch.float64 if query.dtype == torch.float64 else torch.float32
    scores = (query.to(work) @ key.to(work).transpose(-2, -1)) * scale
    b, h, m, n = _indices(scores)
    states = _block_states(block_mask, tuple(scores.shape))
    score_fn = _vmap_for_bhqkv(score_mod, prefix=(0,), suffix=(None,) * len(score_mod_other_buffers))
    mask_fn = _vmap_for_bhqkv(block_mask[-1], prefix=(), suffix=(None,) * len(mask_mod_other_buffers))
    with TransformGetItemToIndex():
        modded = score_fn(scores, b, h, m, n, *score_mod_other_buffers).to(work)
        allowed = states == 2
        if partial_blocks:
            allowed = allowed | ((states == 1) & mask_fn(b, h, m, n, *mask_mod_other_buffers))
        else:
            allowed = allowed | (states == 1)
    modded = torch.where(allowed, modded, torch.tensor(-math.inf, dtype=work, device=scores.device))
    lse = modded.logsumexp(dim=-1)
    empty = ~allowed.any(dim=-1) | torch.all(modded == -math.inf, dim=-1)
    lse = torch.where(empty, torch.tensor(-math.inf, dtype=work, device=lse.device), lse)
    max_score = modded.max(dim=-1).values
    probs = torch._safe_softmax(modded, dim=-1)
    out = probs.to(query.dtype) @ value.to(query.dtype)
    from torch._higher_order_ops.flex_attention import _permute_strides

    return _permute_strides(out, query.stride()), lse / math.log(2), max_score / math.log(2)


def dense_backward(*args, **kwargs):
    """The emulated device's FlexAttention backward: torch's dense reference ``sdpa_dense_backward``
    (arguments and results of the ``flex_attention_backward`` HOP: ``(grad_query, grad_key, grad_value,
    grads of the score_mod buffers)``)."""
    from torch._higher_order_ops.flex_attention import sdpa_dense_backward

    return sdpa_dense_backward(*args, **kwargs)


def _forward_kernel(*args, **kwargs):
    return KERNELS["forward"](*args, **kwargs)


def _backward_kernel(*args, **kwargs):
    return KERNELS["backward"](*args, **kwargs)


def set_kernels(*, forward: Callable | None = None, backward: Callable | None = None) -> None:
    """Replace the PrivateUse1 FlexAttention kernels (None keeps one); for fault injection.

    Raises:
        RuntimeError: :func:`install` has not run.
    """
    if not KERNELS:
        raise RuntimeError("neuron emulator: flex.set_kernels() needs flex.install() first")
    if forward is not None:
        KERNELS["forward"] = forward
    if backward is not None:
        KERNELS["backward"] = backward


def uninstall_compiled_path() -> None:
    """Give ``flex_attention`` back torch's own device check (the kernels stay registered): FlexAttention
    on ``neuron`` is then refused under ``torch.compile`` too, as on a backend without this path."""
    import torch.nn.attention.flex_attention as fa

    if _original_validate is not None:
        fa._validate_device = _original_validate


def install() -> None:
    """Accept the emulated device in compiled FlexAttention and register its kernels (idempotent)."""
    global _original_validate
    import torch.nn.attention.flex_attention as fa
    from torch._C import DispatchKey
    from torch._higher_order_ops.flex_attention import flex_attention, flex_attention_backward

    if _original_validate is None:
        _original_validate = fa._validate_device
    fa._validate_device = _validate_device
    if not KERNELS:
        KERNELS.update(forward=block_sparse_forward, backward=dense_backward)
        flex_attention.py_impl(DispatchKey.PrivateUse1)(_forward_kernel)
        flex_attention_backward.py_impl(DispatchKey.PrivateUse1)(_backward_kernel)


__all__ = ["KERNELS", "block_sparse_forward", "dense_backward", "install", "set_kernels", "uninstall_compiled_path"]
