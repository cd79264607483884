#!/usr/bin/env bash
# No shell sees user strings: train, val and detect work on data, runs and weights under paths
# holding spaces, quotes, ';', '$(...)' and backticks, and nothing in them is executed.
set -euo pipefail
source "$(dirname "$0")/lib.sh" "$@"
cd "$tmp"
name="sp ace 'sq' \"dq\" ;touch pwned1; \$(touch pwned2) \`touch pwned3\` &"
d="$tmp/$name"
"$TOOL" dataset "$d/data" 4 2
check 0 "Results saved to" -- "$BIN/train" --data "$d/data/data.yaml" "${TINY[@]}" --project "$d/runs" --name "x;y"
w="$d/runs/x;y/weights/best.pt"
[ -f "$w" ] || { echo "FAIL: no $w"; fails=$((fails + 1)); }
check 0 "Results saved to" -- "$BIN/val" --weights "$w" --imgsz 64 --workers 0 --noplots --project "$d/val"
check 0 "Results saved to" -- "$BIN/detect" --weights "$w" --source "$d/data/images/val" --imgsz 64 --project "$d/det"
[ "$(find "$d/det" -name '*.png' | wc -l)" -eq 2 ] || { echo "FAIL: detect saved no images"; fails=$((fails + 1)); }
check 0 "Results saved to" -- "$BIN/detect" --weights "$w" --source "$d/data/images/val/im0.png" --imgsz 64 --project "$d/det"
if pwned=$(find "$tmp" -name 'pwned*'); [ -n "$pwned" ]; then
  echo "FAIL: a path was run by a shell: $pwned"
  fails=$((fails + 1))
fi
finish
