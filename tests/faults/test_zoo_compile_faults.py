"""The zoo's compile checks have teeth: a backend wrong only in compiled code is caught, and the eager checks
miss it, in both emulator modes; the clean ``neuron`` backend passes.

Faults (:mod:`tests.faults.zoo_compile_kernels`, each a backend callable made ``torch.compile``'s default by
the check, on llama in float32):

- ``add_to_sub``: the first floating ``+`` of Dynamo's graph becomes ``-`` (the first residual connection):
  ``compile`` and ``compile_train`` fail ``numeric``; ``forward`` (eager) passes;
- ``backward_drops_grad``: the compiled backward zeroes its first gradient: ``compile_train`` fails
  ``numeric``; ``compile`` (no backward) and ``train`` (eager) pass.

In-process (no pytest subprocess), like ``tests/faults/test_generation_faults.py``.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
emulator = pytest.importorskip("neuron_conformance.conformance.emulator")

from neuron_conformance.model_zoo import checks  # noqa: E402
from neuron_conformance.model_zoo.case import clear_cache  # noqa: E402
from tests.faults import zoo_compile_kernels as kernels  # noqa: E402

MODES = ("mirror", "device")
MODEL = "llama"

pytestmark = pytest.mark.slow  # about 8 llama compiles per emulator mode: minutes on 2 cores


@pytest.fixture(params=MODES)
def neuron(request):
    emulator.install()
    before = emulator.get_mode()
    emulator.set_mode(request.param)
    clear_cache()
    yield torch.device("neuron")
    emulator.set_mode(before)
    clear_cache()


def _check(check: str, device, backend=None):
    default_before = torch.compiler.get_default_backend()
    kwargs = {"backend": backend} if backend is not None else {}
    result = checks.run_check(check, MODEL, "float32", device, **kwargs)
    assert torch.compiler.get_default_backend() == default_before
    return result


def test_a_wrong_lowering_is_caught_by_both_compile_checks(neuron):
    for check in ("compile", "compile_train"):
        backend = kernels.add_to_sub()
        result = _check(check, neuron, backend)
        assert backend.calls > 0 and backend.changed > 0, (check, backend.calls, backend.changed)
        assert not result.passed and result.failure_class == "numeric", (check, result.message)
        assert "vs eager on the device" in result.message, result.message
        assert result.fields["graphs"] == backend.calls, result.fields
    assert _check("forward", neuron).passed  # the eager forward check never compiles: it misses the fault


def test_a_wrong_compiled_backward_is_caught_by_the_compiled_train_step_only(neuron):
    backend = kernels.backward_drops_grad()
    train = _check("compile_train", neuron, backend)
    assert backend.changed > 0, "the compiled backward never ran"
    assert not train.passed and train.failure_class == "numeric", train.message
    forward_only = kernels.backward_drops_grad()
    assert _check("compile", neuron, forward_only).passed  # no grad: no backward graph ran
    assert forward_only.calls > 0 and forward_only.changed == 0
    assert _check("train", neuron).passed  # the eager train step never compiles


def test_the_clean_backend_passes_through_the_user_path(neuron):
    """The device's own backend by name, as ``set_default_backend("neuron")`` users give it: counted, one graph."""
    for check in ("compile", "compile_train"):
        result = _check(check, neuron)
        assert result.passed, (check, result.message)
        assert result.metrics["backend"] == "neuron" and result.fields["graphs"] >= 1, result.fields
        assert result.fields["one_graph"] is True and result.fields["recompiles"] == 0, result.fields
