"""The hot-path shortcuts behave exactly like the code they replace.

* :func:`neuron_conformance.opsuites.samples.sample_inputs` gives the same samples (bit for bit) as ``OpInfo.sample_inputs``
  and leaves the CPU generator, ``random`` and NumPy in the same state;
* :func:`neuron_conformance.conformance.verdict.oracle.judge`'s identical-bits shortcut gives the verdict of the full rules;
* :func:`neuron_conformance.opsuites.samples.cached_opinfo_pairs` returns what it computes, and recomputes when the key changes.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch.utils._pytree import tree_flatten

from neuron_conformance.conformance.verdict import oracle
from neuron_conformance.opsuites import (
    samples,
)  # ops whose sample generators draw from torch's RNG, from NumPy or from ``random``, plus plain ones

OPS = [
    "add",
    "nn.functional.dropout",
    "nn.functional.embedding",
    "index_put",
    "multinomial",
    "nn.functional.max_pool2d",
    "cumsum",
    "searchsorted",
    "as_strided.partial_views",
]


def _leaves(sample):
    return tree_flatten((sample.input, sample.args, sample.kwargs))[0]


def _same(x, y) -> bool:
    if isinstance(x, torch.Tensor):
        return (
            isinstance(y, torch.Tensor)
            and x.dtype == y.dtype
            and x.shape == y.shape
            and x.stride() == y.stride()
            and torch.equal(torch.nan_to_num(x), torch.nan_to_num(y))
        )
    return type(x) is type(y) and (x == y or x != x)


def _states():
    return (
        torch.random.default_generator.get_state(),
        torch.initial_seed(),
        random.getstate(),
        np.random.get_state()[1].tobytes(),
    )


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_sample_inputs_matches_opinfo(name, dtype):
    op = samples.opinfo_by_name()[name]
    if dtype not in op.supported_dtypes("cpu"):
        pytest.skip(f"{name} does not support {dtype}")
    torch.manual_seed(7)
    reference = list(op.sample_inputs("cpu", dtype))
    ref_states = _states()
    torch.manual_seed(7)
    fast = list(samples.sample_inputs(op, "cpu", dtype))
    assert len(fast) == len(reference) > 0
    for i, (a, b) in enumerate(zip(fast, reference)):
        la, lb = _leaves(a), _leaves(b)
        assert len(la) == len(lb), f"sample {i}"
        assert all(_same(x, y) for x, y in zip(la, lb)), f"sample {i} differs"
    st = _states()
    assert torch.equal(st[0], ref_states[0]) and st[1:] == ref_states[1:]


def test_cpu_samples_only_keeps_one_index():
    op = samples.opinfo_by_name()["add"]
    every = samples.cpu_samples(op, torch.float32)
    one = samples.cpu_samples(op, torch.float32, only=3)
    assert [i for i, _ in one] == [3]
    assert all(_same(x, y) for x, y in zip(_leaves(one[0][1]), _leaves(every[3][1])))


def _full_judge(a, e, **kw):
    """judge() with the identical-bits shortcut disabled."""
    saved = oracle._same_bits
    oracle._same_bits = lambda x, y: False
    try:
        return oracle.judge(a, e, **kw)
    finally:
        oracle._same_bits = saved


CASES = [
    torch.tensor([1.0, -0.0, float("nan"), float("inf"), -float("inf"), 3.5]),
    torch.tensor([[1.5, 2.5], [3.5, 4.5]], dtype=torch.bfloat16).t(),
    torch.tensor([1.0, 2.0], dtype=torch.float16),
    torch.tensor([1 + 2j, float("nan") + 0j]),
    torch.tensor([True, False]),
    torch.arange(6, dtype=torch.int64).reshape(2, 3),
    torch.empty(0, 3),
    torch.tensor(float("nan")),
    torch.tensor([float("nan"), float("inf")]),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("kw", [{}, {"exact": True}, {"atol": 1e-3, "rtol": 0.0}])
def test_judge_shortcut_gives_the_full_verdict(case, kw):
    e = CASES[case]
    a = e.clone()
    fast, full = oracle.judge(a, e, **kw), _full_judge(a, e, **kw)
    assert fast.passed and fast == full


def test_judge_shortcut_not_taken_for_different_bits():
    e = torch.tensor([0.0, 1.0])
    a = torch.tensor([-0.0, 1.0])
    assert not oracle._same_bits(a, e)
    assert oracle.judge(a, e, exact=True) == _full_judge(a, e, exact=True)
    assert not oracle.judge(a, e, exact=True).passed


class _Cache(dict):
    def get(self, key, default):
        return super().get(key, default)

    def set(self, key, value):
        self[key] = value


def test_cached_opinfo_pairs_round_trip():
    cache = _Cache()
    pick = lambda op: op.name in ("add", "mul")  # noqa: E731
    first = samples.cached_opinfo_pairs(("float32", "int64"), predicate=pick, cache=cache, token="t")
    assert first == samples.opinfo_pairs(("float32", "int64"), predicate=pick)
    assert {n for n, _ in first} == {"add", "mul"} and len(cache) == 1
    # a stored value is what the next session returns, without recomputing
    key = next(iter(cache))
    cache[key] = [["add", "float32"]]
    assert samples.cached_opinfo_pairs(("float32", "int64"), predicate=pick, cache=cache, token="t") == [
        ("add", "float32")
    ]
    # another token (suite, variant) or dtype list is another key
    samples.cached_opinfo_pairs(("float32",), predicate=pick, cache=cache, token="t")
    samples.cached_opinfo_pairs(("float32", "int64"), predicate=pick, cache=cache, token="u")
    assert len(cache) == 3


def test_opinfo_params_ids_and_marks():
    params = samples.opinfo_params(("float32",), "compare_cpu", predicate=lambda op: op.name == "add")
    assert [p.id for p in params] == ["add-float32"]
    marks = {m.name: m for m in params[0].marks}
    assert marks["xdist_group"].args == ("add",)
    assert marks["conformance"].kwargs == {
        "op": "add",
        "dtype": "float32",
        "variant": "function",
        "suite": "compare_cpu",
    }


def test_judge_under_a_dispatch_mode_counts_only_device_ops():
    """The oracle's CPU arithmetic runs outside Python dispatch modes; what touches the device is still seen."""
    import neuron_conformance.emulator.backend  # noqa: F401 - the emulated neuron device
    from neuron_conformance.conformance.results.coverage import CoverageMode

    e = torch.tensor([1.0, 2.0, float("nan")])
    a = (e + torch.tensor([0.0, 1e-7, 0.0])).to("neuron")
    plain = oracle.judge(a, e, atol=1e-5, rtol=1e-5)
    with CoverageMode("neuron", {}) as mode:
        observed = oracle.judge(a, e, atol=1e-5, rtol=1e-5)
    with CoverageMode("neuron", {}) as alone:
        oracle._as_real(a)
    assert observed == plain and observed.passed and observed.rule == "tolerance"
    assert mode.counts == alone.counts and mode.counts  # the device->CPU copy, nothing of the CPU math


