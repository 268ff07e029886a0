"""Behaviour-preserving proof by running.

Every fixture script (``fixtures/*/NM*.py``), every ``e2e_scripts`` script and the realistic scripts in
``proof_scripts/`` (training loop, torchrun DDP worker, ``mp.spawn`` launcher, timing, memory, AMP,
checkpoint, pinned DataLoader, seeding, device selection) is fixed with ``--fix --unsafe-fixes``
(:func:`neuron_conformance.migrate.engine.check_source`), then

* the original and the fixed script run on a CPU-only interpreter: where the original runs to its end,
  the fixed one must too, with the same stdout and the same plain module-level values;
* the fixed script runs on the emulated ``neuron`` device, installed only by ``$CONFORMANCE_EMULATOR`` at
  ``import torch`` (the ``torch.backends`` entry point, declared here by a temporary ``*.dist-info``), so the
  ``mp.spawn`` children get the device the same way.

Cost: two interpreters (``proof_runner.py``), run side by side, each importing torch once and running every
script in-process with ``runpy``; the ``mp.spawn`` launcher starts one child in each.
"""

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from neuron_conformance.migrate.engine import Settings, check_source
from neuron_conformance.migrate.registry import selection

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
RUNNER = HERE / "proof_runner.py"
UNSAFE = Settings(selection(None, None), fix=True, unsafe_fixes=True)
TIMEOUT_S = 1800
"""A guard against a runner that hangs outside its per-script alarm (60 s each, ``proof_runner.py``), not a
speed limit: on two cores shared with other runs the ~80 scripts took more than 240 s."""


def _sources():
    """name -> original script path: fixtures, e2e scripts, realistic scripts."""
    found = {
        f"fixtures/{p.parent.name}/{p.stem}": p
        for p in sorted((HERE / "fixtures").glob("*/NM*.py"))
        if not p.name.endswith(".out.py")
    }
    found.update(
        {f"{d}/{p.stem}": p for d in ("e2e_scripts", "proof_scripts") for p in sorted((HERE / d).glob("*.py"))}
    )
    return found


REALISTIC = [n for n in _sources() if n.startswith("proof_scripts/")]


