"""Judging sampled generation when the device's random stream may differ from CPU's: pure functions on CPU tensors.

A device's random number generator legitimately differs from CPU's (vendors use counter-based generators such
as Philox; CPU uses mt19937), so sampled tokens cannot be compared with CPU's sampled tokens in general. What
can be compared, and what :mod:`neuron_conformance.model_zoo.generation_modes` compares, is:

1. **the distribution the device sampled from**: its raw logits along its own sampled path against CPU's raw
   logits along the same path (a CPU replay fed the device's tokens), and the set of tokens the logits
   processors kept (:func:`kept_set_agreement`: top-k keeps every token whose logit reaches the k-th largest; a
   token kept on one side only is accepted where its CPU logit is within the measured logit error plus the tie
   margin of CPU's k-th largest);
2. **that the draws follow that distribution** (:func:`sampler_statistic`): a randomised-free probability
   integral transform of every draw, summed and tested with Bernstein's inequality at level
   :data:`LEVEL`; a sampler that returns the most likely token, or ignores the probabilities, fails it when the
   distributions are spread out (random-weight models), and is indistinguishable from a correct one, and
   passes, when they are peaked;
3. **that every draw is a token the device itself gave positive probability** (:func:`support_violations`);
4. **determinism**: the same seed twice gives bitwise the same tokens (checked by the caller);
5. **the same stream where the backend promises one** (:func:`same_stream_agreement`): a backend that runs
   CPU's kernels on CPU's generator (``DeviceProfile.mirrors_cpu``, the emulator's mirror mode) must draw
   CPU's tokens at every step whose inputs (previous tokens of every row, processed scores) are bitwise CPU's.
"""

from __future__ import annotations

import math

import torch

LEVEL = 1e-6
"""Significance level of :func:`sampler_statistic`: the level of the random-op suite's distribution tests
(:mod:`neuron_conformance.opsuites.randomops.stats`), so a correct sampler fails once in a million seeds."""