def test_suite_params_come_from_the_cache_and_keep_their_marks(monkeypatch):
    from types import SimpleNamespace

    from neuron_conformance.opsuites import suite_helpers

    cache = _Cache()
    config = SimpleNamespace(cache=cache)
    monkeypatch.setattr(suite_helpers, "selected_dtypes", lambda cfg: ("float32", "int64"))
    pick = lambda op: op.name == "add"  # noqa: E731
    first = suite_helpers.suite_params(config, "autograd", variant="backward", predicate=pick)
    assert [p.id for p in first] == ["add-float32", "add-int64"] and len(cache) == 1
    key = next(iter(cache))
    cache[key] = [["mul", "float32"]]  # what a later session finds is used as is
    again = suite_helpers.suite_params(config, "autograd", variant="backward", predicate=pick)
    assert [p.id for p in again] == ["mul-float32"]
    marks = {m.name: m for m in again[0].marks}
    assert marks["xdist_group"].args == ("mul",)
    assert marks["conformance"].kwargs == {"op": "mul", "dtype": "float32", "variant": "backward", "suite": "autograd"}
    per_op = suite_helpers.suite_params(config, "errors", variant="error", predicate=pick, per_dtype=False)
    assert [p.id for p in per_op] == ["add"] and per_op[0].values == ("add", None) and len(cache) == 2
