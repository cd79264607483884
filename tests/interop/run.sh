#!/usr/bin/env bash
# Usage: run.sh SCRIPT.py ARGS...: runs a test script with the test-only Python packages
# (scripts/requirements-test.txt in .cache/test-venv), or fails saying how to install them.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="$ROOT/.cache/test-venv/bin/python"
if [[ ! -x "$PY" ]]; then
  echo "FAIL: $PY is missing: the test-only Python packages (TensorBoard, pycocotools, YOLOv5 7.0," \
    "ONNX, onnxruntime) are not installed; run scripts/setup.sh --test-packages (scripts/test.sh" \
    "does), which installs scripts/requirements-test.txt there"
  exit 1
fi
# YOLOv5 7.0 offline: no pip installs, a local font for its plots, and its pickled models loadable
# on PyTorch >= 2.6.
export YOLO_AUTOINSTALL=false TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 PYTHONDONTWRITEBYTECODE=1
# One thread per process, as ctest runs another test beside this one.
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
export YOLOV5_CONFIG_DIR="${YOLOV5_CONFIG_DIR:-$(mktemp -d)}"
font=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
[[ -f "$font" && ! -f "$YOLOV5_CONFIG_DIR/Arial.ttf" ]] && cp "$font" "$YOLOV5_CONFIG_DIR/Arial.ttf"
exec "$PY" "$@"
