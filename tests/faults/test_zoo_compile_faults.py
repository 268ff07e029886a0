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
emulator = pytest.importorskip("neuron_conformance.emulator")

from neuron_conformance.model_zoo import checks  # noqa: E402
from tests.faults import zoo_compile_kernels as kernels  # noqa: E402
from tests.faults.zoo_modes import MODES, emulator_mode  # noqa: E402

MODEL = "llama"

pytestmark = pytest.mark.slow  # about 8 llama compiles per emulator mode: minutes on 2 cores


@pytest.fixture(params=MODES)
def neuron(request):
    with emulator_mode(request.param):
        yield torch.device("neuron")


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


def _patched_norm(monkeypatch, breaks_where: str):
    """LlamaRMSNorm.forward behind a Python check: ``"device"``: a branch on the values of a ``neuron`` input
    (what a backend's Python-level input check looks like; Dynamo breaks the graph there, on the device only);
    ``"everywhere"``: an explicit ``torch._dynamo.graph_break()`` on every device."""
    from transformers.models.llama import modeling_llama

    original = modeling_llama.LlamaRMSNorm.forward

    def forward(self, hidden_states):
        if breaks_where == "everywhere":
            torch._dynamo.graph_break()
        elif hidden_states.device.type == "neuron" and not bool(torch.isfinite(hidden_states).all()):
            raise FloatingPointError("non-finite input")
        return original(self, hidden_states)

    monkeypatch.setattr(modeling_llama.LlamaRMSNorm, "forward", forward)


def test_a_device_only_graph_break_is_failed(neuron, monkeypatch):
    _patched_norm(monkeypatch, "device")
    result = _check("compile", neuron)
    assert not result.passed and result.failure_class == "graph-break", result.message
    fields = result.fields
    assert fields["one_graph"] is False and fields["graph_breaks"] > fields["cpu_graph_breaks"] == 0, fields
    assert "on the CPU 1 graph(s), 0 break(s)" in result.message, result.message


def test_a_break_the_cpu_shares_is_recorded_not_failed(neuron, monkeypatch):
    _patched_norm(monkeypatch, "everywhere")
    result = _check("compile", neuron)
    assert result.passed, result.message
    fields = result.fields
    assert fields["one_graph"] is False and fields["graph_breaks"] == fields["cpu_graph_breaks"] > 0, fields
    assert fields["graphs"] == fields["cpu_graphs"] > 1 and fields["break_reasons"], fields
