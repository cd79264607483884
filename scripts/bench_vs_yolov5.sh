#!/usr/bin/env bash
# Our train against YOLOv5 v7.0's train.py on the same data, settings and torch; prints the
# steady-state seconds per epoch of each and their ratio (scripts/bench_vs_yolov5.py).
#
# Usage: scripts/bench_vs_yolov5.sh [--cfg yolov5n] [--imgsz 320] [--batch 16] [--epochs 4]
#                                   [--repeats 3] [--yolov5-threads 1,2] [--ours-threads default]
#                                   [--train build/bin/train] [--out runs/bench_vs_yolov5]
#
# Needs the default build (scripts/setup.sh) and PyPI: YOLOv5 (scripts/requirements-yolov5.txt)
# goes with --no-deps into the throwaway .cache/yolov5-venv, which borrows .venv's torch through
# a .pth file so both trainers run on PyTorch 2.11. Not part of the tests: takes about 10 minutes
# per repeat on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] && [ -x build/bin/train ] || {
  echo "bench_vs_yolov5: run scripts/setup.sh first (it makes .venv and build/bin/train)" >&2
  exit 1
}
VENV=.cache/yolov5-venv
REQ=scripts/requirements-yolov5.txt
stamp="$VENV/.yolo-requirements-$(sha256sum "$REQ" | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "bench_vs_yolov5: installing YOLOv5 7.0 into $VENV (throwaway; delete it at will)"
  rm -rf "$VENV"
  /usr/bin/python3 -m venv "$VENV"
  site() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
  site .venv/bin/python >"$(site "$VENV/bin/python")/yolo_torch.pth"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$REQ"
  "$VENV/bin/python" -c 'import yolov5.train, torch; print("YOLOv5", __import__("yolov5").__version__, "on torch", torch.__version__)'
  touch "$stamp"
fi
exec "$VENV/bin/python" scripts/bench_vs_yolov5.py "$@"
