#!/usr/bin/env bash
# Our train and detect against YOLOv5 7.0's train.py and detect.py on a busy machine: idle, beside
# 1 and 2 busy single-thread processes, and in a CPU quota of 1 core, side by side in one run;
# prints a markdown table (scripts/bench_busy.py says what runs).
#
# Usage: scripts/bench_busy.sh [--conditions idle,busy1,busy2,quota1] [--out runs/bench_busy]
#
# Needs the default build and .cache/test-venv (scripts/setup.sh --test-packages). The quota is a
# cgroup made for the run where /sys/fs/cgroup is writable (root), else taskset -c 0. Not part of
# the tests: about 8 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/yolov5_side.sh disable=SC1091
source scripts/lib/yolov5_side.sh
[ -x build/bin/detect ] || { echo "bench_busy: build/bin/detect is missing (scripts/setup.sh)" >&2; exit 1; }
yolov5_side_exec bench_busy "$@"
