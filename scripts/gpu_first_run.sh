#!/usr/bin/env bash
# The first thing to run on a lent GPU machine: in under ten minutes, build included, it runs the
# CUDA code paths that the CPU-only tests cannot reach and prints one table (check | result |
# figure), also appended to OUT/table.md. Exits non-zero when any row fails. The steps:
#   1. build train and the unit-test binaries test_core, test_data, test_eval, test_distributed
#      and test_engine into build-gpu/, with the machine's PyTorch and the C++ kit
#      (scripts/lib/gpu_run.sh), not the whole project, to leave time for the rest;
#   2. each of those binaries' *Cuda* tests: on a GPU none may skip, and a filter that matches
#      no test fails (the names changed, and the check would pass on nothing);
#   3. SyncBatchNorm.* (test_distributed) and DeviceAugment.* (test_data);
#   4. yolov5n with AdamW and --augment-device cuda, 4 epochs asked, stopped with SIGTERM once 2
#      are in results.csv: non-zero exit, last.pt, finite losses; images/s of epoch 2;
#   5. that last.pt resumed with --device cpu: exit 0 and 4 epochs in results.csv;
#   6. one epoch under torchrun, one rank, NCCL, --sync-bn; images/s;
#   7. export of step 5's last.pt to TorchScript and ONNX on the device (--half on a GPU), and val
#      on the .torchscript there: an 'all' row;
#   8. yolo11n with --optimizer auto (AMP on a GPU), 3 epochs (128 px with --cpu): finite losses
#      that fall from epoch 1 to 3, images/s;
#   9. yolo26n with --optimizer MuSGD (AMP on a GPU), 4 epochs asked, stopped with SIGTERM once 2
#      are in results.csv, then resumed on the device to 4 epochs (MuSGD's buffers from last.pt);
#  10. that yolo26n last.pt exported with --end2end (TorchScript, its top-k in the file) on the
#      device, and val on the .torchscript there (the file holds the top-k: no NMS).
# GPU mode trains on coco128 at 320 px, batch 32, 8 workers.
#
# Usage: scripts/gpu_first_run.sh [--cpu] [--build DIR] [--data DIR] [--out DIR]
#   --cpu        the same steps on the CPU at tiny sizes (generated shapes data, 64 px, batch 16,
#                Gloo, augmentation on the CPU), so the script itself is tested where there is no
#                GPU (ctest gpu_first_run_cpu); there the *Cuda* tests say "skip: no GPU".
#   --build DIR  an existing build to use instead of building one (default with --cpu: build/).
#   --data DIR   a YOLO dataset root with images/train2017 (default ../shared/datasets/coco128).
#   --out DIR    where runs, logs and table.md go (default: a new temporary folder, kept).
#   GPU_KIT=FILE in the environment: the C++ kit to build with, where it is not at
#                ../shared/gpu-kit/deps-x86_64.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
ME=gpu_first_run

CPU=0 BUILD="" DATA="" OUT=""
while (($#)); do
  case "$1" in
    --cpu) CPU=1; shift ;;
    --build) BUILD=${2:?--build needs a folder}; shift 2 ;;
    --data) DATA=${2:?--data needs a folder}; shift 2 ;;
    --out) OUT=${2:?--out needs a folder}; shift 2 ;;
    -h | --help) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "$ME: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$(mktemp -d /tmp/gpu_first_run.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# A folder of an earlier run: its runs go (the steps count results.csv rows), generated data stays.
[[ -f $OUT/table.md ]] && rm -rf "$OUT/runs" "$OUT/table.md"

TEST_BINS=(test_core test_data test_eval test_distributed test_engine)
FAILED=0
ROWS=()
TABLE_OPEN=0
row() {  # check result figure: held in ROWS until the table's head is out, then printed
  local line
  line=$(printf '| %s | %s | %s |' "$1" "$2" "$3")
  if ((TABLE_OPEN)); then echo "$line" | tee -a "$OUT/table.md"; else ROWS+=("$line"); fi
  [[ $2 == FAIL* ]] && FAILED=$((FAILED + 1))
  return 0
}
cell() {  # TEXT: one table cell: one line, no '|', at most 150 characters
  tr '\n|' ' /' <<<"$1" | sed 's/  */ /g; s/ $//' | cut -c1-150
}

