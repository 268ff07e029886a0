"""neuron_conformance.opsuites.suite_helpers.value_policy: every op's values judged, or the record says why not."""

from __future__ import annotations

import pytest

from neuron_conformance.conformance.backend.device import DeviceProfile
from neuron_conformance.opsuites.suite_helpers import VALUES_NONE, VALUES_RANDOM, VALUES_UNDEFINED, value_policy

MIRROR = DeviceProfile(type="neuron", backend="test", backend_version="0", mirrors_cpu=True)
DEVICE = DeviceProfile(type="neuron", backend="test", backend_version="0", mirrors_cpu=False)


@pytest.mark.parametrize(
    "op",
    ["nn.functional.scaled_dot_product_attention", "nn.functional.multi_head_attention_forward", "bitwise_left_shift"],
)
def test_cpu_not_exact_reference(op):
    """Ops PyTorch skips in its own test_compare_cpu: exact on a mirror, fp64-arbitrated floats elsewhere."""
    m = value_policy(op, MIRROR)
    assert m.compare and m.integers and not m.arbitrate
    p = value_policy(op, DEVICE)
    assert p.compare and p.arbitrate and not p.integers and p.rule == VALUES_NONE


def test_ordinary_random_and_undefined_ops():
    add = value_policy("add", DEVICE)
    assert add.compare and add.integers and add.arbitrate  # every suite arbitrates as compare_cpu does
    assert not value_policy("add", MIRROR).arbitrate
    assert value_policy("bernoulli", DEVICE).rule == VALUES_RANDOM and not value_policy("bernoulli", MIRROR)
    assert value_policy("empty_like", MIRROR).rule == VALUES_UNDEFINED and not value_policy("empty_like", MIRROR)


def test_tensor_leaves_walks_tuples_lists_and_dicts():
    import torch

    from neuron_conformance.opsuites.suite_helpers import tensor_leaves

    a, b, c = torch.ones(1), torch.zeros(2), torch.arange(3)
    assert [id(t) for t in tensor_leaves(((a, 2.0), {"k": [b, None]}, c))] == [id(a), id(b), id(c)]
    assert tensor_leaves(3) == []
