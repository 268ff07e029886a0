"""Two emulator bugs the DTensor op sweep found (docs/distributed.md, "Failing on the emulated device only"),
each reproduced here on plain tensors or a plain wrapper subclass, without DTensor:

* eval-mode batch norm: the emulated device returned the CPU kernel's 0-element ``save_mean`` /
  ``save_invstd`` while its own meta kernel (what fake tensors, DTensor's sharding propagation and
  torch.compile see) and CUDA give one element per channel (emulator/batch_norm.py);
* ``max_pool1d`` and ``scaled_dot_product_attention`` in mirror mode: their ``AutogradPrivateUse1`` kernels
  aliased the bytes of a ``__torch_dispatch__`` wrapper on ``neuron`` (DTensor, TwoTensor), which has none:
  "Attempted to access the data pointer on an invalid python storage" (emulator/registrations.py).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing._internal.two_tensor import TwoTensor
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

EVAL_OPS = {
    "native_batch_norm": lambda x, w, b, rm, rv: aten.native_batch_norm(x, w, b, rm, rv, False, 0.1, 1e-5),
    "_native_batch_norm_legit": lambda x, w, b, rm, rv: aten._native_batch_norm_legit(
        x, w, b, rm, rv, False, 0.1, 1e-5
    ),
    "_native_batch_norm_legit_no_training": lambda x, w, b, rm, rv: aten._native_batch_norm_legit_no_training(
        x, w, b, rm, rv, 0.1, 1e-5
    ),
    "_batch_norm_no_update": lambda x, w, b, rm, rv: aten._batch_norm_no_update(x, w, b, rm, rv, 0.1, 1e-5),
}


def _bn_args(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return [
        torch.randn(3, 4, 5, generator=g).to(dtype),
        torch.rand(4, generator=g) + 0.5,
        torch.randn(4, generator=g),
        torch.randn(4, generator=g),
        torch.rand(4, generator=g) + 0.1,
    ]


def _shapes(out):
    return [(tuple(t.shape), t.dtype) for t in out]


@pytest.mark.parametrize("name", sorted(EVAL_OPS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_eval_batch_norm_statistics_follow_the_meta_kernel(name, dtype, mirror_mode):
    fn, args = EVAL_OPS[name], _bn_args(dtype)
    cpu = fn(*args)
    dev_args = [a.to("neuron") for a in args]
    dev = fn(*dev_args)
    meta = fn(*[a.to("meta") for a in args])
    mode = FakeTensorMode()
    fakes = [mode.from_tensor(a) for a in dev_args]
    with mode:  # what DTensor's sharding propagation and torch.compile see on the device
        fake = fn(*fakes)
    assert _shapes(dev) == _shapes(meta) == _shapes(fake)
    assert tuple(dev[1].shape) == tuple(dev[2].shape) == (4,) and tuple(cpu[1].shape) == (0,)
    assert dev[1].dtype == torch.float32
    assert torch.equal(dev[0].cpu(), cpu[0])  # the normalized output stays the CPU kernel's (mirror mode)
    assert torch.equal(dev[1].cpu(), args[3])  # CUDA's: a copy of running_mean, rsqrt(running_var + eps)
    assert torch.equal(dev[2].cpu(), torch.rsqrt(args[4] + 1e-5))


def test_training_batch_norm_is_unchanged_and_updates_running_stats():
    args = _bn_args()
    cpu_args = [a.clone() for a in args]
    dev_args = [a.to("neuron") for a in args]
    cpu = aten.native_batch_norm(*cpu_args, True, 0.1, 1e-5)
    dev = aten.native_batch_norm(*dev_args, True, 0.1, 1e-5)
    for d, c in zip(dev, cpu):
        assert torch.equal(d.cpu(), c)
    assert torch.equal(dev_args[3].cpu(), cpu_args[3]) and torch.equal(dev_args[4].cpu(), cpu_args[4])


def test_eval_batch_norm_out_is_resized_like_cuda():
    args = [a.to("neuron") for a in _bn_args()]
    out, mean, invstd = (torch.empty(0, device="neuron") for _ in range(3))
    aten.native_batch_norm.out(*args, False, 0.1, 1e-5, out=out, save_mean=mean, save_invstd=invstd)
    assert tuple(out.shape) == (3, 4, 5) and tuple(mean.shape) == tuple(invstd.shape) == (4,)
    assert torch.equal(mean.cpu(), args[3].cpu())


def test_eval_batch_norm_gradients_equal_the_cpu(mirror_mode):
    """The backward kernels read the running statistics in evaluation mode, not save_mean/save_invstd."""
    x, w, b, rm, rv = _bn_args()
    grads = []
    for device in ("cpu", "neuron"):
        xi, wi = x.to(device, copy=True).requires_grad_(), w.to(device, copy=True).requires_grad_()
        y = F.batch_norm(xi, rm.to(device), rv.to(device), wi, b.to(device), training=False)
        y.square().sum().backward()
        grads.append((xi.grad.cpu(), wi.grad.cpu()))
    assert all(torch.equal(d, c) for d, c in zip(grads[1], grads[0]))


def _two(t):
    return TwoTensor(t, t.clone())


@pytest.mark.parametrize("shape", [(2, 3, 8), (3, 8)])
def test_max_pool1d_of_a_wrapper_subclass_on_the_device(shape, mirror_mode):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    out = F.max_pool1d(_two(x.to("neuron")), 2)
    assert isinstance(out, TwoTensor) and out.device.type == "neuron"
    assert torch.equal(out.a.cpu(), F.max_pool1d(x, 2)) and torch.equal(out.b.cpu(), F.max_pool1d(x, 2))


def test_sdpa_of_a_wrapper_subclass_on_the_device(mirror_mode):
    q = torch.randn(2, 2, 4, 8, generator=torch.Generator().manual_seed(2))
    out = F.scaled_dot_product_attention(*(_two(q.to("neuron")) for _ in range(3)))
    assert isinstance(out, TwoTensor)
    torch.testing.assert_close(out.a.cpu(), F.scaled_dot_product_attention(q, q, q))


class _Seen(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func.__name__)
        return func(*args, **(kwargs or {}))


def test_max_pool1d_under_a_dispatch_mode_takes_the_cpus_branch(mirror_mode):
    """ATen's composite takes ``max_pool1d_with_indices`` for any input while a dispatch mode is active
    (``isTensorSubclassLike``); mirror mode follows the CPU there too."""
    x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(3))
    seen = {}
    for device in ("cpu", "neuron"):
        xd = x.to(device)
        with _Seen() as mode:
            out = F.max_pool1d(xd, 2)
        seen[device] = [op for op in mode.ops if "max_pool" in op]
        assert torch.equal(out.cpu(), F.max_pool1d(x, 2))
    assert seen["neuron"] == seen["cpu"] == ["max_pool2d_with_indices.default"]
