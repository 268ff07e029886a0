"""The generation-mode checks have teeth: a wrong kernel on the emulated device's PrivateUse1 key that changes
generation only through the path a mode exercises is flagged by that mode, in both emulator modes, and the
modes that never call it (and the clean device) pass.

Faults (:func:`neuron_conformance.emulator.faults.override`, restored on leaving the ``with``), each on
llama in float32:

- ``multinomial-argmax``: ``aten::multinomial`` that returns the most likely index (a sampler that ignores its
  random draws): must fail ``generate-sample`` (the sampler test in both modes, and the same-stream rule in
  mirror mode); ``generate-beam`` never samples and passes;
- ``topk-ascending``: ``aten::topk`` whose sorted values and indices come back smallest first: must fail
  ``generate-sample`` (transformers' top-k filter reads the k-th value as ``topk(...)[0][..., -1]``, so it keeps
  one token: the kept sets differ from CPU's) and ``generate-beam``;
- ``index-copy-drops-last``: ``aten::index_copy_`` that skips the last index (the static cache's update,
  ``StaticLayer.update``): must fail ``generate-static``; ``generate-dynamic`` grows its cache with ``cat`` and
  passes.

In-process (no pytest subprocess), like ``tests/model_zoo/test_train_runtime_faults.py``.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
emulator = pytest.importorskip("neuron_conformance.emulator")
faults = pytest.importorskip("neuron_conformance.emulator.faults")

from neuron_conformance.emulator import storage  # noqa: E402
from neuron_conformance.model_zoo import generation_modes as gm  # noqa: E402
from neuron_conformance.model_zoo.case import Case  # noqa: E402
from tests.faults.zoo_modes import MODES, emulator_mode  # noqa: E402

MODEL = "llama"


def _multinomial_argmax(self, num_samples, replacement=False, *, generator=None):
    result = faults.correct("aten::multinomial", self, num_samples, replacement, generator=generator)
    top = storage.cpu_alias(self).argmax(dim=-1, keepdim=True)
    storage.cpu_alias(result).copy_(top.expand(*top.shape[:-1], num_samples))
    return result


def _topk_ascending(result, self, k, dim=-1, largest=True, sorted=True):
    if sorted:
        for t in result:
            alias = storage.cpu_alias(t)
            alias.copy_(alias.flip(dim).clone())
    return result


def _index_copy_drops_last(self, dim, index, source):
    keep = index.shape[0] - 1
    return faults.correct("aten::index_copy_", self, dim, index[:keep], source.narrow(dim, 0, keep))


FAULTS = {
    "multinomial-argmax": ("aten::multinomial", _multinomial_argmax, "args"),
    "topk-ascending": ("aten::topk", _topk_ascending, "result"),
    "index-copy-drops-last": ("aten::index_copy_", _index_copy_drops_last, "args"),
}
CASES = [
    # fault, mode, what the failure message must contain ("" for any; None: the mode must pass)
    ("multinomial-argmax", "sample", "the draws favour the most likely tokens"),
    ("multinomial-argmax", "beam", None),
    ("topk-ascending", "sample", "top-k kept sets differ from CPU's"),
    ("topk-ascending", "beam", ""),
    ("index-copy-drops-last", "static", "static cache vs CPU's static cache"),
    ("index-copy-drops-last", "dynamic", None),
]


@pytest.fixture(params=MODES)
def neuron(request):
    with emulator_mode(request.param):
        yield torch.device("neuron"), request.param == "mirror"


def _run(mode: str, device, mirrors_cpu: bool):
    case = Case.make(MODEL, "float32")
    prompt = case.raw_inputs()["input_ids"][:, :8]
    return gm.compare_mode(
        mode,
        MODEL,
        case.dtype,
        lambda d: case.model(d),
        prompt,
        device,
        cache_key=(MODEL, "float32", case.seed),
        mirrors_cpu=mirrors_cpu,
    )


@pytest.mark.parametrize(("fault", "mode", "flagged"), CASES, ids=[f"{f}-{m}" for f, m, _ in CASES])
def test_fault_is_flagged(neuron, fault, mode, flagged):
    """``flagged``: the substring the failure message must contain, or None when the mode must pass."""
    device, mirrors_cpu = neuron
    op, kernel, receives = FAULTS[fault]
    with faults.override(op, kernel, receives=receives) as installed:
        result = _run(mode, device, mirrors_cpu)
    if flagged is not None:
        assert installed.calls > 0, f"generate-{mode} never called {op}"
        assert not result.passed and result.failure_class == "numeric", result.metrics
        assert flagged in result.message, result.message
    else:
        assert installed.calls == 0, f"generate-{mode} called {op} {installed.calls} times"
        assert result.passed, result.message


@pytest.mark.parametrize("mode", [m for m in gm.MODES if m not in gm.CAPABILITY])
def test_clean_device_passes(neuron, mode):
    device, mirrors_cpu = neuron
    result = _run(mode, device, mirrors_cpu)
    assert result.passed, result.message
