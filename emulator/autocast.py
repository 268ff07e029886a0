"""``torch.autocast(device_type="neuron")``: ATen's shared autocast op lists and CUDA's dtype policy.

torch 2.13 registers no C++ kernels on ``AutocastPrivateUse1``; without help every op under
``torch.autocast("neuron")`` fails with ``Could not run 'aten::...' from the 'Autocastneuron' backend``.
:func:`install` registers

* a fallthrough fallback on ``AutocastPrivateUse1`` (ops not in a list run unchanged), and
* a Python kernel per op of the lists below, which casts the arguments as the C++ ``WrapFunction_``
  specialisations do and calls the op with ``AutocastPrivateUse1`` excluded.

Source of the lists and the policies: aten/src/ATen/autocast_mode.h (``AT_FORALL_LOWER_PRECISION_FP``,
``AT_FORALL_FP32``, ``AT_FORALL_FP32_SET_OPT_DTYPE``, ``AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE``,
``AT_FORALL_PROMOTE``) and aten/src/ATen/autocast_mode.cpp (the CUDA registrations use exactly these lists,
plus the ban on ``binary_cross_entropy``). Policies:

* ``lower_precision_fp``: floating-point tensors other than float64 are cast to
  ``torch.get_autocast_dtype("neuron")`` (``torch.autocast``'s ``dtype``; float16 when not given).
* ``fp32``: floating-point tensors other than float64 are cast to float32.
* ``fp32_set_opt_dtype``: when the first tensor is eligible (floating point, not float64) and no ``dtype``
  was given, ``dtype=torch.float32`` is passed.
* ``fp32_append_dtype``: ``norm`` is redirected to its ``dtype`` overload with float32 (or the first
  argument's dtype when it is not eligible).
* ``promote``: eligible tensors are cast to the widest floating type among them (float32 beats the lower
  precision type; float64 tensors are ignored and left alone).

Unlike C++ there is no cache of casted fp32 weights; values are identical, only speed differs.
"""

from __future__ import annotations

import torch
from torch._C import DispatchKey, DispatchKeySet

aten = torch.ops.aten
_KEYSET = DispatchKeySet(DispatchKey.AutocastPrivateUse1)

LOWER_PRECISION_FP = (
    "_convolution.deprecated",
    "_convolution",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_tbc",
    "conv_transpose1d",
    "conv_transpose2d.input",
    "conv_transpose3d.input",
    "convolution",
    "prelu",
    "addmm",
    "addmv",
    "addr",
    "matmul",
    "einsum",
    "mm",
    "mv",
    "linalg_vecdot",
    "linear",
    "addbmm",
    "baddbmm",
    "bmm",
    "chain_matmul",
    "linalg_multi_dot",
    "_thnn_fused_lstm_cell",
    "_thnn_fused_gru_cell",
    "lstm_cell",
    "gru_cell",
    "rnn_tanh_cell",
    "rnn_relu_cell",
    "_scaled_dot_product_flash_attention",
    "scaled_dot_product_attention",
)
"""``AT_FORALL_LOWER_PRECISION_FP`` (aten/src/ATen/autocast_mode.h)."""

FP32 = (
    "acos",
    "asin",
    "cosh",
    "erfinv",
    "exp",
    "expm1",
    "log",
    "log10",
    "log2",
    "log1p",
    "reciprocal",
    "rsqrt",
    "sinh",
    "tan",
    "pow.Tensor_Scalar",
    "pow.Tensor_Tensor",
    "pow.Scalar",
    "softplus",
    "layer_norm",
    "native_layer_norm",
    "group_norm",
    "frobenius_norm.dim",
    "nuclear_norm",
    "nuclear_norm.dim",
    "cosine_similarity",
    "poisson_nll_loss",
    "cosine_embedding_loss",
    "nll_loss",
    "nll_loss2d",
    "hinge_embedding_loss",
    "kl_div",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "mse_loss",
    "margin_ranking_loss",
    "multilabel_margin_loss",
    "soft_margin_loss",
    "triplet_margin_loss",
    "multi_margin_loss",
    "binary_cross_entropy_with_logits",
    "dist",
    "pdist",
    "cdist",
    "renorm",
    "logsumexp",
    "upsample_nearest1d",
    "_upsample_nearest_exact1d",
    "upsample_nearest2d",
    "_upsample_nearest_exact2d",
    "upsample_nearest3d",
    "_upsample_nearest_exact3d",
    "upsample_linear1d",
    "upsample_bilinear2d",
    "_upsample_bilinear2d_aa",
    "upsample_trilinear3d",
    "upsample_bicubic2d",
    "_upsample_bicubic2d_aa",
)
"""``AT_FORALL_FP32`` (aten/src/ATen/autocast_mode.h)."""

