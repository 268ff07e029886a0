"""The ``neuron`` torch.compile backend (AOT autograd over eager kernels) matches eager."""

from __future__ import annotations

import pytest
import torch

import neuron_conformance.emulator  # noqa: F401  (installed by conftest)


@pytest.fixture(autouse=True)
def _reset_dynamo():
    import torch._dynamo

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_backend_is_registered():
    import torch._dynamo

    assert "neuron" in torch._dynamo.list_backends(exclude_tags=())


def test_compiled_function_forward_backward_matches_eager():
    def fn(x, w):
        return (torch.sin(x) @ w).relu().sum()

    torch.manual_seed(0)
    x = torch.randn(4, 5, device="neuron", requires_grad=True)
    w = torch.randn(5, 3, device="neuron", requires_grad=True)
    eager = fn(x, w)
    eager.backward()
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad = None
    w.grad = None
    compiled = torch.compile(fn, backend="neuron")
    out = compiled(x, w)
    out.backward()
    assert out.device.type == "neuron"
    assert torch.equal(out.cpu(), eager.cpu())
    assert torch.equal(x.grad.cpu(), gx.cpu()) and torch.equal(w.grad.cpu(), gw.cpu())


def test_default_backend_and_module_compile():
    previous = torch.compiler.get_default_backend() if hasattr(torch.compiler, "get_default_backend") else "inductor"
    torch.compiler.set_default_backend("neuron")
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.Linear(8, 2)).to("neuron")
        x = torch.randn(3, 6, device="neuron")
        ref = model(x)
        ref.square().mean().backward()
        ref_grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        model.compile()
        out = model(x)
        out.square().mean().backward()
        assert torch.equal(out.cpu(), ref.cpu())
        for p, g in zip(model.parameters(), ref_grads):
            assert p.grad.device.type == "neuron"
            assert torch.equal(p.grad.cpu(), g.cpu())
    finally:
        torch.compiler.set_default_backend(previous)
