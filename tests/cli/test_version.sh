#!/usr/bin/env bash
# `train/val/detect --version`: what users paste into bug reports. Usage: test_version.sh BIN CUDA
# (CUDA is ON when the build's LibTorch has CUDA and NCCL compiled in).
set -uo pipefail
BIN=$1 CUDA=$2
status=0
for app in train val detect; do
  out=$("$BIN/$app" --version 2>&1) || { echo "FAIL: $app --version exited $?"; status=1; continue; }
  want=("yolo-cpp " "LibTorch [0-9]+\.[0-9]+" "Gloo: compiled in" "GPUs: [0-9]+" "Threads: [0-9]+")
  if [[ $CUDA == ON ]]; then
    want+=("CUDA: compiled in, [0-9]+\.[0-9]" "cuDNN: [0-9]+\.[0-9]+" "NCCL: compiled in, 2\.")
  else
    want+=("CUDA: not compiled in" "NCCL: not compiled in")
  fi
  for re in "${want[@]}"; do
    grep -Eq "$re" <<<"$out" || { echo "FAIL: $app --version lacks /$re/:"; echo "$out"; status=1; }
  done
done
[[ $status -eq 0 ]] && { echo "--version of train, val and detect:"; "$BIN/train" --version; }
exit $status
