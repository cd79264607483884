#!/usr/bin/env bash
# The anchor-free families end to end on tiny data: `--cfg yolov8n.yaml` and `--cfg yolo11n.yaml`
# (yolov8.yaml and yolo11.yaml at scale n) each train one epoch with their own default
# hyperparameters, optimizer choice, close_mosaic and loss columns, then val and detect read the
# result; export writes yolo11n in Ultralytics' layout and val runs both files. Bad model YAMLs
# fail naming the file and what is supported. YOLO26 trains with MuSGD, is stopped and resumed,
# and is exported end to end.
# Usage: test_anchor_free.sh BIN_DIR SOURCE_DIR
set -euo pipefail
BIN=${1:?usage: test_anchor_free.sh BIN_DIR SOURCE_DIR}
SRC=${2:?usage: test_anchor_free.sh BIN_DIR SOURCE_DIR}
source "$SRC/tests/lib/common.sh"
start_train_test anchor_free
export OMP_NUM_THREADS=1

for model in yolov8n yolo11n; do
  log=$tmp/$model.log
  "$BIN/train" --data "$tmp/data.yaml" --cfg $model.yaml --epochs 1 --imgsz 64 --batch-size 16 \
    --workers 0 --device cpu --noplots --project "$tmp/runs" --name $model >"$log" 2>&1 ||
    { tail -20 "$log"; fail "training $model failed"; }
  run=$tmp/runs/$model
  grep -q "hyperparameters: hyp.anchor-free.yaml" "$log" || fail "$model: not trained with hyp.anchor-free.yaml"
  grep -q "dfl=1.5" "$log" || fail "$model: the dfl gain is not in the hyperparameters line"
  # Ultralytics' close_mosaic 10: a run of at most 10 epochs has no mosaic.
  grep -q "Closing dataloader mosaic: epochs 1 to 1 train without it" "$log" ||
    fail "$model: mosaic not closed for the family's last 10 epochs"
  # Ultralytics' optimizer=auto for a short run: AdamW at 0.01 / (4 + nc), nc = 3.
  grep -q "optimizer: 'auto' chose AdamW(lr=0.001429, momentum=0.9) for 5 iterations" "$log" ||
    fail "$model: not Ultralytics' optimizer=auto choice: $(grep optimizer "$log")"
  head -1 "$run/results.csv" | grep -q "train/box_loss, *train/cls_loss, *train/dfl_loss" ||
    fail "$model: results.csv's loss columns are not box, cls, dfl: $(head -1 "$run/results.csv")"
  "$YOLO_PYTHON" - "$run/results.csv" <<'PY' || fail "$model: losses"
import csv, math, sys
rows = list(csv.reader(open(sys.argv[1])))
head = [c.strip() for c in rows[0]]
vals = dict(zip(head, (float(v) for v in rows[1])))
for k in ("train/box_loss", "train/cls_loss", "train/dfl_loss", "val/box_loss", "val/cls_loss", "val/dfl_loss"):
    assert math.isfinite(vals[k]) and vals[k] > 0, f"{k} = {vals[k]}"
print("losses", {k: round(v, 4) for k, v in vals.items() if "loss" in k})
PY
  grep -q "^ *$model\|Detect *\[3, 16, None\]" "$log" || fail "$model: no anchor-free Detect in the table"
  "$BIN/val" --weights "$run/weights/best.pt" --imgsz 64 --device cpu --project "$tmp/val" \
    --name $model >"$tmp/val_$model.log" 2>&1 || { tail -20 "$tmp/val_$model.log"; fail "val $model"; }
  grep -q " all " "$tmp/val_$model.log" || fail "val $model printed no metrics"
  "$BIN/detect" --weights "$run/weights/best.pt" --source "$tmp/shapes/images/val" --imgsz 64 \
    --device cpu --conf-thres 0.001 --project "$tmp/detect" --name $model --save-txt \
    >"$tmp/detect_$model.log" 2>&1 || { tail -20 "$tmp/detect_$model.log"; fail "detect $model"; }
  echo "$model: trained one epoch, val and detect read it"
done

best=$tmp/runs/yolo11n/weights/best.pt
"$BIN/export" --weights "$best" --include torchscript onnx --imgsz 64 >"$tmp/export.log" 2>&1 ||
  { tail -20 "$tmp/export.log"; fail "export yolo11n"; }
grep -q "output shape (1, 7, 84)" "$tmp/export.log" ||
  fail "export yolo11n: not Ultralytics' (1, 4 + nc, anchors) layout: $(head -3 "$tmp/export.log")"
