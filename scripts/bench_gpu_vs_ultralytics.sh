#!/usr/bin/env bash
# Our train against Ultralytics 8.4.190's side by side on a CUDA machine, in one command, on the
# same torch: the same data (coco128's 128 images copied 3 times under distinct names = 384
# training images; the 128 originals validated every epoch), yolo11n and yolo26n from their YAMLs
# (no weights), 640 px, batch 64, 8 workers, AMP, --optimizer auto on both sides, no plots. Per
# model a markdown table (steady epoch, in-loop images/s, validation time, GPU busy %, peak GPU
# memory, and both sides' box, cls and dfl (YOLO26: l1) training losses at the last epoch; ours, Ultralytics
# and their ratio), written to OUT/table.md and printed. --cpu runs the same at tiny sizes on the
# CPU (ctest bench_gpu_vs_ultralytics_cpu).
#
# Usage: scripts/bench_gpu_vs_ultralytics.sh [--cpu] [--models yolo11n,yolo26n] [--epochs 4]
#          [--imgsz 640] [--batch 64] [--workers 8] [--copies 3] [--images N] [--data DIR]
#          [--build DIR] [--python PATH] [--wheels DIR] [--gpu-kit FILE] [--timeout S] [--out DIR]
#        scripts/bench_gpu_vs_ultralytics.sh --prepare [DIR]
#   --cpu          yolo11n and yolo26n, 64 px, batch 8, 2 epochs, no loader workers, on 16
#                  generated shapes images copied 2 times; the GPU rows say n/a.
#   --data DIR     a YOLO dataset root with images/train2017 (COCO's 80 classes; default
#                  .cache/gpu-bench/coco128, else ../shared/datasets/coco128) or images/train.
#   --build DIR    a build holding bin/train (default: --cpu build/; on CUDA build-gpu/, made with
#                  the C++ kit when it has no bin/train yet).
#   --python PATH  the Python that runs Ultralytics (default .cache/test-venv-ultralytics/bin/python,
#                  which scripts/setup.sh --test-packages makes beside .venv's torch).
#   --wheels DIR   wheels installed for it (into the output folder) before Ultralytics is
#                  imported: on the GPU machine, .cache/gpu-bench/wheels-ultralytics (--prepare).
#   --prepare [DIR]  on a machine with a package registry: downloads the Ultralytics wheels that
#                  the GPU machine's Python 3.12 lacks into DIR/wheels-ultralytics (default
#                  .cache/gpu-bench), and coco128 and the C++ kit as bench_gpu_vs_yolov5.sh does.
#
# On the GPU machine, with .cache/gpu-bench copied into its checkout:
#   scripts/bench_gpu_vs_ultralytics.sh --python /opt/torch/.venv/bin/python \
#     --wheels .cache/gpu-bench/wheels-ultralytics --data .cache/gpu-bench/coco128 \
#     --gpu-kit .cache/gpu-bench/deps-x86_64.tar.xz
# Steady epoch, images/s, validation and GPU sampling are measured as in bench_gpu_vs_yolov5.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ME=bench_gpu_vs_ultralytics
HELPER=$ROOT/scripts/$ME.py
die() { echo "$ME: $*" >&2; exit 1; }
usage_error() { echo "$ME: $* (see --help)" >&2; exit 2; }

CPU=0 PREPARE="" MODELS="" EPOCHS="" IMGSZ="" BATCH="" WORKERS="" COPIES="" IMAGES=""
DATA="" BUILD="" PY="" WHEELS="" GPU_KIT_ARG="" TIMEOUT=900 OUT_DIR=""
need() { [[ $# -ge 2 && -n $2 && $2 != --* ]] || usage_error "$1 needs a value"; }
while (($#)); do
  case "$1" in
    --cpu) CPU=1; shift ;;
    --prepare) PREPARE=.cache/gpu-bench; shift
      if [[ $# -gt 0 && $1 != --* ]]; then PREPARE=$1; shift; fi ;;
    --models) need "$@"; MODELS=$2; shift 2 ;;
    --epochs) need "$@"; EPOCHS=$2; shift 2 ;;
    --imgsz | --img) need "$@"; IMGSZ=$2; shift 2 ;;
    --batch | --batch-size) need "$@"; BATCH=$2; shift 2 ;;
    --workers) need "$@"; WORKERS=$2; shift 2 ;;
    --copies) need "$@"; COPIES=$2; shift 2 ;;
    --images) need "$@"; IMAGES=$2; shift 2 ;;
    --data) need "$@"; DATA=$2; shift 2 ;;
    --build) need "$@"; BUILD=$2; shift 2 ;;
    --python) need "$@"; PY=$2; shift 2 ;;
    --wheels) need "$@"; WHEELS=$2; shift 2 ;;
    --gpu-kit) need "$@"; GPU_KIT_ARG=$2; shift 2 ;;
    --timeout) need "$@"; TIMEOUT=$2; shift 2 ;;
    --out) need "$@"; OUT_DIR=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) usage_error "unknown flag '$1'" ;;
  esac