FP32_SET_OPT_DTYPE = (
    "prod",
    "prod.dim_int",
    "prod.dim_Dimname",
    "softmax.int",
    "softmax.Dimname",
    "log_softmax.int",
    "log_softmax.Dimname",
    "cumprod",
    "cumprod.dimname",
    "cumsum",
    "cumsum.dimname",
    "linalg_vector_norm",
    "linalg_matrix_norm",
    "linalg_matrix_norm.str_ord",
    "sum",
    "sum.dim_IntList",
    "sum.dim_DimnameList",
)
"""``AT_FORALL_FP32_SET_OPT_DTYPE`` (aten/src/ATen/autocast_mode.h)."""

FP32_APPEND_DTYPE = {
    "norm.Scalar": "norm.ScalarOpt_dtype",
    "norm.ScalarOpt_dim": "norm.ScalarOpt_dim_dtype",
    "norm.names_ScalarOpt_dim": "norm.names_ScalarOpt_dim_dtype",
}
"""``AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE``: op -> the overload called with ``dtype`` appended."""

PROMOTE = (
    "addcdiv",
    "addcmul",
    "atan2",
    "bilinear",
    "cross",
    "dot",
    "vdot",
    "grid_sampler",
    "index_put",
    "tensordot",
    "scatter_add",
)
"""``AT_FORALL_PROMOTE`` (aten/src/ATen/autocast_mode.h)."""

BANNED = ("binary_cross_entropy",)
"""Ops CUDA autocast refuses (aten/src/ATen/autocast_mode.cpp, ``binary_cross_entropy_banned``)."""

POLICIES = {
    "lower_precision_fp": LOWER_PRECISION_FP,
    "fp32": FP32,
    "fp32_set_opt_dtype": FP32_SET_OPT_DTYPE,
    "fp32_append_dtype": tuple(FP32_APPEND_DTYPE),
    "promote": PROMOTE,
    "banned": BANNED,
}
"""Policy name -> aten op names (``name`` or ``name.overload``) as in ATen."""

_lib: torch.library.Library | None = None
registered: dict[str, str] = {}
"""Op name -> policy for every kernel :func:`install` registered (ops missing in this torch are skipped)."""
missing: list[str] = []
"""List entries that do not exist as aten ops in the running torch."""


def _resolve(name: str):
    base, _, overload = name.partition(".")
    packet = getattr(aten, base, None)
    if packet is None:
        return None
    return getattr(packet, overload or "default", None)


def _device_type() -> str:
    return torch._C._get_privateuse1_backend_name()


def _eligible(t: object, dev: str) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64 and t.device.type == dev


def _cast(v, dtype: torch.dtype, dev: str):
    if isinstance(v, torch.Tensor):
        return v.to(dtype) if _eligible(v, dev) and v.dtype != dtype else v
    if isinstance(v, (list, tuple)) and v and any(isinstance(x, torch.Tensor) for x in v):
        return type(v)(_cast(x, dtype, dev) for x in v)
    return v


