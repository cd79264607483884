#!/usr/bin/env bash
# Sets up (Debian packages), builds, and runs every test through ctest.
# Usage: scripts/test.sh [--sanitize] [ctest args...]
#   --sanitize: ASan + UBSan build in build-asan/ (YOLO_SANITIZE=ON), then the same tests there.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--sanitize" ]; then
  shift
  export BUILD_DIR=${BUILD_DIR:-build-asan}
  bash scripts/setup.sh -DYOLO_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
  # LibTorch's and OpenCV's allocations held until exit are not ours to report as leaks. A
  # sanitizer report exits 86, not 1, so a test expecting exit status 1 cannot mistake it.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:exitcode=86}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:exitcode=86}
else
  bash scripts/setup.sh
fi
cd "${BUILD_DIR:-build}"
ctest -j"$(nproc)" --output-on-failure --timeout 600 "$@"
