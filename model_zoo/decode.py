"""Running ``generate`` for the generation-mode checks: one call with everything recorded, a CPU replay of a
token path, and the beam-search decision gaps.

Facts used (transformers 5.24, ``transformers/generation/utils.py``):

- ``generate`` returns raw logits (``output_logits``) cast to float32, and the scores after the logits
  processors (``output_scores``): for sampling ``temperature`` then ``top_k`` (``_get_logits_processor``); for
  beam search the processed ``log_softmax``;
- ``past_key_values`` is deprecated for ``cache`` (``@deprecate_kwarg(..., new_name="cache")``), and the
  output field is ``cache``; releases before the rename (5.17) name both ``past_key_values``, so the
  returned cache is read from either field and handed back under the name it came in
  (:data:`CACHE_FIELDS`, :attr:`Decoded.cache_field`);
- with a compilable cache (``cache_implementation="static"``) ``generate`` compiles the forward with
  ``torch.compile`` (backend ``inductor``) on device types ``cuda``, ``xpu``, ``neuron`` and ``tpu``
  (``_valid_auto_compile_criteria``): ``disable_compile=True`` keeps the eager path (the ``static`` check runs
  eager; compilation is the ``compile`` check's and the ``inductor`` capability's matter);
- beam search keeps, per step, the ``num_beams`` best of the ``2 * num_beams`` candidates
  ``_get_top_k_continuations`` returns sorted (``topk_log_probs``); :func:`run` records them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from neuron_conformance.model_zoo.measure import to_cpu

SAMPLING = {"temperature": 0.9, "top_k": 20, "top_p": 1.0}
"""Sampling settings of every sampled mode: a temperature (so that ``TemperatureLogitsWarper`` runs) and a
top-k filter (``TopKLogitsWarper``, which calls ``torch.topk``); ``top_p=1.0`` turns nucleus filtering off,
whose boundary depends on a cumulative sum and has no logit-gap tie rule."""


@dataclasses.dataclass
class Decoded:
    """One ``generate`` call's results, on CPU.

    Attributes:
        tokens: ``(rows, new)`` int64 new tokens (rows = batch x returned sequences).
        logits: ``(rows', new, vocab)`` float32 raw logits (rows' = batch x beams for beam search), or None.
        scores: same shape, the processed scores (``-inf`` where filtered), or None.
        sequences_scores: ``(rows,)`` float32 beam scores, or None outside beam search.
        beam_gaps: ``(batch, steps)`` float64: per step, the accumulated score of the last kept candidate
            minus the first pruned one (beam search only, else None).
        beam_scale: the largest ``|accumulated score|`` seen (beam search only, else 0).
        cache: the returned cache object (on the device), or None.
        cache_field: the output field it came in (``cache`` or ``past_key_values``), which is also the
            ``generate`` argument that takes it back; None without a cache.
    """

    tokens: torch.Tensor
    logits: torch.Tensor | None = None
    scores: torch.Tensor | None = None
    sequences_scores: torch.Tensor | None = None
    beam_gaps: torch.Tensor | None = None
    beam_scale: float = 0.0
    cache: Any = None
    cache_field: str | None = None


CACHE_FIELDS = ("cache", "past_key_values")
"""The generate output's cache field, newest name first (``past_key_values`` before transformers renamed it)."""


def cache_argument() -> str:
    """The name ``generate`` takes a cache under in the running transformers: ``cache`` where its output has
    a ``cache`` field, else ``past_key_values``."""
    from transformers.generation.utils import GenerateDecoderOnlyOutput  # deferred: optional dependency

    return "cache" if "cache" in getattr(GenerateDecoderOnlyOutput, "__dataclass_fields__", {}) else "past_key_values"


def returned_cache(out) -> tuple[str | None, Any]:
    """``(field, cache)`` of a ``generate`` output, from the first of :data:`CACHE_FIELDS` it fills."""
    for field in CACHE_FIELDS:
        value = getattr(out, field, None)
        if value is not None:
            return field, value
    return None, None


def _stack(steps) -> torch.Tensor | None:
    return None if steps is None else to_cpu(torch.stack(tuple(steps), dim=1))


