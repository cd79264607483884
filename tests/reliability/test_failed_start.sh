#!/usr/bin/env bash
# A start that fails on its inputs writes nothing into its run folder: with --exist-ok into the
# folder of an interrupted run, each failing input kind (weights, data YAML, image folder,
# labels, model YAML) leaves every file of that run byte-identical, and the run still resumes.
set -euo pipefail
source "$(dirname "$0")/lib.sh" "$@"
cd "$tmp"
T="$BIN/train"
"$TOOL" dataset "$tmp/data" 4 2
# The target: an interrupted run. Its last.pt is the final epoch's unstripped checkpoint
# (--save-period's epoch1.pt; the final last.pt is stripped), and its opt.yaml asks for one epoch
# more than it trained.
check 0 "Results saved to" -- "$T" --data "$tmp/data/data.yaml" "${TINY[@]}" --epochs 2 \
  --save-period 1 --name X
run="$tmp/runs/X"
cp "$run/weights/epoch1.pt" "$run/weights/last.pt"
sed -i 's/^epochs: 2$/epochs: 3/' "$run/opt.yaml"
grep -q '^epochs: 3$' "$run/opt.yaml" || { echo "FAIL: no 'epochs: 2' in $run/opt.yaml"; exit 1; }
# .lock is the run lock's (each start that reaches it writes its pid), not a file of the run.
snapshot() { (cd "$run" && find . -type f ! -name .lock | sort | xargs sha256sum); }
before=$(snapshot)

echo "not a checkpoint" >"$tmp/text.pt"
printf 'path: %s/nowhere\ntrain: images/train\nval: images/val\nnames: [a, b, c]\n' "$tmp" \
  >"$tmp/no_images.yaml"
printf 'path: %s/data\ntrain: images/train\nval: [images/val\nnames: [a, b, c]\n' "$tmp" \
  >"$tmp/syntax.yaml"
"$TOOL" dataset "$tmp/nolabels" 2 2
rm -r "$tmp/nolabels/labels"
sed 's/SPPF, \[1024, 5\]/SPPX, [1024, 5]/' "$YOLO_ROOT/configs/models/yolov5n.yaml" >"$tmp/bad_model.yaml"
into_x=(--name X --exist-ok --epochs 3)
check 1 "text.pt" -- "$T" --data "$tmp/data/data.yaml" "${TINY[@]}" "${into_x[@]}" --weights "$tmp/text.pt"
check 1 "syntax.yaml" -- "$T" --data "$tmp/syntax.yaml" "${TINY[@]}" "${into_x[@]}"
check 1 "$tmp/nowhere/images/train" -- "$T" --data "$tmp/no_images.yaml" "${TINY[@]}" "${into_x[@]}"
check 1 "no labels found" -- "$T" --data "$tmp/nolabels/data.yaml" "${TINY[@]}" "${into_x[@]}"
check 1 "unknown module 'SPPX'" -- "$T" --data "$tmp/data/data.yaml" "${TINY[@]}" "${into_x[@]}" \
  --cfg "$tmp/bad_model.yaml"
after=$(snapshot)
# The lock goes with the process that took it: a failed start leaves no .lock behind.
[ ! -e "$run/.lock" ] || { echo "FAIL: a failed start left $run/.lock"; fails=$((fails + 1)); }
if [ "$before" != "$after" ]; then
  echo "FAIL: failed starts changed files of $run:"
  diff <(echo "$before") <(echo "$after") || true
  fails=$((fails + 1))
fi
check 0 "Resuming training from $run/weights/last.pt" -- "$T" --resume "$run/weights/last.pt"
[ ! -e "$run/.lock" ] || { echo "FAIL: a finished run left $run/.lock"; fails=$((fails + 1)); }
rows=$(($(wc -l <"$run/results.csv") - 1))
[ "$rows" -eq 3 ] || { echo "FAIL: the resumed run has $rows results rows, not 3"; fails=$((fails + 1)); }
finish
