#!/usr/bin/env bash
# SIGTERM during training: the step finishes, last.pt is saved, the exit status is non-zero and the
# message says how to resume; `train --resume` then completes the run.
set -u
BIN=${1:?usage: test_resume_signal.sh BIN_DIR}
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
write_shapes_yaml "$tmp"
cd "$tmp"
# A model YAML of its own, deleted before the resume: last.pt carries the architecture.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cp "$ROOT/configs/models/yolov5n.yaml" "$tmp/model.yaml"
"$BIN/train" --data "$tmp/data.yaml" --cfg "$tmp/model.yaml" --imgsz 64 --epochs 3 --batch-size 16 \
  --workers 1 --noplots --noautoanchor --project "$tmp/runs" --device cpu >"$tmp/log" 2>&1 &
pid=$!
last="$tmp/runs/exp/weights/last.pt"
# Up to 240 s for epoch 0 to finish: a few seconds alone, but ctest -j runs it beside other
# training tests, and then an epoch has taken a minute.
for _ in $(seq 1 2400); do
  [ -f "$last" ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
[ -f "$last" ] || { echo "FAIL: no last.pt after epoch 0"; tail -20 "$tmp/log"; exit 1; }
kill -TERM $pid
wait $pid
status=$?
if [ "$status" -eq 0 ]; then echo "FAIL: exit status 0 after SIGTERM"; tail -5 "$tmp/log"; exit 1; fi
grep -q -- "--resume" "$tmp/log" || { echo "FAIL: no resume hint"; tail -5 "$tmp/log"; exit 1; }
# The interrupted last.pt (optimizer included) is a plain pickle Python's safe loader reads
# (the loader of PyTorch 2.x: 1.13's lacks opcodes every pickle with a float uses).
PY=${YOLO_PYTHON:-python3}
if "$PY" -c "import sys, torch; sys.exit(int(torch.__version__.split('.')[0]) < 2)" 2>/dev/null; then
  "$PY" - "$last" <<'EOF' || { echo "FAIL: torch.load(weights_only=True) refuses last.pt"; exit 1; }
import sys, torch
c = torch.load(sys.argv[1], weights_only=True)
assert c["optimizer"]["param_groups"][0]["params"], "no optimizer state"
assert c["names"] == ["circle", "rectangle", "triangle"] and c["nc"] == 3, (c["names"], c["nc"])
assert "backbone:" in c["model_yaml"], "no model YAML text"
EOF
else
  echo "no torch 2.x in $PY: the weights_only check is skipped"
fi
rm "$tmp/model.yaml"
sed -i 's/names: \[circle, rectangle, triangle\]/names: [c1, c2, c3]/' "$tmp/data.yaml"
"$BIN/train" --resume "$last" >"$tmp/log2" 2>&1 || { echo "FAIL: resume failed"; tail -20 "$tmp/log2"; exit 1; }
grep -q "Resuming training" "$tmp/log2" || { echo "FAIL: did not resume"; tail -5 "$tmp/log2"; exit 1; }
grep -qF "model.yaml is gone; resuming with the model YAML saved in $last" "$tmp/log2" ||
  { echo "FAIL: the deleted model YAML is not said"; tail -5 "$tmp/log2"; exit 1; }
grep -qF "the run keeps the checkpoint's names" "$tmp/log2" ||
  { echo "FAIL: the renamed classes are not said"; tail -5 "$tmp/log2"; exit 1; }
rows=$(($(wc -l <"$tmp/runs/exp/results.csv") - 1))
[ "$rows" -eq 3 ] || { echo "FAIL: results.csv has $rows rows, want 3"; exit 1; }
"$BIN/train" --resume "$last" --epochs 9 >"$tmp/log3" 2>&1
[ $? -eq 2 ] && grep -q "cannot be changed when resuming" "$tmp/log3" || { echo "FAIL: --epochs with --resume accepted"; exit 1; }
echo "resume after SIGTERM: ok (exit $status, then resumed to 3 epochs)"
