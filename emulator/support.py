"""Which device APIs work on the emulated device: ``native``, ``shim`` or ``missing``, by probing.

:func:`api_support` calls each API for real (small tensors, no crash-prone calls): once with the shim and
the storage resize guard of :mod:`.storage` disabled (success -> ``native``), then as the process is now
(success -> ``shim``: a Python patch made it work; failure -> ``missing``). Nothing is hard-coded, so a torch
upgrade that routes more calls to Python backends turns entries ``native`` by itself, and the report never
claims more than is true."""

from __future__ import annotations

import io
from typing import Callable

import torch

from . import _state, shim, storage
from .profiler import profile_one_op


def _dev() -> str:
    return _state.BACKEND_NAME


def _synchronize():
    torch.accelerator.synchronize()


def _memory_allocated():
    before = torch.accelerator.memory_allocated()
    t = torch.empty(1024, device=_dev())
    after = torch.accelerator.memory_allocated()
    del t
    if after - before < 4096:
        raise AssertionError(f"memory_allocated did not count a 4096-byte tensor ({before} -> {after})")


def _event_elapsed():
    start = torch.Event(device=_dev(), enable_timing=True)
    end = torch.Event(device=_dev(), enable_timing=True)
    start.record()
    torch.ones(4, device=_dev()).sum()
    end.record()
    ms = start.elapsed_time(end)
    if not ms >= 0.0:
        raise AssertionError(f"elapsed_time returned {ms!r}")


def _event_sync():
    ev = torch.Event(device=_dev())
    ev.record()
    ev.synchronize()


def _stream():
    s = torch.Stream(device=_dev())
    s.synchronize()
    s.query()


def _generator():
    torch.Generator(_dev())


def _pin_memory():
    if not torch.empty(4).pin_memory().is_pinned():
        raise RuntimeError("pin_memory() returned an unpinned tensor")


def _storage_resize():
    torch.empty(4, device=_dev()).untyped_storage().resize_(64)


def _storage_free_realloc():
    t = torch.ones(4, device=_dev())
    st = t.untyped_storage()
    st.resize_(0)
    if st.nbytes() != 0:
        raise AssertionError(f"resize_(0) left {st.nbytes()} bytes")
    st.resize_(16)
    t.fill_(2.0)


def _save_load():
    buf = io.BytesIO()
    torch.save(torch.arange(3.0, device=_dev()), buf)
    buf.seek(0)
    torch.load(buf, map_location=_dev())


def _non_blocking():
    torch.ones(3, device=_dev()).to("cpu", non_blocking=True)


def _autocast():
    with torch.autocast(device_type=_dev(), dtype=torch.bfloat16):
        out = torch.mm(torch.ones(2, 2, device=_dev()), torch.ones(2, 2, device=_dev()))
    if out.dtype != torch.bfloat16:
        raise AssertionError(f"autocast mm gave {out.dtype}")


def _second_device():
    torch.empty(1, device=f"{_dev()}:1")


def _mod(name: str) -> Callable[[], object]:
    return lambda: getattr(getattr(torch, _dev()), name)()


PROBES: dict[str, Callable[[], object]] = {
    "torch.accelerator.is_available": lambda: (
        torch.accelerator.is_available() or (_ for _ in ()).throw(AssertionError())
    ),
    "torch.accelerator.current_accelerator": lambda: (
        torch.accelerator.current_accelerator().type == _dev() or (_ for _ in ()).throw(AssertionError())
    ),
    "torch.accelerator.device_count": lambda: torch.accelerator.device_count(),
    "torch.accelerator.current_device_index": lambda: torch.accelerator.current_device_index(),
    "torch.accelerator.set_device_index": lambda: torch.accelerator.set_device_index(0),
    "torch.accelerator.synchronize": _synchronize,
    "torch.accelerator.memory_allocated": _memory_allocated,
    "torch.accelerator.max_memory_allocated": lambda: torch.accelerator.max_memory_allocated(),
    "torch.accelerator.memory_reserved": lambda: torch.accelerator.memory_reserved(),
    "torch.accelerator.memory_stats": lambda: torch.accelerator.memory_stats(),
    "torch.accelerator.reset_peak_memory_stats": lambda: torch.accelerator.reset_peak_memory_stats(),
    "torch.accelerator.empty_cache": lambda: torch.accelerator.empty_cache(),
    "torch.accelerator.get_memory_info": lambda: torch.accelerator.get_memory_info(),
    "torch.accelerator.get_device_capability": lambda: torch.accelerator.get_device_capability(),
    "torch.Stream": _stream,
    "torch.Event.synchronize": _event_sync,
    "torch.Event.elapsed_time": _event_elapsed,
    "torch.Generator(device)": _generator,
    "pin_memory": _pin_memory,
    "UntypedStorage.resize_": _storage_resize,
    "UntypedStorage.resize_(0) and back (FSDP2)": _storage_free_realloc,
    "torch.save/torch.load(map_location)": _save_load,
    "Tensor.to(non_blocking=True)": _non_blocking,
    "torch.autocast": _autocast,
    "multiple devices": _second_device,
    "torch.profiler": lambda: profile_one_op(_dev(), device_activity=False),
    "torch.profiler (ProfilerActivity.PrivateUse1)": lambda: profile_one_op(_dev(), device_activity=True),
    "torch.neuron.synchronize": _mod("synchronize"),
    "torch.neuron.memory_allocated": _mod("memory_allocated"),
    "torch.neuron.get_rng_state": _mod("get_rng_state"),
}
"""API name -> probe that returns normally only when the API works on the emulated device."""


def _works(probe: Callable[[], object]) -> bool:
    try:
        probe()
    except Exception:  # a probe failing in any way means "does not work"
        return False
    return True


def api_support() -> dict[str, str]:
    """Map each name in :data:`PROBES` to ``"native"``, ``"shim"`` or ``"missing"``.

    Raises:
        RuntimeError: when the emulator is not installed.
    """
    if not _state.installed:
        raise RuntimeError("neuron emulator: api_support() needs neuron_conformance.emulator.install() first")
    result: dict[str, str] = {}
    for name, probe in PROBES.items():
        with shim.disabled(), storage.resize_guard_disabled():
            native = _works(probe)
        if native:
            result[name] = "native"
        elif _works(probe):  # works only with the shim or the storage resize guard (Python patches)
            result[name] = "shim"
        else:
            result[name] = "missing"
    return result
