"""The FlexAttention cases of the ``flex_attention`` suite: score mods and masks that real models use, and
their dense equivalents for the SDPA reference.

Each :class:`FlexCase` gives a ``mask`` and a ``score`` rule written once, on index tensors, so the same
function is the ``mask_mod`` / ``score_mod`` handed to FlexAttention on the device (scalar indices, traced
by Dynamo) and the dense mask / bias of the CPU reference (indices broadcast to ``(B, H, L, S)``):

============== =====================================================================================
``causal``     ``kv <= q`` (decoder LMs)
``sliding``    causal within a window of 48 keys (Mistral's sliding-window attention)
``alibi``      causal, bias ``slope_h * (kv - q)``, ``slope_h = 2^(-8 (h+1) / H)`` (Press et al. 2022, ALiBi)
``softcap``    causal, ``cap * tanh(score / cap)`` (Gemma 2's attention-logit soft-capping; cap 5 here,
               Gemma 2 uses 50 on logits of that larger scale)
``document``   packed sequences: causal within each document (``doc[q] == doc[kv]``)
``prefix_lm``  bidirectional over a 40-token prefix, causal after it (T5/UL2-style prefix LM)
``gqa``        causal with 8 query heads sharing 2 key/value heads (``enable_gqa=True``, Llama 3 style)
``padded``     packed documents followed by padding whose query rows attend to nothing: fully masked
               rows (FlexAttention returns zeros there: the ``math_attention`` reference of
               ``torch/_higher_order_ops/flex_attention.py`` uses ``_safe_softmax`` and sets the row's
               log-sum-exp to ``-inf``)
``cross``      no mask, no score mod, 100 queries over 129 keys (the default ``BlockMask``)
============== =====================================================================================

Sequence lengths 100 and 129 are not multiples of the block sizes (128, and 16/32 for the cases that set
``block``), so the last block of each row and column is partial.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch


def _causal(b, h, q, kv, bufs):
    return kv <= q


def _sliding(b, h, q, kv, bufs):
    return (kv <= q) & (q - kv < 48)


def _alibi(score, b, h, q, kv, bufs):
    return score + bufs["slopes"][h] * (kv - q)


def _softcap(score, b, h, q, kv, bufs):
    return 5.0 * torch.tanh(score / 5.0)


def _document(b, h, q, kv, bufs):
    doc = bufs["doc"]
    return (doc[q] == doc[kv]) & (kv <= q)


def _prefix_lm(b, h, q, kv, bufs):
    return (kv <= q) | (kv < 40)


def _padded(b, h, q, kv, bufs):
    doc = bufs["doc"]
    return (doc[q] == doc[kv]) & (doc[q] >= 0)


def _doc_ids(lengths, pad: int = 0) -> torch.Tensor:
    ids = torch.cat([torch.full((n,), i, dtype=torch.int64) for i, n in enumerate(lengths)])
    return torch.cat([ids, torch.full((pad,), -1, dtype=torch.int64)])


def _alibi_slopes(heads: int) -> torch.Tensor:
    return torch.tensor([2.0 ** (-8.0 * (i + 1) / heads) for i in range(heads)], dtype=torch.float32)


@dataclass(frozen=True)
class FlexCase:
    """One FlexAttention configuration.

    Attributes:
        name: the test id.
        batch, q_heads, kv_heads, q_len, kv_len, head_dim: shapes; query ``(batch, q_heads, q_len,
            head_dim)``, key and value ``(batch, kv_heads, kv_len, head_dim)``.
        mask: ``(b, h, q_idx, kv_idx, bufs) -> bool`` or None (attend everywhere).
        score: ``(score, b, h, q_idx, kv_idx, bufs) -> score`` or None (identity).
        buffers: name -> CPU tensor the rules read (moved to the device for FlexAttention).
        block: the ``BLOCK_SIZE`` of ``create_block_mask`` (None: torch's default, 128). Every case keeps the
            default: Inductor's FlexAttention kernels refuse a block mask whose block size their tile sizes
            do not divide ("Q and KV block size must be divisible by BLOCK_M and BLOCK_N"; 16 and 32 were
            refused on CUDA), so a smaller block tests the harness, not the device. Block edges are crossed
            by the lengths instead (129 and 257: one and two full blocks and a partial one).
    """

    name: str
    batch: int
    q_heads: int
    kv_heads: int
    q_len: int
    kv_len: int
    head_dim: int
    mask: Callable | None = None
    score: Callable | None = None
    buffers: dict = field(default_factory=dict)
    block: int | None = None

    @property
    def gqa(self) -> bool:
        """True when key/value heads are shared by several query heads (``enable_gqa=True``)."""
        return self.q_heads != self.kv_heads

    def bufs_on(self, device) -> dict:
        """The buffers on ``device``."""
        return {k: v.to(device) for k, v in self.buffers.items()}

    def mods(self, device):
        """``(score_mod, mask_mod)`` for FlexAttention on ``device`` (None where the case has no rule)."""
        bufs = self.bufs_on(device)
        score_mod = mask_mod = None
        if self.score is not None:
            rule = self.score

            def score_mod(score, b, h, q_idx, kv_idx):
                return rule(score, b, h, q_idx, kv_idx, bufs)

        if self.mask is not None:
            mrule = self.mask

            def mask_mod(b, h, q_idx, kv_idx):
                return mrule(b, h, q_idx, kv_idx, bufs)

        return score_mod, mask_mod

    def dense_keep(self) -> torch.Tensor:
        """The mask on the CPU: bool ``(batch, q_heads, q_len, kv_len)``, True where a query attends."""
        b, h, q, kv = self._grid()
        if self.mask is None:
            return torch.ones(self.batch, self.q_heads, self.q_len, self.kv_len, dtype=torch.bool)
        return self.mask(b, h, q, kv, self.buffers).expand(self.batch, self.q_heads, self.q_len, self.kv_len)

    def dense_score(self, scores: torch.Tensor) -> torch.Tensor:
        """``score_mod`` applied densely to ``scores`` ``(batch, q_heads, q_len, kv_len)`` on the CPU."""
        if self.score is None:
            return scores
        b, h, q, kv = self._grid()
        return self.score(scores, b, h, q, kv, self.buffers)

    def _grid(self):
        return (
            torch.arange(self.batch).view(-1, 1, 1, 1),
            torch.arange(self.q_heads).view(1, -1, 1, 1),
            torch.arange(self.q_len).view(1, 1, -1, 1),
            torch.arange(self.kv_len).view(1, 1, 1, -1),
        )


CASES = (
    FlexCase("causal", 2, 4, 4, 129, 129, 32, mask=_causal),
    FlexCase("sliding", 1, 4, 4, 257, 257, 32, mask=_sliding),
    FlexCase("alibi", 2, 4, 4, 100, 100, 32, mask=_causal, score=_alibi, buffers={"slopes": _alibi_slopes(4)}),
    FlexCase("softcap", 2, 4, 4, 129, 129, 32, mask=_causal, score=_softcap),
    FlexCase("document", 1, 4, 4, 257, 257, 32, mask=_document, buffers={"doc": _doc_ids((100, 90, 67))}),
    FlexCase("prefix_lm", 2, 4, 4, 100, 100, 32, mask=_prefix_lm),
    FlexCase("gqa", 2, 8, 2, 129, 129, 32, mask=_causal),
    FlexCase("padded", 1, 4, 4, 100, 100, 32, mask=_padded, buffers={"doc": _doc_ids((40, 35), pad=25)}),
    FlexCase("cross", 2, 4, 4, 100, 129, 32),
)
"""Every case of the suite (module docstring)."""

BY_NAME = {c.name: c for c in CASES}

__all__ = ["BY_NAME", "CASES", "FlexCase"]
