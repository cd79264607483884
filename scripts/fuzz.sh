#!/usr/bin/env bash
# Fuzzes the label parser, the label cache, the YAML loaders, the restricted unpickler (YOLOv5
# checkpoints) and the COCO JSON readers with libFuzzer (clang) for a bounded time. Opt-in: not part of the default build or ctest.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET (default 60)] [TARGET...]
#   targets: fuzz_labels fuzz_yaml fuzz_pickle fuzz_json (default: all). Builds into build-fuzz/ (clang, ASan+UBSan,
#   libFuzzer instrumentation). Findings (crash-*, slow-unit-*) land in build-fuzz/fuzz-runs/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(fuzz_labels fuzz_yaml fuzz_pickle fuzz_json)
# clang (libFuzzer) is needed only here, so it is installed here rather than by setup.sh.
if ! command -v clang++ >/dev/null; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "fuzz: installing clang"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang >/dev/null
fi
# The fuzzed code needs no GPU: it builds against Debian's CPU LibTorch, which plain CMake finds.
bash scripts/setup.sh --torch system --no-build
BUILD_DIR=${BUILD_DIR:-build-fuzz}
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  GEN=()
  command -v ninja >/dev/null && GEN=(-G Ninja)
  flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=vptr -fno-sanitize-recover=undefined -g"
  CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DYOLO_FUZZ=ON -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
fi
cmake --build "$BUILD_DIR" -j"${JOBS:-$(nproc)}" --target "${targets[@]}"
# LibTorch and OpenCV are not instrumented; their allocations at exit are not ours to report.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
status=0
for t in "${targets[@]}"; do
  dir="$BUILD_DIR/fuzz-runs/$t"
  mkdir -p "$dir/corpus"
  rm -rf "$dir/tmp" && mkdir "$dir/tmp"  # the targets' scratch files
  seeds=()
  case $t in
    fuzz_labels) printf '0 0.5 0.5 0.2 0.2\n1 0.1 0.2 0.5 0.2 0.5 0.6 0.1 0.6\n' >"$dir/corpus/seed.txt" ;;
    fuzz_yaml) seeds=(configs/data configs/models hyp) ;;
    fuzz_pickle) python3 tests/reliability/fuzz/pickle_seeds.py "$dir/corpus" ;;
    fuzz_json)
      printf '%s\n' '{"images": [{"id": 7, "file_name": "a.jpg"}, {"id": "b"}], "categories":' \
        ' [{"id": 3, "name": "x"}], "annotations": [{"id": 1, "image_id": 7, "category_id": 3,' \
        ' "bbox": [1.5, 2, 30, 40e0], "area": 99, "iscrowd": 0, "segmentation": [[1, 2, 3, 4]]},' \
        ' {"id": 2, "image_id": "b", "category_id": 3, "bbox": [0, 0, 9, 9], "iscrowd": true,' \
        ' "segmentation": {"counts": [1, 2], "size": [4, 4]}}], "info": {"s": "\u00e9\n"}}' \
        >"$dir/corpus/gt.json"
      printf '%s\n' '[{"image_id": 7, "category_id": 3, "bbox": [1, 2, 3, 4], "score": 0.9},' \
        ' {"image_id": "b", "category_id": 3, "bbox": [0, 0, 9, 9], "score": 1e-3}]' \
        >"$dir/corpus/results.json" ;;
  esac
  echo "fuzz: $t for ${secs}s"
  (cd "$dir" && TMPDIR="$PWD/tmp" "$OLDPWD/$BUILD_DIR/fuzz/$t" -max_total_time="$secs" -max_len=4096 \
    -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 corpus "${seeds[@]/#/$OLDPWD/}") ||
    status=1
done
[ "$status" -eq 0 ] && echo "fuzz: no findings" || echo "fuzz: findings above (inputs in $BUILD_DIR/fuzz-runs/)"
exit "$status"
