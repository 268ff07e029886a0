"""Shared fixtures of the op suites: OpInfo parametrization driven by the selected dtypes."""

from __future__ import annotations

import pytest

from conformance.options import selected_dtypes
from opsuites.samples import opinfo_params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize tests that take ``op_name`` and ``dtype_name`` over OpInfo x selected dtypes.

    A test module sets ``SUITE`` (suite name in records) and optionally ``OPINFO_FILTER`` (a predicate on
    OpInfos) and ``VARIANT``. The (op, dtype) list is kept in pytest's cache between sessions
    (:func:`opsuites.samples.cached_opinfo_pairs`), so collection does not import the OpInfo database.
    """
    if {"op_name", "dtype_name"} <= set(metafunc.fixturenames):
        module = metafunc.module
        params = opinfo_params(selected_dtypes(metafunc.config), getattr(module, "SUITE"),
                               variant=getattr(module, "VARIANT", "function"),
                               predicate=getattr(module, "OPINFO_FILTER", None),
                               cache=getattr(metafunc.config, "cache", None),
                               module_file=getattr(module, "__file__", None))
        metafunc.parametrize(("op_name", "dtype_name"), params)


@pytest.fixture
def sample_index(request) -> int | None:
    """The ``--sample`` index to replay, or None for every sample."""
    from conformance.plugin import get_state

    return get_state(request.config).sample
