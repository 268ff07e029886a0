"""Attention implementations as a model-zoo axis: which a model supports, whether the device can run one,
and the bound within which an implementation's result must match eager attention's.

transformers runs a model's attention through the implementation named by ``attn_implementation``:
``eager`` (matmul, softmax in float32, matmul, written out in the model file), ``sdpa``
(``torch.nn.functional.scaled_dot_product_attention``; on CPU the flash kernel or the math path, chosen by
``_fused_sdp_choice``) or ``flex_attention`` (``torch.nn.attention.flex_attention``, compiled by
transformers). The zoo's ``train``, ``generate``, ``router`` and ``compile`` checks keep eager; ``forward``
and ``backward`` run in every implementation the model supports (:data:`CHECKS`), each judged twice:
against CPU running the same implementation (the oracle, fp64 arbitration) and against CPU running eager,
within :func:`versus_eager_atol`.

Which implementations an entry supports is :meth:`neuron_conformance.model_zoo.registry.ModelSpec.attention_implementations`
(transformers 5.24's ``_supports_sdpa`` / ``_supports_flex_attn`` class flags, checked by the registry
tests). Whether the device can run one is :func:`device_refusal`.
"""

from __future__ import annotations

import dataclasses

import torch

from neuron_conformance.conformance.verdict.oracle import arbitration_k
from neuron_conformance.model_zoo.registry import ModelSpec

IMPLEMENTATIONS = ("eager", "sdpa", "flex_attention")
"""transformers' ``attn_implementation`` names the zoo checks, in test-id order."""

DEFAULT = "eager"
"""The implementation every registry entry is built with and every check but :data:`CHECKS` uses."""

CHECKS = ("forward", "backward")
"""Checks that run once per supported implementation (the others run with :data:`DEFAULT` only)."""

CI_MODELS = {"sdpa": frozenset({"llama"})}
"""Implementation -> entries whose tests of it join the CI subset (``model_zoo_ci``), besides eager.

One model keeps the CI subset's growth small (llama's sdpa forward + backward in three dtypes: 6 tests)."""


def test_id_suffix(implementation: str) -> str:
    """``""`` for eager (test ids of the default stay ``llama-float32-forward``), else ``"-sdpa"``."""
    return "" if implementation == DEFAULT else f"-{implementation}"


def variant(check: str, implementation: str) -> str:
    """The record's ``variant``: ``"forward"`` for eager, ``"forward-sdpa"`` otherwise (the manifest key)."""
    return check + test_id_suffix(implementation)


def with_implementation(spec: ModelSpec, implementation: str | None) -> ModelSpec:
    """``spec`` built with ``implementation`` (None: unchanged).

    Raises:
        ValueError: ``implementation`` is not one ``spec`` supports
            (:meth:`~neuron_conformance.model_zoo.registry.ModelSpec.attention_implementations`).
    """
    if implementation is None or implementation == spec.attn_implementation:
        return spec
    supported = spec.attention_implementations()
    if implementation not in supported:
        raise ValueError(
            f"model {spec.id!r} does not support attn_implementation={implementation!r}; "
            f"it supports {supported or 'none (no attention)'}"
        )
    return dataclasses.replace(spec, attn_implementation=implementation)


def reference_key(check: str, spec: ModelSpec) -> str:
    """The ``what`` of :func:`neuron_conformance.model_zoo.case.reference` for ``check`` under ``spec``'s implementation: the
    eager key is the check name, so eager references stay shared with the other checks."""
    impl = spec.attn_implementation
    return check if impl in (None, DEFAULT) else f"{check}@{impl}"


_FLEX_DEVICES = frozenset({"cuda", "cpu", "xpu", "hpu", "mps"})
"""Device types torch 2.13's eager FlexAttention accepts (``_validate_device`` in
torch/nn/attention/flex_attention.py); any other type raises ValueError, even under Dynamo."""

_FLEX_NO_BACKWARD = frozenset({"cpu", "mps"})
"""Device types on which torch 2.13's FlexAttention raises NotImplementedError for inputs requiring grad
(same function)."""


def device_refusal(implementation: str, check: str, device: torch.device | str) -> str | None:
    """Why ``check`` cannot run ``implementation`` on ``device`` (a sentence starting ``unsupported:`` or
    ``no CPU reference:``), or None when it can.

    FlexAttention is refused by torch itself, not by the backend: torch 2.13 accepts only the device types
    of :data:`_FLEX_DEVICES`, and has no FlexAttention backward on CPU, so a flex ``backward`` has no CPU
    reference on any device. eager and sdpa are never refused (a device that fails them fails the check).
    """
    if implementation != "flex_attention":
        return None
    kind = device.type if isinstance(device, torch.device) else str(device).split(":", 1)[0]
    if kind not in _FLEX_DEVICES:
        return (
            f"unsupported: torch {torch.__version__}'s eager FlexAttention accepts only "
            f"{', '.join(sorted(_FLEX_DEVICES))} tensors, not {kind}"
        )
    if check == "backward":
        return (
            f"no CPU reference: torch {torch.__version__}'s FlexAttention has no backward on "
            f"{', '.join(sorted(_FLEX_NO_BACKWARD))}"
        )
    return None


def _max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().nan_to_num(0.0).max()) if a.numel() else 0.0


def versus_eager_atol(
    cpu_impl: torch.Tensor, ref_impl: torch.Tensor, cpu_eager: torch.Tensor, ref_eager: torch.Tensor, dtype: torch.dtype
) -> float:
    """Absolute bound on ``|device result of the implementation - CPU eager result|`` (a float, in the
    tensor's units), elementwise.

    The two implementations sum in different orders (flash: blocked online softmax with rescaling and
    float32 accumulation; eager: one float32 softmax, the products rounded to the dtype in between), so
    they differ by rounding even on one machine. By the triangle inequality through the float64 result
    ``r`` (both implementations compute the same function; ``|r_impl - r_eager|`` is float64 noise and is
    added as measured): ``|dev - cpu_eager| <= |dev - r| + |r - cpu_eager|``. The second term is CPU
    eager's measured error ``E_eager = max|cpu_eager - ref_eager|``. The first is what the
    same-implementation check accepts: the device may be ``k`` times further from float64 than CPU's
    own run of the implementation (``k`` = :func:`neuron_conformance.conformance.verdict.oracle.arbitration_k`, the fp64 rule's
    factor), ``k * E_impl``. So the bound is ``k * E_impl + E_eager + max|ref_impl - ref_eager|``, every
    term measured on this model, dtype and input; nothing is guessed.
    """
    return (
        arbitration_k(dtype) * _max_abs(cpu_impl, ref_impl)
        + _max_abs(cpu_eager, ref_eager)
        + _max_abs(ref_impl, ref_eager)
    )
