"""The divergence localizer: traces module outputs and names the first one that leaves tolerance."""

from __future__ import annotations

import copy

import torch
from torch import nn

from neuron_conformance.model_zoo.localize import first_divergence, floating_tensors, localize, trace_forward


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(16, 32)
        self.act = nn.SiLU()
        self.down = nn.Linear(32, 16)

    def forward(self, x):
        return x + self.down(self.act(self.up(x)))


class Toy(nn.Module):
    """Two blocks, a shared norm called twice, and a head returning a tuple."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.norm = nn.LayerNorm(16)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        h = self.norm(self.inp(x))
        for block in self.blocks:
            h = block(h)
        h = self.norm(h)
        return self.head(h), (h, 3)


def _models(dtype=torch.float32):
    torch.manual_seed(0)
    cpu = Toy().to(dtype)
    return cpu, copy.deepcopy(cpu), copy.deepcopy(cpu).double()


def _break(module: nn.Module, rel: float):
    """Make ``module`` return its output scaled by ``1 + rel`` (a stand-in for a broken device kernel)."""
    module.register_forward_hook(lambda m, a, out: out * (1 + rel))


def test_trace_order_children_before_parents_and_call_indices():
    cpu, _, _ = _models()
    trace = trace_forward(cpu, lambda m: m(torch.randn(2, 8)))
    keys = [(name, call) for name, call, _, _ in trace.entries]
    assert keys.index(("blocks.0.up", 0)) < keys.index(("blocks.0", 0))
    assert ("norm", 0) in keys and ("norm", 1) in keys
    assert keys.index(("norm", 1)) > keys.index(("blocks.1", 0))
    assert all(t.device.type == "cpu" for _, _, _, ts in trace.entries for t in ts)


def test_floating_tensors_walks_nested_outputs():
    t = torch.ones(2)
    found = floating_tensors((t, [torch.arange(3), {"a": t * 2}], None, 3))
    assert len(found) == 2 and torch.equal(found[1], t * 2)


def test_names_first_broken_module_in_execution_order():
    cpu, dev, ref = _models()
    _break(dev.blocks[1].act, 1e-2)
    x = torch.randn(4, 8)
    div = localize(dev, {"x": x}, cpu, {"x": x}, ref, {"x": x.double()})
    assert div is not None
    assert div.module == "blocks.1.act" and div.module_class == "SiLU"
    assert div.verdict.rule == "fp64" and div.verdict.max_rel > 5e-3
    assert "blocks.1.act" in div.describe() and "[SiLU]" in div.describe()
    assert div.position < div.compared


def test_names_second_call_of_a_reused_module():
    cpu, dev, ref = _models()
    calls = {"n": 0}

    def second_call_only(module, args, out):
        calls["n"] += 1
        return out * 1.05 if calls["n"] == 2 else out

    dev.norm.register_forward_hook(second_call_only)
    x = torch.randn(4, 8)
    div = localize(dev, {"x": x}, cpu, {"x": x})
    assert (div.module, div.call) == ("norm", 1)
    assert "(call 1)" in div.describe()


def test_no_divergence_for_identical_models_and_small_bf16_noise():
    cpu, dev, ref = _models()
    x = torch.randn(4, 8)
    assert localize(dev, {"x": x}, cpu, {"x": x}, ref, {"x": x.double()}) is None
    cpu16, dev16, ref16 = _models(torch.bfloat16)
    _break(dev16.blocks[0].up, 2**-9)  # well under bfloat16's rounding of these values
    xb = torch.randn(4, 8).to(torch.bfloat16)
    assert localize(dev16, {"x": xb}, cpu16, {"x": xb}, ref16, {"x": xb.double()}) is None


def test_first_divergence_without_reference_uses_tolerance_rule():
    cpu, dev, _ = _models()
    _break(dev.inp, 1e-3)
    x = torch.randn(2, 8)
    d = first_divergence(trace_forward(dev, lambda m: m(x)), trace_forward(cpu, lambda m: m(x)))
    assert d.module == "inp" and d.verdict.rule == "tolerance"


def test_hooks_are_removed_even_when_the_run_raises():
    cpu, _, _ = _models()

    def boom(m):
        raise RuntimeError("boom")

    try:
        trace_forward(cpu, boom)
    except RuntimeError:
        pass
    assert all(not m._forward_hooks for m in cpu.modules())