# shellcheck source=scripts/lib/gpu_run.sh disable=SC1091
source scripts/lib/gpu_run.sh

# ---- 1. build -----------------------------------------------------------------------------------
# The build is not a row until the header (which needs train --version) is out; it is kept in ROWS.
if [[ -z $BUILD && $CPU == 0 ]]; then
  BUILD=build-gpu
  # nproc honours OMP_NUM_THREADS, which may be set to 1 for the tests.
  jobs=$(env -u OMP_NUM_THREADS nproc)
  start=$SECONDS
  # Not in a subshell: the kit's environment must stay set for the programs built with it.
  if ! gpu_kit_configure build-gpu "$OUT/configure.log" 2>"$OUT/kit.log"; then
    why=$(cat "$OUT/kit.log"; grep -s -m1 -E 'Error|error' "$OUT/configure.log")
    row "build (build-gpu, C++ kit)" "FAIL: configure: $(cell "$why")" ""
  else
    # -k 0: a target that fails to compile must not cost the rows of the others.
    cmake --build build-gpu -j"$jobs" --target train val export "${TEST_BINS[@]}" -- -k 0 \
      >"$OUT/build.log" 2>&1
    s=$?
    if [[ $s == 0 ]]; then
      row "build train, val, export + ${#TEST_BINS[@]} test binaries (build-gpu, C++ kit, -j$jobs)" "ok" "$((SECONDS - start)) s"
    else
      row "build train, val, export + ${#TEST_BINS[@]} test binaries (build-gpu, C++ kit, -j$jobs)" \
        "FAIL: exit $s: $(cell "$(grep -m1 -E 'error|FAILED' "$OUT/build.log")")" "$((SECONDS - start)) s"
    fi
  fi
else
  BUILD=${BUILD:-build}
  row "build" "skip: uses the existing build $BUILD" ""
  # A build-gpu/ made earlier finds the kit's libraries through its environment.
  if [[ $CPU == 0 ]]; then gpu_kit_env || true; fi
