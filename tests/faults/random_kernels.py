"""Wrong random kernels for the random_ops fault tests, each a way a backend's generator goes wrong.

The half-precision faults (``exponential_`` ignoring ``lambd`` in bfloat16 or float16, ``normal_``
ignoring ``std`` in float16, ``uniform_`` short of ``to`` in bfloat16) are right in float32: only a suite
that draws in the dtype sees them.

Each factory returns what :mod:`fault_backend` installs: one :class:`neuron_conformance.emulator.faults.Fault`,
or a tuple of them when the overload the suite calls reaches the device as different overloads in mirror
mode (a direct kernel) and device mode (CompositeExplicitAutograd decomposing, e.g. ``randperm`` into
``randperm.generator`` and ``randperm.generator_out``). The kernels receive neuron tensors and write the
wrong answer into the device result through zero-copy CPU aliases
(:func:`neuron_conformance.emulator.storage.cpu_alias`).
"""

from __future__ import annotations

import torch

from neuron_conformance.emulator import faults, storage

aten = torch.ops.aten


def _constant(result, self, low=0.0, high=1.0, generator=None):
    """``uniform_`` that fills the midpoint: every value in range, none random."""
    storage.cpu_alias(result).fill_((low + high) / 2)
    return result


def uniform_constant():
    """uniform_ returns a constant (the midpoint of [from, to))."""
    return faults.override("aten::uniform_", _constant)


def _duplicate(result, *args, **kwargs):
    """A permutation with its second element overwritten by its first (a race in a parallel shuffle)."""
    flat = storage.cpu_alias(result).reshape(-1)
    if flat.numel() > 1:
        flat[1] = flat[0]
    return result


def randperm_duplicate():
    """randperm repeats a value (every overload the call can reach in either mode)."""
    return tuple(
        faults.override(name, _duplicate)
        for name in ("aten::randperm", "aten::randperm.generator", "aten::randperm.generator_out", "aten::randperm.out")
    )


def _half(self, p=0.5, generator=None):
    return faults.correct("aten::bernoulli_.float", self, 0.5, generator=generator)


def bernoulli_ignores_p():
    """bernoulli_(p) draws with p = 0.5 whatever p is."""
    return faults.override("aten::bernoulli_.float", _half, receives="args")


def _unit_std(self, mean=0.0, std=1.0, generator=None):
    return faults.correct("aten::normal_", self, mean, 1.0, generator=generator)


def normal_ignores_std():
    """normal_(mean, std) draws with std = 1."""
    return faults.override("aten::normal_", _unit_std, receives="args")


def _no_rescale(result, input, p, train=None):
    """native_dropout that zeroes with the mask but forgets the 1 / (1 - p) scale of the kept elements."""
    out, mask = result
    storage.cpu_alias(out).copy_(storage.cpu_alias(input) * storage.cpu_alias(mask))
    return result


def dropout_no_rescale():
    """native_dropout keeps x, not x / (1 - p)."""
    return faults.override("aten::native_dropout", _no_rescale)


def _fixed_stream(self, low=0.0, high=1.0, generator=None):
    """``uniform_`` drawing from a generator seeded once with 0: the same values whatever the seed."""
    return faults.correct("aten::uniform_", self, low, high, generator=torch.Generator().manual_seed(0))


def generator_ignores_seed():
    """uniform_ ignores torch.manual_seed (and the generator given)."""
    return faults.override("aten::uniform_", _fixed_stream, receives="args")


def _cpu_stream(self, mean=0.0, std=1.0, generator=None):
    """``normal_`` drawing from the CPU's default generator instead of the device's."""
    return faults.correct("aten::normal_", self, mean, std, generator=torch.random.default_generator)


def draws_cpu_stream():
    """normal_ on the device advances the CPU generator and escapes the device's RNG state."""
    return faults.override("aten::normal_", _cpu_stream, receives="args")


def _exponential_rate_one(dtype):
    """``exponential_`` that draws with rate 1, whatever ``lambd``, when ``self`` is of ``dtype`` (a
    half-precision branch of a kernel that is right in float32)."""

    def kernel(self, lambd=1.0, generator=None):
        return faults.correct("aten::exponential_", self, 1.0 if self.dtype == dtype else lambd, generator=generator)

    return kernel


def exponential_ignores_lambd(dtype):
    """exponential_(lambd) draws with rate 1 in ``dtype`` only."""
    return lambda: faults.override("aten::exponential_", _exponential_rate_one(dtype), receives="args")


def _unit_std_fp16(self, mean=0.0, std=1.0, generator=None):
    return faults.correct("aten::normal_", self, mean, 1.0 if self.dtype == torch.float16 else std, generator=generator)


def normal_ignores_std_fp16():
    """normal_(mean, std) draws with std = 1 in float16 only."""
    return faults.override("aten::normal_", _unit_std_fp16, receives="args")


def _short_range_bf16(self, low=0.0, high=1.0, generator=None):
    """``uniform_`` that maps ``[from, to)`` onto ``[from, to - (to - from) / 8)`` in bfloat16: every value
    in range, the top eighth never drawn (a scale computed from a wrongly rounded span)."""
    if self.dtype == torch.bfloat16:
        high = high - (high - low) / 8
    return faults.correct("aten::uniform_", self, low, high, generator=generator)


def uniform_short_range_bf16():
    """uniform_(from, to) in bfloat16 never draws the top eighth of the range."""
    return faults.override("aten::uniform_", _short_range_bf16, receives="args")


def _other_stream_bernoulli(self, p=0.5, generator=None):
    """``bernoulli_(p)`` drawn from another stream than the CPU's (a generator seeded from the session seed
    plus one): the right distribution, other values, as any accelerator's generator gives."""
    other = torch.Generator().manual_seed(torch.initial_seed() + 1)
    return faults.correct("aten::bernoulli_.float", self, p, generator=other)


def _other_stream_dropout(input, p, train=None):
    if not train or p == 0:
        return faults.correct("aten::native_dropout", input, p, train)
    other = torch.Generator().manual_seed(torch.initial_seed() + 1)
    keep = torch.empty(input.shape, dtype=torch.float32).bernoulli_(1 - p, generator=other).to(torch.bool)
    mask = keep.to(input.device)
    return input * mask / (1 - p), mask


def dropout_other_stream():
    """Dropout masks drawn from another stream than the CPU's: correct (PyTorch's notes on reproducibility:
    CPU and accelerator streams differ even with identical seeds)."""
    return (
        faults.override("aten::bernoulli_.float", _other_stream_bernoulli, receives="args"),
        faults.override("aten::native_dropout", _other_stream_dropout, receives="args"),
    )


RANDOM_FAULTS = {
    "dropout-other-stream": dropout_other_stream,
    "uniform-constant": uniform_constant,
    "randperm-duplicate": randperm_duplicate,
    "bernoulli-ignores-p": bernoulli_ignores_p,
    "normal-ignores-std": normal_ignores_std,
    "dropout-no-rescale": dropout_no_rescale,
    "generator-ignores-seed": generator_ignores_seed,
    "draws-cpu-stream": draws_cpu_stream,
    "exponential-ignores-lambd-bf16": exponential_ignores_lambd(torch.bfloat16),
    "exponential-ignores-lambd-fp16": exponential_ignores_lambd(torch.float16),
    "normal-ignores-std-fp16": normal_ignores_std_fp16,
    "uniform-short-range-bf16": uniform_short_range_bf16,
}
"""Fault name -> factory (merged into :data:`fault_backend.FAULTS`)."""
