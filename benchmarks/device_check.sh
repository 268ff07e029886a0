#!/usr/bin/env bash
# The prepared real-device check: the wheel of this checkout, installed into the machine's own PyTorch, runs the main
# job on the accelerator with 16 workers within MAIN_S seconds, then prints outcome counts per suite and per failure
# class and the status of each known true positive (benchmarks/device_summary.py).
#
# On the GPU machine, from the project's root (the device tool's working copy):
#   bash benchmarks/device_check.sh            # DEV=cuda WORKERS=16 MAIN_S=480 by default; DEV=cpu runs it here
# It writes into ${OUT:-./device-check}: env.txt, main.log, summary.txt and main.tgz (the report folder).
set -uo pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PIP_DISABLE_PIP_VERSION_CHECK=1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUTDIR=${OUT:-$PWD/device-check}
WORK=$(mktemp -d)
DEV=${DEV:-cuda}
mkdir -p "$OUTDIR"
log() { echo "== $(date +%T) $*"; }

log environment
{
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.accelerator.current_accelerator())"
  nproc
} 2>&1 | tee "$OUTDIR/env.txt"

log "wheel, installed beside the machine's own torch (no dependency is replaced)"
python3 -m pip wheel -q --no-deps --no-build-isolation -w "$WORK/dist" "$ROOT" 2>&1 | tail -3
python3 -m pip install -q --no-deps --force-reinstall "$WORK"/dist/neuron_conformance-*.whl 2>&1 | tail -3
python3 -m pip install -q expecttest libcst 2>&1 | tail -3 || true
command -v neuron-conformance >/dev/null || { echo "device_check: the console script neuron-conformance is missing"; exit 2; }

log "main job on $DEV: every op suite, ${WORKERS:-16} workers, at most ${MAIN_S:-480} s"
cd "$WORK" || exit 2
start=$(date +%s)
timeout "${MAIN_S:-480}" neuron-conformance run -n "${WORKERS:-16}" -q -p no:cacheprovider \
  --conformance-device "$DEV" --conformance-report-dir="$WORK/main" > "$OUTDIR/main.log" 2>&1
echo "MAIN_RC $? in $(( $(date +%s) - start )) s"
tail -5 "$OUTDIR/main.log"
python3 -c "import json; r = json.load(open('$WORK/main/run.json')); print('complete:', r.get('complete'), r.get('stop_reason') or '')"

log summary
(cd "$ROOT" && python3 -m benchmarks.device_summary "$WORK/main") | tee "$OUTDIR/summary.txt"
tar czf "$OUTDIR/main.tgz" -C "$WORK" main
log end
