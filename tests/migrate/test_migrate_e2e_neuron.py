"""End to end: realistic CUDA scripts -> ``neuron-migrate --fix --unsafe-fixes`` -> run the rewritten
scripts, unchanged, on the emulated ``neuron`` device (DDP with world size 2) and compare with CPU
results computed here.

The scripts never import the harness: each runs in a subprocess through ``neuron_launch.py``, which
installs the emulator (and its collective backend) and then runs the script with ``runpy``, the way
a user preloads a plugin device.
"""

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = Path(__file__).parent
ROOT = HERE.parents[1]


def run_cli(*args, timeout=300):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "neuron_conformance.migrate", *map(str, args)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


SCRIPTS = HERE / "e2e_scripts"
LAUNCHER = HERE / "neuron_launch.py"


def _emulator_importable() -> bool:
    try:
        return importlib.util.find_spec("neuron_conformance.emulator") is not None
    except ImportError:
        return False


pytestmark = [
    pytest.mark.skipif(
        not _emulator_importable(), reason="neuron_conformance.emulator (the emulated neuron device) is not importable"
    ),
    pytest.mark.slow,
]


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    """The four scripts, copied and rewritten by ``--fix --unsafe-fixes``."""
    work = tmp_path_factory.mktemp("e2e")
    for p in SCRIPTS.glob("*.py"):
        shutil.copy(p, work / p.name)
    proc = run_cli("check", work, "--fix", "--unsafe-fixes", "--no-config", "-j", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return work


def _launch(script, timeout=180, **env):
    proc = subprocess.run(
        [sys.executable, str(LAUNCHER), str(script)],
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=script.parent,
    )
    assert proc.returncode == 0, f"{script.name} failed on neuron:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_rewritten_scripts_have_no_cuda_left(migrated):
    """Should leave no CUDA-only call in the scripts, and a second --fix should change nothing."""
    for p in migrated.glob("*.py"):
        text = p.read_text()
        assert "torch.cuda" not in text and '"nccl"' not in text and ".cuda(" not in text, p.name
    before = {p.name: p.read_text() for p in migrated.glob("*.py")}
    proc = run_cli("check", migrated, "--fix", "--unsafe-fixes", "--no-config", "-j", "1")
    assert proc.returncode == 0, proc.stdout
    assert before == {p.name: p.read_text() for p in migrated.glob("*.py")}


def _cpu_train_amp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    inputs, targets = torch.randn(64, 16), torch.randint(0, 4, (64,))
    losses = []
    for _ in range(5):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(inputs).float(), targets)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    return losses, model[0].weight.sum().item(), scaler.get_scale()


def test_train_amp_on_neuron_matches_cpu(migrated):
    """Should train with autocast and GradScaler on `neuron` and match the CPU run (mirror mode: bitwise)."""
    out = _launch(migrated / "train_amp.py")
    losses, weight_sum, scale = _cpu_train_amp()
    assert out["device"] == "neuron"
    assert out["losses"] == pytest.approx(losses, rel=1e-6, abs=1e-6)
    assert out["weight_sum"] == pytest.approx(weight_sum, rel=1e-6, abs=1e-6)
    assert out["scale"] == scale


def test_bench_events_on_neuron(migrated):
    """Should time with torch.Event on `neuron` (positive ms) and compute the CPU matmul result."""
    out = _launch(migrated / "bench_events.py")
    torch.manual_seed(0)
    a, b = torch.randn(128, 128), torch.randn(128, 128)
    assert out["device"] == "neuron"
    assert out["ms"] > 0
    assert out["checksum"] == pytest.approx((a @ b).sum().item(), rel=1e-6)


def test_memory_report_on_neuron(migrated):
    """Should report the 4 MiB block through torch.accelerator memory statistics on `neuron`."""
    out = _launch(migrated / "memory_report.py")
    assert out["during"]["allocated_mib"] - out["before"]["allocated_mib"] >= 4.0
    assert out["during"]["max_allocated_mib"] >= out["during"]["allocated_mib"]
    assert out["after"]["allocated_mib"] <= out["during"]["allocated_mib"] - 4.0
    assert out["after"]["max_allocated_mib"] >= 4.0


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_ddp_reference():
    torch.manual_seed(0)
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    data = [torch.randn(4, 8, generator=torch.Generator().manual_seed(100 + r)) for r in range(2)]
    for _ in range(3):
        opt.zero_grad()
        # DDP averages gradients over ranks: the gradient of the mean of the per-rank losses.
        loss = sum(model(d).pow(2).mean() for d in data) / 2
        loss.backward()
        opt.step()
    return model.weight.detach(), model.bias.detach()


def test_ddp_world_size_2_on_neuron_matches_cpu(migrated):
    """Should run the rewritten DDP script with 2 ranks on `neuron` (backend from
    get_default_backend_for_device) and end with the CPU single-process weights."""
    port = _free_port()
    script = migrated / "ddp_train.py"
    procs = []
    for rank in range(2):
        env = _env(RANK=rank, WORLD_SIZE=2, LOCAL_RANK=0, MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(
            subprocess.Popen(
                [sys.executable, str(LAUNCHER), str(script)],
                env=env,
                cwd=migrated,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=240))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (so, se) in zip(procs, outs):
        assert p.returncode == 0, f"rank failed:\n{so}\n{se[-4000:]}"
    out = json.loads(outs[0][0].strip().splitlines()[-1])
    weight, bias = _cpu_ddp_reference()
    assert out["device"] == "neuron"
    assert out["total"] == 3.0
    torch.testing.assert_close(torch.tensor(out["weight"]), weight, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(torch.tensor(out["bias"]), bias, rtol=1e-5, atol=1e-6)
