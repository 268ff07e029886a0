"""The emulator's ``alternate`` numeric mode: correct results that are not the CPU's bits.

Each kernel of :mod:`neuron_conformance.emulator.alternate` is checked against its documented contract: within
the accuracy PyTorch documents, different from the CPU where the contract leaves room, equal where it does
not (exact points, stable sorts, first-index reductions), and back to the CPU's bits after leaving the mode.
"""

from __future__ import annotations

import pytest
import torch

import neuron_conformance.emulator as emu


@pytest.fixture
def alternate():
    emu.install()
    before = emu.get_mode()
    emu.set_mode("alternate")
    try:
        yield torch.device("neuron")
    finally:
        emu.set_mode(before)


def _ulps(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    view = {torch.float32: torch.int32, torch.float64: torch.int64, torch.bfloat16: torch.int16}[a.dtype]
    return (a.view(view).long() - b.view(view).long()).abs()


def test_transcendental_results_are_one_ulp_from_the_cpu_and_exact_points_stay(alternate):
    x = torch.linspace(-3, 3, 101)
    got = torch.exp(x.to(alternate)).cpu()
    ref = torch.exp(x)
    assert int(_ulps(got, ref).max()) == 1
    assert bool((got != ref).any())
    assert torch.exp(torch.zeros(3, device=alternate)).cpu().tolist() == [1.0, 1.0, 1.0]
    assert torch.isinf(torch.exp(torch.tensor([1000.0], device=alternate))).all()


def test_half_precision_transcendentals_are_the_float32_result_rounded(alternate):
    x = torch.linspace(-3, 3, 257, dtype=torch.bfloat16)
    got = torch.tanh(x.to(alternate)).cpu()
    assert int(_ulps(got, torch.tanh(x)).max()) <= 1


def test_reductions_and_products_are_accumulated_in_float64(alternate):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 300, generator=g), torch.randn(300, 48, generator=g)
    assert torch.equal(torch.mm(a.to(alternate), b.to(alternate)).cpu(), (a.double() @ b.double()).float())
    assert torch.equal(a.to(alternate).sum(1).cpu(), a.double().sum(1).float())
    assert torch.equal(torch.cumsum(a.to(alternate), 1).cpu(), torch.cumsum(a.double(), 1).float())
    assert not torch.equal(torch.mm(a.to(alternate), b.to(alternate)).cpu(), a @ b)
    ints = torch.arange(12).reshape(3, 4)
    assert torch.equal(ints.to(alternate).sum(1).cpu(), ints.sum(1))


def test_tf32_like_products_only_while_the_float32_matmul_precision_is_reduced(alternate):
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(32, 256, generator=g), torch.randn(256, 32, generator=g)
    full = torch.mm(a.to(alternate), b.to(alternate)).cpu()
    torch.set_float32_matmul_precision("high")
    try:
        reduced = torch.mm(a.to(alternate), b.to(alternate)).cpu()
    finally:
        torch.set_float32_matmul_precision("highest")
    exact = a.double() @ b.double()
    assert (reduced.double() - exact).abs().max() > 10 * (full.double() - exact).abs().max()
    assert float((reduced - full).abs().max()) < 0.05  # about sqrt(256) x 2**-11 for unit normal inputs


def test_the_index_among_ties_is_another_valid_one(alternate):
    t = torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0])
    d = t.to(alternate)
    top = torch.topk(d, 2)
    assert top.values.cpu().tolist() == [3.0, 3.0]
    assert sorted(top.indices.cpu().tolist()) != sorted(torch.topk(t, 2).indices.tolist())
    assert set(top.indices.cpu().tolist()) <= {1, 2, 4}
    unstable = torch.sort(d).indices.cpu()
    assert torch.equal(t[unstable], torch.sort(t).values)
    assert not torch.equal(unstable, torch.sort(t, stable=True).indices)
    assert torch.equal(torch.sort(d, stable=True).indices.cpu(), torch.sort(t, stable=True).indices)
    assert int(torch.max(d, 0).indices) == 1 and int(torch.argmax(d)) == 1
    assert float(t[int(torch.median(d, 0).indices)]) == float(torch.median(t))
    assert int(torch.kthvalue(d, 3).indices) in (1, 2, 4)


def test_accumulation_into_duplicate_indices_in_float64(alternate):
    g = torch.Generator().manual_seed(2)
    src = torch.randn(1000, generator=g) * 1e3
    index = torch.zeros(1000, dtype=torch.long)
    got = torch.zeros(1).to(alternate).index_add(0, index.to(alternate), src.to(alternate)).cpu()
    assert torch.equal(got, src.double().sum().float().reshape(1))


def test_leaving_the_mode_gives_the_cpu_bits_again(alternate):
    x = torch.linspace(-3, 3, 101)
    emu.set_mode("mirror")
    assert torch.equal(torch.exp(x.to("neuron")).cpu(), torch.exp(x))
    emu.set_mode("alternate")
    assert not torch.equal(torch.exp(x.to("neuron")).cpu(), torch.exp(x))


def test_inputs_are_never_changed(alternate):
    x = torch.linspace(-3, 3, 11)
    d = x.to(alternate)
    torch.exp(d)
    torch.sort(d)
    torch.mm(d.reshape(1, -1), d.reshape(-1, 1))
    assert torch.equal(d.cpu(), x)
