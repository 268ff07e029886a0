"""pytest configuration of the model zoo: markers, parametrization and quiet transformers logging.

Tests that take ``model_id``, ``dtype_name`` and ``check`` are parametrized over every registry
entry x the selected floating dtypes (``--dtypes``; the zoo runs ``float32``, ``bfloat16`` and
``float16``) x the checks that apply to the entry. Each case carries:

- ``xdist_group(<model id>)``: with ``--dist loadgroup`` a model's tests stay on one worker, so the
  per-worker cache of CPU/float64 references (:func:`model_zoo.case.reference`) is reused;
- ``conformance(op=..., dtype=..., variant=..., suite="model_zoo", kind="model")``: the identity an
  expected-failure manifest entry matches;
- ``model_zoo_ci`` for the bounded subset that CI runs (``pytest model_zoo -m model_zoo_ci``).
"""

from __future__ import annotations

import logging
import os
import warnings

import pytest

from conformance.options import selected_dtypes
from model_zoo.registry import REGISTRY

ZOO_DTYPES = ("float32", "bfloat16", "float16")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "model_zoo_ci: the bounded model-zoo subset CI runs")
    config.addinivalue_line("markers", "model_zoo_pretrained: needs the optional pretrained-weights package")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import transformers

        transformers.logging.set_verbosity_error()
    except ImportError:  # the zoo's test modules skip themselves without transformers
        pass
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module="transformers")


def zoo_dtypes(config: pytest.Config) -> tuple[str, ...]:
    """The zoo's dtypes among those selected with ``--dtypes`` (all three when none is selected)."""
    try:
        chosen = selected_dtypes(config)
    except Exception:  # plugin not loaded (e.g. -p no:conformance): run every zoo dtype
        return ZOO_DTYPES
    return tuple(d for d in ZOO_DTYPES if d in chosen)


def model_params(config: pytest.Config) -> list:
    """``pytest.param(model_id, dtype_name, check)`` for every registry entry x dtype x check."""
    params = []
    for spec in REGISTRY.values():
        for dtype in zoo_dtypes(config):
            for check in spec.checks():
                marks = [
                    pytest.mark.xdist_group(spec.id),
                    pytest.mark.conformance(op=spec.id, dtype=dtype, variant=check, suite="model_zoo",
                                            kind="model"),
                ]
                if spec.ci:
                    marks.append(pytest.mark.model_zoo_ci)
                if check == "compile":
                    marks.append(pytest.mark.capability("compile"))
                params.append(pytest.param(spec.id, dtype, check, marks=marks, id=f"{spec.id}-{dtype}-{check}"))
    return params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if {"model_id", "dtype_name", "check"} <= set(metafunc.fixturenames):
        metafunc.parametrize(("model_id", "dtype_name", "check"), model_params(metafunc.config))