done
for pair in "--epochs:$EPOCHS" "--imgsz:$IMGSZ" "--batch:$BATCH" "--workers:$WORKERS" \
  "--copies:$COPIES" "--images:$IMAGES" "--timeout:$TIMEOUT"; do
  [[ -z ${pair#*:} || ${pair#*:} =~ ^[0-9]+$ ]] || usage_error "${pair%%:*} must be a whole number, not '${pair#*:}'"
done
[[ -z $EPOCHS || $EPOCHS -ge 2 ]] || usage_error "--epochs must be at least 2 (the steady epoch is measured between epochs)"

# ---- --prepare ------------------------------------------------------------------------------------
if [[ -n $PREPARE ]]; then
  # coco128 and the C++ kit as for the YOLOv5 bench (it also fetches YOLOv5's wheels).
  bash scripts/bench_gpu_vs_yolov5.sh --prepare "$PREPARE" >/dev/null || die "--prepare: bench_gpu_vs_yolov5.sh --prepare failed"
  rm -rf "$PREPARE/wheels-ultralytics" && mkdir -p "$PREPARE/wheels-ultralytics"
  # What the GPU machine's Python lacks (../shared/gpu-kit/README.md), at the tests' pins.
  pins=()
  for p in ultralytics ultralytics-thop polars polars-runtime-32; do
    pins+=("$(grep -i "^$p==" scripts/requirements-ultralytics.txt)") || die "--prepare: no pin for $p in scripts/requirements-ultralytics.txt"
  done
  .venv/bin/python -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d "$PREPARE/wheels-ultralytics" "${pins[@]}" || die "--prepare: pip download failed (needs a package registry)"
  echo "$ME: prepared $PREPARE: coco128, the C++ kit and $(find "$PREPARE/wheels-ultralytics" -name "*.whl" | wc -l) Ultralytics wheels."
  exit 0
fi

# ---- settings per mode ------------------------------------------------------------------------
if [[ $CPU == 1 ]]; then
  DEV=cpu MODELS=${MODELS:-yolo11n,yolo26n} EPOCHS=${EPOCHS:-2} IMGSZ=${IMGSZ:-64} BATCH=${BATCH:-8}
  WORKERS=${WORKERS:-0} COPIES=${COPIES:-2} IMAGES=${IMAGES:-16}
else
  DEV=0 MODELS=${MODELS:-yolo11n,yolo26n} EPOCHS=${EPOCHS:-4} IMGSZ=${IMGSZ:-640} BATCH=${BATCH:-64}
  WORKERS=${WORKERS:-8} COPIES=${COPIES:-3} IMAGES=${IMAGES:-0}
  command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 ||
    die "nvidia-smi sees no GPU; on a machine without a GPU use --cpu"
  if [[ -z $DATA ]]; then
    DATA=../shared/datasets/coco128
    [[ -d .cache/gpu-bench/coco128 ]] && DATA=.cache/gpu-bench/coco128
  fi
fi
if [[ -n $DATA ]]; then
  [[ -d $DATA/images/train2017 || -d $DATA/images/train ]] ||
    die "--data: no images/train2017 or images/train under '$DATA'"
  DATA=$(cd "$DATA" && pwd)
fi
IFS=, read -r -a MODEL_LIST <<<"$MODELS"
for m in "${MODEL_LIST[@]}"; do
  [[ $m =~ ^(yolov8|yolo11|yolo26)[nslmx]$ ]] || usage_error "--models: '$m' is not a YOLOv8, YOLO11 or YOLO26 scale (yolo11n, yolo26s, ...)"
done
OUT_DIR=${OUT_DIR:-${OUT:-runs/$ME}}
mkdir -p "$OUT_DIR"
WORK=$(cd "$OUT_DIR" && pwd)
rm -rf "$WORK/runs" "$WORK/logs" "$WORK/table.md"
mkdir -p "$WORK/logs"

# ---- Ultralytics, offline, settings in the work folder ---------------------------------------------
if [[ -z $PY ]]; then
  PY=$ROOT/.cache/test-venv-ultralytics/bin/python
  [[ -x $PY ]] || die "no $PY: scripts/setup.sh --test-packages installs Ultralytics 8.4.190 there (or pass --python)"
fi
command -v "$PY" >/dev/null || usage_error "--python: '$PY' is not an executable Python"
PY=$(command -v "$PY")
CFG=$WORK/ultralytics_config
mkdir -p "$CFG/Ultralytics"
cat >"$CFG/Ultralytics/settings.json" <<EOF
{"settings_version": "0.0.8", "datasets_dir": "$WORK/datasets", "weights_dir": "$WORK/weights",
 "runs_dir": "$WORK/runs", "uuid": "0", "sync": false, "api_key": "", "openai_api_key": "",
 "clearml": false, "comet": false, "dvc": false, "mlflow": false, "raytune": false,
 "tensorboard": false, "wandb": false, "vscode_msg": false, "openvino_msg": false}
EOF
font=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
[[ -f $font ]] || font=$("$PY" -c 'import matplotlib, os; print(os.path.join(os.path.dirname(matplotlib.__file__), "mpl-data/fonts/ttf/DejaVuSans.ttf"))' 2>/dev/null || true)
[[ -f $font ]] && cp "$font" "$CFG/Ultralytics/Arial.ttf"
UL_ENV=(YOLO_OFFLINE=true YOLO_AUTOINSTALL=false "YOLO_CONFIG_DIR=$CFG" PYTHONUNBUFFERED=1
  PYTHONDONTWRITEBYTECODE=1)
if [[ -n $WHEELS ]]; then
  compgen -G "$WHEELS/*.whl" >/dev/null || die "--wheels: no .whl files in '$WHEELS' (make them with '$0 --prepare')"
  "$PY" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile \
    --no-cache-dir --target "$WORK/site" "$WHEELS"/*.whl >"$WORK/logs/wheels.log" 2>&1 ||
    die "--wheels: installing $WHEELS failed, see $WORK/logs/wheels.log"
  UL_ENV+=("PYTHONPATH=$WORK/site${PYTHONPATH:+:$PYTHONPATH}")
fi
ul_ver=$(env "${UL_ENV[@]}" "$PY" -c 'import ultralytics, torch, sys; print(f"Ultralytics {ultralytics.__version__}, PyTorch {torch.__version__}, Python {sys.version.split()[0]}")' 2>"$WORK/logs/ultralytics_import.log" | tail -1) ||
  die "Ultralytics is not importable by --python $PY ($(tail -1 "$WORK/logs/ultralytics_import.log"))"

# ---- our build ----------------------------------------------------------------------------------
if [[ -z $BUILD ]]; then
  if [[ $CPU == 1 ]]; then
    BUILD=build
  else
    BUILD=build-gpu
    if [[ ! -x build-gpu/bin/train ]]; then
      # shellcheck source=scripts/lib/gpu_run.sh disable=SC1091
      source scripts/lib/gpu_run.sh
      [[ -n $GPU_KIT_ARG ]] && export GPU_KIT=$GPU_KIT_ARG
      [[ -z ${GPU_KIT:-} && -f .cache/gpu-bench/deps-x86_64.tar.xz ]] && export GPU_KIT=.cache/gpu-bench/deps-x86_64.tar.xz
      echo "$ME: building train into build-gpu/ with the C++ kit (log: $WORK/logs/build.log)" >&2
      { gpu_kit_configure build-gpu "$WORK/logs/build.log" &&
        cmake --build build-gpu -j"$(env -u OMP_NUM_THREADS nproc)" --target train >>"$WORK/logs/build.log" 2>&1; } ||
        die "building train with the C++ kit failed, see $WORK/logs/build.log"
    elif [[ -f .gpukit/kit/env.sh ]]; then
      # shellcheck disable=SC1091
      source .gpukit/kit/env.sh
    fi
  fi
fi
[[ -x $BUILD/bin/train ]] || die "--build: no bin/train in '$BUILD' (build it: scripts/setup.sh --targets train)"
TRAIN=$(cd "$BUILD" && pwd)/bin/train

# ---- data: one copy per trainer, since both name their label caches labels/<split>.cache ---------
if [[ -z $DATA ]]; then  # --cpu: shapes generated by our train on first use
  SRC=$WORK/shapes NAMES=()
  printf 'path: %s\ntrain: images/train\nval: images/val\nnames: [circle, rectangle, triangle]\ngenerate: shapes\n' \
    "$SRC" >"$WORK/shapes.yaml"
  "$PY" "$HELPER" run --log "$WORK/logs/generate.log" --timeout "$TIMEOUT" -- "$TRAIN" \
    --data "$WORK/shapes.yaml" --cfg yolov5n.yaml --imgsz 32 --batch-size 16 --epochs 1 --workers 0 \
    --device cpu --noval --nosave --noplots --project "$WORK/gen" --exist-ok ||
    die "generating the shapes data failed, see $WORK/logs/generate.log"
else
  SRC=$DATA NAMES=(--names-from configs/data/coco128.yaml)
  [[ -d $DATA/images/train2017 ]] || NAMES=()
fi
for who in ours ultralytics; do
  desc=$("$PY" "$HELPER" data "$SRC" "$WORK/data_$who" --copies "$COPIES" --images "$IMAGES" "${NAMES[@]}")
done

# ---- header ---------------------------------------------------------------------------------------
cores=$(env -u OMP_NUM_THREADS nproc)
if [[ $CPU == 1 ]]; then
  device="CPU, $cores cores"
else
  device="$(nvidia-smi -i 0 --query-gpu=name,driver_version --format=csv,noheader | sed 's/, / (driver /; s/$/)/'), $cores CPU cores"
fi
amp=""
[[ $CPU == 0 ]] && amp=", AMP"
SETTING="$IMGSZ px, batch $BATCH, $WORKERS workers$amp, $EPOCHS epochs from the YAML, optimizer auto"
TABLE=$WORK/table.md
{
  echo "# ours against Ultralytics, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "- device: $device"
  echo "- ours: $("$TRAIN" --version | sed -n '1,2p' | paste -sd, | sed 's/,/, /'); $ul_ver"
  echo "- data: $desc (each image copied under distinct names; the originals validated every epoch); $SETTING"
  echo "- steady epoch: (end of epoch $EPOCHS's validation - end of epoch 1's) / $((EPOCHS - 1)) from one timestamped run each; in-loop images/s: the per-epoch \"N images in S s\" line (Ultralytics' printed by a callback from its epoch start to its epoch end)"
  [[ $CPU == 1 ]] && echo "- CPU mode: GPU rows n/a"
  [[ $CPU == 0 ]] && echo "- GPU busy: nvidia-smi utilization.gpu every 200 ms over the steady epochs; peak memory: its memory.used over the whole run"
  echo
} >"$TABLE"

# ---- runs -----------------------------------------------------------------------------------------
FAILED=0
run_one() {  # NAME CMD...: one timestamped run (with GPU sampling on CUDA)
  local name=$1 start smi=()
  shift
  [[ $CPU == 0 ]] && smi=(--smi "$WORK/logs/$name.smi.csv" --gpu 0)
  start=$(date +%s)
  if (cd "$WORK" && "$PY" "$HELPER" run --log "$WORK/logs/$name.log" "${smi[@]}" --timeout "$TIMEOUT" -- "$@"); then
    echo "$ME: $name: $(($(date +%s) - start)) s" >&2
  else
    FAILED=$((FAILED + 1))
    return 1
  fi
}
spec() { echo "$WORK/logs/$1.log$([[ $CPU == 0 ]] && echo ",$WORK/logs/$1.smi.csv")"; }
table_flags=()
[[ $CPU == 1 ]] && table_flags=(--cpu)
echo "$ME: $desc; logs in $WORK/logs" >&2
for m in "${MODEL_LIST[@]}"; do
  ok=1
  run_one "ours_$m" "$TRAIN" --data "$WORK/data_ours.yaml" --cfg "$m.yaml" --imgsz "$IMGSZ" \
    --batch-size "$BATCH" --epochs "$EPOCHS" --workers "$WORKERS" --device "$DEV" \
    --optimizer auto --noplots --project "$WORK/runs" --name "ours_$m" --exist-ok || ok=0
  run_one "ultralytics_$m" env "${UL_ENV[@]}" "$PY" "$HELPER" ultralytics \
    --data "$WORK/data_ultralytics.yaml" --cfg "$m.yaml" --imgsz "$IMGSZ" --batch "$BATCH" \
    --epochs "$EPOCHS" --workers "$WORKERS" --device "$DEV" --project "$WORK/runs" \
    --name "ultralytics_$m" || ok=0
  if [[ $ok == 1 ]]; then
    "$PY" "$HELPER" table --model "$m" --setting "$SETTING" --ours "$(spec "ours_$m")" \
      --ultralytics "$(spec "ultralytics_$m")" --ours-csv "$WORK/runs/ours_$m/results.csv" \
      --ultralytics-csv "$WORK/runs/ultralytics_$m/results.csv" "${table_flags[@]}" \
      --out "$TABLE" >/dev/null || { FAILED=$((FAILED + 1)); ok=0; }
  fi
  [[ $ok == 1 ]] || printf '### %s: FAILED, see %s/logs/*_%s.log\n\n' "$m" "$WORK" "$m" >>"$TABLE"
done

cat "$TABLE"
echo "$ME: table in $TABLE; logs in $WORK/logs$([[ $FAILED -gt 0 ]] && echo "; $FAILED run(s) FAILED")"
[[ $FAILED -eq 0 ]]
