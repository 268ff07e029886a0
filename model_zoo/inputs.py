"""Sample inputs for zoo models, and moving them between dtypes and devices.

Inputs are drawn on CPU from a fixed seed. Floating inputs (pixels, audio, mel features) are
drawn in float32 and cast per run with :func:`cast_inputs`; the float64 reference receives the
same values rounded to the dtype under test first (``x.to(dtype).to(float64)``), so input rounding
is not counted as device error. Integer inputs (token ids, masks, grids) are shared by every run.

Token ids are drawn from ``[5, vocab - 5)``: ids 0-4 are the pad/bos/eos/cls/sep ids set in
:mod:`neuron_conformance.model_zoo.registry`, and the top ids are the image/video placeholder tokens of the
multimodal entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

#: Batch size and text length used by every check.
BATCH = 2
SEQ = 16
#: Decoder length for encoder-decoder models.
DECODER_SEQ = 8

INPUT_KINDS = (
    "text",
    "seq2seq",
    "whisper",
    "image",
    "text_image",
    "siglip2_patches",
    "llava",
    "qwen2_vl",
    "paligemma",
    "idefics3",
    "audio",
)


def _ids(gen: torch.Generator, vocab: int, *shape: int) -> torch.Tensor:
    return torch.randint(5, vocab - 5, shape, generator=gen, dtype=torch.long)


def _text_vocab(config) -> int:
    text = getattr(config, "text_config", None)
    return int(getattr(text, "vocab_size", None) or config.vocab_size)


def make_inputs(spec, config, *, seed: int = 0, batch: int = BATCH, seq: int = SEQ) -> dict[str, Any]:
    """Draw the model inputs for ``spec`` (a :class:`neuron_conformance.model_zoo.registry.ModelSpec`) on CPU.

    Returns a dict of keyword arguments for ``model(**inputs)``: integer tensors of shape
    ``(batch, seq)`` for text, float32 tensors for pixels ``(batch, 3, 32, 32)``, audio
    ``(batch, 400)`` or mel features ``(batch, num_mel_bins, 2 * max_source_positions)``.

    Raises:
        ValueError: ``spec.inputs`` is not one of :data:`INPUT_KINDS`, or ``batch``/``seq`` < 1.
    """
    if batch < 1 or seq < 1:
        raise ValueError(f"make_inputs: batch and seq must be >= 1, got batch={batch}, seq={seq}")
    kind = spec.inputs
    gen = torch.Generator().manual_seed(seed)
    ones = lambda *s: torch.ones(*s, dtype=torch.long)  # noqa: E731
    if kind == "text":
        return {"input_ids": _ids(gen, config.vocab_size, batch, seq), "attention_mask": ones(batch, seq)}
    if kind == "seq2seq":
        return {
            "input_ids": _ids(gen, config.vocab_size, batch, seq),
            "attention_mask": ones(batch, seq),
            "decoder_input_ids": _ids(gen, config.vocab_size, batch, DECODER_SEQ),
        }
    if kind == "whisper":
        frames = 2 * config.max_source_positions
        return {
            "input_features": torch.randn(batch, config.num_mel_bins, frames, generator=gen),
            "decoder_input_ids": _ids(gen, config.vocab_size, batch, DECODER_SEQ),
        }
    if kind == "image":
        size = getattr(config, "image_size", 32)
        return {"pixel_values": torch.randn(batch, 3, size, size, generator=gen)}
    if kind == "text_image":
        v = config.vision_config
        return {
            "input_ids": _ids(gen, config.text_config.vocab_size, batch, seq),
            "pixel_values": torch.randn(batch, v.num_channels, v.image_size, v.image_size, generator=gen),
        }
    if kind == "siglip2_patches":
        n, p = config.num_patches, config.patch_size
        side = int(n**0.5)
        return {
            "pixel_values": torch.randn(batch, n, config.num_channels * p * p, generator=gen),
            "pixel_attention_mask": ones(batch, n),
            "spatial_shapes": torch.tensor([[side, side]] * batch, dtype=torch.long),
        }
    if kind in ("llava", "paligemma", "idefics3"):
        v = config.vision_config
        patches = (v.image_size // v.patch_size) ** 2
        if kind == "idefics3":
            n_img = patches // (config.scale_factor**2)
            token = config.image_token_id
        else:
            n_img = patches
            token = config.image_token_index
        text = _ids(gen, _text_vocab(config), batch, seq)
        ids = torch.cat([torch.full((batch, n_img), token, dtype=torch.long), text], dim=1)
        pixels = torch.randn(batch, 3, v.image_size, v.image_size, generator=gen)
        if kind == "idefics3":
            pixels = pixels.unsqueeze(1)  # (batch, num_images=1, C, H, W)
        return {"input_ids": ids, "attention_mask": ones(*ids.shape), "pixel_values": pixels}
    if kind == "qwen2_vl":
        v = config.vision_config
        grid_h = grid_w = 4
        patch_dim = v.in_channels * v.temporal_patch_size * v.patch_size**2
        n_img = grid_h * grid_w // (v.spatial_merge_size**2)
        text = _ids(gen, _text_vocab(config), batch, seq)
        img = torch.cat(
            [
                torch.full((batch, 1), config.vision_start_token_id, dtype=torch.long),
                torch.full((batch, n_img), config.image_token_id, dtype=torch.long),
                torch.full((batch, 1), config.vision_end_token_id, dtype=torch.long),
            ],
            dim=1,
        )
        ids = torch.cat([img, text], dim=1)
        mm = torch.zeros_like(ids, dtype=torch.int32)
        mm[:, 1 : 1 + n_img] = 1
        return {
            "input_ids": ids,
            "attention_mask": ones(*ids.shape),
            "pixel_values": torch.randn(batch * grid_h * grid_w, patch_dim, generator=gen),
            "image_grid_thw": torch.tensor([[1, grid_h, grid_w]] * batch, dtype=torch.long),
            "mm_token_type_ids": mm,
        }
    if kind == "audio":
        return {"input_values": torch.randn(batch, 400, generator=gen)}
    raise ValueError(f"make_inputs: spec {spec.id!r} has inputs={kind!r}; known kinds: {INPUT_KINDS}")


def cast_inputs(
    inputs: Mapping[str, Any], *, dtype: torch.dtype, device: torch.device | str = "cpu", via: torch.dtype | None = None
) -> dict[str, Any]:
    """Copy ``inputs`` to ``device``, casting floating tensors to ``dtype``.

    ``via`` rounds floating tensors through another dtype first: the float64 reference for a
    bfloat16 run uses ``via=torch.bfloat16, dtype=torch.float64``. Integer tensors keep their
    dtype; non-tensors are passed through.
    """
    out: dict[str, Any] = {}
    for key, value in inputs.items():
        if isinstance(value, torch.Tensor):
            if value.is_floating_point():
                if via is not None:
                    value = value.to(via)
                value = value.to(dtype)
            out[key] = value.to(device)
        else:
            out[key] = value
    return out
