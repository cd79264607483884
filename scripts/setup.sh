#!/usr/bin/env bash
# Installs everything the project needs, then configures and builds the programs (train, val,
# detect, export, yolo); scripts/test.sh builds the tests and benchmarks as well.
# Idempotent: packages already present are not reinstalled, and the build is incremental.
#
# Usage: scripts/setup.sh [--torch wheel|system] [--test-packages] [--no-build] [--targets "T1 T2"]
#                         [cmake -D...]
#   --targets LIST  what to build instead of the programs ("all": every target, tests included).
#   --torch wheel  (default) LibTorch 2.x with CUDA, cuDNN and NCCL from PyTorch's pinned CUDA
#                  wheel (scripts/requirements-torch.txt), installed into .venv; builds in build/.
#   --torch system Debian's libtorch-dev 1.13 (CPU only, with Gloo); builds in build-system/.
#   --test-packages  also the Python packages only tests use (scripts/requirements-test.txt:
#                  TensorBoard, pycocotools, YOLOv5 7.0, ONNX, onnxruntime) into .cache/test-venv,
#                  borrowing .venv's torch; scripts/test.sh asks for them (wheel build only).
#                  And Ultralytics 8.4.190 (scripts/requirements-ultralytics.txt) into
#                  .cache/test-venv-ultralytics, as YOLOv5 7.0 pins ultralytics 8.0.200.
#   YOLO_TORCH=wheel|system does the same as --torch; BUILD_DIR overrides the build folder and
#   YOLO_VENV the virtual environment's.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_KIND=${YOLO_TORCH:-wheel}
BUILD=1
TEST_PACKAGES=0
TARGETS=(train val detect export yolo_cli)
CMAKE_ARGS=()
while (($#)); do
  case "$1" in
    --torch) TORCH_KIND=${2:-}; shift 2 || { echo "setup: --torch needs wheel or system" >&2; exit 2; } ;;
    --torch=*) TORCH_KIND=${1#--torch=}; shift ;;
    --no-build) BUILD=0; shift ;;
    --test-packages) TEST_PACKAGES=1; shift ;;
    --targets) read -r -a TARGETS <<<"${2:-}"; shift 2 || { echo "setup: --targets needs a list" >&2; exit 2; } ;;
    *) CMAKE_ARGS+=("$1"); shift ;;
  esac
done
case "$TORCH_KIND" in
  wheel) DEFAULT_BUILD_DIR=build ;;
  system) DEFAULT_BUILD_DIR=build-system ;;
  *) echo "setup: --torch must be 'wheel' or 'system', not '$TORCH_KIND'" >&2; exit 2 ;;
esac

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git curl unzip zip python3 python3-venv
  libopencv-dev libyaml-cpp-dev libgtest-dev
  # COCO annotations and results JSON (utils/eval/json.cpp).
  libsimdjson-dev
  # libjpeg-turbo's headers: the loader decodes JPEGs with it directly (data/image_io.cpp).
  libjpeg62-turbo-dev
  # c10d's ProcessGroupGloo.hpp includes Gloo's headers, which neither LibTorch ships.
  libgloo-dev
  # The export program's ONNX writer (utils/export/onnx_export.cpp).
  libonnx-dev libprotobuf-dev
  # Fetching weights and datasets by URL (utils/core/fetch.cpp) and unpacking their archives.
  libcurl4-openssl-dev libarchive-dev
)
# The system LibTorch and the Python torch whose torchrun the multi-process tests use with it.
[ "$TORCH_KIND" = system ] && PACKAGES+=(libtorch-dev python3-torch)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

CONFIG=(-DYOLO_TORCH_KIND="$TORCH_KIND")
if [ "$TORCH_KIND" = wheel ]; then
  VENV=${YOLO_VENV:-.venv}
  REQ=scripts/requirements-torch.txt
  TOOLS=scripts/requirements-tools.txt
  stamp="$VENV/.yolo-requirements-$(cat "$REQ" "$TOOLS" | sha256sum | cut -c1-16)"
  if [ ! -f "$stamp" ]; then
    echo "setup: installing the pinned PyTorch CUDA wheel and its NVIDIA libraries into $VENV" \
      "(about 2.7 GB on disk)"
    start=$(date +%s)
    [ -x "$VENV/bin/python" ] || /usr/bin/python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$REQ" -r "$TOOLS"
    rm -f "$VENV"/.yolo-requirements-*
    touch "$stamp"
    echo "setup: PyTorch installed in $(($(date +%s) - start)) s"
  fi
  PY="$PWD/$VENV/bin/python"
  SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  TEST_PACKAGES_PENDING=$TEST_PACKAGES  # installed beside the build (install_test_packages)
  # The CUDA build's CMake config needs the toolkit's nvcc; Debian does not put it on PATH.
  if ! command -v nvcc >/dev/null; then
    for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
      [ -x "$d/nvcc" ] && { PATH="$d:$PATH"; break; }
    done
  fi
  command -v nvcc >/dev/null || {
    echo "setup: the CUDA wheel's LibTorch needs the CUDA toolkit (nvcc) to configure; install" \
      "CUDA 13 or use 'scripts/setup.sh --torch system' for Debian's CPU-only LibTorch" >&2
    exit 1
  }
  # The torch folder first, so its lib/ wins over a Debian libtorch in /usr/lib.
  CONFIG+=(-DCMAKE_PREFIX_PATH="$SITE/torch;$SITE/torch/share/cmake" -DNCCL_ROOT="$SITE/nvidia/nccl"
    -DYOLO_PYTHON="$PY" -DTORCH_CUDA_ARCH_LIST=9.0)
