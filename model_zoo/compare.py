"""Comparison rules for model outputs: tolerances, top-k, router and greedy-token agreement.

Pure functions on CPU tensors, used by :mod:`neuron_conformance.model_zoo.checks` and :mod:`neuron_conformance.model_zoo.localize` and
tested in ``tests/model_zoo/test_zoo_compare.py``. Numeric tensors go through the harness oracle
(:func:`neuron_conformance.conformance.verdict.oracle.judge`) with a tolerance scaled to the tensor (:func:`model_tolerance`);
discrete decisions (argmax tokens, chosen experts) are compared exactly except where the CPU
reference itself is within a tie margin.
"""

from __future__ import annotations

from typing import Any

import torch

from neuron_conformance.conformance.verdict.oracle import Verdict, judge
from neuron_conformance.conformance.verdict.tolerances import default_tolerance

#: Margin, in units of the dtype's machine epsilon times ``max(1, |logit|)``, under which two
#: logits count as tied: a differing greedy token or top-k index is accepted there. This project's
#: choice: logits of these models carry a few ULPs of accumulated rounding in every dtype.
TIE_MARGIN_EPS = 4.0


def tie_margin(dtype: torch.dtype, scale: float) -> float:
    """Logit margin below which two candidates count as tied: ``TIE_MARGIN_EPS * eps * max(1, scale)``."""
    return TIE_MARGIN_EPS * torch.finfo(dtype).eps * max(1.0, float(scale))


def model_tolerance(expected: torch.Tensor) -> tuple[float, float]:
    """``(atol, rtol)`` for one model tensor: the dtype's ``rtol`` and ``atol = max(atol, rtol * RMS(expected))``.

    ``rtol`` and the ``atol`` floor are ``torch.testing``'s defaults for the dtype
    (:func:`neuron_conformance.conformance.verdict.tolerances.default_tolerance`). The absolute part scales with the tensor's
    root mean square because the error of a network output element near zero is set by the size
    of the terms summed into it, not by the element itself; an elementwise-relative bound (and the
    oracle's ceiling, a multiple of ``atol + rtol * |fp64|``) would otherwise reject values near
    zero that CPU gets equally "wrong".
    """
    base = default_tolerance(expected.dtype)
    if not expected.is_floating_point() or expected.numel() == 0:
        return base.atol, base.rtol
    e = expected.detach().double()
    e = e[torch.isfinite(e)]
    rms = float(e.square().mean().sqrt()) if e.numel() else 0.0
    return max(base.atol, base.rtol * rms), base.rtol


def judge_model_tensor(
    actual: torch.Tensor, expected: torch.Tensor, reference64: torch.Tensor | None, *, min_atol: float = 0.0, **kwargs
) -> Verdict:
    """:func:`neuron_conformance.conformance.verdict.oracle.judge` with :func:`model_tolerance`; model checks compare through this.

    ``min_atol`` raises the absolute tolerance to at least that value (the ``train`` check's drift
    budget, see :data:`neuron_conformance.model_zoo.measure.DRIFT_BUDGET`).
    """
    atol, rtol = model_tolerance(expected)
    return judge(actual, expected, reference64=reference64, atol=max(atol, min_atol), rtol=rtol, **kwargs)


def train_verdicts(
    actual: dict[str, torch.Tensor],
    expected: dict[str, torch.Tensor],
    ref64: dict[str, torch.Tensor],
    dtype: torch.dtype,
    steps: int,
    drift: float,
    *,
    label: str = "",
) -> list[tuple[str, Verdict]]:
    """Named verdicts of a training run (``measure_train``'s ``{name: tensor}`` plus ``"<losses>"``) against
    ``expected``, float64 ``ref64`` arbitrating: the loss curve judged in ``dtype`` (the losses are float32
    numbers computed from ``dtype`` outputs), then every parameter after ``steps`` steps with an absolute
    tolerance of at least ``drift`` (the drift budget). ``label`` is appended to every name (``" vs eager"``).
    """
    verdicts = [
        (
            f"loss curve{label}",
            judge_model_tensor(actual["<losses>"].to(dtype), expected["<losses>"].to(dtype), ref64["<losses>"]),
        )
    ]
    for name, e in expected.items():
        if name != "<losses>":
            verdicts.append(
                (
                    f"parameter {name} after {steps} steps{label}",
                    judge_model_tensor(actual[name], e, ref64[name], min_atol=drift),
                )
            )
    return verdicts


