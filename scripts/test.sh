#!/usr/bin/env bash
# Sets up, builds, and runs the tests through ctest.
# Usage: scripts/test.sh [--torch wheel|system] [--smoke] [--sanitize] [ctest args...]
#   --torch KIND: the LibTorch to build against (scripts/setup.sh; default: wheel, in build/).
#   --smoke:      build only what the smoke subset needs and run that subset (the libraries'
#                 unit tests but the slow data, plot and end-to-end ones, the CLIs, and the
#                 torchrun equivalence and end-to-end tests); CI
#                 runs it on the system LibTorch.
#   --sanitize:   ASan + UBSan build in build-asan/ (YOLO_SANITIZE=ON), then the same tests there.
set -euo pipefail
cd "$(dirname "$0")/.."

SMOKE_TARGETS="train val detect export yolo_cli test_core test_models test_eval test_export test_distributed test_engine dist_equivalence"
SMOKE_TESTS='^(cli_|dist_(syncbn|ddp)_equivalence$|dist_train_e2e$|[A-Z][A-Za-z]*\.)'
SMOKE_EXCLUDE='^(TrainTest|Train\.|ValidatorTest|Evolve|Loader|Dataset|Augment|Shapes|Verify|LabelCache|Download|Plots|AutoAnchor|Sampler|BadData|CheckpointSafety)'

KIND=${YOLO_TORCH:-wheel}
SETUP=()
CTEST=()
SMOKE=0
SANITIZE=0
while (($#)); do
  case "$1" in
    --torch) KIND=${2:-}; shift 2 || { echo "test: --torch needs wheel or system" >&2; exit 2; } ;;
    --torch=*) KIND=${1#--torch=}; shift ;;
    --smoke) SMOKE=1; shift ;;
    --sanitize) SANITIZE=1; shift ;;
    *) CTEST+=("$1"); shift ;;
  esac
done
SETUP+=(--torch "$KIND")
[ "$KIND" = wheel ] && [ "$SMOKE" = 0 ] && SETUP+=(--test-packages)
if [ "$SANITIZE" = 1 ]; then
  export BUILD_DIR=${BUILD_DIR:-build-asan}
  SETUP+=(-DYOLO_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo)
  # LibTorch's and OpenCV's allocations held until exit are not ours to report as leaks. A
  # sanitizer report exits 86, not 1, so a test expecting exit status 1 cannot mistake it.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:exitcode=86}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:exitcode=86}
fi
if [ "$SMOKE" = 1 ]; then
  SETUP+=(--targets "$SMOKE_TARGETS")
  CTEST+=(-R "$SMOKE_TESTS" -E "$SMOKE_EXCLUDE")
else
  SETUP+=(--targets all)  # setup.sh alone builds only the programs
fi
bash scripts/setup.sh "${SETUP[@]}"
# Tests compare runs bit for bit; ctest -j runs them beside each other, whose load must not change
# the thread counts (tests/CMakeLists.txt sets it for most tests, this for every one).
export YOLO_FIXED_THREADS=1
if [ -z "${BUILD_DIR:-}" ]; then
  BUILD_DIR=build
  [ "$KIND" = system ] && BUILD_DIR=build-system
fi
cd "$BUILD_DIR"
ctest -j"$(nproc)" --output-on-failure --timeout 600 "${CTEST[@]+"${CTEST[@]}"}"