grep -q "Ultralytics: *yolo predict model=.*best.onnx imgsz=64" "$tmp/export.log" ||
  fail "export yolo11n: no Ultralytics command to try next"
for f in best.torchscript best.onnx; do
  "$BIN/val" --weights "$(dirname "$best")/$f" --data "$tmp/data.yaml" --imgsz 64 --device cpu     --project "$tmp/val" --name "$f" >"$tmp/val_$f.log" 2>&1 ||
    { tail -20 "$tmp/val_$f.log"; fail "val $f"; }
  grep -q " all " "$tmp/val_$f.log" || fail "val $f printed no metrics"
done
echo "yolo11n: exported in Ultralytics' layout; val runs the TorchScript and ONNX files"

# Bad input: a scale letter the YAML does not list, an unknown module.
sed '/^  [slmx]:/d' "$SRC/configs/models/yolo11.yaml" >"$tmp/myyolo11.yaml"
out=$("$BIN/train" --data "$tmp/data.yaml" --cfg "$tmp/myyolo11s.yaml" --epochs 1 --imgsz 64 \
  --device cpu --project "$tmp/runs" 2>&1) && fail "a scale missing from 'scales' trained"
grep -q "myyolo11s.yaml: scale 's' is not in 'scales' (it has n)" <<<"$out" ||
  fail "unclear message for a missing scale: $out"
sed 's/C2PSA/C2PSX/' "$SRC/configs/models/yolo11.yaml" >"$tmp/bad11n.yaml"
out=$("$BIN/train" --data "$tmp/data.yaml" --cfg "$tmp/bad11n.yaml" --epochs 1 --imgsz 64 \
  --device cpu --project "$tmp/runs" 2>&1) && fail "an unknown module trained"
grep -q "bad11n.yaml:[0-9]*: unknown module 'C2PSX' (supported: .*C3k2, C2PSA" <<<"$out" ||
  fail "unclear message for an unknown module: $out"
echo "bad model YAMLs fail naming the file and what is supported"

# YOLO26 trains with its end-to-end loss and MuSGD: on 32 images and a narrower yolo26n (the
# bfloat16 Newton-Schulz iterations are slow on a CPU without bfloat16 arithmetic), stopped by
# SIGTERM after its first epoch, then resumed with its optimizer state.
mkdir -p "$tmp/small"
# Whole lists first: `| head` would end sort early, which pipefail turns into a silent exit.
mapfile -t train_images < <(find "$tmp/shapes/images/train" -name '*.png' | sort)
mapfile -t val_images < <(find "$tmp/shapes/images/val" -name '*.png' | sort)
printf '%s\n' "${train_images[@]:0:32}" >"$tmp/small/train.txt"
printf '%s\n' "${val_images[@]:0:16}" >"$tmp/small/val.txt"
cat >"$tmp/small.yaml" <<YAML
path: $tmp/shapes
train: $tmp/small/train.txt
val: $tmp/small/val.txt
names: [circle, rectangle, triangle]
YAML
sed 's/^  n: \[0.50, 0.25, 1024\]/  n: [0.50, 0.125, 1024]/' "$SRC/configs/models/yolo26.yaml" >"$tmp/thinyolo26.yaml"
grep -q "n: \[0.50, 0.125, 1024\]" "$tmp/thinyolo26.yaml" || fail "yolo26.yaml's scale n row changed"
run=$tmp/runs/yolo26
"$BIN/train" --data "$tmp/small.yaml" --cfg "$tmp/thinyolo26n.yaml" --optimizer MuSGD --epochs 3 \
  --imgsz 64 --batch-size 16 --workers 0 --device cpu --noplots --project "$tmp/runs" \
  --name yolo26 >"$tmp/yolo26.log" 2>&1 &
pid=$!
for _ in $(seq 1 3000); do
  [[ -f "$run/weights/last.pt" ]] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
[[ -f "$run/weights/last.pt" ]] || { tail -20 "$tmp/yolo26.log"; fail "yolo26: no last.pt after epoch 1"; }
kill -TERM $pid 2>/dev/null || true  # a run that already ended is caught below
wait $pid && fail "yolo26: exit status 0 after SIGTERM"
grep -q "optimizer: MuSGD(lr=0.01) with parameter groups .*; the classification branches' [0-9]* at 3x lr" \
  "$tmp/yolo26.log" || fail "yolo26: no MuSGD line: $(grep optimizer "$tmp/yolo26.log")"
head -1 "$run/results.csv" | grep -q "train/box_loss, *train/cls_loss, *train/l1_loss" ||
  fail "yolo26: results.csv's loss columns are not box, cls, l1: $(head -1 "$run/results.csv")"
