# shellcheck shell=bash
# What scripts/gpu_check.sh and scripts/gpu_first_run.sh share, sourced from the repository root:
# building on a CUDA machine that has PyTorch but no C++ libraries and no package registry (the
# machine's own PyTorch gives LibTorch and NCCL, the C++ kit gives the rest;
# ../shared/gpu-kit/README.md), a build's Python and torchrun, and the data YAMLs they train on.
#
# GPU_KIT=FILE names the kit where it is not at ../shared/gpu-kit/deps-x86_64.tar.xz (a copy
# inside the checkout, say).

# gpu_kit_configure BUILD_DIR LOG: unpacks the kit into .gpukit/, sources its env.sh into the
# calling shell and configures BUILD_DIR (Ninja, Release), logging to LOG. The environment stays
# set because the programs built there find the kit's libraries through it when they run.
gpu_kit_configure() {
  local dir=$1 log=$2
  local kit=${GPU_KIT:-../shared/gpu-kit/deps-x86_64.tar.xz}
  [[ -f $kit ]] || { echo "${0##*/}: no C++ kit $kit (GPU_KIT)" >&2; return 1; }
  # Unpacked once per kit: a kit with a different checksum replaces the one left in .gpukit.
  local stamp
  stamp=.gpukit/kit-$(sha256sum "$kit" | cut -c1-16)
  if [[ ! -f $stamp ]]; then
    rm -rf .gpukit && mkdir -p .gpukit && tar -xJf "$kit" -C .gpukit && touch "$stamp" || return 1
  fi
  gpu_kit_env || return 1
  local torch_cmake nccl
  torch_cmake=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)') || return 1
  nccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DYOLO_TORCH_KIND=local \
    -DCMAKE_PREFIX_PATH="$(dirname "$(dirname "$torch_cmake")");$torch_cmake;${CMAKE_PREFIX_PATH:-}" \
    -DNCCL_ROOT="$nccl" -DYOLO_PYTHON="$(command -v python3)" >"$log" 2>&1
}

# gpu_kit_env: the unpacked kit's environment (CMAKE_PREFIX_PATH, CPATH, LD_LIBRARY_PATH), for a
# build made with it earlier; fails when no kit is unpacked.
gpu_kit_env() {
  [[ -f .gpukit/kit/env.sh ]] || return 1
  # shellcheck disable=SC1091
  source .gpukit/kit/env.sh
}

# build_python BUILD_DIR: sets PY to the Python the build was configured with (its torch matches
# the LibTorch) and TORCHRUN to the torchrun beside it, else the one on PATH ("" when none).
build_python() {
  PY=$(sed -n 's/^YOLO_PYTHON:FILEPATH=//p' "$1/CMakeCache.txt" 2>/dev/null)
  PY=${PY:-python3}
  TORCHRUN=$(dirname "$PY")/torchrun
  [[ -x $TORCHRUN ]] || TORCHRUN=$(command -v torchrun || true)
}

# shapes_yaml FILE DIR: a data YAML for the built-in shapes data, generated into DIR on first use.
shapes_yaml() {
  cat >"$1" <<YAML
path: $2
train: images/train
val: images/val
names: [circle, rectangle, triangle]
generate: shapes
YAML
}

# coco128_yaml FILE DATA: a data YAML for YOLOv5's coco128 at DATA, validated on its training
# images (as YOLOv5's coco128.yaml); fails when DATA has no images/train2017.
coco128_yaml() {
  [[ -d $2/images/train2017 ]] || return 1
  { echo "path: $2"; echo "train: images/train2017"; echo "val: images/train2017"
    sed -n '/^names:/,$p' configs/data/coco128.yaml | sed '/^download:/,$d'; } >"$1"
}
