#!/usr/bin/env bash
# The label check, validation and --cache ram's memory on 1 rank and on 2 ranks side by side (the
# real torchrun, Gloo, one thread per rank), with their ratio: generated shapes data (IMAGES
# training images of 256 px, a quarter as many val images), the label cache removed before each
# check, val on a yolov5n trained for one epoch at 64 px, and the peak PSS of the whole process
# tree (torchrun included; shared pages count once) of one epoch at PSS_IMGSZ px (default 256)
# with and without --cache ram (without it, each rank's bounded cache of decoded images holds
# what fits in a tenth of the free memory). Prints a markdown table.
#
# Usage: scripts/bench_dist_scale.sh [IMAGES]   (default 2000; needs scripts/test.sh's build)
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGES=${1:-2000}
PSS_IMGSZ=${PSS_IMGSZ:-256}
ROOT=$PWD
TORCHRUN=${TORCHRUN:-$ROOT/.venv/bin/torchrun}
[[ -x "$TORCHRUN" && -x build/tests/dist_equivalence && -x build/bin/val ]] ||
  { echo "bench_dist_scale: run scripts/test.sh first (needs torchrun and the test build)" >&2; exit 1; }
source tests/lib/common.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
torchrun_n() {  # torchrun_n N PROGRAM ARGS...
  local n=$1
  shift
  OMP_NUM_THREADS=1 "$TORCHRUN" --no_python -r 1 -t 1 --nproc_per_node="$n" \
    --master_addr=127.0.0.1 --master_port="$(free_port)" "$@"
}
scan_seconds() {  # scan_seconds N: the check's time on N ranks, from rank 0's line
  rm -f "$tmp/shapes/labels/train.cache"
  torchrun_n "$1" "$ROOT/build/tests/dist_equivalence" scan "$tmp/shapes" "$IMAGES" >"$tmp/scan.log" 2>&1
  sed -nE 's/.*\[rank0\] .* in ([0-9.]+) s$/\1/p' "$tmp/scan.log"
}
echo "making $IMAGES training images..." >&2
torchrun_n 1 "$ROOT/build/tests/dist_equivalence" scan "$tmp/shapes" "$IMAGES" >/dev/null 2>&1
write_shapes_yaml "$tmp"
s1=$(scan_seconds 1)
s2=$(scan_seconds 2)
echo "training a yolov5n for one epoch..." >&2
OMP_NUM_THREADS=2 "$ROOT/build/bin/train" --data "$tmp/data.yaml" --cfg yolov5n.yaml --imgsz 64 \
  --epochs 1 --noval --noplots --project "$tmp/runs" >/dev/null 2>&1
val_seconds() {  # val_seconds N: val's wall time on N ranks (process start included)
  torchrun_n "$1" "$ROOT/build/bin/val" --weights "$tmp/runs/exp/weights/last.pt" \
    --data "$tmp/data.yaml" --imgsz 160 --batch-size 16 --noplots --project "$tmp/val" \
    >"$tmp/val.log" 2>&1
  python3 -c "import time; print(round(time.time() - $2, 2))"
}
v1=$(val_seconds 1 "$(date +%s.%N)")
v2=$(val_seconds 2 "$(date +%s.%N)")
peak_pss_mib() {  # peak_pss_mib PID: the largest PSS sum of this run's processes while PID lives
  local peak=0 sum v p
  while kill -0 "$1" 2>/dev/null; do
    sum=0
    for p in $(pgrep -f "$tmp/data.yaml" || true); do
      v=$(awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null || true)
      sum=$((sum + ${v:-0}))
    done
    ((sum > peak)) && peak=$sum
    sleep 0.2
  done
  echo $((peak / 1024))
}
train_pss() {  # train_pss N [--cache ram]: one epoch's peak PSS (MiB) on N ranks
  local n=$1
  shift
  torchrun_n "$n" "$ROOT/build/bin/train" --data "$tmp/data.yaml" --cfg yolov5n.yaml --imgsz "$PSS_IMGSZ" \
    --batch-size 16 --epochs 1 --noval --noplots --workers 1 --exist-ok --project "$tmp/pss" \
    "$@" >"$tmp/pss.log" 2>&1 &
  peak_pss_mib $!
}
echo "peak PSS with and without --cache ram..." >&2
p1=$(train_pss 1)
p1c=$(train_pss 1 --cache ram)
c1=$(sed -nE 's/.*Cached [0-9]+ images in RAM \(([0-9]+) MiB\).*/\1/p' "$tmp/pss.log" | head -1)
p2=$(train_pss 2)
p2c=$(train_pss 2 --cache ram)
c2=$(sed -nE 's/.*Cached [0-9]+ images in shared memory \(([0-9.]+) MiB.*/\1/p' "$tmp/pss.log" | head -1)
ratio() { python3 -c "print(f'{$2 / $1:.2f}')"; }
echo "| $IMAGES images, $(nproc) cores | 1 rank (s) | 2 ranks (s) | 2 ranks / 1 rank |"
echo "|---|---|---|---|"
echo "| label check (cache removed) | $s1 | $s2 | $(ratio "$s1" "$s2") |"
echo "| val, $((IMAGES / 4)) images at 160 px (wall, start included) | $v1 | $v2 | $(ratio "$v1" "$v2") |"
echo "| peak PSS, one epoch at $PSS_IMGSZ px (MiB) | $p1 | $p2 | $(ratio "$p1" "$p2") |"
echo "| the same with --cache ram (MiB) | $p1c | $p2c | $(ratio "$p1c" "$p2c") |"
echo "| --cache ram's training images (MiB; 2 ranks: one shared copy) | $c1 | $c2 | $(ratio "$c1" "$c2") |"
