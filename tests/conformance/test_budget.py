"""neuron_conformance.conformance.backend.budget: sizes, the --conformance-memory-budget option and the budget a test is gated by."""

from __future__ import annotations

import types

import pytest

from neuron_conformance.conformance.backend.budget import (
    BudgetError,
    MemoryBudget,
    declared_budget,
    format_size,
    parse_size,
    resolve_budget,
)
from neuron_conformance.conformance.backend.device import DeviceProfile


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [
        ("3000000000", 3_000_000_000),
        ("2GiB", 2 << 30),
        ("2.5 GiB", int(2.5 * (1 << 30))),
        ("512MiB", 512 << 20),
        ("4G", 4 << 30),
        ("8GB", 8 * 10**9),
        ("0", 0),
        (17, 17),
        ("1kib", 1024),
    ],
)
def test_parse_size(text, nbytes):
    assert parse_size(text) == nbytes


@pytest.mark.parametrize("text", ["", "lots", "2 parsecs", "-1", True, -5])
def test_parse_size_refuses_with_the_accepted_forms(text):
    with pytest.raises(BudgetError, match="is not a size|negative"):
        parse_size(text)


def test_format_size():
    assert format_size(int(4.3 * (1 << 30))) == "4.3 GiB"
    assert format_size(17) == "17 B"


def _profile(**kw):
    base = dict(type="neuron", backend="vendor_backend", backend_version="1")
    base.update(kw)
    return DeviceProfile(**base)


def test_option_wins_over_the_declared_budget():
    budget = resolve_budget(1 << 30, _profile(memory_budget=8 << 30))
    assert budget == MemoryBudget(1 << 30, "--conformance-memory-budget")


def test_declared_budget_when_auto():
    budget = resolve_budget("auto", _profile(memory_budget=8 << 30))
    assert budget.nbytes == 8 << 30 and "CONFORMANCE_MEMORY_BUDGET of vendor_backend" in budget.source


def test_cpu_has_no_budget_and_the_skip_reason_says_what_to_do():
    budget = resolve_budget(None, _profile(type="cpu", backend="torch"))
    assert budget.nbytes is None
    reason = budget.shortfall(2 << 30)
    assert (
        "needs 2.0 GiB" in reason and "--conformance-memory-budget" in reason and "CONFORMANCE_MEMORY_BUDGET" in reason
    )


def test_shortfall_names_both_sizes():
    budget = MemoryBudget(2 << 30, "--conformance-memory-budget")
    assert budget.shortfall(1 << 30) is None
    assert (
        budget.shortfall(int(4.3 * (1 << 30)))
        == "needs 4.3 GiB of device memory, budget 2.0 GiB (--conformance-memory-budget)"
    )


def test_declared_budget_of_a_module():
    assert declared_budget(types.SimpleNamespace(CONFORMANCE_MEMORY_BUDGET="6GiB")) == 6 << 30
    assert declared_budget(types.SimpleNamespace()) is None
    with pytest.raises(BudgetError, match="CONFORMANCE_MEMORY_BUDGET of vendor"):
        declared_budget(types.SimpleNamespace(__name__="vendor", CONFORMANCE_MEMORY_BUDGET="much"))


def test_bad_option_value_stops_the_run(pytester):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--conformance-device",
        "cpu",
        "--conformance-memory-budget",
        "lots",
        "--conformance-no-report",
    )
    assert result.ret != 0
    assert "--conformance-memory-budget" in result.stdout.str() + result.stderr.str()
