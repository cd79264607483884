#!/usr/bin/env bash
# Learning curves of our train against YOLOv5 v7.0's train.py from scratch on the same data,
# settings and torch, over several seeds: mAP and losses per epoch (mean, sd, min-max), the final
# and best mAP50, the epoch each seed first reaches --threshold, and a PNG of the curves
# (scripts/quality_vs_yolov5.py).
#
# Usage: scripts/quality_vs_yolov5.sh [--data shapes|coco128|PATH.yaml] [--cfg yolov5n]
#                                     [--imgsz 256] [--batch 16] [--hyp hyp.scratch-low.yaml]
#                                     [--optimizer SGD|Adam|AdamW]
#                                     [--epochs 30[,60...]] [--seeds 5]
#                                     [--threshold 0.5] [--jobs 2] [--threads N] [--max-images N]
#                                     [--trainers ours,yolov5] [--train build/bin/train]
#                                     [--out runs/quality_vs_yolov5] [--resume-existing] [--smoke]
#
# Needs what scripts/setup.sh --test-packages makes: the default build, and YOLOv5 7.0
# (scripts/requirements-yolov5.txt) in .cache/test-venv, which borrows .venv's torch through a
# .pth file so both trainers run on the same PyTorch. Not part of the tests (ctest
# quality_vs_yolov5_smoke runs --smoke): the defaults take hours on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/yolov5_side.sh disable=SC1091
source scripts/lib/yolov5_side.sh
yolov5_side_exec quality_vs_yolov5 "$@"
