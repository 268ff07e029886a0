"""The checks of the FlexAttention suite (``opsuites/test_flex_attention.py``): inputs, the device run
through the compile backend, the SDPA reference on the CPU, and the comparison.

Reference (:func:`sdpa_reference`): ``torch.nn.functional.scaled_dot_product_attention`` with the math
backend (``SDPBackend.MATH``) on the CPU over the case's dense equivalent: an additive float mask that is
``-inf`` where the case masks, and ``score_mod(S) - S`` elsewhere, ``S = scale * q @ k^T`` computed from the
same (grad-tracked) inputs, so SDPA's ``S + mask`` is ``score_mod(S)`` and its gradient is the chain rule
through the score mod (for soft-capping, ``1 - tanh^2``). CPU FlexAttention has no backward in torch 2.13
(``_validate_device`` of ``torch/nn/attention/flex_attention.py``), so SDPA is the gradient reference too.
It is computed twice: in the test's dtype (the CPU's same-dtype answer) and in float64 from the same
rounded inputs; the oracle (:func:`neuron_conformance.conformance.verdict.oracle.judge`) takes the dtype's
``torch.testing`` ``rtol`` with an ``atol`` scaled to the tensor (:func:`attention_atol`), then the fp64
rule. Never exact, in mirror mode too: the device runs
FlexAttention's algorithm and the reference runs SDPA's.

Fully masked query rows are defined by FlexAttention only: its math reference (``math_attention`` of
``torch/_higher_order_ops/flex_attention.py``) gives zeros (``_safe_softmax``), a log-sum-exp of ``-inf``
and no gradient (measured on the CPU with torch 2.13: output 0, lse ``-inf``). SDPA on the CPU gives zeros
there too in torch 2.13 (measured: default and math backends, boolean and ``-inf`` float masks), but its
documentation does not define the row, so the reference does not rely on it: it gives such a row a zero
bias and multiplies its output by 0, so the output there is 0 and the row sends no gradient to ``q``,
``k`` or ``v``, FlexAttention's semantics; :func:`check_masked_rows` demands the device's zeros exactly.

Refusals (:func:`is_refusal`): torch's device check (``ValueError: FlexAttention is only supported on
...``; under ``fullgraph=True`` Dynamo reports it as ``Unsupported: Observed exception``), a compile backend that cannot lower the op (``BackendCompilerFailed``), Dynamo refusing to trace it
(``torch._dynamo.exc.Unsupported``) and ``NotImplementedError`` are raised as ``NotImplementedError``,
which the plugin records as class ``unsupported`` (:func:`neuron_conformance.conformance.verdict.failures.classify_exception`).
"""

from __future__ import annotations

import math

import torch

from neuron_conformance.conformance.verdict.failures import NumericFailure
from neuron_conformance.conformance.verdict.oracle import check
from neuron_conformance.conformance.verdict.tolerances import default_tolerance
from neuron_conformance.opsuites.flex.cases import FlexCase

DTYPES = ("float32", "bfloat16", "float16")
"""The dtypes the suite runs (those of ``--conformance-dtypes`` among them)."""

SEED = 20241203
"""Seed of the inputs and the output cotangent (any fixed value)."""

REFUSAL = "FlexAttention is only supported on"
"""The start of torch 2.13's device-check message (``_validate_device``)."""


def inputs(case: FlexCase, dtype: torch.dtype):
    """``(q, k, v, grad_out)`` on the CPU in ``dtype``: standard normal values drawn in float32 from a
    generator of their own (seed :data:`SEED`), then rounded to ``dtype``."""
    gen = torch.Generator().manual_seed(SEED)
    shapes = [
        (case.batch, case.q_heads, case.q_len, case.head_dim),
        (case.batch, case.kv_heads, case.kv_len, case.head_dim),
        (case.batch, case.kv_heads, case.kv_len, case.head_dim),
        (case.batch, case.q_heads, case.q_len, case.head_dim),
    ]
    return tuple(torch.randn(s, generator=gen).to(dtype) for s in shapes)


def sdpa_reference(case: FlexCase, q, k, v, grad_out=None):
    """SDPA over the case's dense mask and bias on the CPU, in the inputs' dtype (module docstring).

    Returns:
        ``(out, grads)``: ``out`` ``(B, Hq, L, E)``; ``grads`` ``(dq, dk, dv)`` when ``grad_out`` is given,
        else None. Fully masked rows give 0 and no gradient.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = (t.detach().requires_grad_(grad_out is not None) for t in (q, k, v))
    scale = 1.0 / math.sqrt(case.head_dim)
    keep = case.dense_keep()
    live = keep.any(dim=-1, keepdim=True)
    group = case.q_heads // case.kv_heads
    work = torch.float64 if q.dtype == torch.float64 else torch.float32
    scores = (q.to(work) @ k.repeat_interleave(group, dim=1).to(work).transpose(-2, -1)) * scale
    bias = case.dense_score(scores) - scores if case.score is not None else torch.zeros_like(scores)
    bias = torch.where(keep, bias, torch.tensor(-math.inf, dtype=work))
    bias = torch.where(live, bias, torch.zeros((), dtype=work))
    with sdpa_kernel(SDPBackend.MATH):
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=bias.to(q.dtype), scale=scale, enable_gqa=case.gqa
        )
    out = out * live.to(out.dtype)
    if grad_out is None:
        return out.detach(), None
    grads = torch.autograd.grad(out, (q, k, v), grad_out)
    return out.detach(), grads


def is_refusal(exc: BaseException) -> bool:
    """True when ``exc`` is a backend's refusal of FlexAttention rather than a wrong run (module docstring)."""
    import torch._dynamo.exc as dexc  # deferred: Dynamo's exceptions are imported only where compile runs

    if isinstance(exc, (NotImplementedError, dexc.BackendCompilerFailed, dexc.Unsupported)):
        return True
    # torch's check raised in eager code, or observed by Dynamo while it traced (ObservedValueErrorError)
    return isinstance(exc, (ValueError, dexc.TorchDynamoException)) and REFUSAL in str(exc)


