"""Loading with ``device_map`` onto the device, with CPU and disk offload and with ``"auto"``, against CPU
(:mod:`neuron_conformance.model_zoo.offload`), for a decoder and an encoder in every zoo dtype. A check that
accelerate or safetensors cannot serve on the device is recorded as not claimed (``metrics.refused``) and
skipped."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from neuron_conformance.model_zoo.conftest import model_check_params  # noqa: E402
from neuron_conformance.model_zoo.offload import CHECKS, Refused, check_device_map  # noqa: E402

MODELS = ("llama", "bert")
"""Entries the checks run on: a causal decoder (``model.layers``) and an encoder with tied embeddings
(``bert.encoder.layer``)."""


def pytest_generate_tests(metafunc):
    if {"offload_model", "offload_dtype", "offload_check"} <= set(metafunc.fixturenames):
        metafunc.parametrize(
            ("offload_model", "offload_dtype", "offload_check"), model_check_params(metafunc.config, MODELS, CHECKS)
        )


def test_device_map(offload_model, offload_dtype, offload_check, device, conformance_record):
    conformance_record.update(
        suite="model_zoo", kind="model", op=offload_model, variant=offload_check, dtype=offload_dtype
    )
    try:
        result = check_device_map(offload_model, offload_dtype, device, offload_check)
    except Refused as refusal:
        conformance_record.update(metrics={"refused": str(refusal)})
        pytest.skip(str(refusal))
    conformance_record.update(**result.record_fields(), metrics=result.metrics)
    result.raise_if_failed()
