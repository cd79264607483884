#!/usr/bin/env bash
# Usage: test_consumer.sh install|subdirectory BUILD_DIR SOURCE_ROOT
# Builds tests/consumer (programs of someone else's: docs/api.md's example, and one that runs
# yolo::Detector) and checks that the latter prints, for the same weights and images, exactly the
# boxes the detect program writes with --save-txt --save-conf.
#   install: `cmake --install` into a prefix, which is then moved elsewhere; the moved train
#     program trains one tiny epoch on its default data from a folder outside the source tree (with
#     YOLO_ROOT unset, and its run must have taken every YAML from the moved prefix); the consumer
#     finds the package with find_package(yolo_cpp).
#   subdirectory: the consumer builds the source tree as a subproject (add_subdirectory).
set -euo pipefail
mode=${1:?usage: test_consumer.sh install|subdirectory BUILD_DIR SOURCE_ROOT}
build=$(cd "${2:?}" && pwd)
src=$(cd "${3:?}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset YOLO_ROOT
fail() {
  echo "FAIL: $*"
  exit 1
}

# The LibTorch, CUDA and NCCL the build was configured with.
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
args=(-DCMAKE_BUILD_TYPE=Release)
command -v ninja >/dev/null && args+=(-G Ninja)
for var in CMAKE_CUDA_COMPILER TORCH_CUDA_ARCH_LIST NCCL_INCLUDE_DIR NCCL_LIBRARY; do
  value=$(cache "$var")
  [[ -n "$value" && "$value" != *NOTFOUND ]] && args+=("-D$var=$value")
done
prefix_path=$(cache CMAKE_PREFIX_PATH)

targets=()
mkdir -p "$tmp/work"
if [[ "$mode" == install ]]; then
  cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
  mv "$tmp/prefix" "$tmp/moved"
  P=$tmp/moved
  for f in bin/train bin/val bin/detect include/yolo/detector.h include/yolo/train.h \
    lib/cmake/yolo_cpp/yolo_cppConfig.cmake share/yolo_cpp/configs/models/yolov5n.yaml \
    share/yolo_cpp/configs/data/shapes.yaml share/yolo_cpp/hyp/hyp.scratch-low.yaml; do
    [[ -e "$P/$f" ]] || fail "the installed tree lacks $f"
  done
  internal=$(find "$P/include" -type f ! -path "$P/include/yolo/*" | head -3)
  [[ -z "$internal" ]] || fail "internal headers installed: $internal"
  echo "installed into a prefix, moved to $P"
  # The Debian package holds the same tree under /usr.
  if command -v cpack >/dev/null && command -v dpkg-deb >/dev/null; then
    cpack -G DEB -B "$tmp/deb" --config "$build/CPackConfig.cmake" >"$tmp/cpack.log" 2>&1 ||
      { tail -20 "$tmp/cpack.log"; fail "cpack -G DEB failed"; }
    dpkg-deb -x "$tmp"/deb/*.deb "$tmp/debroot"
    diff <(cd "$P" && find . -type f | sort) <(cd "$tmp/debroot/usr" && find . -type f | sort) ||
      fail "the Debian package's files differ from the installed tree's"
    echo "cpack -G DEB: the same $(find "$P" -type f | wc -l) files under /usr"
  fi
  train=$P/bin/train detect=$P/bin/detect
  (cd "$tmp/work" && "$train" --cfg yolov5n.yaml --epochs 1 --imgsz 64 --batch-size 16 \
    --workers 0 --device cpu --noplots --project runs --name tiny) >"$tmp/train.log" 2>&1 ||
    { tail -20 "$tmp/train.log"; fail "the installed train program failed"; }
  for key in cfg data hyp; do
    value=$(sed -n "s/^$key: //p" "$tmp/work/runs/tiny/opt.yaml")
    [[ "$value" == "$P/share/yolo_cpp/"* ]] || fail "opt.yaml's $key is '$value', not from $P"
  done
  echo "installed train: one epoch on its default data, every YAML from $P/share/yolo_cpp"
  data_root=$P/share/yolo_cpp/runs/datasets/shapes
  args+=(-DCMAKE_PREFIX_PATH="$P;$prefix_path")
else
  train=$build/bin/train detect=$build/bin/detect
  (cd "$tmp/work" && "$train" --cfg yolov5n.yaml --epochs 1 --imgsz 64 --batch-size 16 \
    --workers 0 --device cpu --noplots --project runs --name tiny) >"$tmp/train.log" 2>&1 ||
    { tail -20 "$tmp/train.log"; fail "train failed"; }
  data_root=$src/runs/datasets/shapes
  args+=(-DCMAKE_PREFIX_PATH="$prefix_path" -DYOLO_CPP_SOURCE="$src")
  # Only the Detector's program: the libraries it needs are compiled again, not training's, and
  # without optimisation (half the compile time; the arithmetic runs in LibTorch and OpenCV, and
  # the boxes must still equal the optimised detect program's).
  targets=(--target detect_boxes)
  args=("${args[@]/-DCMAKE_BUILD_TYPE=Release/-DCMAKE_BUILD_TYPE=None}" -DCMAKE_CXX_FLAGS=-O0)
fi
weights=$tmp/work/runs/tiny/weights/last.pt
[[ -f "$weights" ]] || fail "no $weights"

# The example in the README and docs/api.md is tests/consumer/example.cpp, which is built below.
for doc in README.md docs/api.md; do
  diff <(awk '/^```cpp$/ {f = 1; next} /^```$/ && f {exit} f' "$src/$doc") \
    "$src/tests/consumer/example.cpp" >/dev/null || fail "$doc's example differs from example.cpp"
done

start=$(date +%s)
cmake -S "$src/tests/consumer" -B "$tmp/consumer" "${args[@]}" >"$tmp/configure.log" 2>&1 ||
  { tail -30 "$tmp/configure.log"; fail "the consumer project did not configure"; }
cmake --build "$tmp/consumer" -j"$(nproc)" "${targets[@]}" >"$tmp/build.log" 2>&1 ||
  { tail -30 "$tmp/build.log"; fail "the consumer project did not build"; }
echo "consumer ($mode) configured and built in $(($(date +%s) - start)) s"

# Three images of the default data, through the detect program and through the consumer.
mkdir -p "$tmp/images"
cp "$data_root"/images/val/val_0000[0-2].png "$tmp/images/"
"$detect" --weights "$weights" --source "$tmp/images" --imgsz 64 --conf-thres 0.001 --device cpu \
  --save-txt --save-conf --nosave --project "$tmp/detect" --name run >"$tmp/detect.log" 2>&1 ||
  { tail -20 "$tmp/detect.log"; fail "detect failed"; }
boxes=0
for image in "$tmp"/images/*.png; do
  stem=$(basename "$image" .png)
  expected=$tmp/detect/run/labels/$stem.txt
  [[ -f "$expected" ]] || : >"$expected"
  "$tmp/consumer/detect_boxes" "$weights" "$image" 0.001 64 >"$tmp/$stem.txt"
  diff -q "$expected" "$tmp/$stem.txt" >/dev/null ||
    { diff "$expected" "$tmp/$stem.txt" | head -10; fail "$stem: the consumer's boxes differ"; }
  boxes=$((boxes + $(wc -l <"$expected")))
done
((boxes > 0)) || fail "no detections at all: nothing was compared"
echo "consumer ($mode): $boxes boxes on 3 images, equal to detect --save-txt"
