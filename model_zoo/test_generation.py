"""Greedy generation from the trained fixture decoder on the device vs CPU.

The fixture (``model_zoo/fixtures/tiny_decoder.*``, made by ``python -m neuron_conformance.model_zoo.train_fixture``)
has memorised a short text, so its next-token choices are confident and token agreement over
``NEW_TOKENS`` steps is meaningful: exact in float32; in bfloat16/float16 a differing token is
accepted only where CPU's top-2 logits are within the tie margin. KV-cache and no-cache decoding
must agree on the device.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from neuron_conformance.model_zoo import generation_modes as gm  # noqa: E402
from neuron_conformance.model_zoo.conftest import zoo_dtypes  # noqa: E402
from neuron_conformance.model_zoo.dtypes import as_dtype  # noqa: E402
from neuron_conformance.model_zoo.generation import compare_generation  # noqa: E402
from neuron_conformance.model_zoo.train_fixture import encode, load_fixture  # noqa: E402

MODEL_ID = "tiny_decoder_trained"
NEW_TOKENS = 32
PROMPTS = ("the harness runs ", "greedy decoding ", "a device backend ", "bfloat16 keeps ")


def prompt_ids(vocab):
    """``(len(PROMPTS), T)`` token ids; prompts are cut to the shortest so no padding is needed."""
    rows = [encode(p, vocab) for p in PROMPTS]
    width = min(len(r) for r in rows)
    return torch.stack([r[:width] for r in rows])


@pytest.fixture(scope="module")
def fixture_vocab():
    return load_fixture()[1]


def _params():
    return [
        pytest.param(
            d,
            id=d,
            marks=pytest.mark.conformance(op=MODEL_ID, dtype=d, variant="generate", suite="model_zoo", kind="model"),
        )
        for d in ("float32", "bfloat16", "float16")
    ]


@pytest.mark.model_zoo_ci
@pytest.mark.xdist_group(MODEL_ID)
@pytest.mark.parametrize("dtype_name", _params())
def test_generate_trained(dtype_name, device, conformance_record, fixture_vocab, request):
    if dtype_name not in zoo_dtypes(request.config):
        pytest.skip(f"{dtype_name} not selected with --conformance-dtypes")
    conformance_record.update(suite="model_zoo", kind="model", op=MODEL_ID, variant="generate", dtype=dtype_name)
    dtype = as_dtype(dtype_name)
    result = compare_generation(
        MODEL_ID,
        dtype,
        lambda d: load_fixture(dtype, d)[0],
        prompt_ids(fixture_vocab),
        device,
        new_tokens=NEW_TOKENS,
        cache_key=(MODEL_ID, dtype_name),
    )
    conformance_record.update(**result.record_fields(), metrics=result.metrics)
    result.raise_if_failed()


def _mode_params():
    return [
        pytest.param(
            d,
            m,
            id=f"{d}-{gm.variant(m)}",
            marks=[
                pytest.mark.conformance(op=MODEL_ID, dtype=d, variant=gm.variant(m), suite="model_zoo", kind="model"),
                *([pytest.mark.capability(gm.CAPABILITY[m])] if m in gm.CAPABILITY else []),
                *([pytest.mark.model_zoo_ci] if (d, m) in FIXTURE_CI else []),
            ],
        )
        for d in ("float32", "bfloat16", "float16")
        for m in gm.MODES
    ]


FIXTURE_CI = frozenset({("float32", "continue")})
"""``(dtype, mode)`` of the trained fixture in the ``model_zoo_ci`` subset."""


@pytest.mark.xdist_group(MODEL_ID)
@pytest.mark.parametrize(("dtype_name", "mode"), _mode_params())
def test_generation_mode_trained(dtype_name, mode, device, device_profile, conformance_record, fixture_vocab, request):
    """The generation modes (:mod:`neuron_conformance.model_zoo.generation_modes`) on the trained fixture, whose
    confident choices make beam search and the cache modes agree with CPU token for token."""
    if dtype_name not in zoo_dtypes(request.config):
        pytest.skip(f"{dtype_name} not selected with --conformance-dtypes")
    variant = gm.variant(mode)
    conformance_record.update(suite="model_zoo", kind="model", op=MODEL_ID, variant=variant, dtype=dtype_name)
    dtype = as_dtype(dtype_name)
    result = gm.compare_mode(
        mode,
        MODEL_ID,
        dtype,
        lambda d: load_fixture(dtype, d)[0],
        prompt_ids(fixture_vocab),
        device,
        cache_key=(MODEL_ID, dtype_name),
        mirrors_cpu=device_profile.mirrors_cpu,
    )
    conformance_record.update(**result.record_fields(), metrics=result.metrics)
    result.raise_if_failed()
