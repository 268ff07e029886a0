"""The torch floor: parts that need a newer torch than the running one are left out with one line.

The project runs on torch >= 2.9; the emulated device needs torch >= 2.13 and the zoo's compile checks
``torch.compiler.set_default_backend``. On an older torch a run that names no device tests ``cpu`` and says
why, the compile checks are skipped naming the torch they need, and nothing is a collection error.
"""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.backend import device as device_mod
from neuron_conformance.conformance.pytest_plugin import torch_floor
from neuron_conformance.emulator import requirements


@pytest.fixture
def no_notes(monkeypatch):
    monkeypatch.setattr(torch_floor, "_notes", [])


def test_the_running_torch_runs_the_emulated_device_and_every_part(no_notes):
    assert requirements.unmet() is None
    assert torch_floor.emulated_unmet("neuron") is None
    assert torch_floor.skip_reason(torch_floor.DEFAULT_BACKEND) is None
    assert torch_floor.summary_line() is None


def test_an_older_release_is_named_with_the_release_the_emulator_needs(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.9.1+cu128")
    reason = requirements.unmet()
    assert reason == f"the emulated device needs torch >= {requirements.TORCH} (torch 2.9.1+cu128 is older)"
    with pytest.raises(ImportError, match=f"torch >= {requirements.TORCH}"):
        requirements.check()


def test_a_missing_api_is_named(monkeypatch):
    monkeypatch.setattr(requirements, "APIS", (*requirements.APIS, "torch._C._no_such_module.hook"))
    reason = requirements.unmet()
    assert reason is not None and "lacks torch._C._no_such_module.hook" in reason
    assert requirements.missing_apis() == ["torch._C._no_such_module.hook"]


def test_a_part_whose_api_is_missing_is_skipped_naming_the_release(monkeypatch, no_notes):
    part = torch_floor.Part("the widgets", "2.99", ("torch.compiler.no_such_function", "torch.compile"))
    reason = torch_floor.skip_reason(part)
    assert reason == f"needs torch >= 2.99 (torch {torch.__version__} lacks torch.compiler.no_such_function)"
    monkeypatch.setattr(torch_floor, "PARTS", (part,))
    line = torch_floor.summary_line()
    assert line is not None and "\n" not in line and "the widgets: needs torch >= 2.99" in line


def test_without_the_emulated_device_the_default_device_is_cpu_and_the_line_says_why(monkeypatch, no_notes):
    monkeypatch.setattr(device_mod, "available_accelerator", lambda: None)
    monkeypatch.setattr(torch_floor, "emulated_unmet", lambda device: "the emulated device needs torch >= 99.0")
    profile = device_mod.resolve_profile()
    assert profile.type == "cpu"
    line = torch_floor.summary_line()
    assert line is not None
    assert "the emulated neuron device, so this run tests cpu (the emulated device needs torch >= 99.0)" in line


def test_a_torch_below_the_floor_is_named(monkeypatch):
    assert torch_floor.below_floor() is None
    monkeypatch.setattr(torch, "__version__", "2.8.0+cpu")
    assert torch_floor.below_floor() == f"the harness needs torch >= {torch_floor.FLOOR}; this is torch 2.8.0+cpu"
