"""Generation modes of the zoo's random-weight decoders on the device vs CPU: sampling (default and explicit
generator), beam search, beam sampling, continuing from a returned cache, static and dynamic cache classes
(:mod:`neuron_conformance.model_zoo.generation_modes`). One test per model x dtype x mode, id
``<model>-<dtype>-generate-<mode>``, recorded with ``op=<model>``, ``variant=generate-<mode>``."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from neuron_conformance.model_zoo import generation_modes as gm  # noqa: E402
from neuron_conformance.model_zoo.case import Case  # noqa: E402
from neuron_conformance.model_zoo.conftest import zoo_dtypes  # noqa: E402
from neuron_conformance.model_zoo.dtypes import dtype_name  # noqa: E402


def pytest_generate_tests(metafunc):
    if {"gen_model", "gen_dtype", "gen_mode"} <= set(metafunc.fixturenames):
        params = []
        for model in gm.MODELS:
            for dtype in zoo_dtypes(metafunc.config):
                for mode in gm.modes_of(model):
                    v = gm.variant(mode)
                    marks = [
                        pytest.mark.xdist_group(model),
                        pytest.mark.conformance(op=model, dtype=dtype, variant=v, suite="model_zoo", kind="model"),
                    ]
                    if mode in gm.CAPABILITY:
                        marks.append(pytest.mark.capability(gm.CAPABILITY[mode]))
                    if (model, dtype, mode) in gm.CI:
                        marks.append(pytest.mark.model_zoo_ci)
                    params.append(pytest.param(model, dtype, mode, id=f"{model}-{dtype}-{v}", marks=marks))
        metafunc.parametrize(("gen_model", "gen_dtype", "gen_mode"), params)


def test_generation_mode(gen_model, gen_dtype, gen_mode, device, device_profile, conformance_record):
    conformance_record.update(
        suite="model_zoo", kind="model", op=gen_model, variant=gm.variant(gen_mode), dtype=gen_dtype
    )
    case = Case.make(gen_model, gen_dtype)
    prompt = case.raw_inputs()["input_ids"][:, :8]
    result = gm.compare_mode(
        gen_mode,
        gen_model,
        case.dtype,
        lambda d: case.model(d),
        prompt,
        device,
        cache_key=(gen_model, dtype_name(case.dtype), case.seed),
        mirrors_cpu=device_profile.mirrors_cpu,
    )
    conformance_record.update(**result.record_fields(), metrics=result.metrics)
    if result.left_out is not None:
        pytest.skip(result.left_out)
    result.raise_if_failed()
