#!/usr/bin/env bash
# Our train against YOLOv5 v7.0's train.py on the same data, settings and torch; prints the
# steady-state seconds per epoch of each and their ratio (scripts/bench_vs_yolov5.py).
#
# Usage: scripts/bench_vs_yolov5.sh [--cfg yolov5n] [--imgsz 320] [--batch 16] [--epochs 4]
#                                   [--repeats 3] [--yolov5-threads 1,2] [--ours-threads default]
#                                   [--train build/bin/train] [--out runs/bench_vs_yolov5]
#
# Needs what scripts/setup.sh --test-packages makes: the default build, and YOLOv5 7.0
# (scripts/requirements-yolov5.txt) in .cache/test-venv, which borrows .venv's torch through a
# .pth file so both trainers run on PyTorch 2.11. Not part of the tests: takes about 10 minutes
# per repeat on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/yolov5_side.sh disable=SC1091
source scripts/lib/yolov5_side.sh
yolov5_side_exec bench_vs_yolov5 "$@"
