"""Round trips of device models against CPU: ``save_pretrained``/``from_pretrained``, ``torch.save``/
``torch.load(map_location=...)``, building under ``torch.device(...)``, gradient checkpointing
(:mod:`neuron_conformance.model_zoo.roundtrip`), for a decoder and an encoder in every zoo dtype."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from neuron_conformance.model_zoo.conftest import model_check_params  # noqa: E402
from neuron_conformance.model_zoo.roundtrip import CHECK_FUNCTIONS, CHECKS  # noqa: E402

MODELS = ("llama", "bert")
"""Entries the round trips run on: a causal decoder with rotary buffers and an encoder with tied embeddings."""


def pytest_generate_tests(metafunc):
    if {"roundtrip_model", "roundtrip_dtype", "roundtrip_check"} <= set(metafunc.fixturenames):
        metafunc.parametrize(
            ("roundtrip_model", "roundtrip_dtype", "roundtrip_check"),
            model_check_params(metafunc.config, MODELS, CHECKS),
        )


def test_roundtrip(roundtrip_model, roundtrip_dtype, roundtrip_check, device, conformance_record):
    conformance_record.update(
        suite="model_zoo", kind="model", op=roundtrip_model, variant=roundtrip_check, dtype=roundtrip_dtype
    )
    result = CHECK_FUNCTIONS[roundtrip_check](roundtrip_model, roundtrip_dtype, device)
    conformance_record.update(**result.record_fields(), metrics=result.metrics)
    result.raise_if_failed()
