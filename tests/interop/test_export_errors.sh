#!/usr/bin/env bash
# Usage: test_export_errors.sh BIN_DIR FIXTURE_DIR WORK_DIR
# export on bad input: exit status 2 for a bad flag, 1 for a file that is no model or a place it
# cannot write, each message naming the flag or file, and no file (whole or partial) left behind.
set -u
BIN=${1:?usage: test_export_errors.sh BIN_DIR FIXTURE_DIR WORK_DIR}
FIXTURE=${2:?}
WORK=${3:?}
rm -rf "$WORK"
mkdir -p "$WORK/w"
cp "$FIXTURE/runs/exp/weights/best.pt" "$WORK/w/best.pt"
fails=0
check() {  # check EXPECTED_STATUS EXPECTED_TEXT -- export flags...
  local want=$1 text=$2
  shift 3
  local out status
  out=$("$BIN/export" "$@" 2>&1)
  status=$?
  if [ "$status" -ne "$want" ] || ! grep -qF -- "$text" <<<"$out"; then
    echo "FAIL: export $* -> status $status (want $want), output lacks '$text':"
    echo "$out" | tail -5
    fails=$((fails + 1))
  else
    echo "ok: export $* -> $status: $(grep -F -- "$text" <<<"$out" | head -1)"
  fi
}
# Nothing but the inputs may remain in the folder.
only() {  # only DIR FILE...: DIR holds exactly these files (hidden ones included)
  local dir=$1
  shift
  local have want
  have=$(cd "$dir" && ls -A | sort | tr '\n' ' ')
  want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
  if [[ "$have" != "$want" ]]; then
    echo "FAIL: $dir holds '$have', expected '$want'"
    fails=$((fails + 1))
  fi
}
W=$WORK/w/best.pt
check 2 "--weights" -- --include onnx
check 2 "--weights" -- --weights "$WORK/none.pt"
check 2 "--include foo" -- --weights "$W" --include foo
check 2 "--include openvino" -- --weights "$W" --include openvino
check 2 "--opset 9" -- --weights "$W" --include onnx --opset 9
check 2 "--opset 18" -- --weights "$W" --include onnx --opset 18
check 2 "--half" -- --weights "$W" --half --device cpu
check 2 "--imgsz" -- --weights "$W" --imgsz 320 320 320
check 2 "--batch-size" -- --weights "$W" --batch-size 0
only "$WORK/w" best.pt

# A file that is no model.
mkdir -p "$WORK/bad"
echo "not a checkpoint" >"$WORK/bad/best.pt"
check 1 "$WORK/bad/best.pt" -- --weights "$WORK/bad/best.pt" --include torchscript onnx
only "$WORK/bad" best.pt

# The target is in the way (a folder of that name): the first file is written, the second fails
# naming its path and leaves no temporary behind.
mkdir -p "$WORK/w/best.onnx"
check 1 "$WORK/w/best.onnx" -- --weights "$W" --include torchscript onnx --imgsz 64
only "$WORK/w" best.pt best.torchscript best.onnx
# Test-time augmentation runs .pt weights only: detect and val refuse it for an exported file.
for prog in detect val; do
  source_flag=()
  [[ "$prog" == detect ]] && source_flag=(--source "$FIXTURE/shapes/images/val")
  out=$("$BIN/$prog" --weights "$WORK/w/best.torchscript" --augment --imgsz 64 \
    "${source_flag[@]}" --project "$WORK/tta" 2>&1)
  status=$?
  if [[ $status -ne 2 ]] || ! grep -qF -- "--augment: test-time augmentation runs .pt weights" <<<"$out"; then
    echo "FAIL: $prog --augment on a .torchscript -> status $status: $(tail -2 <<<"$out")"
    fails=$((fails + 1))
  else
    echo "ok: $prog --augment on a .torchscript -> 2: $(grep -F -- --augment <<<"$out" | head -1)"
  fi
done
rmdir "$WORK/w/best.onnx"
rm -f "$WORK/w/best.torchscript"
# A folder it may not write (only where permissions bind: not as root).
if [[ $(id -u) -ne 0 ]]; then
  mkdir -p "$WORK/ro" && cp "$W" "$WORK/ro/best.pt" && chmod 555 "$WORK/ro"
  check 1 "$WORK/ro/best.torchscript" -- --weights "$WORK/ro/best.pt" --imgsz 64
  only "$WORK/ro" best.pt
  chmod 755 "$WORK/ro"
else
  echo "skipped the read-only folder case: root writes anywhere"
fi
echo "export bad input: $fails failed"
[ "$fails" -eq 0 ]
