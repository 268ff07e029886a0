"""The process environment a backend changes while the harness loads it, kept from the processes the run starts.

A backend may set process environment variables when it is imported or first used: a runtime that points
``PYTHONEXECUTABLE`` at its interpreter, a cache folder, a marker saying its kernels are set up. The process
that controls an xdist or ``--conformance-isolate`` run loads the backend only to resolve the device; the
processes that run the tests (xdist workers, isolation children) and the preflight child load it again,
each for itself. Had they inherited the controller's changes, a backend that sets up its runtime once per
process would find it set up by another process, and fail in every worker although it works alone.

So the controlling process takes a :class:`Snapshot` before it imports the backend; once the device is
resolved, the preflight child gets the environment of the snapshot, and a controller that runs no test
itself puts its own environment back (:meth:`Snapshot.restore`) before xdist or isolation start their
processes. A process that runs the tests itself (``-n 0``) keeps what its backend set: that is the
backend's own process. The report header names the variables put back. Torch-free.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, MutableMapping


class Snapshot:
    """The process environment at one moment, to compare with and to go back to.

    Args:
        environ: the mapping to watch (``os.environ``; a test passes a dict).
    """

    def __init__(self, environ: MutableMapping[str, str] | None = None):
        self._environ = os.environ if environ is None else environ
        self.before: dict[str, str] = dict(self._environ)

    def changed(self, keep: Iterable[str] = ()) -> list[str]:
        """The names set, changed or removed since the snapshot, sorted, leaving out ``keep``."""
        kept = set(keep)
        now = self._environ
        names = {n for n in now if self.before.get(n) != now[n]} | {n for n in self.before if n not in now}
        return sorted(names - kept)

    def environ(self, keep: Iterable[str] = ()) -> dict[str, str]:
        """The environment of the snapshot, with the current values of the names in ``keep``: what a child
        process that loads the backend itself should start with."""
        env = dict(self.before)
        for name in keep:
            if name in self._environ:
                env[name] = self._environ[name]
            else:
                env.pop(name, None)
        return env

    def restore(self, keep: Iterable[str] = ()) -> list[str]:
        """Put back every variable changed since the snapshot, except those in ``keep``; returns their names."""
        names = self.changed(keep)
        for name in names:
            if name in self.before:
                self._environ[name] = self.before[name]
            else:
                self._environ.pop(name, None)
        return names


def describe(names: Iterable[str], limit: int = 8) -> str:
    """``A, B, C`` (at most ``limit`` names, then ``and N more``)."""
    names = list(names)
    text = ", ".join(names[:limit])
    return text + (f" and {len(names) - limit} more" if len(names) > limit else "")


def child_environ(base: Mapping[str, str] | None) -> dict[str, str]:
    """A copy of ``base``, or of ``os.environ`` when no snapshot was taken."""
    return dict(os.environ if base is None else base)


__all__ = ["Snapshot", "child_environ", "describe"]
