"""The profiler's start-up probe: one ``torch.profiler.profile`` around one op on the device.

Shared by the third-party preflight (:data:`neuron_conformance.conformance.backend.probe.API_PROBES`), the emulated
device's API table (:data:`neuron_conformance.emulator.support.PROBES`) and the profiler checks of the
device API suite (:mod:`neuron_conformance.opsuites.profiler_checks`), so all three ask the same question.
"""

from __future__ import annotations

import torch

from neuron_conformance.conformance.survival.native_stderr import silenced_native_stderr


def device_activity_supported() -> bool:
    """``ProfilerActivity.PrivateUse1`` is among the activities this process's profiler supports
    (``torch._C._autograd._supported_activities()``)."""
    return torch.profiler.ProfilerActivity.PrivateUse1 in torch._C._autograd._supported_activities()


def profile_one_op(dev: torch.device | str, *, device_activity: bool) -> None:
    """Profile ``torch.ones(4, device=dev).add_(1)`` with CPU activity (and ``ProfilerActivity.PrivateUse1``
    when ``device_activity``); the profiler's native start/stop lines are kept off stderr.

    Raises:
        NotImplementedError: ``device_activity`` and the activity is not supported, or the profile holds no
            device-side event (torch 2.13 lists the PrivateUse1 activity for any renamed PrivateUse1 backend;
            only a backend that registers a device-side profiler adds device events).
        Exception: whatever the profiler or the op raises (the probes read any exception as "missing").
    """
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device_activity:
        if not device_activity_supported():
            raise NotImplementedError("ProfilerActivity.PrivateUse1 is not a supported profiler activity")
        activities.append(ProfilerActivity.PrivateUse1)
    with silenced_native_stderr(), profile(activities=activities) as prof:
        torch.ones(4, device=dev).add_(1)
    events = prof.events()
    if device_activity and not any(e.device_type == torch.autograd.DeviceType.PrivateUse1 for e in events):
        raise NotImplementedError("a profile with ProfilerActivity.PrivateUse1 holds no device-side event")


__all__ = ["device_activity_supported", "profile_one_op"]
