"""Factories with ``device="neuron"`` and the device RNG (reproducible, reached by torch.manual_seed)."""

from __future__ import annotations

import pytest
import torch

FACTORIES = {
    "empty": lambda d: torch.empty(2, 3, device=d).fill_(1),
    "zeros": lambda d: torch.zeros(2, 3, device=d),
    "ones": lambda d: torch.ones(2, 3, device=d, dtype=torch.int64),
    "full": lambda d: torch.full((2,), 7.5, device=d),
    "arange": lambda d: torch.arange(0, 10, 3, device=d),
    "linspace": lambda d: torch.linspace(0, 1, 5, device=d),
    "eye": lambda d: torch.eye(3, device=d),
    "tensor": lambda d: torch.tensor([[1, 2], [3, 4]], device=d),
    "zeros_like": lambda d: torch.zeros_like(torch.ones(2, device=d)),
    "empty_strided": lambda d: torch.empty_strided((2, 3), (1, 2), device=d).zero_(),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factory_matches_cpu(name):
    dev = FACTORIES[name]("neuron")
    cpu = FACTORIES[name]("cpu")
    assert dev.device == torch.device("neuron", 0)
    assert dev.dtype == cpu.dtype and dev.stride() == cpu.stride()
    assert torch.equal(dev.cpu(), cpu)


RANDOM = {
    "randn": lambda d: torch.randn(16, device=d),
    "rand": lambda d: torch.rand(16, device=d),
    "randint": lambda d: torch.randint(0, 100, (16,), device=d),
    "randperm": lambda d: torch.randperm(16, device=d),
    "normal_": lambda d: torch.empty(16, device=d).normal_(),
    "bernoulli": lambda d: torch.bernoulli(torch.full((16,), 0.5, device=d)),
    "dropout": lambda d: torch.nn.functional.dropout(torch.ones(16, device=d), 0.5),
}


@pytest.mark.parametrize("name", sorted(RANDOM))
def test_manual_seed_reproduces_and_matches_cpu(name):
    fn = RANDOM[name]
    torch.manual_seed(1234)
    first = fn("neuron").cpu()
    torch.manual_seed(1234)
    second = fn("neuron").cpu()
    torch.manual_seed(1234)
    cpu = fn("cpu")
    assert torch.equal(first, second)
    assert torch.equal(first, cpu)


def test_successive_draws_differ():
    torch.manual_seed(0)
    a = torch.randn(8, device="neuron").cpu()
    b = torch.randn(8, device="neuron").cpu()
    assert not torch.equal(a, b)


def test_rng_state_get_set():
    torch.neuron.manual_seed(7)
    state = torch.neuron.get_rng_state()
    a = torch.randn(5, device="neuron").cpu()
    torch.neuron.set_rng_state(state)
    b = torch.randn(5, device="neuron").cpu()
    assert torch.equal(a, b)
    assert torch.neuron.initial_seed() == 7


def test_fork_rng_covers_device():
    torch.manual_seed(3)
    with torch.random.fork_rng(device_type="neuron"):
        torch.randn(4, device="neuron")
    after = torch.randn(4, device="neuron").cpu()
    torch.manual_seed(3)
    assert torch.equal(after, torch.randn(4, device="neuron").cpu())


def test_set_rng_state_rejects_non_byte_tensor():
    with pytest.raises(TypeError, match="uint8"):
        torch.neuron.set_rng_state(torch.zeros(3))


def test_efficient_zero_tensor_is_real_zeros_on_the_device():
    z = torch.ops.aten._efficientzerotensor([2, 3], dtype=torch.float16, device="neuron")
    assert z.device == torch.device("neuron", 0) and z.dtype == torch.float16 and z.shape == (2, 3)
    assert torch.equal(z.cpu(), torch.zeros(2, 3, dtype=torch.float16))


def test_gradient_that_autograd_builds_as_a_zero_tensor():
    """``sgn``'s gradient on real input is an ``_efficientzerotensor`` (a CPU ZeroTensor has no data)."""
    x = torch.tensor([-1.5, 0.0, 2.0], device="neuron", requires_grad=True)
    torch.sgn(x).backward(torch.ones(3, device="neuron"))
    assert x.grad.device.type == "neuron" and torch.equal(x.grad.cpu(), torch.zeros(3))
    y = (x.detach() * 3).requires_grad_()
    (torch.sgn(y) * 2 + y).sum().backward()
    assert torch.equal(y.grad.cpu(), torch.ones(3))
