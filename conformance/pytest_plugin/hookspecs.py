"""Hooks that test suites may implement, registered by the plugin with ``pytest_addhooks``.

The harness calls these hooks; a suite implements them in the ``conftest.py`` of its folder, so an
answer applies to that folder's tests only (the harness calls them through the item's hook relay,
``item.ihook``). The pattern is pytest-xdist's ``xdist/newhooks.py``.
"""

from __future__ import annotations

import pytest


@pytest.hookspec(firstresult=True)
def pytest_conformance_trace_coverage(item: pytest.Item, uses_dispatch_mode: bool) -> bool | None:
    """Whether to trace the aten coverage of ``item``'s call phase (:mod:`neuron_conformance.conformance.pytest_plugin.tracing`).

    Args:
        item: the test about to run.
        uses_dispatch_mode: True when there is no backend op counter, so tracing runs the test under a
            ``TorchDispatchMode`` (which ``torch.compile`` and some model code do not tolerate).

    Returns:
        True to trace, False not to, None to leave the decision to another implementation; no answer at
        all means no tracing. The first non-None answer wins.
    """
