"""pytest configuration of the model zoo: markers, parametrization and quiet transformers logging.

Tests that take ``model_id``, ``dtype_name`` and ``check`` are parametrized over every registry
entry x the selected floating dtypes (``--conformance-dtypes``; the zoo runs ``float32``, ``bfloat16`` and
``float16``) x the checks that apply to the entry. Each case carries:

- ``xdist_group(<model id>)``: with ``--dist loadgroup`` a model's tests stay on one worker, so the
  per-worker cache of CPU/float64 references (:func:`neuron_conformance.model_zoo.case.reference`) is reused;
- an attention implementation (``attn_implementation``: ``eager``, ``sdpa``, ``flex_attention`` or None
  without attention, :mod:`neuron_conformance.model_zoo.attention`), in the test id after the check when not eager;
- ``conformance(op=..., dtype=..., variant=..., suite="model_zoo", kind="model")``: the identity an
  expected-failure manifest entry matches;
- ``model_zoo_ci`` for the bounded subset that CI runs (``pytest model_zoo -m model_zoo_ci``): the CI
  entries in eager (their compile checks only where :data:`neuron_conformance.model_zoo.registry.COMPILE_CI` says),
  plus :data:`neuron_conformance.model_zoo.attention.CI_MODELS` in their other implementations;
- ``capability("compile")`` on the compile checks (a backend that does not claim ``compile`` counts them
  ``not-claimed``).
"""

from __future__ import annotations

import logging
import os
import warnings

import pytest

from neuron_conformance.conformance.pytest_plugin.options import selected_dtypes
from neuron_conformance.model_zoo import attention
from neuron_conformance.model_zoo.registry import COMPILE_CI, REGISTRY

COMPILE_CHECKS = ("compile", "compile_train")
"""The checks that need the ``compile`` capability."""

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
    """The zoo's dtypes among those selected with ``--conformance-dtypes`` (all three when none is selected)."""
    try:
        chosen = selected_dtypes(config)
    except Exception:  # plugin not loaded (e.g. -p no:conformance): run every zoo dtype
        return ZOO_DTYPES
    return tuple(d for d in ZOO_DTYPES if d in chosen)


def model_check_params(config: pytest.Config, models, checks) -> list:
    """``pytest.param(model, dtype, check)`` for every model x zoo dtype x check, id ``<model>-<dtype>-<check>``,
    each marked with its record identity (``suite="model_zoo"``, ``kind="model"``, ``op`` the model,
    ``variant`` the check) and grouped per model for xdist (one worker builds a model once)."""
    return [
        pytest.param(
            m,
            d,
            c,
            id=f"{m}-{d}-{c}",
            marks=[
                pytest.mark.xdist_group(m),
                pytest.mark.conformance(op=m, dtype=d, variant=c, suite="model_zoo", kind="model"),
            ],
        )
        for m in models
        for d in zoo_dtypes(config)
        for c in checks
    ]


def _cases(spec):
    """``(check, attention implementation)`` pairs of one entry: every check in eager (or without
    attention), then :data:`neuron_conformance.model_zoo.attention.CHECKS` in each other implementation the entry supports
    (flex ``backward`` left out: torch 2.13's FlexAttention has no CPU backward, so no reference exists)."""
    default = attention.DEFAULT if spec.attn_implementation else None
    pairs = [(check, default) for check in spec.checks()]
    for impl in spec.attention_implementations():
        if impl != attention.DEFAULT:
            pairs += [
                (check, impl) for check in attention.CHECKS if not (impl == "flex_attention" and check == "backward")
            ]
    return pairs


def _in_ci(spec, dtype: str, check: str, impl) -> bool:
    """Whether a case belongs to the CI subset: a CI entry's eager checks (its compile checks only as
    :data:`neuron_conformance.model_zoo.registry.COMPILE_CI` lists them) and
    :data:`neuron_conformance.model_zoo.attention.CI_MODELS` in their other implementations."""
    if not spec.ci:
        return False
    if check in COMPILE_CHECKS:
        return dtype in COMPILE_CI.get((spec.id, check), ())
    return impl in (None, attention.DEFAULT) or spec.id in attention.CI_MODELS.get(impl, ())


def model_params(config: pytest.Config, *, with_attention: bool = True) -> list:
    """``pytest.param(model_id, dtype_name, check, attn_implementation)`` for every registry entry x dtype x
    (check, implementation) (:func:`_cases`); without ``with_attention`` the eager ``(model_id, dtype_name,
    check)`` triples only. Test ids: ``llama-float32-forward`` (eager), ``llama-float32-forward-sdpa``."""
    params = []
    for spec in REGISTRY.values():
        for dtype in zoo_dtypes(config):
            for check, impl in _cases(spec):
                if impl not in (None, attention.DEFAULT) and not with_attention:
                    continue
                variant = attention.variant(check, impl or attention.DEFAULT)
                marks = [
                    pytest.mark.xdist_group(spec.id),
                    pytest.mark.conformance(op=spec.id, dtype=dtype, variant=variant, suite="model_zoo", kind="model"),
                ]
                if _in_ci(spec, dtype, check, impl):
                    marks.append(pytest.mark.model_zoo_ci)
                if check in COMPILE_CHECKS:
                    marks.append(pytest.mark.capability("compile"))
                values = (spec.id, dtype, check, impl) if with_attention else (spec.id, dtype, check)
                params.append(pytest.param(*values, marks=marks, id=f"{spec.id}-{dtype}-{variant}"))
    return params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = ("model_id", "dtype_name", "check", "attn_implementation")
    if set(names) <= set(metafunc.fixturenames):
        metafunc.parametrize(names, model_params(metafunc.config))
    elif set(names[:3]) <= set(metafunc.fixturenames):
        metafunc.parametrize(names[:3], model_params(metafunc.config, with_attention=False))
