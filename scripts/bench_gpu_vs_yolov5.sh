#!/usr/bin/env bash
# Our train against YOLOv5 7.0.14's train.py side by side on a CUDA machine, in one command: the
# same data (coco128's 128 images copied 10 times under distinct names = 1280 training images; the
# 128 originals validated every epoch), yolov5n and yolov5s from their YAMLs (no weights), 640 px,
# batch 64, 8 workers, AMP, --noplots. Per model a markdown table (steady epoch, in-loop images/s,
# validation time, GPU busy %, peak GPU memory; ours, YOLOv5 and their ratio) and a line for ours
# under `torchrun --nproc_per_node=1` (NCCL, --device 0) against the plain run, written to
# OUT/table.md and printed. --cpu runs the same at tiny sizes on the CPU (ctest runs it).
#
# Usage: scripts/bench_gpu_vs_yolov5.sh [--cpu] [--models yolov5n,yolov5s] [--epochs 5]
#          [--imgsz 640] [--batch 64] [--workers 8] [--copies 10] [--images N] [--data DIR]
#          [--build DIR] [--python PATH] [--wheels DIR] [--gpu-kit FILE] [--no-torchrun]
#          [--timeout S] [--out DIR] [--work DIR] [--augment-device cpu|cuda]
#        scripts/bench_gpu_vs_yolov5.sh --prepare [DIR]
#   --cpu          yolov5n, 64 px, batch 8, 2 epochs, no loader workers, on 16 generated shapes
#                  images copied 4 times; the GPU rows say n/a.
#   --data DIR     a YOLO dataset root with images/train2017 and its labels, COCO's 80 classes
#                  (default: .cache/gpu-bench/coco128, else ../shared/datasets/coco128), or with
#                  images/train holding the shapes' 3 classes.
#   --images N     use its first N images (default: all); --copies how often each is copied.
#   --augment-device D  passed to our train (and the torchrun run): where its augmentation runs.
#   --build DIR    a build holding bin/train (default: --cpu build/; on CUDA build-gpu/ made with
#                  the C++ kit when there is one (--gpu-kit), else build/ through scripts/setup.sh).
#   --python PATH  the Python that runs YOLOv5 (default .cache/test-venv/bin/python, else python3).
#   --wheels DIR   wheels installed for it (into the work folder) before YOLOv5 is imported: on
#                  the GPU machine, .cache/gpu-bench/wheels from --prepare.
#   --gpu-kit FILE the C++ libraries for a CUDA machine without a registry (default
#                  .cache/gpu-bench/deps-x86_64.tar.xz, else ../shared/gpu-kit/deps-x86_64.tar.xz).
#   --out DIR      where table.md (and, when it is not --work, logs.tar.gz) go (default: $OUT when
#                  set, else runs/bench_gpu_vs_yolov5); --work DIR where data, runs and logs go
#                  (default: --out, or runs/bench_gpu_vs_yolov5 when --out is $OUT).
#   --prepare [DIR]  on a machine with ../shared and a package registry: copies coco128 and the C++
#                  kit and downloads YOLOv5's wheels for the GPU machine's Python 3.12 into DIR
#                  (default .cache/gpu-bench), to be copied into the GPU machine's checkout.
#
# On the GPU machine (with the --prepare folder .cache/gpu-bench copied into its checkout):
#   scripts/bench_gpu_vs_yolov5.sh --python /opt/torch/.venv/bin/python \
#     --wheels .cache/gpu-bench/wheels --data .cache/gpu-bench/coco128 \
#     --gpu-kit .cache/gpu-bench/deps-x86_64.tar.xz
# It builds train into build-gpu/ with the kit, then runs ours, YOLOv5 and torchrun per model.
#
# Steady epoch: each trainer runs once for --epochs epochs; its output is timestamped line by line
# as it arrives, and the steady epoch is (end of the last epoch's validation - end of the first's)
# / (epochs - 1): the quantity of (wall at 5 epochs - wall at 1) / 4 from one run instead of two.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ME=bench_gpu_vs_yolov5
HELPER=$ROOT/scripts/$ME.py
die() { echo "$ME: $*" >&2; exit 1; }
usage_error() { echo "$ME: $* (see --help)" >&2; exit 2; }

