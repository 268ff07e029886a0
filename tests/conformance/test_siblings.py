"""neuron_conformance.conformance.siblings: the project's own packages win over same-named folders."""

from __future__ import annotations

import sys
import types

import pytest

from neuron_conformance.conformance import siblings


def test_namespace_package_is_replaced_by_the_project_package(monkeypatch):
    fake = types.ModuleType("reports")  # what a ./reports folder without __init__.py imports as
    fake.__path__ = ["/somewhere/reports"]
    monkeypatch.setitem(sys.modules, "reports", fake)
    module = siblings.ensure_own_package("reports")
    assert module is not fake and module.__file__ == str(siblings.ROOT / "reports" / "__init__.py")
    assert sys.modules["reports"] is module and hasattr(module, "build")


def test_unknown_package_is_an_import_error():
    with pytest.raises(ImportError, match="no package 'no_such_pkg_xyz'"):
        siblings.ensure_own_package("no_such_pkg_xyz")
