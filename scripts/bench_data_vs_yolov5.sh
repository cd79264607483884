#!/usr/bin/env bash
# Our loader (bench_data --images) against YOLOv5 v7.0's LoadImagesAndLabels on the same JPEGs in
# one run: mosaic images/s per core and per worker count, with and without caches, the first
# batch apart, and the ratios ours/YOLOv5 (scripts/bench_data_yolov5.py).
#
# Usage: scripts/bench_data_vs_yolov5.sh [--data DIR|generate] [--imgsz 640] [--batch 64]
#                                        [--batches 8] [--workers 1,2] [--count 128] [--width 640]
#                                        [--bench-data build/bin/bench_data]
#                                        [--out runs/bench_data_vs_yolov5]
# --data defaults to ../shared/datasets/coco128 when it is there (copied under OUT/data first, as
# both loaders write label caches), else JPEGs generated there (--count, --width).
#
# Needs YOLOv5 7.0 in .cache/test-venv (scripts/setup.sh --test-packages) and bench_data built.
# Not part of the tests (ctest bench_data_vs_yolov5_smoke runs it at tiny sizes): about 3 minutes
# on 2 cores at the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.cache/test-venv
[ -x "$VENV/bin/python" ] || {
  echo "bench_data_vs_yolov5: $VENV is missing; scripts/setup.sh --test-packages installs YOLOv5" \
    "7.0 there" >&2
  exit 1
}
# One intra-op thread per process on both sides: the worker count alone sets the cores used.
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
exec "$VENV/bin/python" scripts/bench_data_yolov5.py "$@"
