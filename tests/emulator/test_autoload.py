"""``$CONFORMANCE_EMULATOR``: the ``torch.backends`` entry point that gives child processes the emulated device.

The spawned child finds the entry point through a ``*.dist-info`` folder written to a temporary directory on
its path, which is how an installed distribution declares it (``importlib.metadata``); the shared editable
install is not touched.
"""

from __future__ import annotations

import multiprocessing
import sys

import pytest
import tomllib

from neuron_conformance.emulator import _state, autoload

from .conftest import REPO_ROOT


def test_pyproject_declares_the_entry_point():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["torch.backends"] == {
        "conformance-emulator": "neuron_conformance.emulator.autoload:load"
    }


@pytest.mark.parametrize(("raw", "mode"), [(None, None), ("", None), (" device ", "device"), ("mirror", "mirror")])
def test_requested_mode(monkeypatch, raw, mode):
    if raw is None:
        monkeypatch.delenv(autoload.ENV_AUTOLOAD, raising=False)
    else:
        monkeypatch.setenv(autoload.ENV_AUTOLOAD, raw)
    assert autoload.requested_mode() == mode


def test_unknown_mode_is_one_line_naming_the_variable(monkeypatch):
    monkeypatch.setenv(autoload.ENV_AUTOLOAD, "gpu")
    with pytest.raises(ValueError, match=r"^CONFORMANCE_EMULATOR='gpu': accepted values are 'mirror', 'device'"):
        autoload.load()


def test_unset_load_installs_nothing(monkeypatch):
    monkeypatch.delenv(autoload.ENV_AUTOLOAD, raising=False)
    monkeypatch.setattr(_state, "autoload_mode", None)
    assert autoload.load() is None
    assert _state.autoload_mode is None


def test_harness_install_same_mode_is_noop_other_mode_is_an_error(monkeypatch, emulator):
    previous = emulator.get_mode()
    monkeypatch.setattr(_state, "autoload_mode", previous)
    emulator.install(mode=previous)
    assert emulator.get_mode() == previous
    other = "device" if previous == "mirror" else "mirror"
    with pytest.raises(ValueError, match=rf"installed at import torch in '{previous}' mode .*asks for '{other}'"):
        emulator.install(mode=other)
    assert emulator.get_mode() == previous


def _child_report() -> tuple:
    """Run in a spawned child: what it sees after a plain ``import torch``, and how the harness then
    describes the device (its own emulator in the same mode; another mode is a one-line DeviceError)."""
    import torch
    import torch.distributed as dist

    from neuron_conformance.conformance.backend.device import DeviceError, resolve_profile
    from neuron_conformance.emulator import _state as state

    x = torch.ones(2, device="neuron") * 3
    profile = resolve_profile(device="neuron", emulator_mode="device")
    try:
        resolve_profile(device="neuron", emulator_mode="mirror")
        clash = ""
    except DeviceError as exc:
        clash = str(exc)
    return (
        str(x.device),
        torch.accelerator.current_accelerator().type,
        state.autoload_mode,
        dist.get_default_backend_for_device("neuron"),
        profile.emulated,
        profile.registered_by,
        "CONFORMANCE_EMULATOR=device" in clash and "\n" not in clash,
    )


def test_spawned_child_sees_the_emulated_device(monkeypatch, tmp_path):
    info = tmp_path / "neuron_conformance_autoload-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: neuron-conformance-autoload\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[torch.backends]\nconformance-emulator = neuron_conformance.emulator.autoload:load\n"
    )
    monkeypatch.setenv(autoload.ENV_AUTOLOAD, "device")
    monkeypatch.delenv("TORCH_DEVICE_BACKEND_AUTOLOAD", raising=False)
    monkeypatch.setattr(sys, "path", [str(tmp_path), str(REPO_ROOT), *sys.path])  # the child's sys.path
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        seen = pool.apply_async(_child_report).get(timeout=120)
    assert seen == ("neuron:0", "neuron", "device", "neuron_gloo", True, "harness", True)
