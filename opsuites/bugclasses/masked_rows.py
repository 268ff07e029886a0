"""Fully masked rows: rows that are all ``-inf`` (or masked out entirely) through softmax-like kernels.

A softmax kernel subtracts the row maximum before ``exp``; for an all ``-inf`` row that is
``-inf - (-inf) = NaN``, so softmax and log_softmax of such a row are NaN by the math, while kernels that
guard the maximum (or clamp it to ``finfo.min``) return 0 or a uniform row. Attention is the exception:
PyTorch's CPU SDPA kernels return 0 for a query row whose boolean mask is all False. Reductions whose
identity is ``-inf`` (amax, logsumexp) must return ``-inf``, not ``finfo.min`` or NaN.

Sources: ``torch.nn.functional.softmax`` / ``log_softmax`` docs (``exp(x_i) / sum_j exp(x_j)``; IEEE 754
gives NaN for ``-inf - -inf`` and ``0/0``), ``torch.logsumexp`` (``log(sum(exp(x)))``: ``log(0) = -inf``),
``torch.amax``; ``torch.nn.functional.scaled_dot_product_attention``: the CPU kernels
(``_scaled_dot_product_flash_attention_for_cpu`` and the math path's ``_safe_softmax``,
aten/src/ATen/native/transformers/attention.cpp, torch >= 2.5) give 0 for fully masked rows; the CPU
result is the reference.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from neuron_conformance.opsuites.bugclasses.case import BugCase

BUG_CLASS = "masked-rows"
DESCRIPTION = (
    "all -inf or fully masked rows: softmax, log_softmax, masked_fill+softmax, SDPA bool mask, logsumexp, amax"
)

_FLOATS = ("float32", "bfloat16", "float16")
_INF = float("inf")


def _scores(dtype, seed=0, shape=(4, 37)):
    """Random scores of ``shape`` (37: not a multiple of a vector width): row 1 all -inf, row 2 half -inf."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 3
    x[1] = -_INF
    x[2, ::2] = -_INF
    return x.to(dtype)


def _softmax(dim):
    def build(dtype):
        x = _scores(dtype, 1)
        return (lambda x: torch.softmax(x if dim == -1 else x.t().contiguous(), dim)), (x,), {}

    return build


def _log_softmax(dtype):
    return (lambda x: torch.log_softmax(x, -1)), (_scores(dtype, 2),), {}


def _masked_fill_softmax(dtype):
    g = torch.Generator().manual_seed(3)
    scores = torch.randn(3, 5, 9, generator=g).to(dtype)
    mask = torch.rand(3, 5, 9, generator=g) > 0.4
    mask[0, 2] = False  # one fully masked row per tensor
    mask[2, 4] = False

    def fn(s, m):
        return s.masked_fill(~m, -_INF).softmax(-1)

    return fn, (scores, mask), {}


def _sdpa(dtype):
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 2, 6, 8, generator=g).to(dtype) for _ in range(3))
    mask = torch.rand(6, 6, generator=g) > 0.5
    mask[:, 0] = True
    mask[3] = False  # query row 3 sees no key
    return (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)), (q, k, v, mask), {}


def _logsumexp(dtype):
    return (lambda x: torch.logsumexp(x, -1)), (_scores(dtype, 5),), {}


def _amax(dtype):
    x = _scores(dtype, 6)
    return (lambda x: (torch.amax(x, -1), torch.amin(-x, -1))), (x,), {}


_TABLE = [
    (
        "softmax-all_-inf_row",
        "softmax",
        _softmax(-1),
        "softmax of an all -inf row is NaN (exp(-inf - -inf)); half -inf rows give 0 there (softmax docs, IEEE 754)",
    ),
    (
        "softmax-all_-inf_column",
        "softmax",
        _softmax(0),
        "softmax along dim 0 (a strided reduction) of an all -inf column is NaN (softmax docs, IEEE 754)",
    ),
    (
        "log_softmax-all_-inf_row",
        "log_softmax",
        _log_softmax,
        "log_softmax of an all -inf row is NaN; -inf entries of other rows stay -inf (log_softmax docs)",
    ),
    (
        "masked_fill_softmax-fully_masked",
        "softmax",
        _masked_fill_softmax,
        "masked_fill(~mask, -inf).softmax(-1) of a fully masked row is NaN (masked_fill and softmax docs)",
    ),
    (
        "sdpa-bool_mask_fully_masked_row",
        "nn.functional.scaled_dot_product_attention",
        _sdpa,
        "SDPA with a boolean attn_mask whose row is all False returns 0 for that query on CPU "
        "(flash_attention_for_cpu / _safe_softmax, attention.cpp); the CPU result is the reference",
    ),
    (
        "logsumexp-all_-inf_row",
        "logsumexp",
        _logsumexp,
        "logsumexp of an all -inf row is -inf (log of an empty sum; torch.logsumexp docs)",
    ),
    (
        "amax-all_-inf_row",
        "amax",
        _amax,
        "amax of an all -inf row is -inf and amin of an all +inf row is +inf (torch.amax / amin docs)",
    ),
]


def _bind(builder, dtype_name):
    return lambda: builder(getattr(torch, dtype_name))


def cases() -> list[BugCase]:
    """One case per (table row, floating dtype)."""
    return [
        BugCase(BUG_CLASS, name, op, dt, _bind(builder, dt), semantics)
        for name, op, builder, semantics in _TABLE
        for dt in _FLOATS
    ]
