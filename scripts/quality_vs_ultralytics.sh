#!/usr/bin/env bash
# Training quality against Ultralytics 8.4.190 over several seeds: both trainers train the model
# YAML from scratch on the same data and settings, seed by seed; then the mean learning curves,
# the final mAP50-95 and the first epoch each run reaches a threshold
# (scripts/quality_vs_ultralytics.py, on scripts/bench_vs_ultralytics.py).
#
# Usage: scripts/quality_vs_ultralytics.sh [--seeds 5] [--threshold 0.01] [--cfg yolo11n.yaml]
#                                          [--imgsz 128] [--batch 16] [--epochs 10] [--threads 2]
#                                          [--data DATA.yaml]
#                                          [--out runs/quality_vs_ultralytics]
#
# Needs what scripts/setup.sh --test-packages makes (as scripts/bench_vs_ultralytics.sh). Default
# data: the built-in shapes (generated on first use). Not part of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/ultralytics_side.sh
ultralytics_side_exec quality_vs_ultralytics "$@"