CPU=0 PREPARE="" MODELS="" EPOCHS="" IMGSZ="" BATCH="" WORKERS="" COPIES="" IMAGES=""
DATA="" BUILD="" PY="" WHEELS="" GPU_KIT="" TORCHRUN_RUN=1 TIMEOUT=900 OUT_DIR="" WORK=""
OURS_FLAGS=()
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
    --gpu-kit) need "$@"; GPU_KIT=$2; shift 2 ;;
    --no-torchrun) TORCHRUN_RUN=0; shift ;;
    --augment-device) need "$@"; [[ $2 == cpu || $2 == cuda ]] || usage_error "--augment-device must be cpu or cuda, not '$2'"
      OURS_FLAGS=(--augment-device "$2"); shift 2 ;;
    --timeout) need "$@"; TIMEOUT=$2; shift 2 ;;
    --out) need "$@"; OUT_DIR=$2; shift 2 ;;
    --work) need "$@"; WORK=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) usage_error "unknown flag '$1'" ;;
  esac
done
for pair in "--epochs:$EPOCHS" "--imgsz:$IMGSZ" "--batch:$BATCH" "--workers:$WORKERS" \
  "--copies:$COPIES" "--images:$IMAGES" "--timeout:$TIMEOUT"; do
  [[ -z ${pair#*:} || ${pair#*:} =~ ^[0-9]+$ ]] || usage_error "${pair%%:*} must be a whole number, not '${pair#*:}'"
done
[[ -z $EPOCHS || $EPOCHS -ge 2 ]] || usage_error "--epochs must be at least 2 (the steady epoch is measured between epochs)"

if [[ -z $PY ]]; then
  PY=python3
  [[ -x .cache/test-venv/bin/python ]] && PY=$ROOT/.cache/test-venv/bin/python
fi
command -v "$PY" >/dev/null || usage_error "--python: '$PY' is not an executable Python"
PY=$(command -v "$PY")

# ---- --prepare: what the GPU machine lacks, in one folder to copy there --------------------------
if [[ -n $PREPARE ]]; then
  [[ -d ../shared/datasets/coco128/images/train2017 ]] || die "--prepare: ../shared/datasets/coco128 is missing"
  [[ -f ../shared/gpu-kit/deps-x86_64.tar.xz ]] || die "--prepare: ../shared/gpu-kit/deps-x86_64.tar.xz is missing"
  mkdir -p "$PREPARE"
  rm -rf "$PREPARE/coco128" "$PREPARE/wheels"
  mkdir -p "$PREPARE/coco128" "$PREPARE/wheels"
  cp -r ../shared/datasets/coco128/images ../shared/datasets/coco128/labels "$PREPARE/coco128/"
  find "$PREPARE/coco128" -name '*.cache' -delete
  install -m 644 ../shared/gpu-kit/deps-x86_64.tar.xz "$PREPARE/"
  # libjpeg-turbo's headers, which the kit lacks (it has the library): our loader decodes JPEGs
  # with it directly, 1.6x faster than through OpenCV 4.6.
  rm -rf "$PREPARE/jpeg-include" && mkdir -p "$PREPARE/jpeg-include"
  for h in jpeglib.h jerror.h jmorecfg.h x86_64-linux-gnu/jconfig.h; do
    [[ -f /usr/include/$h ]] && cp "/usr/include/$h" "$PREPARE/jpeg-include/"
  done
  # YOLOv5 and the packages it needs that the GPU machine's Python lacks (../shared/gpu-kit/
  # README.md), at the versions pinned for the tests; not numpy, which its scipy is built against.
  pins=()
  for p in yolov5 ultralytics roboflow huggingface-hub thop GitPython gitdb smmap requests-toolbelt \
    python-dotenv pillow-avif-plugin; do
    pins+=("$(grep -i "^$p==" scripts/requirements-yolov5.txt)") || die "--prepare: no pin for $p in scripts/requirements-yolov5.txt"
  done
  pip_py=$PY
  "$pip_py" -m pip --version >/dev/null 2>&1 || pip_py=$ROOT/.venv/bin/python
  "$pip_py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d "$PREPARE/wheels" "${pins[@]}" || die "--prepare: pip download failed (needs a package registry)"
  echo "$ME: prepared $PREPARE ($(du -sh "$PREPARE" | cut -f1)): coco128, the C++ kit and $(find "$PREPARE/wheels" -name "*.whl" | wc -l) wheels."
  echo "Copy $PREPARE into the GPU machine's checkout, then run there:"
  echo "  scripts/$ME.sh --python /opt/torch/.venv/bin/python --wheels $PREPARE/wheels --data $PREPARE/coco128 --gpu-kit $PREPARE/deps-x86_64.tar.xz"
  exit 0
fi

# ---- settings per mode ------------------------------------------------------------------------
if [[ $CPU == 1 ]]; then
  DEV=cpu MODELS=${MODELS:-yolov5n} EPOCHS=${EPOCHS:-2} IMGSZ=${IMGSZ:-64} BATCH=${BATCH:-8}
  WORKERS=${WORKERS:-0} COPIES=${COPIES:-4} IMAGES=${IMAGES:-16}
else
  DEV=0 MODELS=${MODELS:-yolov5n,yolov5s} EPOCHS=${EPOCHS:-5} IMGSZ=${IMGSZ:-640} BATCH=${BATCH:-64}
  WORKERS=${WORKERS:-8} COPIES=${COPIES:-10} IMAGES=${IMAGES:-0}
  command -v nvidia-smi >/dev/null ||
    die "nvidia-smi not found: the CUDA mode samples GPU busy % and memory with it; on a machine without a GPU use --cpu"
  nvidia-smi -L >/dev/null 2>&1 || die "nvidia-smi sees no GPU ($(nvidia-smi -L 2>&1 | head -1)); on a machine without a GPU use --cpu"
  if [[ -z $DATA ]]; then
    DATA=../shared/datasets/coco128
    [[ -d .cache/gpu-bench/coco128 ]] && DATA=.cache/gpu-bench/coco128
  fi
fi
if [[ -n $DATA ]]; then
  [[ -d $DATA/images/train2017 || -d $DATA/images/train ]] ||
    die "--data: no images/train2017 or images/train under '$DATA' (coco128: ../shared/datasets/coco128; for a GPU machine, run '$0 --prepare' where ../shared is and copy .cache/gpu-bench into its checkout)"
  DATA=$(cd "$DATA" && pwd)
fi
IFS=, read -r -a MODEL_LIST <<<"$MODELS"
for m in "${MODEL_LIST[@]}"; do
  [[ -f configs/models/$m.yaml ]] || usage_error "--models: no configs/models/$m.yaml"
done

if [[ -z $OUT_DIR ]]; then
  OUT_DIR=${OUT:-runs/$ME}
  [[ -n ${OUT:-} && -z $WORK ]] && WORK=runs/$ME  # $OUT gets only table.md and logs.tar.gz: work elsewhere
fi
WORK=${WORK:-$OUT_DIR}
mkdir -p "$OUT_DIR" "$WORK"
OUT_DIR=$(cd "$OUT_DIR" && pwd) WORK=$(cd "$WORK" && pwd)
rm -rf "$WORK/runs" "$WORK/logs" "$WORK/table.md" "$OUT_DIR/table.md"
mkdir -p "$WORK/logs"

# ---- YOLOv5: importable by --python, from the --wheels folder if need be -------------------------
Y5_ENV=(YOLO_OFFLINE=true YOLO_AUTOINSTALL=false YOLOv5_AUTOINSTALL=false PYTHONUNBUFFERED=1
  TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 "YOLOV5_CONFIG_DIR=$WORK/yolov5_config")
mkdir -p "$WORK/yolov5_config"
# YOLOv5 downloads Arial.ttf for its plots unless it finds one there; any TrueType font will do.
font=$("$PY" -c 'import matplotlib, os; print(os.path.join(os.path.dirname(matplotlib.__file__), "mpl-data/fonts/ttf/DejaVuSans.ttf"))' 2>/dev/null || true)
[[ -f $font ]] || font=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
[[ -f $font ]] && cp "$font" "$WORK/yolov5_config/Arial.ttf"
if [[ -n $WHEELS ]]; then
  compgen -G "$WHEELS/*.whl" >/dev/null || die "--wheels: no .whl files in '$WHEELS' (make them with '$0 --prepare')"
  site=$WORK/site
  rm -rf "$site"
  "$PY" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile \
    --no-cache-dir --target "$site" "$WHEELS"/*.whl >"$WORK/logs/wheels.log" 2>&1 ||
    die "--wheels: installing $WHEELS into $site failed, see $WORK/logs/wheels.log"
  Y5_ENV+=("PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}")
fi
if ! env "${Y5_ENV[@]}" "$PY" -c 'import yolov5.train' >"$WORK/logs/yolov5_import.log" 2>&1; then
  die "YOLOv5 7.0 is not importable by --python $PY ($(tail -1 "$WORK/logs/yolov5_import.log")). Here: scripts/setup.sh --test-packages (makes .cache/test-venv). On a machine without a registry: run '$0 --prepare' where there is one, copy .cache/gpu-bench into this checkout, and pass --wheels .cache/gpu-bench/wheels"
fi

# ---- our build ----------------------------------------------------------------------------------
if [[ -z $GPU_KIT ]]; then
  GPU_KIT=../shared/gpu-kit/deps-x86_64.tar.xz
  [[ -f .cache/gpu-bench/deps-x86_64.tar.xz ]] && GPU_KIT=.cache/gpu-bench/deps-x86_64.tar.xz
fi
build_with_kit() {  # a CUDA machine with PyTorch but no C++ libraries and no registry
  local stamp
  stamp=.gpukit/kit-$(sha256sum "$GPU_KIT" | cut -c1-16)  # a newer kit replaces an older one
  if [[ ! -f $stamp ]]; then
    rm -rf .gpukit && mkdir -p .gpukit && tar -xJf "$GPU_KIT" -C .gpukit && touch "$stamp"
  fi
  # shellcheck disable=SC1091
  source .gpukit/kit/env.sh
  local torch_cmake nccl
  torch_cmake=$("$PY" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
  nccl=$("$PY" -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)
  local jpeg=() headers kit_lib=$ROOT/.gpukit/kit/usr/lib/x86_64-linux-gnu/libjpeg.so.62
  headers=$(cd "$(dirname "$GPU_KIT")" && pwd)/jpeg-include
  if [[ -f $headers/jpeglib.h && -f $kit_lib ]]; then
    jpeg=(-DJPEG_INCLUDE_DIR="$headers" -DJPEG_LIBRARY="$kit_lib")
  fi
  echo "$ME: building train in build-gpu/ with $GPU_KIT (log: $WORK/logs/build.log)"
  { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DYOLO_TORCH_KIND=local \
      -DCMAKE_PREFIX_PATH="$(dirname "$(dirname "$torch_cmake")");$torch_cmake;${CMAKE_PREFIX_PATH:-}" \
      -DNCCL_ROOT="$nccl" -DYOLO_PYTHON="$PY" "${jpeg[@]}" &&
      cmake --build build-gpu -j"$(env -u OMP_NUM_THREADS nproc)" --target train; } >"$WORK/logs/build.log" 2>&1 ||
    die "building with the C++ kit failed, see $WORK/logs/build.log"
}
if [[ -z $BUILD ]]; then
  if [[ $CPU == 1 ]]; then
    BUILD=build
  elif [[ -f $GPU_KIT && ! -x .venv/bin/python ]]; then
    build_with_kit
    BUILD=build-gpu
  else
    bash scripts/setup.sh --targets train >"$WORK/logs/build.log" 2>&1 ||
      die "scripts/setup.sh failed, see $WORK/logs/build.log"
    BUILD=build
  fi
fi
[[ -x $BUILD/bin/train ]] || die "--build: no bin/train in '$BUILD' (build it: scripts/setup.sh --targets train)"
TRAIN=$(cd "$BUILD" && pwd)/bin/train

TR_FLAGS=()
if [[ $TORCHRUN_RUN == 1 ]]; then
  build_py=$(sed -n 's/^YOLO_PYTHON:FILEPATH=//p' "$(dirname "$(dirname "$TRAIN")")/CMakeCache.txt" 2>/dev/null || true)
  if [[ -z ${TORCHRUN:-} ]]; then
    for t in "$(dirname "${build_py:-/nonexistent/x}")/torchrun" "$(dirname "$PY")/torchrun" "$(command -v torchrun || true)"; do
      [[ -x $t ]] && { TORCHRUN=$t; break; }
    done
  fi
  [[ -n ${TORCHRUN:-} && -x $TORCHRUN ]] || die "no torchrun next to the build's Python or on PATH (set TORCHRUN, or --no-torchrun)"
  # torchrun 1.x spells --no_python and, on Python 3.11, needs its output redirected and teed.
  if "$TORCHRUN" --help 2>/dev/null | grep -q -- '--no-python'; then
    TR_FLAGS=(--no-python)
  else
    TR_FLAGS=(--no_python -r 1 -t 1)
  fi
fi

# ---- data: one copy per trainer, since both name their label caches labels/<split>.cache ---------
if [[ -z $DATA ]]; then  # --cpu: shapes generated by our train on first use
  SHAPES=$WORK/shapes
  if [[ ! -d $SHAPES/images/train ]]; then
    printf 'path: %s\ntrain: images/train\nval: images/val\nnames: [circle, rectangle, triangle]\ngenerate: shapes\n' \
      "$SHAPES" >"$WORK/shapes.yaml"
    "$PY" "$HELPER" run --log "$WORK/logs/generate.log" --timeout "$TIMEOUT" -- "$TRAIN" \
      --data "$WORK/shapes.yaml" --cfg yolov5n.yaml --imgsz 32 --batch-size 16 --epochs 1 --workers 0 \
      --device cpu --noval --nosave --noplots --project "$WORK/gen" --exist-ok ||
      die "generating the shapes data failed, see $WORK/logs/generate.log"
  fi
  SRC=$SHAPES NAMES=()
else
  SRC=$DATA NAMES=(--names-from configs/data/coco128.yaml)
  [[ -d $DATA/images/train2017 ]] || NAMES=()
fi
for who in ours yolov5; do
  desc=$("$PY" "$HELPER" data "$SRC" "$WORK/data_$who" --copies "$COPIES" --images "$IMAGES" "${NAMES[@]}")
done

# ---- header ---------------------------------------------------------------------------------------
cores=$(env -u OMP_NUM_THREADS nproc)  # nproc itself would report OMP_NUM_THREADS
if [[ $CPU == 1 ]]; then
  device="CPU, $cores cores"
else
  device="$(nvidia-smi -i 0 --query-gpu=name,driver_version --format=csv,noheader | sed 's/, / (driver /; s/$/)/'), $cores CPU cores"
fi
[[ -n ${OMP_NUM_THREADS:-} ]] && device+=", OMP_NUM_THREADS=$OMP_NUM_THREADS"
ours_ver=$("$TRAIN" --version | sed -n '1,2p' | paste -sd, | sed 's/,/, /')
y5_ver=$(env "${Y5_ENV[@]}" "$PY" -c 'import yolov5, torch, sys; print(f"YOLOv5 {yolov5.__version__}, PyTorch {torch.__version__}, Python {sys.version.split()[0]}")' 2>/dev/null | tail -1)
amp=""
[[ $CPU == 0 ]] && amp=", AMP"
SETTING="$IMGSZ px, batch $BATCH, $WORKERS workers$amp, $EPOCHS epochs from the YAML${OURS_FLAGS[*]:+, ours with ${OURS_FLAGS[*]}}"
TABLE=$WORK/table.md
{
  echo "# ours against YOLOv5, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "- device: $device"
  echo "- ours: $ours_ver; $y5_ver"
  echo "- data: $desc (each image copied under distinct names; the originals validated every epoch); $SETTING, --noplots"
  echo "- steady epoch: one $EPOCHS-epoch run each, output timestamped line by line as it arrived: (end of epoch $EPOCHS's validation - end of epoch 1's) / $((EPOCHS - 1))"
  echo "- in-loop images/s: the per-epoch \"N images in S s\" line (YOLOv5's printed by a callback from its epoch start to the end of its batch loop); validation: from that line to the validation's \"all\" row"
  [[ $CPU == 1 ]] && echo "- CPU mode: GPU rows n/a"
  [[ $CPU == 0 ]] && echo "- GPU busy: nvidia-smi utilization.gpu every 200 ms over the steady epochs; peak memory: its memory.used over the whole run; YOLOv5's AMP is on (its check, which would fetch yolov5n.pt for a random model that fails it, is skipped)"
  echo
} >"$TABLE"

# ---- runs -----------------------------------------------------------------------------------------
COMMON=(--weights '' --imgsz "$IMGSZ" --batch-size "$BATCH" --epochs "$EPOCHS" --workers "$WORKERS"
  --device "$DEV" --noplots --project "$WORK/runs" --exist-ok)
FAILED=0
run_one() {  # NAME CMD...: one timestamped run (with GPU sampling on CUDA); 0 when it succeeded
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
publish() {  # the table so far, and the logs, into --out (after each model: a run cut short keeps them)
  [[ $OUT_DIR != "$WORK" ]] || return 0
  cp "$TABLE" "$OUT_DIR/table.md"
  # One archive, so that $OUT holds two files: table.md and logs.tar.gz.
  (cd "$WORK" && tar -czf "$OUT_DIR/logs.tar.gz" logs runs/*/results.csv runs/*/opt.yaml 2>/dev/null) || true
}
spec() { echo "$WORK/logs/$1.log$([[ $CPU == 0 ]] && echo ",$WORK/logs/$1.smi.csv")"; }
if [[ $CPU == 1 ]]; then
  ddp_label="torchrun --nproc_per_node=1 ${TR_FLAGS[*]} (Gloo, --device cpu)"
else
  ddp_label="torchrun --nproc_per_node=1 ${TR_FLAGS[*]} (NCCL, --device 0)"
fi
table_flags=()
[[ $CPU == 1 ]] && table_flags=(--cpu)
echo "$ME: $desc; logs in $WORK/logs" >&2
for m in "${MODEL_LIST[@]}"; do
  ok=1
  run_one "ours_$m" "$TRAIN" --data "$WORK/data_ours.yaml" --cfg "$m.yaml" --name "ours_$m" "${COMMON[@]}" \
    "${OURS_FLAGS[@]}" || ok=0
  run_one "yolov5_$m" env "${Y5_ENV[@]}" "$PY" "$HELPER" yolov5 --data "$WORK/data_yolov5.yaml" \
    --cfg "$m.yaml" --name "yolov5_$m" "${COMMON[@]}" || ok=0
  ddp=()
  if [[ $TORCHRUN_RUN == 1 ]]; then
    port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    backend=()
    [[ $CPU == 0 ]] && backend=(--dist-backend nccl)
    if run_one "torchrun_$m" "$TORCHRUN" "${TR_FLAGS[@]}" --nproc_per_node=1 --master_addr=127.0.0.1 \
      --master_port="$port" "$TRAIN" --data "$WORK/data_ours.yaml" --cfg "$m.yaml" --name "torchrun_$m" \
      "${COMMON[@]}" "${backend[@]}" "${OURS_FLAGS[@]}"; then
      ddp=(--ddp "$(spec "torchrun_$m")" --ddp-label "$ddp_label")
    fi
  fi
  if [[ $ok == 1 ]]; then
    "$PY" "$HELPER" table --model "$m" --setting "$SETTING" --ours "$(spec "ours_$m")" \
      --yolov5 "$(spec "yolov5_$m")" "${ddp[@]}" "${table_flags[@]}" --out "$TABLE" >/dev/null || { FAILED=$((FAILED + 1)); ok=0; }
  fi
  if [[ $ok == 0 ]]; then
    printf '### %s: FAILED, see %s/logs/*_%s.log\n\n' "$m" "$WORK" "$m" >>"$TABLE"
  elif [[ $TORCHRUN_RUN == 1 && ${#ddp[@]} == 0 ]]; then
    printf 'ours under %s: FAILED, see %s\n\n' "$ddp_label" "$WORK/logs/torchrun_$m.log" >>"$TABLE"
  fi
  publish
done

cat "$OUT_DIR/table.md"
echo "$ME: table in $OUT_DIR/table.md; logs in $WORK/logs$([[ $FAILED -gt 0 ]] && echo "; $FAILED run(s) FAILED")"
[[ $FAILED -eq 0 ]]
