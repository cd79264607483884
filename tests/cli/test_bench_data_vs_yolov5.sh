#!/usr/bin/env bash
# Usage: test_bench_data_vs_yolov5.sh SOURCE_ROOT BENCH_DATA OUT_DIR
# scripts/bench_data_vs_yolov5.sh at tiny sizes on generated JPEGs: both loaders run and the table
# has a number in every row (no timing thresholds). Skipped (exit 77) without the test-only Python
# packages (.cache/test-venv, where YOLOv5 7.0 comes from).
set -euo pipefail
ROOT=${1:?usage: test_bench_data_vs_yolov5.sh SOURCE_ROOT BENCH_DATA OUT_DIR}
BENCH=${2:?usage: test_bench_data_vs_yolov5.sh SOURCE_ROOT BENCH_DATA OUT_DIR}
OUT=${3:?usage: test_bench_data_vs_yolov5.sh SOURCE_ROOT BENCH_DATA OUT_DIR}
if [[ ! -x $ROOT/.cache/test-venv/bin/python ]]; then
  echo "skip: $ROOT/.cache/test-venv is missing (scripts/setup.sh --test-packages installs YOLOv5 7.0 there)"
  exit 77
fi
status=0
bash "$ROOT/scripts/bench_data_vs_yolov5.sh" --bench-data "$BENCH" --out "$OUT" --data generate \
  --count 12 --width 160 --imgsz 160 --batch 4 --batches 2 --workers 1,2 >"$OUT.log" 2>&1 ||
  status=$?
cat "$OUT.log"
[[ $status -eq 0 ]] || { echo "FAIL: bench_data_vs_yolov5.sh exited $status"; exit 1; }
table=$OUT/table.md
[[ -f $table ]] || { echo "FAIL: no $table"; exit 1; }
num='[0-9]+(\.[0-9]+)?'
fail=0
for row in "images/s per core, no cache" "images/s per core, ours default" \
  "images/s per core, --cache ram both" "images/s total, 2 workers" "first batch s" \
  "--cache ram: cache bytes per image"; do
  grep -Eq "^\| ${row}[^|]* \| $num \| $num \| $num \|" "$table" ||
    { echo "FAIL: no numeric '$row' row (ours, YOLOv5, ratio)"; fail=1; }
done
for side in "\[ours\]  cache ram     workers 2" "\[yolov5\] cache ram  DataLoader 2 workers" \
  "\[yolov5\] cache none in process"; do
  grep -Eq "$side.*images/s" "$OUT.log" || { echo "FAIL: no '$side' line"; fail=1; }
done
[[ $fail -eq 0 ]] && echo "table ok"
exit "$fail"