"$BIN/train" --resume "$run/weights/last.pt" >"$tmp/yolo26_resume.log" 2>&1 ||
  { tail -20 "$tmp/yolo26_resume.log"; fail "yolo26: the MuSGD run did not resume"; }
grep -q "Resuming training" "$tmp/yolo26_resume.log" || fail "yolo26: did not resume"
[[ $(rows "$run/results.csv") -eq 3 ]] || fail "yolo26: $(rows "$run/results.csv") epochs in results.csv, want 3"
"$YOLO_PYTHON" - "$run/results.csv" <<'PY' || fail "yolo26: losses"
import csv, math, sys
rows = list(csv.reader(open(sys.argv[1])))
head = [c.strip() for c in rows[0]]
for row in rows[1:]:
    vals = dict(zip(head, (float(v) for v in row)))
    for k in ("train/box_loss", "train/cls_loss", "train/l1_loss", "val/l1_loss"):
        assert math.isfinite(vals[k]) and vals[k] > 0, f"{k} = {vals[k]}"
PY
"$BIN/val" --weights "$run/weights/best.pt" --imgsz 64 --device cpu --project "$tmp/val" \
  --name yolo26 >"$tmp/val_yolo26.log" 2>&1 || { tail -20 "$tmp/val_yolo26.log"; fail "val yolo26"; }
grep -q " all " "$tmp/val_yolo26.log" || fail "val yolo26 printed no metrics"
"$BIN/val" --weights "$run/weights/best.pt" --imgsz 64 --device cpu --project "$tmp/val" \
  --name yolo26e2e --end2end >"$tmp/val_yolo26e2e.log" 2>&1 ||
  { tail -20 "$tmp/val_yolo26e2e.log"; fail "val --end2end yolo26"; }
grep -q " all " "$tmp/val_yolo26e2e.log" || fail "val --end2end yolo26 printed no metrics"
# --end2end needs a one-to-one head, and a .pt file.
out=$("$BIN/val" --weights "$best" --imgsz 64 --device cpu --end2end 2>&1) &&
  fail "val --end2end ran a model without a one-to-one head"
grep -q "best.pt has no one-to-one (end-to-end) head; end-to-end models (YOLO26) run without NMS" \
  <<<"$out" || fail "unclear message for --end2end on yolo11n: $out"
out=$("$BIN/detect" --weights "${best%.pt}.onnx" --source "$tmp/shapes/images/val" --imgsz 64 \
  --device cpu --end2end 2>&1) && fail "detect --end2end ran an ONNX file"
grep -q "best.onnx was exported without --end2end (its ONNX output needs NMS); export the .pt" \
  <<<"$out" || fail "unclear message for --end2end on an ONNX file: $out"
# Exported end to end: (1, k, 6) detections (k = 84 anchors at 64 px); val reads the TorchScript file as the .pt's
# one-to-one head; yolo11n has none to export.
e2e=$tmp/e2e
mkdir -p "$e2e"
cp "$run/weights/best.pt" "$e2e/y26.pt"
"$BIN/export" --weights "$e2e/y26.pt" --include torchscript onnx --imgsz 64 --end2end \
  >"$tmp/export_e2e.log" 2>&1 || { tail -20 "$tmp/export_e2e.log"; fail "export --end2end yolo26"; }
grep -q "output shape (1, 84, 6)" "$tmp/export_e2e.log" ||
  fail "export --end2end: not (1, k, 6) detections: $(grep "output shape" "$tmp/export_e2e.log")"
"$BIN/val" --weights "$e2e/y26.torchscript" --data "$tmp/small.yaml" --imgsz 64 --device cpu \
  --project "$tmp/val" --name yolo26ts >"$tmp/val_yolo26ts.log" 2>&1 ||
  { tail -20 "$tmp/val_yolo26ts.log"; fail "val e2e TorchScript"; }
ts_all=$(grep " all " "$tmp/val_yolo26ts.log")
pt_all=$(grep " all " "$tmp/val_yolo26e2e.log")
[[ "$ts_all" == "$pt_all" ]] ||
  fail "val of the end-to-end TorchScript file: '$ts_all'; the .pt with --end2end: '$pt_all'"
out=$("$BIN/export" --weights "$best" --include torchscript --imgsz 64 --end2end 2>&1) &&
  fail "export --end2end ran a model without a one-to-one head"
grep -q "end2end: .*best.pt has no one-to-one (end-to-end) head" <<<"$out" ||
  fail "unclear message for export --end2end on yolo11n: $out"
echo "yolo26: trained with MuSGD and its end-to-end loss, stopped, resumed; val reads it with and"
echo "  without NMS, and its end-to-end export (TorchScript: the .pt's --end2end metrics)"
