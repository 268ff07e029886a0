"""`--conformance-emulator-mode` reaches a backend module that wraps the emulated device, or the run stops naming it.

The fault-injection backend (tests/faults/fault_backend.py) installs the emulator at import in the mode
``$CONFORMANCE_EMULATOR_MODE`` names. Before, ``--conformance-emulator-mode device`` on the command line did not reach it
(the flag was not in the environment) and the run went on in mirror mode: every "device mode" fault test
given the flag instead of the variable tested mirror mode. Each case runs in a fresh process because the
emulator is installed once per process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _resolve(tmp_path: Path, module: str, mode: str) -> subprocess.CompletedProcess:
    code = textwrap.dedent(f"""
        from neuron_conformance.conformance.backend.device import DeviceError, resolve_profile
        from neuron_conformance import emulator
        try:
            p = resolve_profile("neuron", {module!r}, {mode!r})
        except DeviceError as exc:
            print("ERROR", exc)
        else:
            print("MODE", emulator.get_mode(), "MIRRORS", p.mirrors_cpu)
    """)
    env = {k: v for k, v in os.environ.items() if k != "CONFORMANCE_EMULATOR_MODE"}
    env.update(
        PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT), str(ROOT / "tests" / "faults")]),
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path
    )


def test_wrapping_backend_module_gets_the_resolved_mode(tmp_path):
    out = _resolve(tmp_path, "fault_backend", "device")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "MODE device MIRRORS False" in out.stdout, out.stdout


def test_wrapping_backend_module_in_mirror_mode_by_default(tmp_path):
    out = _resolve(tmp_path, "fault_backend", "mirror")
    assert "MODE mirror MIRRORS True" in out.stdout, out.stdout + out.stderr[-2000:]


def test_backend_module_that_ignores_the_mode_stops_the_run(tmp_path):
    (tmp_path / "fixed_mirror_backend.py").write_text(
        "from neuron_conformance import emulator\nemulator.install(mode='mirror')\n", encoding="utf-8"
    )
    out = _resolve(tmp_path, "fixed_mirror_backend", "device")
    assert out.returncode == 0, out.stderr[-2000:]
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("ERROR"))
    assert (
        "'fixed_mirror_backend'" in line and "mirror mode" in line and "--conformance-emulator-mode device" in line
    ), line
