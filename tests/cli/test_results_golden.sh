#!/usr/bin/env bash
# Usage: test_results_golden.sh BIN_DIR MODE TORCH_KIND
# Training gives the same numbers as the recorded run: a 2-epoch run on generated shapes data
# (--seed 0 --workers 0, one intra-op thread per process, NCHW memory) must write a results.csv
# identical to tests/golden/results_TORCH_KIND_MODE.csv. Guards refactors of the training engine.
# The recorded runs predate channels-last, CPU training's default layout, whose convolutions round
# differently; --memory-format contiguous keeps the runs comparable.
#   single   one process on the CPU.
#   ddp      two CPU ranks over Gloo under the real torchrun.
# CPUs of another family (AVX-512 or AVX2 only, Intel or AMD) run other oneDNN kernels, whose
# float32 sums round differently: each family's run is recorded beside the first as
# results_TORCH_KIND_MODE.VARIANT.csv, and results.csv must equal one of the recorded runs.
# YOLO_RECORD_GOLDEN=1 writes the golden file instead of comparing, the variant named by
# YOLO_GOLDEN_VARIANT when set (only when the engine's numbers are meant to change, from a build of
# the last commit whose numbers are trusted; say why in the commit).
set -euo pipefail
BIN=${1:?usage: test_results_golden.sh BIN_DIR MODE TORCH_KIND}
MODE=${2:?usage: test_results_golden.sh BIN_DIR MODE TORCH_KIND}
KIND=${3:?usage: test_results_golden.sh BIN_DIR MODE TORCH_KIND}
GOLDEN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/golden"
GOLDEN="$GOLDEN_DIR/results_${KIND}_${MODE}${YOLO_GOLDEN_VARIANT:+.$YOLO_GOLDEN_VARIANT}.csv"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
start_train_test "$MODE"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
ARGS=(--data "$tmp/data.yaml" --cfg yolov5n.yaml --imgsz 64 --batch-size 16 --epochs 2 --seed 0
  --workers 0 --memory-format contiguous --noplots --project "$tmp/runs" --device cpu)
case "$MODE" in
  single)
    timeout 300 "$BIN/train" "${ARGS[@]}" >"$tmp/log" 2>&1 || fail "training exited $?"
    ;;
  ddp)
    TORCHRUN=${TORCHRUN:-$(command -v torchrun || true)}
    [[ -n "$TORCHRUN" ]] || { echo "torchrun not found: skipping"; exit 77; }
    timeout -k 10 300 "$TORCHRUN" --no_python -r 1 -t 1 --nproc_per_node=2 \
      --master_addr=127.0.0.1 --master_port="$(free_port)" "$BIN/train" "${ARGS[@]}" \
      >"$tmp/log" 2>&1 || fail "2-rank training exited $?"
    ;;
  *) fail "unknown mode" ;;
esac
csv="$tmp/runs/exp/results.csv"
[[ -f "$csv" ]] || fail "no results.csv"
# TensorBoard's event file comes from rank 0 alone: one file, whatever the number of ranks.
events=$(find "$tmp/runs" -name 'events.out.tfevents.*' | wc -l)
[[ "$events" == 1 ]] || fail "$events TensorBoard event files under $tmp/runs (want 1, from rank 0)"
if [[ "${YOLO_RECORD_GOLDEN:-0}" == 1 ]]; then
  mkdir -p "$(dirname "$GOLDEN")"
  cp "$csv" "$GOLDEN"
  echo "recorded $GOLDEN"
  exit 0
fi
[[ -f "$GOLDEN" ]] || fail "no recorded results for LibTorch '$KIND' ($GOLDEN); record them from a \
build of the last commit whose numbers are trusted: YOLO_RECORD_GOLDEN=1 ctest -R results_golden"
for g in "$GOLDEN_DIR/results_${KIND}_${MODE}".csv "$GOLDEN_DIR/results_${KIND}_${MODE}".*.csv; do
  if [[ -f "$g" ]] && cmp -s "$g" "$csv"; then
    echo "results.csv matches $(basename "$g") ($(rows "$csv") epochs)"
    exit 0
  fi
done
diff -u "$GOLDEN" "$csv" || true
fail "results.csv differs from every recorded run (results_${KIND}_${MODE}*.csv in $GOLDEN_DIR): \
the training's numbers changed"
