#!/usr/bin/env bash
# CI step: the suites run from the installed package, not from the clone (README, "Installed, not cloned").
# Builds a wheel of this checkout, installs it non-editable (with its dependencies) into a fresh virtual
# environment next to torch==2.13.0, and from an empty temporary folder runs a bounded conformance run
# with the console command and, from a folder holding a user's own top-level packages named like the
# distribution's (reports, migrate, opsuites, model_zoo, conformance), one with the `pytest --pyargs` form.
# Checks: the wheel has one top-level import package (neuron_conformance), each report is in its folder with
# tests > 0 and no failure, every project package is imported from the venv (none from the checkout), the
# user's packages stay theirs and untouched, and bad input (an unknown suite, a missing backend module)
# stops with exit code 2.
# Wall time (2 shared cores, measured): 307 s with the cores busy (install 241 s, runs 30 s + 33 s); the
# install into the fresh venv (torch from the local wheel, then the wheel's dependencies) is most of it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
unset PYTHONPATH                                   # nothing may come from the checkout
REPO=$PWD
WORK=${CONFORMANCE_INSTALLED_WORK:-/tmp/conformance-installed}
VENV=$WORK/venv
PY=$VENV/bin/python
t0=$SECONDS

echo "-- wheel of this checkout"
rm -rf "$WORK" && mkdir -p "$WORK/dist" "$WORK/src"
# built from a copy of the checkout's files (tracked and not ignored), so that a stale build/ folder or a
# run's reports/ output cannot get into the wheel; without git, from the checkout after removing build/
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -co --exclude-standard -z -- pyproject.toml README.md neuron_conformance conformance emulator opsuites model_zoo reports \
    migrate | xargs -0 cp --parents -t "$WORK/src"
  src=$WORK/src
else
  rm -rf build && src=.
fi
timeout 600 python3 -m pip wheel -q --no-deps -w "$WORK/dist" "$src"
wheel=$(ls "$WORK"/dist/neuron_conformance-*.whl)
echo "   $(basename "$wheel")"
python3 - "$wheel" <<'EOF'
import sys, zipfile
tops = sorted({n.split("/", 1)[0] for n in zipfile.ZipFile(sys.argv[1]).namelist()})
print(f"   top-level entries: {', '.join(tops)}")
if [t for t in tops if not t.endswith(".dist-info")] != ["neuron_conformance"]:
    sys.exit(f"error: the wheel must install one top-level package, neuron_conformance; it has {tops}")
EOF

echo "-- fresh venv: torch==2.13.0, then the wheel (non-editable, with its dependencies)"
python3 -m venv "$VENV"
timeout 900 "$PY" -m pip install -q torch==2.13.0   # the CPU build; a bare 'torch' would pull CUDA
timeout 900 "$PY" -m pip install -q "$wheel"
echo "   installed in $((SECONDS - t0)) s"

run_dir=$(mktemp -d "$WORK/run.XXXXXX")          # empty: no conftest, no pyproject, no checkout
cd "$run_dir"
echo "-- imports come from the venv ($run_dir)"
"$PY" - "$VENV" "$REPO" <<'EOF'
import importlib, sys
from pathlib import Path
venv, repo = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
for name in ("conformance", "emulator", "opsuites", "model_zoo", "reports", "migrate"):
    path = Path(importlib.import_module(f"neuron_conformance.{name}").__file__).resolve()
    print(f"   {name}: {path}")
    if venv not in path.parents or repo in path.parents:
        sys.exit(f"error: {name} imported from {path}, not from the venv {venv}")
EOF
"$VENV/bin/neuron-conformance" list | tail -1

echo "-- bad input: exit code 2"
for bad in "run no_such_suite" "run compare_cpu --conformance-backend-module no_such_backend_module"; do
  set +e; timeout 120 "$VENV/bin/neuron-conformance" $bad >bad.log 2>&1; rc=$?; set -e
  if [ "$rc" -ne 2 ] || [ "$(wc -l <bad.log)" -ne 1 ]; then
    cat bad.log; echo "error: 'neuron-conformance $bad' exited $rc (expected 2 and one line)"; exit 1
  fi
  echo "   $bad -> 2: $(cut -c1-100 bad.log)"
done
rm -f bad.log

check_report() {  # DIR: summary.json there, tests > 0, nothing failing
  "$PY" - "$1" <<'EOF'
import json, sys
from pathlib import Path
path = Path(sys.argv[1]) / "summary.json"
if not path.is_file():
    sys.exit(f"error: no {path}")
totals = json.loads(path.read_text())["totals"]
print(f"   {path}: {totals['total']} tests, {totals['passed']} passed, {totals['failing']} failing")
if totals["total"] <= 0 or totals["failing"] or totals["failed"] or totals["error"]:
    sys.exit(f"error: expected tests > 0 and no failure in {path}: {totals}")
EOF
}

echo "-- neuron-conformance run compare_cpu, bounded"
r0=$SECONDS
timeout 600 "$VENV/bin/neuron-conformance" run compare_cpu --conformance-ops add,mul --conformance-dtypes float32 -n 0 -q | tail -3
check_report "$run_dir/reports/latest"
[ -d "$run_dir/.pytest_cache" ] || { echo "error: pytest's cache is not in the run folder"; exit 1; }
echo "   run in $((SECONDS - r0)) s"

echo "-- pytest --pyargs neuron_conformance.opsuites.test_compare_cpu, bounded, beside a user's own packages"
r0=$SECONDS
user_dir=$(mktemp -d "$WORK/user.XXXXXX")        # a user project with its own reports, migrate, ... packages
for name in reports migrate opsuites model_zoo conformance; do
  mkdir "$user_dir/$name" && echo 'WHO = "user"' >"$user_dir/$name/__init__.py"
done
cd "$user_dir"
timeout 600 "$PY" -m pytest --pyargs neuron_conformance.opsuites.test_compare_cpu --conformance-ops add --conformance-dtypes float32 -n 0 -q -p no:cacheprovider \
  --conformance-report-dir=pyargs-report | tail -3
check_report "$user_dir/pyargs-report"
"$PY" - <<'EOF'
import importlib, sys
from pathlib import Path
for name in ("reports", "migrate", "opsuites", "model_zoo", "conformance"):
    module = importlib.import_module(name)
    files = sorted(p.name for p in Path(name).iterdir() if p.name != "__pycache__")
    if getattr(module, "WHO", None) != "user" or files != ["__init__.py"]:
        sys.exit(f"error: the user's package {name} is shadowed or was written into: {module.__file__}, {files}")
print("   the user's reports, migrate, opsuites, model_zoo, conformance packages: theirs, untouched")
EOF
cd "$run_dir"
echo "   run in $((SECONDS - r0)) s"
if [ -n "$(find "$VENV" \( -name .pytest_cache -o -path '*/reports/latest' \) -print -quit)" ]; then
  echo "error: a run wrote into the venv's site-packages"; exit 1
fi
echo "-- installed-package step: $((SECONDS - t0)) s"
