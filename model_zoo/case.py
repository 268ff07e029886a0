"""A model check's case (model, dtype, seed) and the per-process cache of its inputs and CPU references.

Every check builds the same model three times from the same seed: on the device in the dtype under
test, on CPU in that dtype (the *expected* result) and on CPU in float64 from the weights rounded to
that dtype (the *reference64* that arbitrates, see :func:`neuron_conformance.conformance.verdict.oracle.judge`). :class:`Case`
builds those models and their inputs. The CPU and float64 results depend only on the model, the dtype
and the check, so they are computed once per worker process and cached (:func:`reference`), for the
:data:`KEPT_MODELS` most recent models.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from neuron_conformance.model_zoo import inputs as zoo_inputs
from neuron_conformance.model_zoo.dtypes import as_dtype, dtype_name
from neuron_conformance.model_zoo.registry import ModelSpec, build_model, get_spec


@dataclasses.dataclass
class Case:
    """A model id, a dtype and the seed: everything needed to build the three runs."""

    spec: ModelSpec
    dtype: torch.dtype
    seed: int = 0

    @classmethod
    def make(cls, model: str | ModelSpec, dtype: torch.dtype | str, seed: int = 0) -> "Case":
        """The case of a model id (or spec) in ``dtype``.

        Raises:
            KeyError: unknown model id.
            ValueError: ``dtype`` is not a dtype the model checks run in (:data:`neuron_conformance.model_zoo.dtypes.DTYPES`).
        """
        spec = get_spec(model) if isinstance(model, str) else model
        return cls(spec, as_dtype(dtype), seed)

    def raw_inputs(self) -> dict[str, Any]:
        """The seeded sample inputs on CPU, as made (cached per process, see :func:`clear_cache`)."""
        key = (self.spec.id, self.seed)
        if key not in _INPUTS:
            config = self.spec.make_config()
            _INPUTS[key] = zoo_inputs.make_inputs(self.spec, config, seed=self.seed)
        return _INPUTS[key]

    def model(self, device: torch.device | str, *, fp64: bool = False) -> torch.nn.Module:
        """Build the model: in ``dtype`` on ``device``, or (``fp64``) the float64 reference on CPU.

        The float64 model holds the dtype-rounded weights and uses eager MoE experts
        (``torch._grouped_mm`` has no float64 kernel).
        """
        model = build_model(self.spec, seed=self.seed, dtype=self.dtype)
        if fp64:
            model = model.to(torch.float64)
            if self.spec.is_moe and hasattr(model, "set_experts_implementation"):
                model.set_experts_implementation("eager")
            return model
        return model.to(device)

    def inputs(self, device: torch.device | str, *, fp64: bool = False) -> dict[str, Any]:
        """Floating inputs in ``dtype`` on ``device``, or (``fp64``) rounded through ``dtype`` and held in
        float64 on CPU; integer tensors keep their dtype."""
        if fp64:
            return zoo_inputs.cast_inputs(self.raw_inputs(), dtype=torch.float64, via=self.dtype)
        return zoo_inputs.cast_inputs(self.raw_inputs(), dtype=self.dtype, device=device)

    def model_and_inputs(
        self, device: torch.device | str, *, fp64: bool = False
    ) -> tuple[torch.nn.Module, dict[str, Any]]:
        """``(model, inputs)`` built for ``device`` (or the float64 reference): :meth:`model` and :meth:`inputs`.

        Builds only; nothing is run.
        """
        return self.model(device, fp64=fp64), self.inputs(device, fp64=fp64)


_INPUTS: dict[tuple[str, int], dict[str, Any]] = {}
_REFERENCES: dict[tuple, tuple[Any, Any]] = {}


def reference(case: Case, what: str, compute: Callable[[Case, str, bool], Any]) -> tuple[Any, Any]:
    """``(cpu, fp64)`` results of ``compute`` for ``case``, computed once per process (for the
    :data:`KEPT_MODELS` most recent models).

    ``compute(case, device, fp64)`` runs the check's measurement; the cache key is the model id,
    dtype, seed and ``what``. Each pytest-xdist worker is its own process, so the cache is per
    worker; grouping a model's tests on one worker (``--dist loadgroup``) makes it hit.
    """
    key = (case.spec.id, dtype_name(case.dtype), case.seed, what)
    if key not in _REFERENCES:
        _forget_other_models(case.spec.id)
        _REFERENCES[key] = (compute(case, "cpu", False), compute(case, "cpu", True))
    return _REFERENCES[key]


def cpu_reference(key: tuple, compute: Callable[[], Any]) -> Any:
    """``compute()`` (a CPU result with no float64 counterpart), cached per process under ``key``.

    The entry lives in the same cache as :func:`reference` (dropped by :func:`clear_cache`, and
    whenever older models are forgotten, since ``key[0]`` is not a model id); the caller chooses a
    ``key`` that cannot collide with :func:`reference`'s ``(model id, dtype, seed, what)``.
    """
    if key not in _REFERENCES:
        _REFERENCES[key] = (compute(), None)
    return _REFERENCES[key][0]


KEPT_MODELS = 2
"""Models whose inputs and references stay cached; older ones are dropped. A model's tests run one after
the other on one worker (pytest order, and ``xdist_group`` per model), so this keeps every hit while a
whole-zoo process stays small: with every model kept, ``pytest model_zoo -n 0`` peaked at 2,052 MiB."""

_recent_models: list[str] = []


def _forget_other_models(model_id: str) -> None:
    if model_id in _recent_models:
        _recent_models.remove(model_id)
    _recent_models.append(model_id)
    if len(_recent_models) <= KEPT_MODELS:
        return
    keep = set(_recent_models[-KEPT_MODELS:])
    del _recent_models[:-KEPT_MODELS]
    for k in [k for k in _REFERENCES if k[0] not in keep]:
        del _REFERENCES[k]
    for k in [k for k in _INPUTS if k[0] not in keep]:
        del _INPUTS[k]


def clear_cache() -> None:
    """Drop every cached input and CPU/float64 reference (tests that patch kernels call this)."""
    _INPUTS.clear()
    _REFERENCES.clear()
    _recent_models.clear()
