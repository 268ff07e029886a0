"""The aten op in flight, left where a dead process cannot take it with it: a small fixed-size shared buffer.

A process that runs tests keeps, beside its crash file (:mod:`neuron_conformance.conformance.survival.crash_files`), the *breadcrumb*
``<report-dir>/crash/<worker>.op``: :data:`SIZE` bytes mapped into memory with ``mmap`` (``MAP_SHARED``,
so every write lands in the kernel's page cache, which outlives the process however it dies). While a test
is traced for aten coverage (:mod:`neuron_conformance.conformance.pytest_plugin.tracing`), every aten overload entered on the device writes
its dispatcher name (``aten::neg``, ``aten::add.Tensor``) into the buffer: one ``memcpy`` of
:data:`SIZE` bytes, no system call. The watcher that writes a crash record (the xdist controller, the
isolation parent) reads the file with :func:`read_breadcrumb` after the process died.

Layout: bytes ``0..SIZE-1`` hold the UTF-8 name, NUL-padded (names longer than ``SIZE - 1`` bytes are cut).
All NUL: the test in flight is not traced (:meth:`Breadcrumb.clear`, run at each test's start and when its
trace ends); :data:`ARMED` then NULs: traced, no op entered yet (:meth:`Breadcrumb.arm`, when the trace
starts). Without tracing (``--conformance-aten-coverage off``, or a backend with no op counter under ``auto``) nothing
arms or writes the buffer, so a crash record says the op is unknown rather than guessing.

Where the name comes from: the backend's op counter (``CONFORMANCE_COUNT_OPS``, docs/architecture.md) adds
one call per overload to a dict by item assignment *before* running the kernel (the emulator does,
emulator/fallback.py), so the dict is a :class:`CountingBreadcrumb`, whose ``__setitem__``
writes the name first; the coverage ``TorchDispatchMode`` writes it before calling the overload
(:class:`neuron_conformance.conformance.results.coverage.CoverageMode`). The name is therefore the *last aten op entered on the
device*: the one that crashed when the crash is in a kernel.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

SIZE = 256
"""Bytes in the buffer (the longest aten overload name in torch 2.13 is under 80 bytes)."""
SUFFIX = ".op"
"""The breadcrumb's file name is ``<worker>.op`` in the crash folder (``<report-dir>/crash``)."""
ARMED = b"\x01"
"""First byte of a buffer whose test is traced but has entered no aten op on the device yet."""
_EMPTY = bytes(SIZE)
_ARMED = ARMED + bytes(SIZE - 1)


def breadcrumb_path(crash_dir: str | os.PathLike, worker: str) -> Path:
    """``<crash_dir>/<worker>.op``."""
    return Path(crash_dir) / f"{worker}{SUFFIX}"


class Breadcrumb:
    """The writer side: the mapped buffer of this process (module docstring).

    Args:
        path: the file to create (or overwrite) with :data:`SIZE` NUL bytes and map.

    Raises:
        OSError: the file cannot be created or mapped.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._encoded: dict[str, bytes] = {}
        with open(self.path, "w+b") as fh:
            fh.write(_EMPTY)
            fh.flush()
            self._mm = mmap.mmap(fh.fileno(), SIZE)  # the mapping stays valid after the file is closed

    def enter(self, name: str) -> None:
        """Write ``name`` (an aten overload's dispatcher name) into the buffer."""
        data = self._encoded.get(name)
        if data is None:
            raw = name.encode("utf-8", "replace")[: SIZE - 1]
            data = self._encoded[name] = raw + bytes(SIZE - len(raw))
        self._mm[:SIZE] = data

    def clear(self) -> None:
        """Zero the buffer: the test in flight is not traced."""
        self._mm[:SIZE] = _EMPTY

    def arm(self) -> None:
        """Mark the buffer traced with no op entered yet (:data:`ARMED`)."""
        self._mm[:SIZE] = _ARMED

    def close(self) -> None:
        """Unmap the buffer (the file keeps its last content)."""
        self._mm.close()


class CountingBreadcrumb(dict):
    """An aten-count dict (dispatcher name -> calls) that also writes each name assigned into a
    :class:`Breadcrumb`: a backend counter doing ``counts[name] = counts.get(name, 0) + 1`` before its
    kernel leaves the name behind for a crash record. Otherwise an ordinary ``dict`` (JSON-serialisable).

    Args:
        crumb: the breadcrumb to write, or None (then only counts).
        counts: initial counts.
    """

    __slots__ = ("crumb",)

    def __init__(self, crumb: Breadcrumb | None, counts: dict | None = None):
        super().__init__(counts or {})
        self.crumb = crumb

    def __setitem__(self, name, calls) -> None:
        crumb = self.crumb
        if crumb is not None:
            crumb.enter(name)
        dict.__setitem__(self, name, calls)


def read_breadcrumb(crash_dir: str | os.PathLike, worker: str) -> tuple[bool, str | None]:
    """``(traced, name)`` from ``<crash_dir>/<worker>.op``: whether the test in flight was traced, and the
    last aten op it entered on the device (None: none, or not traced). A missing or unreadable file is
    ``(False, None)``; never raises."""
    try:
        raw = breadcrumb_path(crash_dir, worker).read_bytes()[:SIZE]
    except OSError:
        return False, None
    if raw[:1] == ARMED:
        return True, None
    name = raw.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
    return bool(name), name or None


__all__ = ["ARMED", "SIZE", "Breadcrumb", "CountingBreadcrumb", "breadcrumb_path", "read_breadcrumb"]