def midpoint_pit(probs: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mid-point probability integral transform of discrete draws: ``(u, var)``, each ``(draws,)`` float64.

    ``probs`` is ``(draws, vocab)`` (rows sum to 1), ``tokens`` ``(draws,)`` the drawn indices. Tokens are
    ordered by decreasing probability (stable, ties by index); for the drawn token ``t`` with probability
    ``p_t`` and ``F_t`` the probability of the tokens before it, ``u = F_t + p_t / 2``. Under correct sampling
    ``E[u] = sum_t p_t (F_t + p_t / 2) = (sum_t p_t)^2 / 2 = 1/2`` exactly, and ``var = sum_t p_t u_t^2 - 1/4``
    is returned per draw. A sampler biased to the most likely tokens gives small ``u``, one that ignores the
    probabilities large ``u``.

    Raises:
        ValueError: shapes do not match.
    """
    if probs.dim() != 2 or tokens.shape != probs.shape[:1]:
        raise ValueError(
            f"midpoint_pit: probs must be (draws, vocab) and tokens (draws,), got "
            f"{tuple(probs.shape)} and {tuple(tokens.shape)}"
        )
    p = probs.double()
    p = p / p.sum(dim=1, keepdim=True)
    order = torch.sort(p, dim=1, descending=True, stable=True).indices
    sorted_p = p.gather(1, order)
    before = sorted_p.cumsum(dim=1) - sorted_p
    mid = before + sorted_p / 2
    rank = (order == tokens.long()[:, None]).double().argmax(dim=1)
    u = mid.gather(1, rank[:, None]).squeeze(1)
    var = (sorted_p * mid.square()).sum(dim=1) - 0.25
    return u, var.clamp_min(0.0)


def sampler_statistic(probs: torch.Tensor, tokens: torch.Tensor) -> dict[str, float | int]:
    """Test that ``tokens`` were drawn from ``probs``: the sum of :func:`midpoint_pit` values against its mean.

    ``S = sum(u) - n/2`` has variance ``V = sum(var)`` and each term lies in ``[-1/2, 1/2]``, so Bernstein's
    inequality bounds ``P(|S| >= t) <= 2 exp(-t^2 / (2 (V + t / 6)))`` whatever the distributions (no normal
    approximation, which fails for peaked distributions with a few rare draws). The returned ``p_bound`` is
    that bound at ``t = |S|`` (capped at 1); the caller fails the draws when it is below :data:`LEVEL`.
    Source: S. Bernstein's inequality for bounded independent variables (e.g. Boucheron, Lugosi, Massart,
    *Concentration Inequalities*, 2013, Thm. 2.10).

    Returns:
        ``{"draws", "deviation" (S), "variance" (V), "p_bound"}``.
    """
    u, var = midpoint_pit(probs, tokens)
    n = int(u.numel())
    s = float(u.sum()) - n / 2
    v = float(var.sum())
    t = abs(s)
    p_bound = 1.0 if t == 0 else min(1.0, 2.0 * math.exp(-t * t / (2.0 * (v + t / 6.0))))
    return {"draws": n, "deviation": s, "variance": v, "p_bound": p_bound}


def support_violations(scores: torch.Tensor, tokens: torch.Tensor) -> list[tuple[int, int, int]]:
    """Draws of a token the sampler's own processed scores excluded: ``[(row, step, token)]``.

    ``scores`` is ``(rows, steps, vocab)`` (``-inf`` where a logits processor filtered a token), ``tokens``
    ``(rows, steps)``.
    """
    picked = scores.gather(2, tokens.long()[..., None]).squeeze(2)
    bad = (~torch.isfinite(picked)).nonzero().tolist()
    return [(r, s, int(tokens[r, s])) for r, s in bad]


def kept_set_agreement(
    device_scores: torch.Tensor, cpu_scores: torch.Tensor, cpu_logits: torch.Tensor, *, margin: torch.Tensor
) -> dict:
    """Compare the token sets a top-k filter kept on the device and on CPU, position by position.

    ``device_scores``/``cpu_scores`` are processed scores ``(positions, vocab)`` (``-inf`` = filtered);
    ``cpu_logits`` the scores CPU filtered (after temperature), ``margin`` ``(positions,)`` the logit distance
    from CPU's smallest kept logit under which a token may legitimately be kept on one side only (the caller
    passes the measured device-vs-CPU logit error plus the tie margin). A token in the symmetric difference
    further than ``margin`` from that threshold is unexplained.

    Returns:
        ``{"positions", "differing_positions", "unexplained", "first": (position, token, gap) or None}``.
    """
    dev_kept = torch.isfinite(device_scores)
    cpu_kept = torch.isfinite(cpu_scores)
    logits = cpu_logits.double()
    threshold = torch.where(cpu_kept, logits, torch.full_like(logits, math.inf)).min(dim=1).values
    gap = (logits - threshold[:, None]).abs()
    differs = dev_kept != cpu_kept
    bad = differs & (gap > margin.double()[:, None])
    first = None
    if bad.any():
        pos, tok = (int(i) for i in bad.nonzero()[0])
        first = (pos, tok, float(gap[pos, tok]))
    return {
        "positions": int(dev_kept.shape[0]),
        "differing_positions": int(differs.any(dim=1).sum()),
        "unexplained": int(bad.sum()),
        "first": first,
    }


def same_stream_agreement(
    device_tokens: torch.Tensor, cpu_tokens: torch.Tensor, device_scores: torch.Tensor, cpu_scores: torch.Tensor
) -> dict:
    """Where the device draws from CPU's stream, the steps at which it must have drawn CPU's tokens.

    ``*_tokens`` are ``(rows, steps)``, ``*_scores`` ``(rows, steps, vocab)``. A generator shared by the
    batch advances by the same amount at every step whatever was drawn, so at step ``s`` the device's
    generator is in CPU's state while every row's tokens before ``s`` equal CPU's; if the processed scores at
    ``s`` are also bitwise CPU's, the draw must be too. Comparison stops at the first step where either
    condition fails (the streams then legitimately part).

    Returns:
        ``{"bound_steps" (steps at which equality was required), "first_mismatch": (row, step, cpu, device) or None}``.
    """
    steps = device_tokens.shape[1]
    for s in range(steps):
        if not torch.equal(device_tokens[:, :s], cpu_tokens[:, :s]):
            return {"bound_steps": s, "first_mismatch": None}
        if not torch.equal(device_scores[:, s], cpu_scores[:, s]):
            return {"bound_steps": s, "first_mismatch": None}
        if not torch.equal(device_tokens[:, s], cpu_tokens[:, s]):
            row = int((device_tokens[:, s] != cpu_tokens[:, s]).nonzero()[0])
            return {
                "bound_steps": s + 1,
                "first_mismatch": (row, s, int(cpu_tokens[row, s]), int(device_tokens[row, s])),
            }
    return {"bound_steps": steps, "first_mismatch": None}
