"""install(): idempotent, import has no side effects, refusal when another backend owns PrivateUse1."""

from __future__ import annotations

import torch

import neuron_conformance.emulator as emu


def test_install_is_idempotent():
    module = torch.neuron
    emu.install(mode="mirror")
    emu.install()
    assert torch.neuron is module
    assert torch._C._get_privateuse1_backend_name() == "neuron"


def test_import_alone_installs_nothing(run_py):
    proc = run_py(
        """
        import torch
        import neuron_conformance.emulator as emu
        import neuron_conformance.emulator.faults, neuron_conformance.emulator.support
        print(torch._C._get_privateuse1_backend_name(), emu.is_installed(), hasattr(torch, "neuron"))
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["privateuseone", "False", "False"]


def test_backend_module_import_installs(run_py):
    proc = run_py(
        """
        import torch
        import neuron_conformance.emulator.backend as b
        print(torch._C._get_privateuse1_backend_name(), b.CONFORMANCE_MIRRORS_CPU(), b.CONFORMANCE_DIST_BACKEND,
              torch.ones(1, device="neuron").device)
        """,
        env={"CONFORMANCE_EMULATOR_MODE": "mirror"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["neuron", "True", "neuron_gloo", "neuron:0"]


def test_refuses_when_another_backend_is_registered(run_py):
    proc = run_py(
        """
        import torch
        torch.utils.rename_privateuse1_backend("foo")
        import neuron_conformance.emulator as emu
        try:
            emu.install()
        except RuntimeError as e:
            print("REFUSED:", e)
        print(torch._C._get_privateuse1_backend_name(), emu.is_installed())
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert "REFUSED: neuron emulator: PrivateUse1 is already registered as 'foo'" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "foo False"


def test_unknown_mode_rejected():
    import pytest

    with pytest.raises(ValueError, match="unknown mode 'turbo'"):
        emu.install(mode="turbo")
    assert emu.get_mode() in emu.MODES


def test_a_later_install_without_a_mode_keeps_the_current_mode(run_py):
    """The harness installs the emulator, then sets the mode; importing the emulator's backend module later
    (the custom-op suite reads its declarations at collection) installs again without a mode, which must
    not switch a device-mode session back to mirror mode (every test collected after it would then have
    compared CPU kernels with themselves)."""
    proc = run_py(
        """
        import neuron_conformance.emulator as emu
        emu.install()
        emu.set_mode("device")
        emu.set_async(True)
        import neuron_conformance.emulator.backend as backend
        emu.install()
        print(emu.get_mode(), emu.is_async(), backend.CONFORMANCE_MIRRORS_CPU())
        emu.install(mode="mirror")
        print(emu.get_mode())
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["device", "True", "False", "mirror"]
