"""The emulated device's RNG state in CUDA's Philox layout (emulator/rng.py): 16 bytes, seed (uint64) then offset
(int64), as DTensor's ``OffsetBasedRNGTracker`` reads it (torch/distributed/tensor/_random.py, ``_PhiloxState``),
while mirror mode keeps the device's stream of draws bitwise the CPU's after ``torch.manual_seed``."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from neuron_conformance.emulator import rng


def _state(seed: int, offset: int) -> torch.Tensor:
    return torch.tensor([seed, offset], dtype=torch.int64).view(torch.uint8)


def _fields(state: torch.Tensor) -> tuple[int, int]:
    return state[:8].view(torch.uint64).item(), state[8:].view(torch.int64).item()


def _draws(device: str) -> list[torch.Tensor]:
    """Several random ops in a row, with and without a ``Generator?`` argument."""
    return [
        t.cpu()
        for t in (
            torch.randn(7, device=device),
            torch.rand(3, 2, device=device),
            F.dropout(torch.ones(16, device=device), 0.5),  # native_dropout: no Generator? argument
            torch.randint(0, 100, (5,), device=device),
            torch.empty(6, device=device).normal_(2.0, 3.0),
            torch.empty(4, device=device).uniform_(-1, 1),
            torch.bernoulli(torch.full((8,), 0.3, device=device)),
            torch.randperm(9, device=device),
        )
    ]


def test_state_is_sixteen_bytes_seed_then_offset():
    torch.manual_seed(1234)
    state = torch.neuron.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu" and state.numel() == 16
    assert _fields(state) == (1234, 0)
    torch.randn(3, device="neuron")
    torch.rand(3, device="neuron")
    seed, offset = _fields(torch.neuron.get_rng_state())
    assert seed == 1234 and offset == 2 * rng.OFFSET_PER_OP and offset % 4 == 0
    torch.manual_seed(2**64 - 5)  # the seed is a uint64
    assert _fields(torch.neuron.get_rng_state()) == (2**64 - 5, 0)
    assert torch.neuron.initial_seed() == 2**64 - 5


def test_manual_seed_then_draws_equal_the_cpus_bitwise(mirror_mode):
    torch.manual_seed(99)
    device = _draws("neuron")
    torch.manual_seed(99)
    cpu = _draws("cpu")
    for d, c in zip(device, cpu):
        assert torch.equal(d, c)


def test_set_rng_state_of_get_rng_state_replays():
    torch.manual_seed(7)
    torch.randn(5, device="neuron")  # not at offset 0
    state = torch.neuron.get_rng_state()
    first = _draws("neuron")
    torch.neuron.set_rng_state(state)
    assert torch.equal(torch.neuron.get_rng_state(), state)
    second = _draws("neuron")
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    with torch.random.fork_rng(device_type="neuron"):  # fork_rng saves and restores through the same API
        torch.randn(100, device="neuron")
    assert _fields(torch.neuron.get_rng_state()) == _fields(state)[:1] + (_fields(state)[1] + 8 * rng.OFFSET_PER_OP,)


def test_offset_zero_is_the_seeds_stream():
    torch.manual_seed(11)
    expected = torch.randn(6, device="neuron").cpu()
    torch.manual_seed(0)
    torch.neuron.set_rng_state(_state(11, 0))
    assert torch.equal(torch.randn(6, device="neuron").cpu(), expected)


def test_offsets_give_streams_of_their_own_the_same_in_a_fresh_state():
    torch.neuron.set_rng_state(_state(5, 4096))
    a = torch.randn(32, device="neuron").cpu()
    torch.neuron.set_rng_state(_state(5, 8192))
    b = torch.randn(32, device="neuron").cpu()
    torch.neuron.set_rng_state(_state(6, 4096))
    c = torch.randn(32, device="neuron").cpu()
    assert not torch.equal(a, b) and not torch.equal(a, c)
    rng._remembered.clear()  # a fresh state, as another rank has: (seed, offset) alone decides
    torch.manual_seed(123)
    torch.randn(3, device="neuron")
    torch.neuron.set_rng_state(_state(5, 4096))
    assert torch.equal(torch.randn(32, device="neuron").cpu(), a)
    assert _fields(torch.neuron.get_rng_state()) == (5, 4096 + rng.OFFSET_PER_OP)


def test_the_same_seed_and_offset_in_another_process_gives_the_same_stream(run_py):
    code = (
        "import torch, neuron_conformance.emulator as emu; emu.install();"
        "torch.neuron.set_rng_state(torch.tensor([5, 4096], dtype=torch.int64).view(torch.uint8));"
        "print(torch.randn(4, device='neuron').cpu().tolist())"
    )
    out = run_py(code)
    torch.neuron.set_rng_state(_state(5, 4096))
    assert out.returncode == 0, out.stderr
    assert eval(out.stdout.strip().splitlines()[-1]) == torch.randn(4, device="neuron").cpu().tolist()


def test_a_device_draw_leaves_the_cpu_stream_alone():
    torch.manual_seed(3)
    before = torch.random.get_rng_state()
    F.dropout(torch.ones(8, device="neuron"), 0.5)
    torch.randn(4, device="neuron")
    assert torch.equal(torch.random.get_rng_state(), before)


_INTERLEAVED = (
    "import torch, torch.nn.functional as F\n"
    "def run(dev):\n"
    "    torch.manual_seed(0)\n"
    "    a = torch.randn(4)\n"
    "    b = F.dropout(torch.ones(16, device=dev), 0.5).cpu()\n"
    "    c = torch.multinomial(torch.ones(10, device=dev), 3).cpu()\n"
    "    d = torch.rand(2)\n"
    "    return [a.tolist(), b.tolist(), c.tolist(), d.tolist()]\n"
    "print(run('cpu') == run('neuron'))\n"
)


@pytest.mark.parametrize("stream, same", [("host", True), ("device", False)])
def test_one_stream_with_the_host_draws_what_the_cpu_draws_in_program_order(run_py, stream, same):
    """With ``CONFORMANCE_EMULATOR_RNG=host`` a program draws the same numbers, in the same order, whether its
    random ops run on the CPU or on the device (what ``neuron-migrate prove`` relies on); by default the
    device has a stream of its own."""
    out = run_py(_INTERLEAVED, env={"CONFORMANCE_EMULATOR": "mirror", "CONFORMANCE_EMULATOR_RNG": stream})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == str(same)


def test_an_unknown_random_stream_names_the_variable(run_py):
    out = run_py("import torch", env={"CONFORMANCE_EMULATOR": "mirror", "CONFORMANCE_EMULATOR_RNG": "shared"})
    assert out.returncode != 0 and "CONFORMANCE_EMULATOR_RNG='shared'" in out.stderr


@pytest.mark.parametrize(
    "bad, error, match",
    [
        (torch.zeros(16), TypeError, "uint8 tensor of 16 bytes"),
        ([0] * 16, TypeError, "uint8"),
        (torch.zeros(5056, dtype=torch.uint8), ValueError, "expects 16 bytes .*got 5056"),
        (torch.zeros(8, dtype=torch.uint8), ValueError, "expects 16 bytes"),
        (torch.tensor([1, -4], dtype=torch.int64).view(torch.uint8), ValueError, "offset must be >= 0"),
    ],
)
def test_a_bad_state_raises_naming_what_it_expected(bad, error, match):
    torch.manual_seed(1)
    with pytest.raises(error, match=match):
        torch.neuron.set_rng_state(bad)
    assert _fields(torch.neuron.get_rng_state()) == (1, 0)  # unchanged


def test_asynchronous_mode_keeps_the_stream(async_mode):
    torch.manual_seed(21)
    state = torch.neuron.get_rng_state()
    first = _draws("neuron")
    torch.neuron.set_rng_state(state)
    second = _draws("neuron")
    torch.manual_seed(21)
    cpu = _draws("cpu")
    assert all(torch.equal(a, b) and torch.equal(a, c) for a, b, c in zip(first, second, cpu))


@pytest.mark.parametrize("reentrant", [False, True])
def test_activation_checkpointing_recomputes_the_same_dropout_mask(reentrant):
    """``torch.utils.checkpoint`` saves and restores the device RNG only for an initialized device module
    (``_initialized``, CUDA's flag): the recomputed dropout must draw the forward's mask, or the gradients are
    wrong."""
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    x = torch.ones(64, device="neuron", requires_grad=True)
    y = checkpoint(lambda t: F.dropout(t * 1.0, 0.5), x, use_reentrant=reentrant)
    y.sum().backward()
    assert torch.equal(y.detach().cpu() != 0, x.grad.cpu() != 0)
