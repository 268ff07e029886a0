"""Seeding every random number generator in use, at a fraction of ``torch.manual_seed``'s cost.

``torch.manual_seed`` (torch/random.py) seeds the CPU generator, CUDA, MPS, XPU, MTIA and the
PrivateUse1 backend's module. For CUDA, XPU and MTIA that are not initialised it queues a lazy seed
together with ``traceback.format_stack()`` (``torch.cuda._lazy_call``): three formatted stacks per call,
about 1 ms each under pytest's deep stack, and the harness seeds before every test and every sample
list. :func:`manual_seed` has the same effect on every generator that can draw numbers now and skips the
queued seeds of devices that are not initialised (the device under test always is: the harness
allocates a tensor on it when it resolves the device).
"""

from __future__ import annotations

import torch

_LAZY_DEVICES = ("cuda", "xpu", "mtia")


def manual_seed(seed: int) -> None:
    """Seed the CPU generator, the initialised CUDA/XPU/MTIA devices, MPS and the PrivateUse1 backend's
    module (its ``manual_seed_all``, as ``torch.manual_seed`` does) with ``seed``.

    Raises:
        RuntimeError: ``seed`` is outside ``[-2**63, 2**64 - 1]`` (from the CPU generator).
    """
    seed = int(seed)
    for name in _LAZY_DEVICES:
        mod = getattr(torch, name, None)
        if mod is None:
            continue
        initialized = getattr(mod, "is_initialized", None)
        bad_fork = getattr(mod, "_is_in_bad_fork", None)
        if initialized is not None and initialized() and not (bad_fork is not None and bad_fork()):
            mod.manual_seed_all(seed)
    if torch.backends.mps.is_available():
        torch.mps.manual_seed(seed)
    custom = getattr(torch, torch._C._get_privateuse1_backend_name(), None)
    seed_all = getattr(custom, "manual_seed_all", None)
    bad_fork = getattr(custom, "_is_in_bad_fork", None)
    if seed_all is not None and not (bad_fork is not None and bad_fork()):
        seed_all(seed)
    torch.random.default_generator.manual_seed(seed)


__all__ = ["manual_seed"]
