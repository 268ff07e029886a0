"""conformance/results/peak_memory.py: the process's own peak resident memory."""

import builtins
import resource

from neuron_conformance.conformance.results import peak_memory


def _current_rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        return next(int(line.split()[1]) / 1024 for line in fh if line.startswith("VmRSS:"))


def test_the_peak_is_at_least_what_the_process_holds_now():
    block = bytearray(96 * 1024 * 1024)  # zero-filled: every page is written, so resident
    now = _current_rss_mib()
    peak = peak_memory.peak_rss_mib()
    assert len(block) and now >= 96
    assert peak >= now - 0.1, (peak, now)


def test_without_proc_it_falls_back_to_ru_maxrss(monkeypatch):
    real_open = builtins.open

    def no_proc(path, *a, **k):
        if str(path).startswith("/proc/"):
            raise OSError("no /proc")
        return real_open(path, *a, **k)

    monkeypatch.setattr(builtins, "open", no_proc)
    expected = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    assert peak_memory.peak_rss_mib() == expected