fi
BIN=$ROOT/$BUILD/bin
[[ $BUILD == /* ]] && BIN=$BUILD/bin
BUILD_DIR=$(dirname "$BIN")
TESTS=$BUILD_DIR/tests
build_python "$BUILD_DIR"

# ---- settings per mode --------------------------------------------------------------------------
if [[ $CPU == 1 ]]; then
  DEV=cpu WHERE=cpu IMGSZ=64 BATCH=16 WORKERS=1 BACKEND=gloo
  # yolo11n's losses rise over 3 warmup epochs at 64 px (an 8x8 finest grid for the shapes'
  # small objects) and fall at 128.
  AF_IMGSZ=128
  # train refuses --augment-device cuda when it trains on the CPU; cpu is the same flag's other path.
  AUG=cpu
  DATA_YAML=$OUT/shapes.yaml
  shapes_yaml "$DATA_YAML" "$OUT/shapes"
else
  DEV=0 WHERE=cuda:0 IMGSZ=320 BATCH=32 WORKERS=8 BACKEND=nccl AUG=cuda AF_IMGSZ=320
  DATA=${DATA:-$ROOT/../shared/datasets/coco128}
  DATA_YAML=$OUT/coco128.yaml
  coco128_yaml "$DATA_YAML" "$DATA" ||
    echo "$ME: no $DATA/images/train2017 (--data); the training rows will fail" >&2
fi

# ---- header and table ---------------------------------------------------------------------------
{
  if [[ $CPU == 1 ]]; then
    where=CPU
  else
    where=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  fi
  echo "$ME $(date -u +%Y-%m-%dT%H:%M:%SZ) on ${where:-no GPU found by nvidia-smi}"
  if [[ -x $BIN/train ]]; then "$BIN/train" --version; else echo "no $BIN/train"; fi
} | tee "$OUT/header.txt"
echo | tee -a "$OUT/table.md"
printf '| check | result | figure |\n| --- | --- | --- |\n' | tee -a "$OUT/table.md"
printf '%s\n' "${ROWS[@]}" | tee -a "$OUT/table.md"
TABLE_OPEN=1

# ---- 2. and 3. unit tests -----------------------------------------------------------------------
# gtest_check LABEL BINARY FILTER: the tests of BINARY that FILTER matches, run as ctest runs them
# (from the build folder, with its environment), one row with passed / skipped / failed counts.
# Skipped everywhere is the expected result on the CPU and a failure on a GPU, where the CUDA
# variants are the point; no test matched at all is a failure in both.
gtest_check() {
  local label=$1 bin=$TESTS/$2 filter=$3 log s ok skip fail counts
  if [[ ! -x $bin ]]; then row "$label" "FAIL: $bin not built" ""; return; fi
  log=$OUT/gtest_$2_${filter//[^A-Za-z0-9]/}.log
  (cd "$BUILD_DIR" && YOLO_PYTHON=$PY TORCHRUN=$TORCHRUN YOLO_BIN=$BIN \
    timeout -k 10 300 "$bin" --gtest_filter="$filter") >"$log" 2>&1
  s=$?
  # Per-test result lines end with the time; the summary's lists repeat the names without it.
  ok=$(grep -Ec '^\[       OK \] .* ms\)$' "$log")
  skip=$(grep -Ec '^\[  SKIPPED \] .* ms\)$' "$log")
  fail=$(grep -Ec '^\[  FAILED  \] .* ms\)$' "$log")
  counts="$ok passed, $skip skipped, $fail failed"
  if [[ $s == 124 || $s == 137 ]]; then
    row "$label" "FAIL: timed out after 300 s in $(cell "$(grep '^\[ RUN      \]' "$log" | tail -1 | cut -c14-)")" "$counts"
  elif ((fail > 0)); then
    row "$label" "FAIL: $(cell "$(grep -m1 -E '^\[  FAILED  \] .* ms\)$' "$log" | cut -c14-): $(grep -m1 -A2 'Failure' "$log")")" "$counts"
  elif [[ $s != 0 ]]; then
    row "$label" "FAIL: exit $s in $(cell "$(grep '^\[ RUN      \]' "$log" | tail -1 | cut -c14-)") ($(cell "$(tail -1 "$log")"))" "$counts"
  elif ((ok + skip == 0)); then
    row "$label" "FAIL: no test matches '$filter' (names changed?)" "$counts"
  elif ((ok == 0)) && [[ $CPU == 1 ]]; then
    row "$label" "skip: no GPU" "$counts"
  elif ((ok == 0)); then
    row "$label" "FAIL: skipped on a GPU machine ($(cell "$(grep -m1 -A1 'Skipped' "$log" | tail -1)"))" "$counts"
  else
    row "$label" "ok" "$counts"
  fi
}
for t in "${TEST_BINS[@]}"; do
  gtest_check "$t *Cuda*" "$t" '*Cuda*'
done
gtest_check "test_distributed SyncBatchNorm.*" test_distributed 'SyncBatchNorm.*'
gtest_check "test_data DeviceAugment.*" test_data 'DeviceAugment.*'

# ---- 4. training, stopped after 2 of 4 epochs ---------------------------------------------------
# --epochs 4 with SIGTERM after the second leaves an epoch or two for the resume of step 5: a
# signal inside epoch 3's steps stops it there (2 rows), one during its validation at its end (3
# rows). results.csv is polled often, so that the signal lands before the last epoch.
epoch_ips() {  # LOG N: images/s of the Nth training epoch the log reports
  grep -E 'images in [0-9.]+ s \([0-9.]+ img/s\)' "$1" | sed -n "$2p" | grep -Eo '[0-9.]+ img/s'
}
losses() {  # CSV: "ROWS FINITE SUM1 SUM2 ...": data rows, whether every train loss is finite, and
  # each row's sum of its train/*_loss columns (box, obj, cls for YOLOv5; box, cls, dfl otherwise)
  "$PY" - "$1" <<'PY'
import csv, math, sys
rows = [{k.strip(): v.strip() for k, v in r.items()} for r in csv.DictReader(open(sys.argv[1]))]
sums = [sum(float(v) for k, v in r.items() if k.startswith("train/") and k.endswith("_loss"))
        for r in rows]
print(len(rows), all(math.isfinite(s) for s in sums), *(f"{s:.5g}" for s in sums))
PY
}
# stop_after_two NAME LABEL TRAIN-FLAGS...: trains OUT/runs/NAME for 4 epochs, stopped with SIGTERM
# once results.csv has 2 rows; one row; STOPPED=1 when it stopped as asked with a last.pt.
stop_after_two() {
  local name=$1 label=$2 pid sent=0 alive=0 status n finite l1 l2
  shift 2
  local run=$OUT/runs/$name csv=$OUT/runs/$name/results.csv log=$OUT/$name.log
  STOPPED=0
  if [[ ! -x $BIN/train ]]; then row "$label" "FAIL: $BIN/train not built" ""; return; fi
  rm -rf "$run"
  (cd "$OUT" && exec "$BIN/train" --data "$DATA_YAML" --imgsz "$IMGSZ" --batch-size "$BATCH" \
    --workers "$WORKERS" --project "$OUT/runs" --name "$name" --exist-ok --noplots --epochs 4 \
    --device "$DEV" "$@") >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 6000); do  # up to 5 min for two epochs (mapfile: no process per poll)
    if [[ -f $csv ]]; then
      mapfile -t lines <"$csv"
      if ((${#lines[@]} - 1 >= 2)); then kill -TERM "$pid" 2>/dev/null && sent=1; break; fi
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -0 "$pid" 2>/dev/null && ((!sent)) && alive=1 && kill -TERM "$pid"
  for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done  # the save
  kill -KILL "$pid" 2>/dev/null
  wait "$pid"
  status=$?
  read -r n finite l1 l2 _ < <([[ -f $csv ]] && losses "$csv")
  if ((alive)); then
    row "$label" "FAIL: not 2 epochs after 5 min: $(cell "$(tail -1 "$log")")" ""
  elif ((!sent)); then
    row "$label" "FAIL: exit $status before 2 epochs: $(cell "$(tail -1 "$log")")" ""
  elif [[ $status == 0 ]]; then
    row "$label" "FAIL: finished all 4 epochs before SIGTERM landed (exit 0)" "$(epoch_ips "$log" 2)"
  elif [[ ! -f $run/weights/last.pt ]]; then
    row "$label" "FAIL: exit $status after SIGTERM, no last.pt" ""
  elif [[ ${n:-} != [23] || ${finite:-} != True ]]; then
    row "$label" "FAIL: exit $status after SIGTERM; results.csv rows ${n:-none}, losses ${l1:-?} ${l2:-?}" ""
  else
    STOPPED=1
    row "$label" "ok: exit $status after SIGTERM, last.pt, loss $l1 -> $l2" "$(epoch_ips "$log" 2) (epoch 2)"
  fi
}
RUN=$OUT/runs/first_run
CSV=$RUN/results.csv
LAST=$RUN/weights/last.pt
stop_after_two first_run \
  "train yolov5n, AdamW, --augment-device $AUG ($IMGSZ px, batch $BATCH, $WHERE), SIGTERM after 2 of 4 epochs" \
  --cfg yolov5n.yaml --optimizer AdamW --augment-device "$AUG"
# The step's log under its old name, which the docs cite.
[[ -f $OUT/first_run.log ]] && mv "$OUT/first_run.log" "$OUT/train.log"

# ---- 5. resume on the CPU -----------------------------------------------------------------------
# A GPU run's checkpoint resumes on the CPU (optimizer state and EMA are saved on the CPU); its
# opt.yaml's --augment-device cuda falls back to the CPU there.
label="resume that last.pt with --device cpu"
if ((!STOPPED)); then
  row "$label" "FAIL: no interrupted run from step 4" ""
else
  (cd "$OUT" && timeout -k 10 300 "$BIN/train" --resume "$LAST" --device cpu) >"$OUT/resume_cpu.log" 2>&1
  s=$?
  read -r n _ < <(losses "$CSV")
  if [[ $s == 0 && ${n:-} == 4 ]]; then
    row "$label" "ok: 4 epochs in results.csv" "$(epoch_ips "$OUT/resume_cpu.log" 1) (first resumed epoch)"
  else
    row "$label" "FAIL: exit $s, results.csv rows ${n:-none}: $(cell "$(tail -1 "$OUT/resume_cpu.log")")" ""
  fi
fi

# ---- 6. torchrun --------------------------------------------------------------------------------
label="torchrun, 1 rank, $BACKEND on $WHERE, --sync-bn, 1 epoch"
if [[ -z $TORCHRUN ]]; then
  row "$label" "FAIL: no torchrun next to $PY" ""
elif [[ ! -x $BIN/train ]]; then
  row "$label" "FAIL: $BIN/train not built" ""
else
  rm -rf "$OUT/runs/ddp"
  (cd "$OUT" && timeout -k 10 300 "$TORCHRUN" --no_python -r 1 -t 1 --nproc_per_node 1 \
    --master_addr=127.0.0.1 --master_port=$((29500 + RANDOM % 2000)) "$BIN/train" \
    --data "$DATA_YAML" --imgsz "$IMGSZ" --batch-size "$BATCH" --workers "$WORKERS" \
    --project "$OUT/runs" --name ddp --exist-ok --noplots --cfg yolov5n.yaml --epochs 1 \
    --sync-bn --dist-backend "$BACKEND" --device "$DEV") >"$OUT/ddp.log" 2>&1
  s=$?
  if [[ $s == 0 ]]; then
    row "$label" "ok" "$(epoch_ips "$OUT/ddp.log" 1)"
  else
    # train's own message, not torchrun's report around it.
    why=$(grep -m1 -E '(^|\]:)ERROR|traceback :' "$OUT/ddp.log" || tail -1 "$OUT/ddp.log")
    row "$label" "FAIL: exit $s: $(cell "$why")" ""
  fi
fi

# ---- 7. export, and the exported TorchScript on the device ----------------------------------------
HALF=()
[[ $CPU == 0 ]] && HALF=(--half)
label="export last.pt to TorchScript + ONNX ${HALF[*]:+${HALF[*]} }on $WHERE, val on the .torchscript there"
if ((!STOPPED)); then
  row "$label" "FAIL: no last.pt from step 4" ""
elif [[ ! -x $BIN/export || ! -x $BIN/val ]]; then
  row "$label" "FAIL: $BIN/export or $BIN/val not built" ""
else
  start=$SECONDS
  (cd "$OUT" && timeout -k 10 300 "$BIN/export" --weights "$LAST" --include torchscript onnx \
    --imgsz "$IMGSZ" --device "$DEV" "${HALF[@]}" &&
    timeout -k 10 300 "$BIN/val" --weights "${LAST%.pt}.torchscript" --data "$DATA_YAML" \
      --imgsz "$IMGSZ" --device "$DEV" --noplots --project "$OUT/runs" --name val_ts) \
    >"$OUT/export.log" 2>&1
  s=$?
  all=$(grep -E '^ +all +[0-9]+' "$OUT/export.log" | tail -1 | awk '{print "mAP50 " $6}')
  if [[ $s == 0 && -n $all ]]; then
    row "$label" "ok" "$all, $((SECONDS - start)) s"
  else
    row "$label" "FAIL: exit $s: $(cell "$(grep -m1 -E 'ERROR|rror' "$OUT/export.log" || tail -1 "$OUT/export.log")")" ""
  fi
fi

# ---- 8. yolo11n ----------------------------------------------------------------------------------
# The anchor-free loss (task-aligned assignment, CIoU, DFL) under AMP on a GPU; --optimizer auto
# picks AdamW for a short run, as Ultralytics does.
label="train yolo11n, --optimizer auto ($AF_IMGSZ px, batch $BATCH, $WHERE), 3 epochs"
if [[ ! -x $BIN/train ]]; then
  row "$label" "FAIL: $BIN/train not built" ""
else
  rm -rf "$OUT/runs/yolo11n"
  (cd "$OUT" && timeout -k 10 300 "$BIN/train" --data "$DATA_YAML" --imgsz "$AF_IMGSZ" \
    --batch-size "$BATCH" --workers "$WORKERS" --project "$OUT/runs" --name yolo11n --exist-ok \
    --noplots --cfg yolo11n.yaml --optimizer auto --epochs 3 --device "$DEV") \
    >"$OUT/yolo11n.log" 2>&1
  s=$?
  read -r n finite l1 _ l3 _ < <([[ -f $OUT/runs/yolo11n/results.csv ]] && losses "$OUT/runs/yolo11n/results.csv")
  if [[ $s != 0 ]]; then
    row "$label" "FAIL: exit $s: $(cell "$(grep -m1 -E 'ERROR|rror' "$OUT/yolo11n.log" || tail -1 "$OUT/yolo11n.log")")" ""
  elif [[ ${n:-} != 3 || ${finite:-} != True ]]; then
    row "$label" "FAIL: results.csv rows ${n:-none}, losses finite: ${finite:-?}" ""
  elif ! "$PY" -c "import sys; sys.exit(not float(sys.argv[2]) < float(sys.argv[1]))" "$l1" "$l3"; then
    row "$label" "FAIL: loss did not fall: $l1 -> $l3" "$(epoch_ips "$OUT/yolo11n.log" 3) (epoch 3)"
  else
    row "$label" "ok: loss $l1 -> $l3 ($(grep -m1 -o "optimizer: 'auto' chose [A-Za-z]*" "$OUT/yolo11n.log"))" "$(epoch_ips "$OUT/yolo11n.log" 3) (epoch 3)"
  fi
fi

# ---- 9. yolo26n with MuSGD, stopped and resumed on the device -------------------------------------
stop_after_two yolo26n \
  "train yolo26n, MuSGD ($IMGSZ px, batch $BATCH, $WHERE), SIGTERM after 2 of 4 epochs" \
  --cfg yolo26n.yaml --optimizer MuSGD
Y26_STOPPED=$STOPPED
Y26_LAST=$OUT/runs/yolo26n/weights/last.pt
label="resume that yolo26n last.pt on $WHERE (MuSGD's state from the checkpoint)"
if ((!Y26_STOPPED)); then
  row "$label" "FAIL: no interrupted yolo26n run from step 9" ""
else
  (cd "$OUT" && timeout -k 10 300 "$BIN/train" --resume "$Y26_LAST") >"$OUT/yolo26n_resume.log" 2>&1
  s=$?
  read -r n finite _ < <(losses "$OUT/runs/yolo26n/results.csv")
  if [[ $s == 0 && ${n:-} == 4 && ${finite:-} == True ]] &&
    grep -q 'optimizer: MuSGD' "$OUT/yolo26n_resume.log"; then
    row "$label" "ok: 4 epochs in results.csv, finite losses" "$(epoch_ips "$OUT/yolo26n_resume.log" 1) (first resumed epoch)"
  else
    row "$label" "FAIL: exit $s, results.csv rows ${n:-none}: $(cell "$(grep -m1 -E 'ERROR|rror' "$OUT/yolo26n_resume.log" || tail -1 "$OUT/yolo26n_resume.log")")" ""
  fi
fi

# ---- 10. yolo26n exported end to end, and val on that file ---------------------------------------
label="export yolo26n --end2end to TorchScript ${HALF[*]:+${HALF[*]} }on $WHERE, val on it there (no NMS)"
if ((!Y26_STOPPED)); then
  row "$label" "FAIL: no yolo26n last.pt from step 9" ""
elif [[ ! -x $BIN/export || ! -x $BIN/val ]]; then
  row "$label" "FAIL: $BIN/export or $BIN/val not built" ""
else
  start=$SECONDS
  (cd "$OUT" && timeout -k 10 300 "$BIN/export" --weights "$Y26_LAST" --include torchscript \
    --end2end --imgsz "$IMGSZ" --device "$DEV" "${HALF[@]}" &&
    timeout -k 10 300 "$BIN/val" --weights "${Y26_LAST%.pt}.torchscript" --data "$DATA_YAML" \
      --imgsz "$IMGSZ" --device "$DEV" --noplots --project "$OUT/runs" --name val_e2e) \
    >"$OUT/export_e2e.log" 2>&1
  s=$?
  all=$(grep -E '^ +all +[0-9]+' "$OUT/export_e2e.log" | tail -1 | awk '{print "mAP50 " $6}')
  if [[ $s == 0 && -n $all ]]; then
    row "$label" "ok" "$all, $((SECONDS - start)) s"
  else
    row "$label" "FAIL: exit $s: $(cell "$(grep -m1 -E 'ERROR|rror' "$OUT/export_e2e.log" || tail -1 "$OUT/export_e2e.log")")" ""
  fi
fi

echo "$ME: $FAILED failed; table in $OUT/table.md, logs in $OUT"
[[ $FAILED -eq 0 ]]
