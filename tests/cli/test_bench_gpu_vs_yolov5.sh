#!/usr/bin/env bash
# Usage: test_bench_gpu_vs_yolov5.sh SOURCE_ROOT BUILD_DIR OUT_DIR
# scripts/bench_gpu_vs_yolov5.sh --cpu: both trainers and torchrun run at tiny sizes and the table
# comes out with a number in every CPU row (no timing thresholds). Skipped (exit 77) without the
# test-only Python packages (.cache/test-venv, where YOLOv5 7.0 comes from).
set -euo pipefail
ROOT=${1:?usage: test_bench_gpu_vs_yolov5.sh SOURCE_ROOT BUILD_DIR OUT_DIR}
BUILD=${2:?usage: test_bench_gpu_vs_yolov5.sh SOURCE_ROOT BUILD_DIR OUT_DIR}
OUT=${3:?usage: test_bench_gpu_vs_yolov5.sh SOURCE_ROOT BUILD_DIR OUT_DIR}
if [[ ! -x $ROOT/.cache/test-venv/bin/python ]]; then
  echo "skip: $ROOT/.cache/test-venv is missing (scripts/setup.sh --test-packages installs YOLOv5 7.0 there)"
  exit 77
fi
# One thread per process, as ctest runs another test beside this one.
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
status=0
env -u OUT bash "$ROOT/scripts/bench_gpu_vs_yolov5.sh" --cpu --build "$BUILD" --out "$OUT" \
  --timeout 240 >"$OUT.log" 2>&1 || status=$?
cat "$OUT.log"
[[ $status -eq 0 ]] || { echo "FAIL: bench_gpu_vs_yolov5.sh --cpu exited $status"; exit 1; }
table=$OUT/table.md
[[ -f $table ]] || { echo "FAIL: no $table"; exit 1; }
num='[0-9]+(\.[0-9]+)?'
fail=0
for row in "steady epoch" "in-loop images/s" "validation, s"; do
  grep -Eq "^\| ${row}[^|]* \| $num \| $num \| $num \|$" "$table" ||
    { echo "FAIL: no numeric '$row' row (ours, YOLOv5, ratio)"; fail=1; }
done
for row in "GPU busy" "peak GPU memory" "peak GPU_mem column"; do
  grep -Eq "^\| ${row}[^|]* \| n/a \| n/a \| n/a \|$" "$table" ||
    { echo "FAIL: the '$row' row is not n/a on the CPU"; fail=1; }
done
grep -Eq "^ours under torchrun --nproc_per_node=1 .*: in-loop $num images/s against $num in the plain run: ratio $num" "$table" ||
  { echo "FAIL: no torchrun line with numbers"; fail=1; }
[[ $fail -eq 0 ]] && echo "table ok"
exit "$fail"
