"""Mutable (``Tensor(a!)``) arguments that the CPU kernel resizes: in-place ops that grow ``self``.

The fallback hands CPU kernels zero-copy aliases whose storages cannot grow; a kernel that resizes a
mutable argument beyond its storage (``addbmm_`` turns a ``(1,)`` ``self`` into ``(n, p)``) is rerun on a
resizable copy and the neuron tensor re-pointed, as ``out=`` arguments are (fallback._run_growing_writes).
"""

from __future__ import annotations

import warnings

import pytest
import torch


def test_addbmm_inplace_grows_self_like_cpu():
    torch.manual_seed(0)
    cpu_self, b1, b2 = torch.randn(1), torch.randn(3, 5, 4), torch.randn(3, 4, 10)
    dev_self = cpu_self.to("neuron")
    result = dev_self.addbmm_(b1.to("neuron"), b2.to("neuron"), beta=0.5, alpha=2.0)
    expected = cpu_self.clone().addbmm_(b1, b2, beta=0.5, alpha=2.0)
    assert result is dev_self
    assert dev_self.device.type == "neuron"
    assert dev_self.shape == expected.shape == (5, 10)
    assert dev_self.stride() == expected.stride()
    assert torch.equal(dev_self.cpu(), expected)
    assert dev_self.untyped_storage().nbytes() >= 5 * 10 * 4


def test_addbmm_inplace_that_fits_keeps_the_storage():
    torch.manual_seed(1)
    cpu_self, b1, b2 = torch.randn(2, 3), torch.randn(4, 2, 5), torch.randn(4, 5, 3)
    dev_self = cpu_self.to("neuron")
    ptr = dev_self.untyped_storage().data_ptr()
    dev_self.addbmm_(b1.to("neuron"), b2.to("neuron"))
    assert dev_self.untyped_storage().data_ptr() == ptr
    assert torch.equal(dev_self.cpu(), cpu_self.clone().addbmm_(b1, b2))


@pytest.fixture(scope="module")
def grow_op():
    """A custom op with two mutable arguments whose CPU kernel grows the first one.

    ``emu_test_grow::grow_(Tensor(a!) self, Tensor(b!) other, int n) -> ()``: ``self`` becomes
    ``arange(n) + self[0]``, ``other`` gets ``self``'s old first element added. It has no PrivateUse1
    kernel, so neuron calls reach the boxed fallback.
    """
    lib = torch.library.Library("emu_test_grow", "DEF")
    lib.define("grow_(Tensor(a!) self, Tensor(b!) other, int n) -> ()")

    def cpu_kernel(self, other, n):
        first = self.flatten()[0].item()
        self.resize_(n)
        self.copy_(torch.arange(n, dtype=self.dtype) + first)
        other.add_(first)

    lib.impl("grow_", cpu_kernel, "CPU")
    yield torch.ops.emu_test_grow.grow_.default
    lib._destroy()


def test_any_mutable_argument_the_cpu_kernel_grows(grow_op):
    dev_self = torch.tensor([7.0, 1.0], device="neuron")
    other = torch.zeros(3, device="neuron")
    view = dev_self[1:]  # another view of the old storage
    grow_op(dev_self, other, 6)
    assert dev_self.device.type == "neuron" and dev_self.shape == (6,)
    assert dev_self.cpu().tolist() == [7.0, 8.0, 9.0, 10.0, 11.0, 12.0]
    assert other.cpu().tolist() == [7.0, 7.0, 7.0]  # the second mutable argument is written back too
    assert view.cpu().tolist() == [1.0]  # README "Limits": other views keep the old storage


@pytest.mark.parametrize(("n", "size"), [(3, 3), (4, 2)], ids=["fits", "grows"])
def test_mutable_arguments_sharing_one_storage_match_cpu(grow_op, n, size):
    # self and other view one storage of `size` floats; on CPU, growing self past it reallocates the
    # storage, which other sees too
    results = {}
    for device in ("cpu", "neuron"):
        base = torch.zeros(size, device=device)
        base[0] = 5.0
        dev_self, other = base[:1], base[1:]
        grow_op(dev_self, other, n)
        results[device] = (dev_self.cpu(), other.cpu())
        if device == "neuron":
            moved = dev_self.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
            assert moved == (n > size)
            assert dev_self.untyped_storage().data_ptr() == other.untyped_storage().data_ptr()
    assert torch.equal(results["neuron"][0], results["cpu"][0])
    assert torch.equal(results["neuron"][1], results["cpu"][1])


def test_growing_a_read_only_argument_still_raises():
    # only mutable arguments get resizable copies: a kernel growing an input it may not write raises the
    # CPU error once (no loop, no silent reallocation of device memory)
    lib = torch.library.Library("emu_test_grow_ro", "DEF")
    try:
        lib.define("bad_(Tensor(a!) self, Tensor other) -> ()")
        calls = []

        def cpu_kernel(self, other):
            calls.append(1)
            other.resize_(64)

        lib.impl("bad_", cpu_kernel, "CPU")
        with pytest.raises(RuntimeError, match="Trying to resize storage that is not resizable"):
            torch.ops.emu_test_grow_ro.bad_(torch.zeros(1, device="neuron"), torch.zeros(1, device="neuron"))
        assert len(calls) == 2  # the first run and one rerun
    finally:
        lib._destroy()


def test_resize_output_on_a_neuron_tensor():
    out = torch.empty(0, device="neuron")
    torch.ops.aten._resize_output_(out, (2, 3), out.device)
    assert out.shape == (2, 3)
    out2 = torch.empty(4, device="neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.ops.aten._resize_output_(out2, (5,), torch.device("neuron"))
    assert out2.shape == (5,)
    assert any("was resized" in str(w.message) for w in caught)
    with pytest.raises(RuntimeError, match="correct device"):
        torch.ops.aten._resize_output_(out2, (5,), torch.device("cpu"))
