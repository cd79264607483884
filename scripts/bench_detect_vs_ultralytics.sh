#!/usr/bin/env bash
# Our detect against Ultralytics 8.4.190's predict on the same .pt file and images: ms per image
# and boxes found (scripts/bench_detect_vs_ultralytics.py).
#
# Usage: scripts/bench_detect_vs_ultralytics.sh [--source ../shared/datasets/coco128/images/train2017]
#                                               [--cfg yolo11n.yaml] [--imgsz 640] [--threads 2]
#                                               [--out runs/bench_detect_vs_ultralytics]
#
# Needs what scripts/setup.sh --test-packages makes: the default build and Ultralytics 8.4.190 in
# .cache/test-venv-ultralytics. Not part of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
source=../shared/datasets/coco128/images/train2017 out=runs/bench_detect_vs_ultralytics args=()
while (($#)); do
  case "$1" in
    --source) source=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
exec bash tests/interop/run_ultralytics.sh scripts/bench_detect_vs_ultralytics.py \
  --detect "$PWD/build/bin/detect" --source "$source" --out "$out" "${args[@]+"${args[@]}"}"
