"""Whether ``torch.profiler`` works on the emulated device: one op profiled, for its API table
(:mod:`.support`).

The emulator answers this for itself, as a vendor's backend would (it imports nothing of the harness).
torch 2.13's profiler prints ``USDT: ... profiler_start/stop`` lines to file descriptor 2 from C++ for every
profile it opens; the probe keeps them off the process's stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys

import torch


@contextlib.contextmanager
def _quiet_fd2():
    """Send file descriptor 2 to ``os.devnull`` inside the block (unchanged where it cannot be duplicated)."""
    try:
        sys.stderr.flush()
        kept = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
        yield
    finally:
        os.dup2(kept, 2)
        os.close(kept)


def profile_one_op(dev: str, *, device_activity: bool) -> None:
    """Profile ``torch.ones(4, device=dev).add_(1)`` (CPU activity, plus ``ProfilerActivity.PrivateUse1``
    when ``device_activity``).

    Raises:
        NotImplementedError: the device activity is asked for but not supported, or the profile holds no
            device-side event.
        Exception: whatever the profiler or the op raises.
    """
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device_activity:
        if ProfilerActivity.PrivateUse1 not in torch._C._autograd._supported_activities():
            raise NotImplementedError("ProfilerActivity.PrivateUse1 is not a supported profiler activity")
        activities.append(ProfilerActivity.PrivateUse1)
    with _quiet_fd2(), profile(activities=activities) as prof:
        torch.ones(4, device=dev).add_(1)
    if device_activity and not any(e.device_type == torch.autograd.DeviceType.PrivateUse1 for e in prof.events()):
        raise NotImplementedError("a profile with ProfilerActivity.PrivateUse1 holds no device-side event")
