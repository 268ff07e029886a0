"""Fault injection helpers: non-crashing kinds in process, crash kinds in a subprocess."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import torch

from neuron_conformance.emulator import faults


@pytest.fixture(autouse=True)
def _clean_faults():
    yield
    faults.restore_all()


def _mats():
    torch.manual_seed(0)
    return torch.randn(3, 3, device="neuron"), torch.randn(3, 3, device="neuron")


def test_scale_output_changes_result_and_restores():
    a, b = _mats()
    ref = (a @ b).cpu()
    with faults.scale_output("aten::mm", rel=1e-3) as fault:
        bad = (a @ b).cpu()
    assert fault.calls >= 1 and not fault.active
    torch.testing.assert_close(bad, ref * (1 + 1e-3))
    assert not torch.equal(bad, ref)
    assert torch.equal((a @ b).cpu(), ref)


def test_scale_output_on_mirror_registered_op_restores_mirror_kernel():
    x = torch.arange(4.0, device="neuron")
    with faults.scale_output("aten::add.Tensor", rel=0.5):
        assert (x + x).cpu().tolist() == [0.0, 3.0, 6.0, 9.0]
    assert (x + x).cpu().tolist() == [0.0, 2.0, 4.0, 6.0]


def test_make_raise():
    a, b = _mats()
    with faults.make_raise("aten::mm"):
        with pytest.raises(RuntimeError, match="injected fault"):
            a @ b
    assert (a @ b).shape == (3, 3)


def test_make_raise_custom_exception():
    with faults.make_raise("aten::relu", exc=NotImplementedError, message="no relu today"):
        with pytest.raises(NotImplementedError, match="no relu today"):
            torch.ones(2, device="neuron").relu()


def test_copy_instead_of_inplace_leaves_self_unchanged():
    x = torch.ones(3, device="neuron")
    with faults.make_copy_instead_of_inplace("aten::add_.Tensor") as fault:
        x.add_(1)
    assert fault.calls == 1
    assert x.cpu().tolist() == [1.0, 1.0, 1.0]
    x.add_(1)
    assert x.cpu().tolist() == [2.0, 2.0, 2.0]


def test_copy_instead_of_inplace_rejects_functional_op():
    with pytest.raises(ValueError, match="not an in-place op"):
        faults.make_copy_instead_of_inplace("aten::add.Tensor")


def test_override_receives_result_and_args():
    seen = {}

    def spy(result, *args, **kwargs):
        seen["shape"] = tuple(result.shape)
        seen["nargs"] = len(args)
        return result.neg()

    x = torch.arange(3.0, device="neuron")
    with faults.override("aten::exp", spy):
        out = x.exp()
    assert seen == {"shape": (3,), "nargs": 1}
    assert torch.equal(out.cpu(), -torch.arange(3.0).exp())

    with faults.override("aten::exp", lambda t: torch.zeros_like(t), receives="args"):
        assert x.exp().cpu().tolist() == [0.0, 0.0, 0.0]
    assert torch.equal(x.exp().cpu(), torch.arange(3.0).exp())


def test_install_remove_and_restore_all():
    f1 = faults.make_raise("aten::mm").install()
    f2 = faults.scale_output("aten::exp", 1.0).install()
    assert faults.active() == [f1, f2]
    faults.restore_all()
    assert faults.active() == [] and not f1.active and not f2.active
    a, b = _mats()
    assert torch.equal((a @ b).cpu(), a.cpu() @ b.cpu())


def test_bad_names_are_rejected():
    with pytest.raises(ValueError, match="not an aten overload"):
        faults.make_raise("aten::no_such_op")
    with pytest.raises(ValueError, match="receives"):
        faults.override("aten::mm", lambda *a: None, receives="both")


CRASH_SCRIPT = """
import neuron_conformance.emulator as emu
emu.install()
import torch
from neuron_conformance.emulator import faults
faults.{maker}("aten::mm").install()
print("ready", flush=True)
torch.ones(2, 2, device="neuron") @ torch.ones(2, 2, device="neuron")
print("survived", flush=True)
"""


@pytest.mark.parametrize("maker, signal_name", [("make_abort", "SIGABRT"), ("make_segfault", "SIGSEGV")])
def test_crash_kinds_kill_subprocess(run_py, maker, signal_name):
    import signal

    proc = run_py(CRASH_SCRIPT.format(maker=maker), timeout=120)
    assert "ready" in proc.stdout and "survived" not in proc.stdout
    assert proc.returncode == -getattr(signal, signal_name), (proc.returncode, proc.stderr[-2000:])


def test_hang_kind_never_returns():
    import os
    from pathlib import Path

    repo_root = Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(repo_root) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        [sys.executable, "-c", CRASH_SCRIPT.format(maker="make_hang")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=str(repo_root),
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(2.0)
        assert proc.poll() is None, "the hang kernel returned"
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_hang_with_seconds_returns_correct_result():
    a, b = _mats()
    with faults.make_hang("aten::mm", seconds=0.01):
        assert torch.equal((a @ b).cpu(), a.cpu() @ b.cpu())