def _tensors(args, kwargs):
    for v in list(args) + list(kwargs.values()):
        if isinstance(v, torch.Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            for x in v:
                if isinstance(x, torch.Tensor):
                    yield x


def _first_tensor(args, kwargs):
    for t in _tensors(args, kwargs):
        return t
    return None


def _cast_kernel(op, fixed: torch.dtype | None):
    def kernel(*args, **kwargs):
        dev = _device_type()
        dtype = fixed if fixed is not None else torch.get_autocast_dtype(dev)
        with torch._C._ExcludeDispatchKeyGuard(_KEYSET):
            args = [_cast(a, dtype, dev) for a in args]
            kwargs = {k: _cast(v, dtype, dev) for k, v in kwargs.items()}
            return op(*args, **kwargs)

    return kernel


def _promote_kernel(op):
    def kernel(*args, **kwargs):
        dev = _device_type()
        lower = torch.get_autocast_dtype(dev)
        target = lower
        for t in _tensors(args, kwargs):
            if _eligible(t, dev) and t.dtype == torch.float32:
                target = torch.float32
                break
            if _eligible(t, dev) and t.dtype != lower:
                raise RuntimeError(f"Unexpected floating ScalarType {t.dtype} in neuron autocast promote ({op})")
        with torch._C._ExcludeDispatchKeyGuard(_KEYSET):
            args = [_cast(a, target, dev) for a in args]
            kwargs = {k: _cast(v, target, dev) for k, v in kwargs.items()}
            return op(*args, **kwargs)

    return kernel


def _set_opt_dtype_kernel(op):
    names = [a.name for a in op._schema.arguments]
    idx = names.index("dtype")

    def kernel(*args, **kwargs):
        dev = _device_type()
        first = _first_tensor(args, kwargs)
        with torch._C._ExcludeDispatchKeyGuard(_KEYSET):
            if first is not None and _eligible(first, dev):
                if len(args) > idx:
                    if args[idx] is None:
                        args = list(args)
                        args[idx] = torch.float32
                elif kwargs.get("dtype") is None:
                    kwargs = dict(kwargs)
                    kwargs["dtype"] = torch.float32
            return op(*args, **kwargs)

    return kernel


def _append_dtype_kernel(target):
    def kernel(*args, **kwargs):
        dev = _device_type()
        first = _first_tensor(args, kwargs)
        dtype = torch.float32 if first is not None and _eligible(first, dev) else first.dtype
        with torch._C._ExcludeDispatchKeyGuard(_KEYSET):
            return target(*args, **kwargs, dtype=dtype)

    return kernel


def _banned_kernel(name: str):
    def kernel(*args, **kwargs):
        raise RuntimeError(
            f"torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast "
            f"(aten::{name} under torch.autocast('neuron'), same rule as CUDA). Many models use a sigmoid "
            f"layer right before the binary cross entropy layer; combine the two with "
            f"torch.nn.functional.binary_cross_entropy_with_logits or torch.nn.BCEWithLogitsLoss instead."
        )

    return kernel


def install() -> None:
    """Register the fallthrough fallback and the per-op kernels on ``AutocastPrivateUse1`` (idempotent)."""
    global _lib
    if _lib is not None:
        return
    lib = torch.library.Library("_", "IMPL")
    lib.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    impl = torch.library.Library("aten", "IMPL")
    for policy, names in POLICIES.items():
        for name in names:
            op = _resolve(name)
            if op is None:
                missing.append(name)
                continue
            if policy == "lower_precision_fp":
                kernel = _cast_kernel(op, None)
            elif policy == "fp32":
                kernel = _cast_kernel(op, torch.float32)
            elif policy == "fp32_set_opt_dtype":
                kernel = _set_opt_dtype_kernel(op)
            elif policy == "fp32_append_dtype":
                target = _resolve(FP32_APPEND_DTYPE[name])
                if target is None:
                    missing.append(name)
                    continue
                kernel = _append_dtype_kernel(target)
            elif policy == "promote":
                kernel = _promote_kernel(op)
            else:
                kernel = _banned_kernel(name)
            impl.impl(name, kernel, "AutocastPrivateUse1")
            registered[name] = policy
    _lib = (lib, impl)


def policy_of(name: str) -> str | None:
    """The autocast policy of aten op ``name`` (``"mm"``, ``"pow.Scalar"``) on neuron, or None (runs as is)."""
    return registered.get(name)
