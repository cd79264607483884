#!/usr/bin/env bash
# Usage: test_bench_gpu_vs_ultralytics.sh SOURCE_ROOT BUILD_DIR OUT_DIR
# scripts/bench_gpu_vs_ultralytics.sh --cpu: ours and Ultralytics train yolo11n and yolo26n at tiny
# sizes, and each model's table comes out with a number in every CPU row and finite losses on
# both sides (no timing thresholds). Skipped (exit 77) without .cache/test-venv-ultralytics.
set -euo pipefail
ROOT=${1:?usage: test_bench_gpu_vs_ultralytics.sh SOURCE_ROOT BUILD_DIR OUT_DIR}
BUILD=${2:?usage: test_bench_gpu_vs_ultralytics.sh SOURCE_ROOT BUILD_DIR OUT_DIR}
OUT=${3:?usage: test_bench_gpu_vs_ultralytics.sh SOURCE_ROOT BUILD_DIR OUT_DIR}
if [[ ! -x $ROOT/.cache/test-venv-ultralytics/bin/python ]]; then
  echo "skip: $ROOT/.cache/test-venv-ultralytics is missing (scripts/setup.sh --test-packages installs Ultralytics 8.4.190 there)"
  exit 77
fi
# One thread per process, as ctest runs another test beside this one.
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
status=0
env -u OUT bash "$ROOT/scripts/bench_gpu_vs_ultralytics.sh" --cpu --build "$BUILD" --out "$OUT" \
  --timeout 240 >"$OUT.log" 2>&1 || status=$?
cat "$OUT.log"
[[ $status -eq 0 ]] || { echo "FAIL: bench_gpu_vs_ultralytics.sh --cpu exited $status"; exit 1; }
table=$OUT/table.md
[[ -f $table ]] || { echo "FAIL: no $table"; exit 1; }
num='[0-9]+(\.[0-9]+)?'
fail=0
for m in yolo11n yolo26n; do
  section=$(awk -v m="### $m:" 'index($0, m) == 1 {on = 1; print; next} /^### / {on = 0} on' "$table")
  [[ -n $section ]] || { echo "FAIL: no $m section"; fail=1; continue; }
  third=dfl
  [[ $m == yolo26* ]] && third=l1  # YOLO26's distances are raw: an L1 term in DFL's place
  for row in "steady epoch" "in-loop images/s" "validation, s" "train/box_loss, epoch 2" \
    "train/cls_loss, epoch 2" "train/${third}_loss, epoch 2"; do
    grep -Eq "^\| ${row}[^|]* \| $num \| $num \| $num \|$" <<<"$section" ||
      { echo "FAIL: $m: no numeric '$row' row (ours, Ultralytics, ratio)"; fail=1; }
  done
  for row in "GPU busy" "peak GPU memory" "peak GPU_mem column"; do
    grep -Eq "^\| ${row}[^|]* \| n/a \| n/a \| n/a \|$" <<<"$section" ||
      { echo "FAIL: $m: the '$row' row is not n/a on the CPU"; fail=1; }
  done
done
[[ $fail -eq 0 ]] && echo "table ok"
exit "$fail"