def topk_agreement(
    actual: torch.Tensor, expected: torch.Tensor, *, k: int = 5, margin: float
) -> dict[str, float | int]:
    """Top-1 and top-k agreement of two logit tensors ``(..., classes)``.

    A position whose top-1 class differs is *explained* when the expected logit of the device's
    pick is within ``margin`` of the expected maximum (a near tie); otherwise it is counted in
    ``top1_unexplained``. ``topk_overlap`` is the mean fraction of the expected top-k found in the
    actual top-k. Positions whose expected row is not all finite are skipped.

    Returns:
        ``{"positions", "top1_agree", "top1_unexplained", "topk_overlap"}`` (fractions in [0, 1]).
    """
    if actual.shape != expected.shape:
        raise ValueError(f"topk_agreement: shapes differ: {tuple(actual.shape)} vs {tuple(expected.shape)}")
    classes = expected.shape[-1]
    a = actual.detach().double().reshape(-1, classes)
    e = expected.detach().double().reshape(-1, classes)
    keep = torch.isfinite(e).all(dim=1)
    a, e = a[keep], e[keep]
    n = a.shape[0]
    if n == 0:
        return {"positions": 0, "top1_agree": 1.0, "top1_unexplained": 0, "topk_overlap": 1.0}
    a_top1 = a.argmax(dim=1)
    e_max = e.max(dim=1).values
    e_of_pick = e.gather(1, a_top1[:, None]).squeeze(1)
    agree = a_top1 == e.argmax(dim=1)
    unexplained = (~agree) & ((e_max - e_of_pick) > margin)
    kk = min(k, classes)
    a_k = a.topk(kk, dim=1).indices
    e_k = e.topk(kk, dim=1).indices
    overlap = (a_k[:, :, None] == e_k[:, None, :]).any(dim=2).double().mean(dim=1)
    return {
        "positions": n,
        "top1_agree": float(agree.double().mean()),
        "top1_unexplained": int(unexplained.sum()),
        "topk_overlap": float(overlap.mean()),
    }


def router_agreement(
    actual_idx: torch.Tensor, expected_idx: torch.Tensor, expected_logits: torch.Tensor, *, margin: float
) -> dict[str, float | int]:
    """Compare chosen expert sets token by token.

    ``actual_idx``/``expected_idx`` are ``(tokens, top_k)`` expert indices; ``expected_logits`` is
    CPU's ``(tokens, experts)`` router logits. A token whose expert set differs is *explained* when
    every expert in the symmetric difference has a CPU logit within ``margin`` of CPU's k-th largest
    logit (a tie at the selection boundary).
    """
    if actual_idx.shape != expected_idx.shape:
        raise ValueError(
            f"router_agreement: index shapes differ: {tuple(actual_idx.shape)} vs {tuple(expected_idx.shape)}"
        )
    experts = expected_logits.shape[-1]
    a = torch.zeros(actual_idx.shape[0], experts, dtype=torch.bool)
    e = torch.zeros_like(a)
    a.scatter_(1, actual_idx.long(), True)
    e.scatter_(1, expected_idx.long(), True)
    differ_rows = (a != e).any(dim=1)
    logits = expected_logits.double()
    kth = logits.topk(actual_idx.shape[1], dim=1).values[:, -1:]
    near = (logits - kth).abs() <= margin
    explained = ((a != e) <= near).all(dim=1)  # every differing expert is near the boundary
    return {
        "tokens": int(a.shape[0]),
        "agree": float((~differ_rows).double().mean()),
        "unexplained": int((differ_rows & ~explained).sum()),
    }


def token_agreement(
    actual: torch.Tensor, expected: torch.Tensor, expected_logits: torch.Tensor | None, *, margin: float | None
) -> dict[str, Any]:
    """Compare greedy token rows ``(batch, new_tokens)``.

    The first differing token of a row is *accepted* when ``margin`` is not None and the expected
    logits at that step (``expected_logits``: ``(batch, new_tokens, vocab)``) put the actual token
    within ``margin`` of the expected token; the rest of that row is then not compared (the
    continuations legitimately differ). With ``margin=None`` every difference is a failure
    (float32: exact).

    Returns:
        ``{"rows", "agreeing_rows", "accepted", "unexplained", "first": [(row, step, exp, got, gap)]}``.
    """
    if actual.shape != expected.shape:
        raise ValueError(f"token_agreement: shapes differ: {tuple(actual.shape)} vs {tuple(expected.shape)}")
    accepted = unexplained = agreeing = 0
    first: list[tuple[int, int, int, int, float | None]] = []
    for row in range(actual.shape[0]):
        diff = (actual[row] != expected[row]).nonzero()
        if diff.numel() == 0:
            agreeing += 1
            continue
        step = int(diff[0])
        exp_tok, got_tok = int(expected[row, step]), int(actual[row, step])
        gap = None
        if expected_logits is not None:
            lg = expected_logits[row, step].double()
            gap = float(lg[exp_tok] - lg[got_tok])
        if margin is not None and gap is not None and gap <= margin:
            accepted += 1
        else:
            unexplained += 1
        first.append((row, step, exp_tok, got_tok, gap))
    return {
        "rows": int(actual.shape[0]),
        "agreeing_rows": agreeing,
        "accepted": accepted,
        "unexplained": unexplained,
        "first": first,
    }
