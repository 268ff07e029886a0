"""Peak resident memory of the calling process, for records and benchmarks.

One concern: read the process's own high-water mark of resident memory, in MiB. Torch-free, so the
benchmarks' pytest plugin can import it before torch is imported.

Rule: the peak is ``VmHWM`` of ``/proc/self/status`` (Linux ``proc(5)``: "Peak resident set size",
in KiB). ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` is used only where there is no ``/proc``: on
Linux it is not the process's own peak after ``fork`` + ``exec``, because the kernel keeps the parent's
high-water mark in the child's signal struct (``setmax_mm_hiwater_rss`` in ``fs/exec.c``), so every xdist
worker and every launched rank would report at least its parent's size.
"""

from __future__ import annotations

import resource


def peak_rss_mib() -> float:
    """The calling process's peak resident set size, in MiB (1 MiB = 1,048,576 bytes), rounded to 0.1.

    ``VmHWM`` of ``/proc/self/status`` where readable; otherwise ``ru_maxrss`` of
    ``getrusage(RUSAGE_SELF)`` (KiB on Linux, bytes on macOS: the fallback assumes KiB, so on macOS it
    reads 1,024 times too large). Never raises.
    """
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
