#!/usr/bin/env bash
# Our train against Ultralytics 8.4.190's on the same data, model YAML, settings and torch: whole
# run seconds, peak memory and mAP50-95 per epoch (scripts/bench_vs_ultralytics.py).
#
# Usage: scripts/bench_vs_ultralytics.sh [--cfg yolo11n.yaml] [--imgsz 128] [--batch 16]
#                                        [--epochs 10] [--seed 0] [--threads 2]
#                                        [--data DATA.yaml] [--out runs/bench_vs_ultralytics]
#
# Needs what scripts/setup.sh --test-packages makes: the default build, and Ultralytics 8.4.190
# (scripts/requirements-ultralytics.txt) in .cache/test-venv-ultralytics, which borrows .venv's
# torch. Default data: the built-in shapes (generated on first use). Not part of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/ultralytics_side.sh
ultralytics_side_exec bench_vs_ultralytics "$@"
