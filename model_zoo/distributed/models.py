"""The distributed scenarios' models, data and optimizer, shared by the ranks (:mod:`.scenarios`) and the
single-process CPU reference (:mod:`.reference`); the module docstring of :mod:`.scenarios` describes them."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS = 3
"""Optimizer steps per run (the issue: compare parameters after 3 optimizer steps)."""

BATCH, SEQ, D, H, N_BLOCKS = 8, 4, 8, 16, 2
LR, MOMENTUM = 0.1, 0.9
LLAMA_VOCAB, LLAMA_BATCH, LLAMA_SEQ = 64, 4, 8


class Block(nn.Module):
    """Residual MLP block ``x + fc2(gelu(fc1(norm(x))))`` on ``(..., D)`` inputs."""

    def __init__(self, d: int = D, h: int = H):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class TinyNet(nn.Module):
    """:data:`N_BLOCKS` :class:`Block` s in sequence; input and output ``(B, S, D)``."""

    def __init__(self, n_blocks: int = N_BLOCKS):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(n_blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class MatMLP(nn.Module):
    """``gelu(x @ w1) @ w2`` with ``w1: (D, H)``, ``w2: (H, D)``; input ``(N, D)``."""

    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(D, H) * 0.3)
        self.w2 = nn.Parameter(torch.randn(H, D) * 0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x @ self.w1) @ self.w2


def make_tinynet() -> TinyNet:
    """A :class:`TinyNet` with the scenarios' fixed initialisation (seed 0, CPU, fp32)."""
    torch.manual_seed(0)
    return TinyNet()


def make_matmlp() -> MatMLP:
    """A :class:`MatMLP` with the scenarios' fixed initialisation (seed 0, CPU, fp32)."""
    torch.manual_seed(0)
    return MatMLP()


def llama_config():
    """A 2-layer Llama config (hidden 32, 4 heads, 2 KV heads, vocab 64) with eager attention.

    Eager attention because SDPA takes a different kernel on CPU than on a PrivateUse1 device
    (``docs/architecture.md`` oracle notes; design notes section 4).
    """
    from transformers import LlamaConfig  # deferred: optional dependency

    config = LlamaConfig(
        vocab_size=LLAMA_VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        use_cache=False,
    )
    config._attn_implementation = "eager"
    return config


def make_llama():
    """A tiny ``LlamaForCausalLM`` from :func:`llama_config`, seed 0, CPU, fp32."""
    from transformers import LlamaForCausalLM  # deferred: optional dependency

    torch.manual_seed(0)
    return LlamaForCausalLM(llama_config())


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch of ``step``: input and target, both ``(BATCH, SEQ, D)`` fp32 on CPU."""
    gen = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(BATCH, SEQ, D, generator=gen)
    y = torch.randn(BATCH, SEQ, D, generator=gen)
    return x, y


def token_batch(step: int) -> torch.Tensor:
    """The global batch of token ids of ``step``: ``(LLAMA_BATCH, LLAMA_SEQ)`` int64 on CPU."""
    gen = torch.Generator().manual_seed(2000 + step)
    return torch.randint(0, LLAMA_VOCAB, (LLAMA_BATCH, LLAMA_SEQ), generator=gen)


def make_optimizer(params) -> torch.optim.Optimizer:
    """SGD with the scenarios' learning rate and momentum."""
    return torch.optim.SGD(params, lr=LR, momentum=MOMENTUM)


def chunk(t: torch.Tensor, index: int, count: int, dim: int = 0) -> torch.Tensor:
    """Part ``index`` of ``count`` equal parts of ``t`` along ``dim``.

    Raises:
        ValueError: ``t.shape[dim]`` is not divisible by ``count``.
    """
    if t.shape[dim] % count:
        raise ValueError(f"cannot split size {t.shape[dim]} of dim {dim} into {count} equal parts")
    return t.chunk(count, dim=dim)[index]


def full_params(model: nn.Module) -> dict[str, torch.Tensor]:
    """``{name: fp32 CPU tensor}`` of every parameter; DTensors are gathered (a collective: call on all ranks)."""
    from torch.distributed.tensor import DTensor  # deferred: start-up cost

    out = {}
    for name, param in model.named_parameters():
        data = param.detach()
        if isinstance(data, DTensor):
            data = data.full_tensor()
        out[name] = data.to("cpu", torch.float32).clone()
    return out