else
  CONFIG+=(-DYOLO_PYTHON=/usr/bin/python3)
fi

# The test-only Python packages (wheel builds): YOLOv5 7.0's set and Ultralytics 8.4.190's, each in
# a venv of its own borrowing .venv's torch through a .pth file. Network and disk bound, so they
# install while the compiler runs.
install_test_packages() {
  # The test-only Python packages, beside .venv and borrowing its torch through a .pth file.
  TEST_VENV=.cache/test-venv
  TEST_REQ=scripts/requirements-test.txt
  stamp="$TEST_VENV/.yolo-requirements-$(cat "$TEST_REQ" scripts/requirements-yolov5.txt "$REQ" |
    sha256sum | cut -c1-16)"
  if [ "$TEST_PACKAGES" = 1 ] && [ ! -f "$stamp" ]; then
    echo "setup: installing the test-only Python packages (TensorBoard, pycocotools, YOLOv5 7.0," \
      "ONNX, onnxruntime) into $TEST_VENV"
    start=$(date +%s)
    rm -rf "$TEST_VENV"
    /usr/bin/python3 -m venv "$TEST_VENV"
    echo "$SITE" >"$("$TEST_VENV/bin/python" \
      -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/yolo_torch.pth"
    "$TEST_VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$TEST_REQ"
    "$TEST_VENV/bin/python" -c 'import yolov5.export, onnxruntime, pycocotools.cocoeval, torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator'
    touch "$stamp"
    echo "setup: test packages installed in $(($(date +%s) - start)) s"
  fi
  # Ultralytics 8.4.190 for the YOLOv8 and YOLO11 comparisons, in a venv of its own as YOLOv5 7.0
  # pins ultralytics 8.0.200, borrowing .venv's torch the same way.
  UL_VENV=.cache/test-venv-ultralytics
  UL_REQ=scripts/requirements-ultralytics.txt
  stamp="$UL_VENV/.yolo-requirements-$(cat "$UL_REQ" "$REQ" | sha256sum | cut -c1-16)"
  if [ "$TEST_PACKAGES" = 1 ] && [ ! -f "$stamp" ]; then
    echo "setup: installing Ultralytics 8.4.190 into $UL_VENV"
    start=$(date +%s)
    rm -rf "$UL_VENV"
    /usr/bin/python3 -m venv "$UL_VENV"
    echo "$SITE" >"$("$UL_VENV/bin/python" \
      -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/yolo_torch.pth"
    "$UL_VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$UL_REQ"
    YOLO_OFFLINE=true YOLO_AUTOINSTALL=false YOLO_VERBOSE=false YOLO_CONFIG_DIR="$UL_VENV/config" \
      "$UL_VENV/bin/python" -c 'import ultralytics.models.yolo, onnxruntime, polars, torchvision'
    rm -rf "$UL_VENV/config"
    touch "$stamp"
    echo "setup: Ultralytics installed in $(($(date +%s) - start)) s"
  fi
}

if [ "${TEST_PACKAGES_PENDING:-0}" = 1 ] && [ "$BUILD" = 0 ]; then
  install_test_packages
  TEST_PACKAGES_PENDING=0
fi
[ "$BUILD" = 1 ] || exit 0

BUILD_DIR=${BUILD_DIR:-$DEFAULT_BUILD_DIR}
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
if [ -f "$BUILD_DIR/CMakeCache.txt" ] &&
  ! grep -q "^YOLO_TORCH_KIND:STRING=$TORCH_KIND\$" "$BUILD_DIR/CMakeCache.txt"; then
  echo "setup: $BUILD_DIR was configured with another LibTorch; use another BUILD_DIR or remove" \
    "$BUILD_DIR" >&2
  exit 1
fi
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] || ((${#CMAKE_ARGS[@]})); then
  cmake -S . -B "$BUILD_DIR" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release "${CONFIG[@]}" \
    "${CMAKE_ARGS[@]}" >/dev/null
fi
packages_log=""
if [ "${TEST_PACKAGES_PENDING:-0}" = 1 ]; then
  packages_log=$(mktemp)
  install_test_packages >"$packages_log" 2>&1 &
  packages_pid=$!
fi
build_status=0
cmake --build "$BUILD_DIR" -j"$(nproc)" --target "${TARGETS[@]}" || build_status=$?
if [ -n "$packages_log" ]; then
  packages_status=0
  wait "$packages_pid" || packages_status=$?
  cat "$packages_log"
  rm -f "$packages_log"
  if [ "$packages_status" != 0 ]; then
    echo "setup: installing the test-only Python packages failed (exit $packages_status)" >&2
    exit "$packages_status"
  fi
fi
exit "$build_status"
