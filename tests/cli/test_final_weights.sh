#!/usr/bin/env bash
# The final best.pt and last.pt are stripped as YOLOv5's train.py leaves them, whatever
# --save-period says: no optimizer state, weights in float16 (half the file); the periodic
# epochN.pt files keep everything for --resume. val reads the stripped files back.
# Usage: test_final_weights.sh BIN_DIR SOURCE_DIR
set -euo pipefail
BIN=${1:?usage: test_final_weights.sh BIN_DIR SOURCE_DIR}
SRC=${2:?usage: test_final_weights.sh BIN_DIR SOURCE_DIR}
source "$SRC/tests/lib/common.sh"
start_train_test final_weights
export OMP_NUM_THREADS=1
"$BIN/train" --data "$tmp/data.yaml" --cfg yolov5n.yaml --epochs 2 --imgsz 64 --batch-size 16 \
  --workers 0 --device cpu --noplots --save-period 1 --project "$tmp/runs" --name exp \
  >"$tmp/train.log" 2>&1 || { tail -20 "$tmp/train.log"; fail "training failed"; }
w=$tmp/runs/exp/weights
"$YOLO_PYTHON" - "$w" <<'PY' || fail "the saved files"
import os, sys, torch
w = sys.argv[1]
def load(name):
    return torch.load(os.path.join(w, name), map_location="cpu", weights_only=False)
for name in ("best.pt", "last.pt"):
    c = load(name)
    assert c["optimizer"] is None, f"{name} keeps its optimizer"
    kinds = {t.dtype for t in c["model"].values() if t.is_floating_point()}
    assert kinds == {torch.float16}, f"{name}: {kinds}"
    print(f"{name}: stripped, float16, {os.path.getsize(os.path.join(w, name))} bytes")
e = load("epoch1.pt")
assert e["optimizer"] is not None, "epoch1.pt lost its optimizer"
assert {t.dtype for t in e["model"].values() if t.is_floating_point()} == {torch.float32}
print(f"epoch1.pt: optimizer and float32 weights kept")
PY
"$BIN/val" --weights "$w/best.pt" --imgsz 64 --device cpu --project "$tmp/val" >"$tmp/val.log" \
  2>&1 || { tail -20 "$tmp/val.log"; fail "val of the stripped best.pt failed"; }
echo "val reads the stripped best.pt"
