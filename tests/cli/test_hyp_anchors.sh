#!/usr/bin/env bash
# A hyp file's `anchors: N` builds the model with N anchors per output layer, as YOLOv5's
# Model(cfg, anchors=hyp['anchors']) does, AutoAnchor fits them, the checkpoint keeps them (val
# reads it back), and a value out of range is refused naming the hyp file and the key.
# Usage: test_hyp_anchors.sh BIN_DIR SOURCE_DIR
set -euo pipefail
BIN=${1:?usage: test_hyp_anchors.sh BIN_DIR SOURCE_DIR}
SRC=${2:?usage: test_hyp_anchors.sh BIN_DIR SOURCE_DIR}
source "$SRC/tests/lib/common.sh"
start_train_test hyp_anchors
export OMP_NUM_THREADS=1
train=("$BIN/train" --data "$tmp/data.yaml" --cfg yolov5n.yaml --epochs 1 --imgsz 64
  --batch-size 16 --workers 0 --device cpu --noplots --project "$tmp/runs")
cp "$SRC/hyp/hyp.scratch-low.yaml" "$tmp/four.yaml"
echo "anchors: 4  # anchors per output layer" >>"$tmp/four.yaml"
"${train[@]}" --hyp "$tmp/four.yaml" --name four >"$tmp/four.log" 2>&1 ||
  { tail -20 "$tmp/four.log"; fail "training with anchors: 4 failed"; }
grep -q "Overriding model.yaml anchors with anchors=4" "$tmp/four.log" ||
  fail "no 'Overriding model.yaml anchors' line"
grep -q "AutoAnchor" "$tmp/four.log" || fail "AutoAnchor did not look at the placeholder anchors"
"$YOLO_PYTHON" - "$tmp/runs/four/weights/last.pt" <<'PY' || fail "the checkpoint's Detect layer"
import sys, torch
sd = torch.load(sys.argv[1], map_location="cpu", weights_only=False)["model"]
a, w = sd["model.24.anchors"], sd["model.24.m.0.weight"]
assert tuple(a.shape) == (3, 4, 2), a.shape
assert w.shape[0] == 4 * (5 + 3), w.shape
assert len(set(a.flatten().tolist())) > 8, f"placeholders left: {a}"
print("checkpoint: anchors", tuple(a.shape), "fitted, Detect conv", tuple(w.shape))
PY
"$BIN/val" --weights "$tmp/runs/four/weights/last.pt" --imgsz 64 --device cpu \
  --project "$tmp/val" >"$tmp/val.log" 2>&1 || { tail -20 "$tmp/val.log"; fail "val of it failed"; }
echo "val reads the 4-anchor checkpoint"
cp "$SRC/hyp/hyp.scratch-low.yaml" "$tmp/bad.yaml"
echo "anchors: 40" >>"$tmp/bad.yaml"
if "${train[@]}" --hyp "$tmp/bad.yaml" --name bad >"$tmp/bad.log" 2>&1; then
  fail "anchors: 40 was accepted"
fi
grep -q "bad.yaml: anchors: 40" "$tmp/bad.log" || { tail -5 "$tmp/bad.log"; fail "message"; }
echo "anchors: 40 refused: $(grep -m1 "anchors: 40" "$tmp/bad.log")"
