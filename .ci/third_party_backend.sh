#!/usr/bin/env bash
# CI step: a bounded conformance run against a real third-party PrivateUse1 backend, torch-opencl
# (OpenCL on Debian's pocl CPU driver), built from its sdist against the installed torch (its published
# wheels are ABI-broken for torch 2.13). See docs/harness.md, "A real third-party backend".
#
# Idempotent: the venv and the built wheel are reused when torch_opencl already imports there.
# Skips (a "warning: ... skipped because ..." line, exit 0) only when apt or the package index cannot be
# reached; a failing build, a harness crash or a failed report expectation fails CI.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1 DEBIAN_FRONTEND=noninteractive

VERSION=0.1.0.dev23
VENV=${CONFORMANCE_OPENCL_VENV:-/tmp/conformance-opencl-venv}
WORK=${CONFORMANCE_OPENCL_WORK:-/tmp/conformance-opencl-build}
REPORT=reports/ci-opencl
PY=$VENV/bin/python
t0=$SECONDS

skip() { echo "warning: third-party backend run (torch-opencl) skipped because $*"; exit 0; }
index_reachable() {
  timeout 60 python3 -m pip index versions torch-opencl >/dev/null 2>&1   # the configured package index
}

echo "-- system packages: pocl (OpenCL CPU driver), OpenCL headers + ICD loader, CMake, g++"
pkgs="pocl-opencl-icd opencl-headers ocl-icd-opencl-dev cmake g++"
if ! dpkg -s $pkgs >/dev/null 2>&1; then
  apt-get update -qq >/dev/null 2>&1 || skip "apt-get update failed (no Debian mirror reachable)"
  apt-get install -y -qq $pkgs >/dev/null
fi

if [ -x "$PY" ] && "$PY" -c "import importlib.metadata as m, torch, torch_opencl; \
    assert m.version('torch-opencl') == '$VERSION'" >/dev/null 2>&1; then
  echo "-- torch-opencl $VERSION already built in $VENV"
else
  echo "-- build torch-opencl $VERSION from its sdist into $VENV"
  rm -rf "$VENV" "$WORK" && mkdir -p "$WORK"
  python3 -m venv --system-site-packages "$VENV"     # reuses the system torch 2.13 (no second torch)
  # build deps; scikit-build-core-conan (the sdist's declared backend, it pulls conan) is only needed so
  # that pip can read the sdist's metadata: the build itself calls scikit-build-core directly (below)
  if ! "$PY" -m pip install -q nanobind scikit-build-core setuptools-scm scikit-build-core-conan; then
    index_reachable || skip "the package index (PyPI) is unreachable"
    exit 1
  fi
  if ! "$PY" -m pip download -q --no-deps --no-build-isolation --no-binary torch-opencl -d "$WORK" \
      "torch-opencl==$VERSION"; then
    index_reachable || skip "the package index (PyPI) is unreachable"
    exit 1
  fi
  tar -xzf "$WORK/torch_opencl-$VERSION.tar.gz" -C "$WORK"
  src=$WORK/torch_opencl-$VERSION
  # The one source edit: nanobind_add_stub's LIB_PATH keyword exists only in the nanobind fork the
  # project pins through uv (Doekin/nanobind@stubgen_win_dll, a git source pip cannot use); PyPI's
  # nanobind reads it as a file dependency "LIB_PATH" and ninja stops. It only matters on Windows.
  sed -i '/LIB_PATH/d' "$src/CMakeLists.txt"
  # Build flags instead of the conan backend (conan would fetch the OpenCL headers from conancenter):
  # Debian's headers and CMake configs; torch's CMake config from the installed torch. Debian's
  # opencl.hpp (2023.02.06) defines detail::getContextPlatformVersion only for a minimum OpenCL version
  # below 1.2 but uses it below 2.0, so the project's -DCL_HPP_MINIMUM_OPENCL_VERSION=120 does not
  # compile: CMAKE_CXX_FLAGS (which come after the target's definitions) lower it to 110.
  b0=$SECONDS
  (cd "$src" && CMAKE_PREFIX_PATH=$("$PY" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)') \
    "$PY" -c "import scikit_build_core.build as b; b.build_wheel('$WORK/dist', {'cmake.build-type': 'Release',
      'cmake.define.CMAKE_CXX_FLAGS': '-UCL_HPP_MINIMUM_OPENCL_VERSION -DCL_HPP_MINIMUM_OPENCL_VERSION=110'})" \
    >"$WORK/build.log" 2>&1) || { tail -40 "$WORK/build.log"; echo "error: torch-opencl build failed"; exit 1; }
  echo "   built in $((SECONDS - b0)) s"
  "$PY" -m pip install -q --no-deps "$WORK"/dist/torch_opencl-*.whl
fi
"$PY" -m pip install -q --no-deps -e .           # the harness of this checkout, in the venv
# torch autoloads torch_opencl in every process of this venv (its torch.backends entry point), so
# TORCH_DEVICE_BACKEND_AUTOLOAD must stay on here; the other CI steps run outside the venv.
export TORCH_DEVICE_BACKEND_AUTOLOAD=1
"$PY" -c "import torch; print('   smoke:', torch.ones(2, device='opencl') + 1)"

# torch-opencl segfaults in Tensor.pin_memory(), which the harness's device-API probe calls in the pytest
# process at start-up. If a plain start-up dies, use the start-up shim (.ci/opencl/opencl_startup_shim.py);
# once the probe runs in a child process, the plain module is used and this costs one collection.
backend=torch_opencl
set +e
"$PY" -X faulthandler -m pytest opsuites/test_compare_cpu.py --conformance-backend-module torch_opencl --conformance-device opencl --conformance-ops add \
  --collect-only -q -p no:cacheprovider --conformance-no-report --conformance-report-dir="$WORK/startup-report" >"$WORK/startup.log" 2>&1
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  echo "note: plain start-up with --conformance-backend-module torch_opencl exited $rc (139 = SIGSEGV in the pin_memory" \
       "probe); using --conformance-backend-module opencl_startup_shim. Tail:"; grep -m1 -A4 "Fatal Python error" "$WORK/startup.log" || tail -5 "$WORK/startup.log"
  backend=opencl_startup_shim
  export PYTHONPATH=$PWD/.ci/opencl${PYTHONPATH:+:$PYTHONPATH}
fi

echo "-- bounded conformance run on device opencl (backend module $backend)"
r0=$SECONDS
set +e
"$PY" -m pytest opsuites/test_compare_cpu.py opsuites/test_variants.py --conformance-backend-module "$backend" \
  --conformance-device opencl --conformance-ops=@.ci/opencl_ops.txt --conformance-dtypes float32,float16,int32,int64,bool,complex64 \
  -n 2 --max-worker-restart 20 -q -p no:cacheprovider --conformance-report-dir="$REPORT" --junitxml="$REPORT/junit.xml" \
  >"$WORK/run.log" 2>&1
rc=$?
set -e
tail -3 "$WORK/run.log"
echo "   pytest exit $rc after $((SECONDS - r0)) s (1 = tests failed, expected: the backend has bugs)"
if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
  tail -40 "$WORK/run.log"; echo "error: the conformance run against torch-opencl did not finish normally"
  "$PY" tests/third_party/check_opencl_report.py "$REPORT" || true
  exit 1
fi
"$PY" tests/third_party/check_opencl_report.py "$REPORT" --conformance-backend-module "$backend"
echo "-- third-party backend step: $((SECONDS - t0)) s"
