#!/usr/bin/env bash
# One command that shows what works on a GPU: builds the project, then runs each check and prints
# one table row per check (check | result | figure). Exits non-zero when any check fails.
#
# Usage: scripts/gpu_check.sh [--cpu] [--build DIR] [--data DIR] [--out DIR]
#   --cpu        the same steps on the CPU at tiny sizes (generated data, 64 px, yolov5n), so the
#                script itself is tested where there is no GPU; checks that only mean something
#                on a GPU (float16 SyncBatchNorm on CUDA, out-of-memory) say "skip".
#   --build DIR  an existing build to use (default: build/, made by scripts/setup.sh; on a CUDA
#                machine without a package registry, build-gpu/ from the local PyTorch and the
#                C++ kit in ../shared/gpu-kit, as its README says).
#   --data DIR   a YOLO dataset root with images/train2017 (default ../shared/datasets/coco128).
#   --out DIR    where runs and logs go (default: a new temporary folder, kept).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD

CPU=0 BUILD="" DATA="" OUT=""
while (($#)); do
  case "$1" in
    --cpu) CPU=1; shift ;;
    --build) BUILD=${2:?--build needs a folder}; shift 2 ;;
    --data) DATA=${2:?--data needs a folder}; shift 2 ;;
    --out) OUT=${2:?--out needs a folder}; shift 2 ;;
    -h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$(mktemp -d /tmp/gpu_check.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# A folder of an earlier gpu_check: its runs go (the checks count epochs), generated data stays.
[[ -f $OUT/table.md ]] && rm -rf "$OUT/runs" "$OUT/table.md"

# ---- build ------------------------------------------------------------------------------------
# shellcheck source=scripts/lib/gpu_run.sh disable=SC1091
source scripts/lib/gpu_run.sh
build_gpu_kit() {  # a CUDA machine with PyTorch but no C++ libraries and no registry
  gpu_kit_configure build-gpu "$OUT/configure.log" &&
    cmake --build build-gpu -j"$(nproc)" >"$OUT/build.log" 2>&1
}
if [[ -z $BUILD ]]; then
  if [[ $CPU == 0 ]] && ! python3 -m pip download --no-deps -q --timeout 5 --retries 0 -d "$OUT/pipcheck" six==1.16.0 \
    >/dev/null 2>&1; then
    BUILD=build-gpu
    build_gpu_kit || { echo "gpu_check: build failed, see $OUT/*.log" >&2; exit 1; }
  else
    BUILD=build
    bash scripts/setup.sh --targets all >"$OUT/build.log" 2>&1 || { echo "gpu_check: scripts/setup.sh failed, see $OUT/build.log" >&2; exit 1; }
  fi
fi
BIN=$ROOT/$BUILD/bin
[[ $BUILD == /* ]] && BIN=$BUILD/bin
TESTS=$(dirname "$BIN")/tests
[[ -x $BIN/train ]] || { echo "gpu_check: no $BIN/train; build first" >&2; exit 1; }
build_python "$(dirname "$BIN")"

# ---- settings per mode ------------------------------------------------------------------------
if [[ $CPU == 1 ]]; then
  DEV=cpu MODELS=(yolov5n) IMGSZ=64 BATCH=16 EPOCHS=3 WORKERS=1
  DATA_YAML=$OUT/shapes.yaml
  shapes_yaml "$DATA_YAML" "$OUT/shapes"
else
  DEV=0 MODELS=(yolov5n yolov5s) IMGSZ=640 BATCH=32 EPOCHS=3 WORKERS=8
  DATA=${DATA:-$ROOT/../shared/datasets/coco128}
  DATA_YAML=$OUT/coco128.yaml
  coco128_yaml "$DATA_YAML" "$DATA" || { echo "gpu_check: no $DATA/images/train2017 (--data)" >&2; exit 1; }
fi
GPUS=0
[[ $CPU == 0 ]] && GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)

# ---- table ------------------------------------------------------------------------------------
FAILED=0
row() {  # check result figure
  printf '| %s | %s | %s |\n' "$1" "$2" "$3" | tee -a "$OUT/table.md"
  [[ $2 == FAIL* ]] && FAILED=$((FAILED + 1))
  return 0
}
{
  echo "gpu_check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $([[ $CPU == 1 ]] && echo CPU || nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
  "$BIN/train" --version
} | tee "$OUT/header.txt"
echo | tee -a "$OUT/table.md"
row check result figure
row --- --- ---

train() {  # NAME ARGS...: a run in $OUT/runs/NAME, log in $OUT/NAME.log; returns train's status
  run_train "$1" "$@"
}
run_train() {  # LOG NAME ARGS...: as train, into run dir NAME with log $OUT/LOG.log
  local log=$1 name=$2
  shift 2
  (cd "$OUT" && "$BIN/train" --data "$DATA_YAML" --imgsz "$IMGSZ" --batch-size "$BATCH" \
    --workers "$WORKERS" --project "$OUT/runs" --name "$name" --exist-ok --noplots "$@") \
    >"$OUT/$log.log" 2>&1
}
col() {  # CSV COLUMN ROW: a results.csv value (ROW 1 = first epoch, -1 = last)
  "$PY" - "$@" <<'PY'
import csv, sys
rows = [{k.strip(): v.strip() for k, v in r.items()} for r in csv.DictReader(open(sys.argv[1]))]
print(rows[int(sys.argv[3]) - 1 if int(sys.argv[3]) > 0 else int(sys.argv[3])][sys.argv[2]])
PY
}
img_per_s() {  # LOG: median images/s of the epochs after the first
  grep -Eo '\(([0-9.]+) img/s\)' "$1" | tr -d '(' | awk 'NR > 1 {print $1}' | sort -n |
    awk '{a[NR] = $1} END {print NR ? a[int((NR + 1) / 2)] : "n/a"}'
}
map_of() {  # LOG: mAP50-95 of the "all" row
  awk '$1 == "all" {v = $NF} END {print v}' "$1"
}

# 1. Training (AMP on CUDA): losses finite and falling, results.csv, best.pt and last.pt.
declare -A SPEED
for m in "${MODELS[@]}"; do
  if train "train_$m" --cfg "$m.yaml" --epochs "$EPOCHS" --device "$DEV"; then
    csv=$OUT/runs/train_$m/results.csv
    first=$("$PY" -c "import sys; print(sum(float(x) for x in sys.argv[1:]))" \
      "$(col "$csv" train/box_loss 1)" "$(col "$csv" train/obj_loss 1)" "$(col "$csv" train/cls_loss 1)")
    last=$("$PY" -c "import sys; print(sum(float(x) for x in sys.argv[1:]))" \
      "$(col "$csv" train/box_loss -1)" "$(col "$csv" train/obj_loss -1)" "$(col "$csv" train/cls_loss -1)")
    SPEED[$m]=$(img_per_s "$OUT/train_$m.log")
    if ! "$PY" -c "import math,sys; a,b=map(float,sys.argv[1:]); sys.exit(0 if math.isfinite(a) and math.isfinite(b) and b < a else 1)" "$first" "$last"; then
      row "train $m ($IMGSZ px, batch $BATCH, $EPOCHS epochs)" "FAIL: loss $first -> $last" "${SPEED[$m]} img/s"
    elif [[ ! -f $OUT/runs/train_$m/weights/best.pt || ! -f $OUT/runs/train_$m/weights/last.pt ]]; then
      row "train $m" "FAIL: best.pt or last.pt missing" ""
    else
      row "train $m ($IMGSZ px, batch $BATCH, $EPOCHS epochs$([[ $CPU == 0 ]] && echo ", AMP"))" \
        "ok: loss $first -> $last" "${SPEED[$m]} img/s"
    fi
  else
    row "train $m" "FAIL: exit $? ($(tail -1 "$OUT/train_$m.log"))" ""
  fi
done

# 2. val and detect on the device against the CPU, same weights.
best=$OUT/runs/train_${MODELS[0]}/weights/best.pt
if [[ -f $best ]]; then
  ok=1
  for d in $(printf '%s\n' "$DEV" cpu | sort -u); do
    (cd "$OUT" && "$BIN/val" --weights "$best" --data "$DATA_YAML" --imgsz "$IMGSZ" --device "$d" \
      --project "$OUT/runs" --name "val_$d" --exist-ok --noplots) >"$OUT/val_$d.log" 2>&1 || ok=0
    (cd "$OUT" && "$BIN/detect" --weights "$best" --source "$(sed -n 's/^path: //p' "$DATA_YAML")/images/$([[ $CPU == 1 ]] && echo val || echo train2017)" \
      --imgsz "$IMGSZ" --device "$d" --conf-thres 0.001 --max-det 30 --save-txt --save-conf \
      --nosave --project "$OUT/runs" \
      --name "detect_$d" --exist-ok) >"$OUT/detect_$d.log" 2>&1 || ok=0
  done
  a=$(map_of "$OUT/val_$DEV.log") b=$(map_of "$OUT/val_cpu.log")
  if [[ $ok == 0 || -z $a || -z $b ]]; then
    row "val and detect, $DEV vs cpu" "FAIL: a run failed (see $OUT/val_*.log, detect_*.log)" ""
  else
    boxes=$("$PY" - "$OUT/runs/detect_$DEV/labels" "$OUT/runs/detect_cpu/labels" <<'PY'
import os, sys
def load(d):
    out = {}
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        out[f] = sorted(tuple(float(v) for v in l.split()) for l in open(os.path.join(d, f)) if l.strip())
    return out
def close(x, y):  # class, xywh within 0.002 of the image, confidence within 0.01
    return x[0] == y[0] and max(abs(p - q) for p, q in zip(x[1:5], y[1:5])) <= 2e-3 and abs(x[5] - y[5]) <= 1e-2
a, b = load(sys.argv[1]), load(sys.argv[2])
n = same = 0
for f, boxes in b.items():
    left = list(a.get(f, []))
    n += max(len(boxes), len(left))
    for y in boxes:
        i = next((i for i, x in enumerate(left) if close(x, y)), None)
        if i is not None:
            same += 1
            left.pop(i)
print(f"{same}/{n}")
PY
)
    same=${boxes%/*} total=${boxes#*/}
    if "$PY" -c "import sys; sys.exit(0 if abs(float('$a') - float('$b')) <= 0.002 else 1)" &&
      [[ $total -eq 0 || $((same * 100)) -ge $((total * 98)) ]]; then
      row "val and detect, $DEV vs cpu" "ok" "mAP50-95 $a vs $b; boxes equal $boxes"
    else
      row "val and detect, $DEV vs cpu" "FAIL: mAP50-95 $a vs $b; boxes equal $boxes" ""
    fi
  fi
else
  row "val and detect" "FAIL: no best.pt from check 1" ""
fi

# 3. Resume: SIGTERM after epoch 1, --resume on the device; the same last.pt resumes on the CPU.
m=${MODELS[0]}
(cd "$OUT" && exec "$BIN/train" --data "$DATA_YAML" --imgsz "$IMGSZ" --batch-size "$BATCH" \
  --workers "$WORKERS" --project "$OUT/runs" --name resume --exist-ok --noplots --cfg "$m.yaml" \
  --epochs 3 --device "$DEV") >"$OUT/resume.log" 2>&1 &
pid=$!
csv=$OUT/runs/resume/results.csv
for _ in $(seq 1 6000); do  # up to 10 min for two epochs
  [[ -f $csv && $(($(wc -l <"$csv") - 1)) -ge 2 ]] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
kill -TERM $pid 2>/dev/null
wait $pid
status=$?
last=$OUT/runs/resume/weights/last.pt
if [[ $status -eq 0 || ! -f $last ]] || ! grep -q -- "--resume" "$OUT/resume.log"; then
  row "resume after SIGTERM" "FAIL: exit $status after SIGTERM, last.pt $([[ -f $last ]] && echo present || echo missing)" ""
else
  rm -rf "$OUT/runs/resume_cpu" && cp -r "$OUT/runs/resume" "$OUT/runs/resume_cpu"
  "$BIN/train" --resume "$last" --device "$DEV" >"$OUT/resume2.log" 2>&1
  s1=$?
  "$BIN/train" --resume "$OUT/runs/resume_cpu/weights/last.pt" --device cpu >"$OUT/resume_cpu.log" 2>&1
  s2=$?
  r1=$(($(wc -l <"$csv") - 1)) r2=$(($(wc -l <"$OUT/runs/resume_cpu/results.csv") - 1))
  if [[ $s1 -eq 0 && $s2 -eq 0 && $r1 -eq 3 && $r2 -eq 3 ]]; then
    row "resume after SIGTERM; its last.pt on cpu" "ok" "3 epochs in results.csv both ways"
  else
    row "resume after SIGTERM; its last.pt on cpu" "FAIL: exits $s1/$s2, rows $r1/$r2" ""
  fi
fi

# 4. DDP under torchrun: NCCL with one rank on cuda:0, two ranks sharing one device with Gloo,
# and NCCL over two GPUs where there are two.
ddp() {  # NAME NPROC ARGS...
  local name=$1 n=$2
  shift 2
  (cd "$OUT" && timeout -k 10 900 "$TORCHRUN" --no_python -r 1 -t 1 --nproc_per_node="$n" \
    --master_addr=127.0.0.1 --master_port=$((29500 + RANDOM % 2000)) "$BIN/train" \
    --data "$DATA_YAML" --imgsz "$IMGSZ" --batch-size "$BATCH" --workers 2 --project "$OUT/runs" \
    --name "$name" --exist-ok --noplots --cfg "${MODELS[0]}.yaml" --epochs 1 --sync-bn "$@") \
    >"$OUT/$name.log" 2>&1
}
ddp_row() {  # ok|fail LABEL LOG: a row for a run that took one epoch
  if [[ $1 == ok ]]; then
    row "$2" "ok" "$(grep -Eo '[0-9.]+ img/s' "$OUT/$3.log" | tail -1)"
  else
    row "$2" "FAIL: $(grep -m1 -E 'error|Error|FAIL' "$OUT/$3.log" | cut -c1-120)" ""
  fi
}
if [[ -z $TORCHRUN ]]; then
  row "DDP under torchrun" "FAIL: no torchrun next to $PY" ""
elif [[ $CPU == 1 ]]; then
  ddp ddp_gloo 2 --device cpu && r=ok || r=fail
  ddp_row $r "DDP: 2 CPU ranks, Gloo, --sync-bn" ddp_gloo
else
  ddp ddp_nccl1 1 --device 0 --dist-backend nccl && r=ok || r=fail
  ddp_row $r "DDP: 1 rank on cuda:0, NCCL, --sync-bn" ddp_nccl1
  ddp ddp_gloo_shared 2 --device 0 --dist-backend gloo && r=ok || r=fail
  ddp_row $r "DDP: 2 ranks sharing cuda:0, Gloo, --sync-bn" ddp_gloo_shared
  if [[ $GPUS -ge 2 ]]; then
    ddp ddp_nccl2 2 --device 0,1 --dist-backend nccl && r=ok || r=fail
    ddp_row $r "DDP: 2 ranks on 2 GPUs, NCCL, --sync-bn" ddp_nccl2
  else
    row "DDP: 2 ranks on 2 GPUs, NCCL" "skip: $GPUS GPU" ""
  fi
fi

# 5. SyncBatchNorm against BatchNorm on the same batch (float16 on CUDA under autocast).
gtest_row() {  # LABEL BINARY FILTER
  local out
  if [[ ! -x $2 ]]; then row "$1" "FAIL: $2 not built" ""; return; fi
  out=$("$2" --gtest_filter="$3" 2>&1)
  if ! grep -q "PASSED" <<<"$out" || grep -q "FAILED" <<<"$out"; then
    row "$1" "FAIL: $(grep -m1 -A2 'Failure' <<<"$out" | tr '\n' ' ' | cut -c1-150)" ""
  elif grep -q "SKIPPED" <<<"$out" && ! grep -q "\[       OK \]" <<<"$out"; then
    row "$1" "skip: $(grep -m1 -o 'Skipped.*' <<<"$out")" ""
  else
    row "$1" "ok" "$(grep -Ec '^\[       OK \] .* ms\)$' <<<"$out") passed, $(grep -Ec '^\[  SKIPPED \] .* ms\)$' <<<"$out") skipped"
  fi
}
gtest_row "SyncBatchNorm vs BatchNorm (float16 inputs up to 1000; CUDA AMP on a GPU)" \
  "$TESTS/test_distributed" 'SyncBatchNorm.*'

# 6. DataParallel: --device 0 trains in one process; with 2 GPUs --device 0,1 splits the batch.
gtest_row "DataParallel mechanism (replicas, autocast, gradients)" "$TESTS/test_distributed" 'DataParallel.*'
if [[ $GPUS -ge 2 ]]; then
  train dp2 --cfg "${MODELS[0]}.yaml" --epochs 1 --device 0,1 && r=ok || r=fail
  ddp_row $r "DataParallel --device 0,1" dp2
else
  row "DataParallel --device 0,1" "skip: $([[ $CPU == 1 ]] && echo "CPU" || echo "$GPUS GPU")" ""
fi

# 7. Out of GPU memory: a clear message naming the batch size, exit 1, last.pt untouched.
if [[ $CPU == 1 ]]; then
  row "CUDA out of memory" "skip: CPU" ""
else
  # Into check 1's run dir, whose last.pt must come out of it byte for byte.
  m=${MODELS[-1]}
  kept=$OUT/runs/train_$m/weights/last.pt
  sum_before=$(sha256sum "$kept" 2>/dev/null | cut -c1-64)
  run_train oom "train_$m" --cfg "$m.yaml" --epochs 1 --device 0 --batch-size 512 --imgsz 1280
  s=$?
  if [[ $s -eq 1 && -n $sum_before ]] && grep -q "out of memory.*--batch-size 512" "$OUT/oom.log" &&
    [[ $(sha256sum "$kept" | cut -c1-64) == "$sum_before" ]]; then
    row "CUDA out of memory (batch 512, 1280 px)" "ok" "$(grep -m1 -o 'out of memory.*' "$OUT/oom.log" | cut -c1-100)"
  else
    row "CUDA out of memory (batch 512, 1280 px)" "FAIL: exit $s: $(tail -1 "$OUT/oom.log" | cut -c1-120)" ""
  fi
fi

# 8. Our full training step against the plain-PyTorch model's forward + backward (no loss, no
# data, no optimizer) on the same device: the ratio says what the rest of training costs.
BENCH=(--device cuda --amp)
[[ $CPU == 1 ]] && BENCH=(--device cpu)
for m in "${MODELS[@]}"; do
  ref=$("$PY" scripts/bench_pytorch_yolov5n.py "$(nproc)" --model "$m" "${BENCH[@]}" \
    --imgsz "$IMGSZ" --batch "$BATCH" 2>"$OUT/bench_$m.err" | sed -n 's/^images\/s: //p')
  ours=${SPEED[$m]:-}
  if [[ -z $ref || -z $ours || $ours == n/a ]]; then
    row "throughput $m vs plain PyTorch" "FAIL: reference '$ref', ours '$ours'" ""
  else
    row "throughput $m vs plain PyTorch fwd+bwd" "ok" \
      "$ours vs $ref img/s: ratio $("$PY" -c "print(f'{$ours / $ref:.2f}')")"
  fi
done

echo "gpu_check: $FAILED failed; table in $OUT/table.md, logs in $OUT"
[[ $FAILED -eq 0 ]]
