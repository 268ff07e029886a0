"""Greedy generation on the device vs CPU: :func:`greedy`, :func:`compare_generation` and the ``generate``
check of random-weight zoo decoders (:func:`check_generate`).

Greedy tokens on the device must agree with CPU: exactly in float32; in bfloat16/float16 a differing
token is accepted only where CPU's top-2 logits are within the tie margin
(:func:`neuron_conformance.model_zoo.compare.tie_margin`). KV-cache and no-cache decoding must agree on the device under
the same rule.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from neuron_conformance.model_zoo.case import Case, cpu_reference
from neuron_conformance.model_zoo.compare import tie_margin, token_agreement
from neuron_conformance.model_zoo.dtypes import dtype_name
from neuron_conformance.model_zoo.measure import to_cpu
from neuron_conformance.model_zoo.registry import ModelSpec
from neuron_conformance.model_zoo.results import CheckResult

#: New tokens per greedy generation for random-weight zoo decoders (the trained fixture uses more).
GENERATE_TOKENS = 8


def greedy(
    model: torch.nn.Module, input_ids: torch.Tensor, new_tokens: int, *, use_cache: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy-decode exactly ``new_tokens`` tokens; return ``(tokens (B, new), logits (B, new, V))`` on CPU."""
    attention_mask = torch.ones_like(input_ids)
    with torch.no_grad():
        out = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            do_sample=False,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            use_cache=use_cache,
            output_logits=True,
            return_dict_in_generate=True,
            num_beams=1,
            pad_token_id=0,
            eos_token_id=None,
        )
    tokens = out.sequences[:, input_ids.shape[1] :]
    logits = torch.stack(out.logits, dim=1)
    return to_cpu(tokens), to_cpu(logits)


def compare_generation(
    model_id: str,
    dtype: torch.dtype,
    build: Callable[[str], torch.nn.Module],
    prompt: torch.Tensor,
    device,
    *,
    new_tokens: int,
    cache_key: tuple | None = None,
) -> CheckResult:
    """Greedy generation on the device vs CPU, and KV-cache vs no-cache on the device.

    ``build(device)`` returns the model (in ``dtype``) on that device; ``prompt`` is ``(B, T)``
    token ids on CPU. CPU greedy tokens are cached under ``cache_key`` when given.
    """

    def margin_for(logits: torch.Tensor) -> float | None:
        return None if dtype == torch.float32 else tie_margin(dtype, float(logits.abs().max()))

    def cpu_greedy() -> tuple[torch.Tensor, torch.Tensor]:
        return greedy(build("cpu"), prompt, new_tokens, use_cache=True)

    if cache_key is None:
        cpu_tokens, cpu_logits = cpu_greedy()
    else:
        cpu_tokens, cpu_logits = cpu_reference(("generate", cache_key, new_tokens), cpu_greedy)
    dev_model = build(device)
    dev_prompt = prompt.to(device)
    dev_tokens, dev_logits = greedy(dev_model, dev_prompt, new_tokens, use_cache=True)
    nocache_tokens, _ = greedy(dev_model, dev_prompt, new_tokens, use_cache=False)
    vs_cpu = token_agreement(dev_tokens, cpu_tokens, cpu_logits, margin=margin_for(cpu_logits))
    vs_cache = token_agreement(nocache_tokens, dev_tokens, dev_logits, margin=margin_for(dev_logits))
    metrics = {
        "rule": "greedy-margin" if dtype != torch.float32 else "greedy-exact",
        "new_tokens": new_tokens,
        "rows": vs_cpu["rows"],
        "agreeing_rows": vs_cpu["agreeing_rows"],
        "accepted_divergences": vs_cpu["accepted"],
        "cache_agreeing_rows": vs_cache["agreeing_rows"],
        "cache_accepted": vs_cache["accepted"],
        "token_agreement": float((dev_tokens == cpu_tokens).double().mean()),
    }
    problems = []
    if vs_cpu["unexplained"]:
        problems.append("greedy tokens differ from CPU: " + _describe_first(vs_cpu["first"]))
    if vs_cache["unexplained"]:
        problems.append("KV-cache and no-cache decoding differ on the device: " + _describe_first(vs_cache["first"]))
    passed = not problems
    return CheckResult(
        model_id,
        "generate",
        dtype,
        passed,
        None,
        None if passed else "numeric",
        "; ".join(problems),
        2 * vs_cpu["rows"],
        metrics,
    )


def _describe_first(first: list[tuple[int, int, int, int, float | None]]) -> str:
    row, step, exp, got, gap = first[0]
    gap_s = "n/a" if gap is None else f"{gap:.3g}"
    return f"row {row} step {step}: expected token {exp}, got {got} (reference logit gap {gap_s})"


def check_generate(
    model: str | ModelSpec, dtype, device, *, seed: int = 0, new_tokens: int = GENERATE_TOKENS
) -> CheckResult:
    """Generation check for a random-weight zoo decoder (see :func:`compare_generation`).

    The prompt is the first 8 tokens of the model's sample ``input_ids``.

    Raises:
        ValueError: the model does not support generate.
    """
    case = Case.make(model, dtype, seed)
    if not case.spec.supports_generate:
        raise ValueError(f"model {case.spec.id!r} does not support generate (supports_generate=False)")
    prompt = case.raw_inputs()["input_ids"][:, :8]
    return compare_generation(
        case.spec.id,
        case.dtype,
        lambda d: case.model(d),
        prompt,
        device,
        new_tokens=new_tokens,
        cache_key=(case.spec.id, dtype_name(case.dtype), seed),
    )
