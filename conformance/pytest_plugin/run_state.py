"""What the plugin's helper modules read of a run's state, as a structural type.

:class:`neuron_conformance.conformance.pytest_plugin.session.ConformanceSession` is built in one place
(``session.py``) and imports the modules that select tests, record results and judge fallbacks; those
modules (and the progress display it refers to) take the session as a :class:`RunState`, so that none of them imports ``session`` back, not even
for annotations (``tests/test_architecture.py`` checks for cycles through ``TYPE_CHECKING`` imports too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import pytest


class RunState(Protocol):
    """The run's state as the selection, recording, progress and fallback modules read it."""

    config: pytest.Config
    profile: Any
    """The :class:`~neuron_conformance.conformance.backend.device.DeviceProfile` under test, or None."""
    manifest: Any
    """The run's :class:`~neuron_conformance.conformance.results.manifest.Manifest`."""
    report_dir: Path
    worker: str
    is_worker: bool
    isolation_child: bool
    controls_run: bool
    identities: dict
    ops_checked: bool
    num_shards: int | None
    shard_id: int | None
    shard_durations: dict
    canary_variant: str | None
    poisoned: Any
    watch: Any
    repro_count: int
    display: Any
    terminal_file: Any

    def backend_module(self) -> str | None: ...

    def mark_ops_checked(self) -> bool: ...

    def count_repro(self) -> None: ...

    def mark_poisoned(self, nodeid: str, canary: str) -> None: ...

    def attach_display(self, display, terminal_file) -> None: ...

    def detach_display(self) -> None: ...

    def record_writer(self) -> Any: ...

    def repro_command(self, nodeid: str, sample: int | None) -> str: ...
