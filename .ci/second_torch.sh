#!/usr/bin/env bash
# CI step: the project on a second torch, PyPI's torch 2.14.1 (a CUDA build, on a host without a GPU: it runs
# on the CPU), in a fresh virtual environment with this checkout installed editable. Runs, with no
# --conformance-device given (so the default-device rule is exercised: a CUDA build without a GPU tests the
# emulated device), the project's fast tests that follow the running torch (the emulator's SDPA mirror and
# async/sync equality, the aten audit, the default device, the torch floor, the modes runner's log tail), the
# main job's bounded subset in both emulator modes and the model zoo's CI subset.
# Checks: each report is in its folder with tests > 0 and no failure, and the run tested the default device
# (on a host without an accelerator: the emulated neuron device).
# Wall time (2 cores shared with other jobs, load average 5-7, measured): 327 s (install into the fresh venv
# 108 s, fast tests 43 s, main job 40 s mirror + 44 s device, zoo 82 s), 378 s with removing the venv at the
# end. With $CONFORMANCE_SECOND_TORCH_WORK naming a folder, its venv is kept and reused while it has the torch.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
unset PYTHONPATH
TORCH_VERSION=${CONFORMANCE_SECOND_TORCH:-2.14.1}
if [ -n "${CONFORMANCE_SECOND_TORCH_WORK:-}" ]; then  # kept, and its venv reused when it has the torch
  WORK=$CONFORMANCE_SECOND_TORCH_WORK
else                                                 # a fresh one, removed at the end
  WORK=$(mktemp -d -t conformance-second-torch.XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"
VENV=$WORK/venv
PY=$VENV/bin/python
REPORTS=reports/ci-torch-$TORCH_VERSION
t0=$SECONDS

echo "-- fresh venv: torch==$TORCH_VERSION (PyPI's default wheel), then this checkout editable"
if ! "$PY" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  timeout 900 "$PY" -m pip install -q "torch==$TORCH_VERSION"
fi
timeout 900 "$PY" -m pip install -q -e ".[test]" "torch==$TORCH_VERSION"
"$PY" -c "import torch; print(f'   torch {torch.__version__}, accelerator {torch.accelerator.current_accelerator()}, available: {torch.accelerator.is_available()}')"
echo "   installed in $((SECONDS - t0)) s"

check_report() {  # DIR: summary.json there, tests > 0, nothing failing, the default device tested
  "$PY" - "$1" <<'EOF'
import json, sys
from pathlib import Path
path = Path(sys.argv[1]) / "summary.json"
if not path.is_file():
    sys.exit(f"error: no {path}")
summary = json.loads(path.read_text())
totals, run = summary["totals"], summary.get("run", {})
device = run.get("device", {})
print(f"   {path}: {totals['total']} tests, {totals['passed']} passed, {totals['failing']} failing, device {device.get('type')}, torch {run.get('torch_version')}")
if totals["total"] <= 0 or totals["failing"] or totals["failed"] or totals["error"]:
    sys.exit(f"error: expected tests > 0 and no failure in {path}: {totals}")
import torch
acc = torch.accelerator.current_accelerator(check_available=True)
expected = acc.type if acc is not None else "neuron"   # the default-device rule: an available accelerator, else neuron
if device.get("type") != expected:
    sys.exit(f"error: with no --conformance-device this host tests {expected!r}, the run tested: {device}")
EOF
}

step() {  # NAME, then the command: runs it, prints its last line (pytest's summary) and its wall time; on
  local name=$1 s0=$SECONDS log  # failure, the tail of its output
  shift
  log=$(mktemp "$WORK/step.XXXXXX")
  if ! "$@" >"$log" 2>&1; then
    tail -40 "$log"
    echo "error: $name failed (log: $log)"
    exit 1
  fi
  # the last line that is not blank nor triton's exit-time nanobind leak report (torch's CUDA builds)
  echo "   $(grep -Ev '^[[:space:]]*$|^nanobind: |^ - (leaked |\.\.\. skipped)|^See https://nanobind' "$log" | tail -1)"
  echo "   $name: $((SECONDS - s0)) s"
}

echo "-- the project's fast tests that follow the running torch"
step "fast tests" timeout 600 "$PY" -m pytest -n 2 -q -p no:cacheprovider \
  tests/emulator/test_sdpa_mirror.py tests/emulator/test_async_equals_sync.py tests/conformance/test_aten_audit.py \
  tests/conformance/test_default_device.py tests/conformance/test_torch_floor.py \
  tests/conformance/test_modes_runner.py::test_log_tail_leaves_out_native_exit_noise

echo "-- main job, bounded (core ops), mirror mode, no --conformance-device"
step "main job, mirror" timeout 900 "$PY" -m pytest opsuites/test_compare_cpu.py -n 2 -q -p no:cacheprovider \
  --conformance-ops=@.ci/core_ops.txt --conformance-emulator-mode mirror --conformance-report-dir="$REPORTS/mirror"
check_report "$REPORTS/mirror"

echo "-- main job, bounded (core ops), device mode, no --conformance-device"
step "main job, device" timeout 900 "$PY" -m pytest opsuites/test_compare_cpu.py -n 2 -q -p no:cacheprovider \
  --conformance-ops=@.ci/core_ops.txt --conformance-emulator-mode device --conformance-report-dir="$REPORTS/device"
check_report "$REPORTS/device"

echo "-- model zoo, bounded (model_zoo_ci), no --conformance-device"
step "zoo" timeout 900 "$PY" -m pytest model_zoo -m model_zoo_ci -n 2 -q -p no:cacheprovider \
  --conformance-report-dir="$REPORTS/zoo"
check_report "$REPORTS/zoo"

echo "-- second torch step (torch $TORCH_VERSION): $((SECONDS - t0)) s"