def run(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    new_tokens: int,
    *,
    seed: int | None = None,
    record_gaps: bool = False,
    keep_cache: bool = False,
    **kwargs,
) -> Decoded:
    """``model.generate`` for exactly ``new_tokens`` tokens with logits and scores recorded.

    ``input_ids`` is ``(batch, T)`` on the model's device (no padding: the attention mask is all ones);
    ``seed`` seeds every generator with ``torch.manual_seed`` just before the call (the CPU's and each
    registered device module's, ``torch/random.py``); ``kwargs`` go to ``generate`` (``do_sample``,
    ``num_beams``, ``cache``...). ``record_gaps`` wraps the model's ``_get_top_k_continuations`` for this call to
    fill :attr:`Decoded.beam_gaps`. EOS is off so every row runs the full length.
    """
    settings = dict(do_sample=False, num_beams=1, use_cache=True, pad_token_id=0, eos_token_id=None)
    settings.update(kwargs)
    gaps: list[torch.Tensor] = []
    scale = [0.0]
    beams = int(settings.get("num_beams", 1))
    if record_gaps:
        original = model._get_top_k_continuations

        def recording(*args, **kw):
            out = original(*args, **kw)
            top = out[0].detach().to("cpu", torch.float64)  # (batch, 2 * beams), sorted descending
            finite = top[torch.isfinite(top) & (top > -1e8)]
            scale[0] = max(scale[0], float(finite.abs().max()) if finite.numel() else 0.0)
            gaps.append(top[:, beams - 1] - top[:, beams])
            return out

        model._get_top_k_continuations = recording
    try:
        if seed is not None:
            torch.manual_seed(seed)
        with torch.no_grad():
            out = model.generate(
                input_ids=input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                output_logits=True,
                output_scores=True,
                return_dict_in_generate=True,
                **settings,
            )
    finally:
        if record_gaps:
            del model._get_top_k_continuations
    seq_scores = getattr(out, "sequences_scores", None)
    field, cache = returned_cache(out) if keep_cache else (None, None)
    return Decoded(
        tokens=to_cpu(out.sequences[:, input_ids.shape[1] :]),
        logits=_stack(out.logits),
        scores=_stack(out.scores),
        sequences_scores=None if seq_scores is None else to_cpu(seq_scores),
        beam_gaps=torch.stack(gaps, dim=1) if gaps else None,
        beam_scale=scale[0],
        cache=cache,
        cache_field=field,
    )


class _ForcedPath:
    """A logits processor that makes greedy decoding follow ``tokens`` (``(rows, new)``): at step ``s``
    every score but ``tokens[:, s]``'s is ``-inf``. The raw logits ``generate`` records are untouched."""

    def __init__(self, tokens: torch.Tensor, prompt_len: int) -> None:
        self.tokens = tokens
        self.prompt_len = prompt_len

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        step = input_ids.shape[1] - self.prompt_len
        forced = torch.full_like(scores, -float("inf"))
        column = self.tokens[:, step].to(scores.device)[:, None]
        return forced.scatter(1, column, torch.zeros_like(column, dtype=scores.dtype))


def replay(model: torch.nn.Module, input_ids: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Raw logits ``(rows, new, vocab)`` (float32, CPU) of ``model`` decoding the given path ``tokens``.

    ``input_ids`` ``(rows, T)`` and ``tokens`` ``(rows, new)`` are on CPU. The replay runs ``generate``'s own
    incremental decoding with a KV cache (greedy, with a processor that forces each token), so it computes
    what a device computed along the same path. This is how a device's *sampled* path is compared with CPU:
    the device's random stream may differ from CPU's (a vendor's counter-based generator), but the logits it
    sampled from must still be CPU's.

    Raises:
        RuntimeError: the replay did not follow ``tokens`` (a logits processor of the model overrode the path).
    """
    from transformers import LogitsProcessorList  # deferred: optional dependency

    forced = _ForcedPath(tokens, input_ids.shape[1])
    out = run(
        model,
        input_ids.to(next(model.parameters()).device),
        tokens.shape[1],
        logits_processor=LogitsProcessorList([forced]),
    )
    if not torch.equal(out.tokens, tokens):
        raise RuntimeError("replay: generate did not follow the forced token path")
    return out.logits


def warp(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tempered, processed)``: :data:`SAMPLING`'s temperature and top-k applied on CPU to raw logits
    ``(positions, vocab)`` with transformers' own ``TemperatureLogitsWarper`` and ``TopKLogitsWarper``."""
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper  # deferred: optional dependency

    tempered = TemperatureLogitsWarper(SAMPLING["temperature"])(None, logits.float())
    return tempered, TopKLogitsWarper(SAMPLING["top_k"])(None, tempered)


class ExplicitGenerator(torch.overrides.TorchFunctionMode):
    """Passes ``generator`` to every ``torch.multinomial`` call that has none (``generate`` passes none): the
    sampling path then draws from an explicit ``torch.Generator(device=<type>)``."""

    def __init__(self, generator: torch.Generator) -> None:
        super().__init__()
        self.generator = generator

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func is torch.multinomial and kwargs.get("generator") is None:
            kwargs["generator"] = self.generator
        return func(*args, **kwargs)