def compile_flex(backend: str):
    """``torch.compile(flex_attention, backend=backend, fullgraph=True, dynamic=False)`` after a Dynamo
    reset (each test compiles afresh: no cache entry of another case decides)."""
    import torch._dynamo  # deferred: about a second to import
    from torch.nn.attention.flex_attention import flex_attention

    torch._dynamo.reset()
    return torch.compile(flex_attention, backend=backend, fullgraph=True, dynamic=False)


def run_device(case: FlexCase, device, backend: str, q, k, v, grad_out=None):
    """FlexAttention of CPU inputs ``q, k, v`` on ``device`` through ``torch.compile`` with ``backend``.

    The block mask is built on the device (``create_block_mask`` of the case's ``mask_mod``, ``BLOCK_SIZE``
    of the case) outside the compiled region, as models do.

    Returns:
        ``(out, grads)`` read back to the CPU (``grads`` ``(dq, dk, dv)`` when ``grad_out`` is given).

    Raises:
        NotImplementedError: the backend refused FlexAttention (:func:`is_refusal`), naming the backend and
            the exception.
    """
    from torch.nn.attention.flex_attention import create_block_mask

    score_mod, mask_mod = case.mods(device)
    block_mask = None
    if mask_mod is not None:
        kwargs = {"BLOCK_SIZE": case.block} if case.block else {}
        block_mask = create_block_mask(
            mask_mod, case.batch, case.q_heads, case.q_len, case.kv_len, device=device, **kwargs
        )
    dq, dk, dv = (t.to(device).requires_grad_(grad_out is not None) for t in (q, k, v))
    flex = compile_flex(backend)
    try:
        out = flex(dq, dk, dv, score_mod=score_mod, block_mask=block_mask, enable_gqa=case.gqa)
        grads = None
        if grad_out is not None:
            grads = torch.autograd.grad(out, (dq, dk, dv), grad_out.to(device))
    except Exception as exc:  # noqa: BLE001 - a refusal is sorted from a failure below
        if is_refusal(exc):
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise NotImplementedError(
                f"FlexAttention ({case.name}) on {device.type} through "
                f"torch.compile(backend={backend!r}) refused: {type(exc).__name__}: "
                f"{first}"
            ) from exc
        raise
    return out.detach().cpu(), None if grads is None else tuple(g.cpu() for g in grads)


def attention_atol(reference64: torch.Tensor, dtype: torch.dtype) -> float:
    """The absolute tolerance of an attention output or gradient: the dtype's ``torch.testing`` ``rtol``
    times the root mean square of the float64 reference, at least the dtype's default ``atol``.

    Why (this suite's rule): each element is a weighted sum over the keys whose rounding error follows
    the magnitude of the tensor (of ``v``, of the probabilities), not of the element; cancellation leaves
    elements near 0 carrying the error of the whole, where the default ``atol`` (1e-5) would demand a
    relative accuracy no implementation has (measured on the emulated device: torch's FlexAttention
    math, probabilities rounded to bfloat16 before ``@ v``, 0.0156 absolute on outputs of RMS about
    0.3). PyTorch's own FlexAttention tests judge by a tensor-wide error too: the mean absolute error
    against a float64 golden, within a factor of the reference's (``_check_equal`` of
    ``test/inductor/test_flex_attention.py``).
    """
    base = default_tolerance(dtype)
    rms = float(reference64.double().pow(2).mean().sqrt()) if reference64.numel() else 0.0
    return max(base.atol, base.rtol * rms)


def compare(actual, expected, reference64, where: str):
    """Judge one device tensor against the same-dtype reference, with :func:`attention_atol`, the dtype's
    ``rtol`` and the fp64 rule; the verdict.

    Raises:
        ConformanceFailure: ``metadata``, ``nonfinite`` or ``numeric`` (:func:`neuron_conformance.conformance.verdict.oracle.check`).
    """
    atol = attention_atol(reference64, expected.dtype)
    return check(
        actual, expected, reference64=reference64, where=where, atol=atol, rtol=default_tolerance(expected.dtype).rtol
    )


def check_masked_rows(case: FlexCase, out: torch.Tensor, where: str) -> int:
    """The device output is exactly 0 on every fully masked query row (FlexAttention's defined value);
    returns how many rows were checked.

    Raises:
        NumericFailure: a fully masked row holds anything else, naming the first (batch, head, row).
    """
    dead = ~case.dense_keep().any(dim=-1)
    if not bool(dead.any()):
        return 0
    rows = out[dead]
    bad = rows != 0
    if bool(bad.any()):
        first = tuple(int(i) for i in dead.nonzero()[int(bad.any(dim=-1).nonzero()[0])])
        raise NumericFailure(
            f"{where}: {int(bad.any(dim=-1).sum())} of {int(dead.sum())} fully masked query "
            f"row(s) are not 0 (first (batch, head, row) {first}: "
            f"{rows[bad][0].item()!r}); FlexAttention defines them as 0",
            fields={"rule": "exact", "max_abs": float(rows.double().abs().max()), "atol": 0.0, "rtol": 0.0},
        )
    return int(dead.sum())


__all__ = [
    "DTYPES",
    "REFUSAL",
    "SEED",
    "attention_atol",
    "check_masked_rows",
    "compare",
    "compile_flex",
    "inputs",
    "is_refusal",
    "run_device",
    "sdpa_reference",
]
