#!/usr/bin/env bash
# What a run prints names what the user typed and can be pasted, through the real executables:
#  - a run name holding a newline cannot forge a line of the log ("Logging results to",
#    "Results saved to", "Weights:" show it as \n);
#  - the "Next:" commands a run prints (train's flags, the yolo program's key=value) run as
#    pasted into a POSIX shell, with spaces and quotes in the run's path;
#  - a hyperparameter given on the command line is named as typed: out of range (mosaic=2,
#    --hyp-set fliplr=1.5), or not used by the 'auto' optimizer (lr0=0.0123);
#  - `yolo train resume ... lr0=0.5` is refused naming lr0=0.5;
#  - a MuSGD run whose opt.yaml now says SGD is refused on --resume naming opt.yaml.
set -euo pipefail
source "$(dirname "$0")/lib.sh" "$@"
cd "$tmp"
T="$BIN/train" Y="$BIN/yolo"
[ -x "$Y" ] || skip "$Y is not built"
"$TOOL" dataset "$tmp/d" 4 2
data=$tmp/d/data.yaml

# --- a run name with a newline ----------------------------------------------------------------
forged=$'a\nWARNING: forged'
check 0 'Results saved to' -- "$T" --data "$data" "${TINY[@]}" --name "$forged"
if grep -q '^WARNING: forged' <<<"$LAST_OUT"; then
  echo "FAIL: the run name forged a log line: $(grep -m1 '^WARNING: forged' <<<"$LAST_OUT")"
  fails=$((fails + 1))
fi
for line in 'Logging results to' 'Results saved to' 'Weights:'; do
  grep -F "$line" <<<"$LAST_OUT" | grep -qF 'a\nWARNING: forged' || {
    echo "FAIL: '$line' does not show the name escaped: $(grep -F -m1 "$line" <<<"$LAST_OUT")"
    fails=$((fails + 1))
  }
done

# --- Next: lines pasted into a shell ----------------------------------------------------------
odd="x y's"
check 0 'Next: ' -- "$T" --data "$data" "${TINY[@]}" --name "$odd"
val_cmd=$(grep -F 'Next: ' <<<"$LAST_OUT" | sed 's/^Next: //')
check 0 'all' -- sh -c "$val_cmd --device cpu --project '$tmp/val'"
[ -d "$tmp/val/exp" ] || { echo "FAIL: the pasted val command wrote no run"; fails=$((fails + 1)); }

# The yolo program: its own commands; lr0 given with optimizer auto is named as typed.
check 0 "lr0=0.0123 is not used: the 'auto' optimizer chooses lr0 and momentum itself" -- \
  "$Y" train model=yolov5n.yaml data="$data" imgsz=64 epochs=1 batch=2 workers=0 plots=False \
  device=cpu project="$tmp/yruns" name="$odd" lr0=0.0123
lacks "lr0, momentum and warmup_bias_lr of"
yolo_val=$(grep -F 'Next: ' <<<"$LAST_OUT" | sed 's/^Next: //')
check 0 'all' -- sh -c "$yolo_val device=cpu project='$tmp/yval'"
[ -d "$tmp/yval/val" ] || { echo "FAIL: the pasted yolo val wrote no run"; fails=$((fails + 1)); }

# --- hyperparameters named as typed -----------------------------------------------------------
check 1 "mosaic=2: key 'mosaic' is out of range (0..1)" -- \
  "$Y" train model=yolov5n.yaml data="$data" imgsz=64 epochs=1 device=cpu project="$tmp/bad" \
  mosaic=2
lacks "hyp.scratch-low.yaml"
check 1 "--hyp-set fliplr=1.5: key 'fliplr' is out of range (0..1)" -- \
  "$T" --data "$data" "${TINY[@]}" --name bad --hyp-set fliplr=1.5
lacks "hyp.scratch-low.yaml"
check 2 "lr0=0.5: a resumed run trains on with its own hyperparameters" -- \
  "$Y" train resume model="$tmp/runs/exp/weights/last.pt" lr0=0.5

# --- an optimizer changed in opt.yaml -------------------------------------------------------------
"$T" --data "$data" --cfg yolov5n.yaml --imgsz 64 --epochs 300 --batch-size 2 --workers 0 \
  --noplots --noval --noautoanchor --device cpu --project "$tmp/mu" --name run \
  --optimizer MuSGD >"$tmp/mu.log" 2>&1 &
pid=$!
cleanup_hooks+=("kill $pid 2>/dev/null")
last=$tmp/mu/run/weights/last.pt
for _ in $(seq 1 1200); do
  [ -f "$last" ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
kill -TERM $pid 2>/dev/null || true
wait $pid || true
if [ -f "$last" ]; then
  sed -i 's/^optimizer: MuSGD$/optimizer: SGD/' "$tmp/mu/run/opt.yaml"
  grep -q '^optimizer: SGD$' "$tmp/mu/run/opt.yaml" || { echo "FAIL: opt.yaml has no optimizer"; exit 1; }
  check 1 "$tmp/mu/run/opt.yaml: optimizer is SGD, but $last was trained with MuSGD" -- \
    "$T" --resume "$last"
  lacks "pass the same --optimizer"
else
  echo "FAIL: the MuSGD run wrote no last.pt"; tail -5 "$tmp/mu.log"; fails=$((fails + 1))
fi
finish
