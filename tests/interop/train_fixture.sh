#!/usr/bin/env bash
# Usage: train_fixture.sh BIN_DIR OUT_DIR
# The model the interoperability tests share: yolov5n trained 40 epochs at 160 px on the built-in
# shapes data (16 s an epoch on one thread of the 2-core AMD EPYC machine, 2026-12-02), in
# OUT_DIR/runs/exp; data in OUT_DIR/shapes.
# One intra-op thread: ctest runs another test beside it, and two processes of two OpenMP
# threads each on two cores spin against each other (a run then takes 5x longer).
set -euo pipefail
BIN=${1:?usage: train_fixture.sh BIN_DIR OUT_DIR}
OUT=${2:?usage: train_fixture.sh BIN_DIR OUT_DIR}
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
rm -rf "$OUT"
mkdir -p "$OUT"
write_shapes_yaml "$OUT"
cd "$OUT"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
if ! "$BIN/train" --data "$OUT/data.yaml" --cfg yolov5n.yaml --imgsz 160 --batch-size 16 \
  --epochs 40 --seed 0 --noval --noplots --project "$OUT/runs" --name exp --device cpu \
  >"$OUT/train.log" 2>&1; then
  tail -30 "$OUT/train.log"
  echo "FAIL: training the shared model exited non-zero"
  exit 1
fi
[[ -f "$OUT/runs/exp/weights/best.pt" ]] || { echo "FAIL: no best.pt"; exit 1; }
grep " all " "$OUT/train.log" | tail -1
