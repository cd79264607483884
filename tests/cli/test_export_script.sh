#!/usr/bin/env bash
# scripts/export_yolov5_weights.py turns a YOLOv5-style checkpoint ({'model': module, 'ema': ...})
# into a plain dict of tensors. Skipped (exit 77) without Python's torch.
set -euo pipefail
ROOT=${1:?usage: test_export_script.sh SOURCE_ROOT}
PY=${YOLO_PYTHON:-/usr/bin/python3}
"$PY" -c 'import torch' 2>/dev/null || { echo "skip: no python3 torch"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PY" - "$tmp" <<'PY'
import sys, torch
m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.BatchNorm2d(4))
torch.save({"epoch": 3, "model": m.half(), "ema": None}, sys.argv[1] + "/ckpt.pt")
PY
"$PY" "$ROOT/scripts/export_yolov5_weights.py" "$tmp/ckpt.pt" "$tmp/sd.pt"
"$PY" - "$tmp" <<'PY'
import sys, torch
sd = torch.load(sys.argv[1] + "/sd.pt")
assert type(sd) is dict, type(sd)
assert sorted(sd) == ['0.bias', '0.weight', '1.bias', '1.num_batches_tracked', '1.running_mean',
                      '1.running_var', '1.weight'], sorted(sd)
assert sd['0.weight'].dtype == torch.float32
print("export ok")
PY
