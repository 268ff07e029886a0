"""Seeding every random number generator in use, at a fraction of ``torch.manual_seed``'s cost.

``torch.manual_seed`` (torch/random.py) seeds the CPU generator, CUDA, MPS, XPU, MTIA and the
PrivateUse1 backend's module. For CUDA, XPU and MTIA that are not initialised it queues a lazy seed
together with ``traceback.format_stack()`` (``torch.cuda._lazy_call``): three formatted stacks per call,
about 1 ms each under pytest's deep stack, and the harness seeds before every test and every sample
list. :func:`manual_seed` has the same effect on every generator that can draw numbers now and skips the
queued seeds of devices that are not initialised (the device under test always is: the harness
allocates a tensor on it when it resolves the device).

:func:`frozen_rng_state` is ``torch.testing``'s ``freeze_rng_state`` for a device that may lack an RNG state
API: the op suites' sample wrappers freeze the RNG around every random op, and a backend without
``get_rng_state`` would fail every such op although its kernels work. That gap is the device API check's
(``rng.state`` in the device-API suite, the preflight's ``get_rng_state/set_rng_state`` row), charged once.
"""

from __future__ import annotations

import contextlib

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


def _accelerator_module():
    """The device module of the available accelerator (``torch.<type>``), or None."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None or not accelerator.is_available():
        return None
    try:
        current = accelerator.current_accelerator(check_available=True)
    except TypeError:  # torch < 2.8: no check_available argument
        current = accelerator.current_accelerator()
    return torch.get_device_module(current.type) if current is not None else None


def _call_or_none(fn, *args):
    """``fn(*args)``, or None when ``fn`` is missing or raises: a device RNG-state API that fails is the device
    API check's finding, not the finding of the test that froze the RNG around its op."""
    if not callable(fn):
        return None
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - see the docstring
        return None


@contextlib.contextmanager
def frozen_rng_state():
    """Save the CPU's RNG state and the accelerator's where its device module can give it, and put them back
    on exit (``torch.testing._utils.freeze_rng_state``, which raises on a device module without
    ``get_rng_state``). The CPU's state is always restored; the device's only when it could be read."""
    module = _accelerator_module()
    with torch.utils._mode_utils.no_dispatch(), torch._C._DisableFuncTorch():
        cpu_state = torch.get_rng_state()
        device_state = _call_or_none(getattr(module, "get_rng_state", None))
    try:
        yield
    finally:
        with torch.utils._mode_utils.no_dispatch(), torch._C._DisableFuncTorch():
            if device_state is not None:
                _call_or_none(getattr(module, "set_rng_state", None), device_state)
            torch.set_rng_state(cpu_state)


__all__ = ["frozen_rng_state", "manual_seed"]