def _run(expect, manifest, work, env):
    dest = work / f"{expect}.json"
    proc = subprocess.run(
        [sys.executable, str(RUNNER), expect, str(manifest), str(dest)],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, f"proof_runner {expect} failed:\n{proc.stderr[-3000:]}"
    return json.loads(dest.read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """name -> {"cpu_original", "cpu_fixed", "neuron_fixed"} records (see ``proof_runner.py``)."""
    work = tmp_path_factory.mktemp("proof")
    cpu, neuron = [], []
    for name, path in _sources().items():
        source = path.read_text()
        result = check_source(source, UNSAFE, str(path))
        assert result.error is None, f"{name}: {result.error}"
        for kind, text in (("original", source), ("fixed", result.new_source or source), ("neuron", None)):
            folder = work / kind / name
            folder.mkdir(parents=True)
            script = folder / "script.py"
            script.write_text(text if text is not None else (result.new_source or source))
            (neuron if kind == "neuron" else cpu).append([f"{kind}:{name}", str(script)])
    info = work / "ep" / "neuron_conformance_proof-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: neuron-conformance-proof\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[torch.backends]\nconformance-emulator = neuron_conformance.emulator.autoload:load\n"
    )
    base = {k: v for k, v in os.environ.items() if k not in ("CONFORMANCE_EMULATOR", "CUDA_VISIBLE_DEVICES")}
    base.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    cpu_env = dict(base, PYTHONPATH=os.pathsep.join([str(ROOT), base.get("PYTHONPATH", "")]))
    neuron_env = dict(
        base,
        CONFORMANCE_EMULATOR="mirror",
        PYTHONPATH=os.pathsep.join([str(work / "ep"), str(ROOT), base.get("PYTHONPATH", "")]),
    )
    for label, items in (("cpu", cpu), ("neuron", neuron)):
        (work / f"{label}.manifest.json").write_text(json.dumps(items))
    with ThreadPoolExecutor(2) as pool:
        cpu_job = pool.submit(_run, "cpu", work / "cpu.manifest.json", work, cpu_env)
        neuron_job = pool.submit(_run, "neuron", work / "neuron.manifest.json", work, neuron_env)
        cpu_records, neuron_records = cpu_job.result(), neuron_job.result()
    records = {
        name: {
            "cpu_original": cpu_records[f"original:{name}"],
            "cpu_fixed": cpu_records[f"fixed:{name}"],
            "neuron_fixed": neuron_records[f"neuron:{name}"],
        }
        for name in _sources()
    }
    (work / "records.json").write_text(json.dumps(records, indent=1))  # for a per-script table (--basetemp)
    return records


INTENDED = {("fixtures/distributed/NM601", "BACKEND"): ("nccl", "gloo")}
"""(script, module value) -> (original, fixed) value the fix changes on purpose: NM601 replaces the NCCL name by
the device's default backend, which is gloo on a CPU-only host (where the original "nccl" cannot initialise)."""


def _same(name, a, b):
    """True when the fixed run observed what the original did: both ran, same stdout, same shared values
    (apart from the :data:`INTENDED` changes)."""
    shared = a["values"].keys() & b["values"].keys()
    return (
        a["ok"]
        and b["ok"]
        and a["stdout"] == b["stdout"]
        and all(
            a["values"][k] == b["values"][k] or INTENDED.get((name, k)) == (a["values"][k], b["values"][k])
            for k in shared
        )
    )


def test_realistic_scripts_run_on_cpu_before_migration(runs):
    """Should be real CUDA-gated scripts: each runs to its end on a CPU-only interpreter, printing a result."""
    failed = {n: runs[n]["cpu_original"]["error"] for n in REALISTIC if not runs[n]["cpu_original"]["ok"]}
    assert not failed
    assert all(runs[n]["cpu_original"]["stdout"].strip() for n in REALISTIC)


def test_fixed_scripts_behave_like_the_originals_on_cpu(runs):
    """Should keep what every script that ran observes: same stdout and module values on a CPU-only host."""
    differ = {
        n: (r["cpu_original"]["stdout"], r["cpu_fixed"]["error"], r["cpu_fixed"]["stdout"])
        for n, r in runs.items()
        if r["cpu_original"]["ok"] and not _same(n, r["cpu_original"], r["cpu_fixed"])
    }
    assert not differ


EMULATOR_LIMITS = {
    "fixtures/device/NM109": "invalid device ordinal 1",
    "fixtures/device/NM110": "invalid device ordinal 1",
}
"""Fixed scripts that cannot run on the emulated device, and the start of the error they must raise: it has
one device (``cuda:1`` became ordinal 1)."""


def test_fixed_scripts_run_on_the_emulated_device(runs):
    """Should run every fixed script that ran on CPU on the emulated neuron device too, apart from the
    :data:`EMULATOR_LIMITS`, which must fail with their documented error."""
    failed = {
        n: r["neuron_fixed"]["message"] for n, r in runs.items() if r["cpu_fixed"]["ok"] and not r["neuron_fixed"]["ok"]
    }
    assert failed.keys() == EMULATOR_LIMITS.keys(), failed
    assert all(EMULATOR_LIMITS[n] in message for n, message in failed.items()), failed


def test_the_pinned_dataloader_is_reported_after_the_fix():
    """Should keep NM308 on the widened pin_memory gate: pinning on every accelerator is the user's call."""
    source = (HERE / "proof_scripts" / "dataloader_pin.py").read_text()
    result = check_source(source, UNSAFE)
    assert "pin_memory=torch.accelerator.is_available()" in result.new_source
    assert [v.code for v in result.violations] == ["NM308"]


def test_the_emulated_runs_used_the_accelerator(runs):
    """Should have taken the accelerator branch on neuron: the gated scripts print another result there."""
    moved = [n for n in REALISTIC if runs[n]["neuron_fixed"]["stdout"] != runs[n]["cpu_fixed"]["stdout"]]
    assert {"proof_scripts/device_select", "proof_scripts/spawn_launcher", "proof_scripts/amp_loop"} <= set(moved)
