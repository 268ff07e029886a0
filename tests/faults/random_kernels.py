"""Wrong random kernels for the random_ops fault tests, each a way a backend's generator goes wrong.

Each factory returns what :mod:`fault_backend` installs: one :class:`conformance.emulator.faults.Fault`,
or a tuple of them when the overload the suite calls reaches the device as different overloads in mirror
mode (a direct kernel) and device mode (CompositeExplicitAutograd decomposing, e.g. ``randperm`` into
``randperm.generator`` and ``randperm.generator_out``). The kernels receive neuron tensors and write the
wrong answer into the device result through zero-copy CPU aliases
(:func:`conformance.emulator.storage.cpu_alias`).
"""

from __future__ import annotations

import torch

from conformance.emulator import faults, storage

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
    return tuple(faults.override(name, _duplicate) for name in
                 ("aten::randperm", "aten::randperm.generator", "aten::randperm.generator_out", "aten::randperm.out"))


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


RANDOM_FAULTS = {
    "uniform-constant": uniform_constant,
    "randperm-duplicate": randperm_duplicate,
    "bernoulli-ignores-p": bernoulli_ignores_p,
    "normal-ignores-std": normal_ignores_std,
    "dropout-no-rescale": dropout_no_rescale,
    "generator-ignores-seed": generator_ignores_seed,
    "draws-cpu-stream": draws_cpu_stream,
}
"""Fault name -> factory (merged into :data:`fault_backend.FAULTS`)."""
