#!/usr/bin/env bash
# What a run, a checkpoint and an output folder promise, through the real executables:
#  - a checkpoint carries its model YAML, nc and class names: val, detect, export and a fine-tune
#    use them after the data and model YAMLs are edited, moved or deleted;
#  - metadata read from an exported file is checked (stride, names, shape), not divided by;
#  - every path made from a class name stays inside --project;
#  - detect gives each source its own output name, finishes its video on SIGINT and checks that
#    each video it wrote reads back;
#  - val marks a folder it did not finish; an interrupted evolution says how to go on, and that
#    works; the run lock is taken before the run's folder is touched and leaves no file behind;
#  - sizes, folders, rendezvous addresses and environment variables that cannot work are refused
#    in one line naming the flag, file or variable.
set -euo pipefail
source "$(dirname "$0")/lib.sh" "$@"
cd "$tmp"
T="$BIN/train" V="$BIN/val" D="$BIN/detect" E="$BIN/export"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || skip "no python3 (zip and protobuf edits)"
[ -x "$E" ] || skip "$E is not built"

# One tiny model, trained from a model YAML and a data YAML that are then changed or removed.
"$TOOL" dataset "$tmp/d" 4 2
cp "$YOLO_ROOT/configs/models/yolov5n.yaml" "$tmp/model.yaml"
check 0 "Results saved to" -- "$T" --data "$tmp/d/data.yaml" "${TINY[@]}" --cfg "$tmp/model.yaml" \
  --name run
best=$tmp/runs/run/weights/best.pt
check 0 "names [a,b,c] model_yaml" -- "$TOOL" check "$best"
[ ! -e "$tmp/runs/run/.lock" ] || { echo "FAIL: a finished run left its .lock"; fails=$((fails + 1)); }
"$TOOL" image "$tmp/one.png"
ANY=(--conf-thres 0 --max-det 3 --imgsz 64 --device cpu --project "$tmp/out")

# --- names and architecture travel with the weights --------------------------------------------
sed -i 's/names: \[a, b, c\]/names: [cats, dogs, cows]/' "$tmp/d/data.yaml"
grep -q cats "$tmp/d/data.yaml" || { echo "FAIL: could not rename the classes"; exit 1; }
check 0 "Results saved to" -- "$D" --weights "$best" --source "$tmp/one.png" "${ANY[@]}" --nosave
lacks "cats"
lacks "cows"
check 0 "names the classes differently from $best (class 0: 'cats' there, 'a' in the weights)" -- \
  "$D" --weights "$best" --data "$tmp/d/data.yaml" --source "$tmp/one.png" "${ANY[@]}" --nosave
check 0 "export success" -- "$E" --weights "$best" --include onnx --imgsz 64
grep -qa "cats" "$tmp/runs/run/weights/best.onnx" && { echo "FAIL: the ONNX metadata took the edited names"; fails=$((fails + 1)); }
grep -qa "'a'" "$tmp/runs/run/weights/best.onnx" || { echo "FAIL: the ONNX metadata lacks the weights' names"; fails=$((fails + 1)); }
# The exported file names no data: the printed val command names it, and works as printed.
validate=$(grep -F "Validate:" <<<"$LAST_OUT" | sed 's/^Validate: *//')
grep -qF -- "--data $tmp/d/data.yaml" <<<"$validate" || { echo "FAIL: Validate line lacks --data: $validate"; fails=$((fails + 1)); }
mv "$tmp/d/data.yaml" "$tmp/d/moved.yaml"
rm "$tmp/model.yaml"
check 0 "Results saved to" -- "$D" --weights "$best" --source "$tmp/one.png" "${ANY[@]}" --nosave
check 0 "export success" -- "$E" --weights "$best" --include torchscript --imgsz 64
check 2 "training data (pass --data to choose): file '$tmp/d/data.yaml' not found" -- \
  "$V" --weights "$best" --imgsz 64 --project "$tmp/out"
lacks "--data: file"
check 0 "Results saved to" -- "$V" --weights "$best" --data "$tmp/d/moved.yaml" --imgsz 64 \
  --project "$tmp/out" --name val
[ ! -e "$tmp/out/val/INCOMPLETE.txt" ] || { echo "FAIL: a finished val left INCOMPLETE.txt"; fails=$((fails + 1)); }
check 0 "model: the model YAML saved in $best" -- "$T" --data "$tmp/d/moved.yaml" --weights "$best" \
  --imgsz 64 --epochs 1 --batch-size 2 --workers 0 --noplots --noautoanchor --device cpu \
  --project "$tmp/runs" --name finetune
mv "$tmp/d/moved.yaml" "$tmp/d/data.yaml"
# shellcheck disable=SC2086
check 0 "Results saved to" -- $validate  # as printed, the data YAML back where it was

# --- metadata read from exported files ----------------------------------------------------------
ts=$tmp/runs/run/weights/best.torchscript onnx=$tmp/runs/run/weights/best.onnx
# retag FILE OUT OLD NEW: FILE with OLD replaced by NEW in its extra/config.txt (a TorchScript zip)
retag() {
  "$PY" - "$@" <<'PYEOF'
import sys, zipfile
src, out, old, new = sys.argv[1:5]
with zipfile.ZipFile(src) as zi, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zo:
    for item in zi.infolist():
        data = zi.read(item)
        if item.filename.endswith("extra/config.txt"):
            assert old.encode() in data, data
            data = data.replace(old.encode(), new.encode())
        zo.writestr(item.filename, data)
PYEOF
}
# bytes FILE OUT OLD NEW: FILE with the bytes OLD replaced by NEW (same length) throughout
bytes() {
  "$PY" - "$@" <<'PYEOF'
import sys
src, out, old, new = sys.argv[1:5]
data = open(src, "rb").read()
old, new = old.encode().decode("unicode_escape").encode("latin1"), new.encode().decode("unicode_escape").encode("latin1")
assert old in data and len(old) == len(new)
open(out, "wb").write(data.replace(old, new))
PYEOF
}
retag "$ts" "$tmp/stride0.torchscript" '"stride": 32' '"stride": 0'
check 1 "stride0.torchscript: config.txt key 'stride' is 0" -- "$D" --weights "$tmp/stride0.torchscript" \
  --source "$tmp/one.png" "${ANY[@]}" --nosave
retag "$ts" "$tmp/negative.torchscript" '"stride": 32' '"stride": -32'
check 1 "negative.torchscript: config.txt key 'stride' is -32" -- "$V" --weights "$tmp/negative.torchscript" \
  --data "$tmp/d/data.yaml" --imgsz 64 --project "$tmp/out"
retag "$ts" "$tmp/fixed.torchscript" '"dynamic": true' '"dynamic": false'
retag "$tmp/fixed.torchscript" "$tmp/shape.torchscript" '[1, 3, 64, 64]' '[1, 3, 60, 64]'
check 1 "shape.torchscript: config.txt its input size 60x64 is not a multiple of its stride 32" -- \
  "$D" --weights "$tmp/shape.torchscript" --source "$tmp/one.png" "${ANY[@]}" --nosave
bytes "$onnx" "$tmp/stride00.onnx" '\x06stride\x12\x0232' '\x06stride\x12\x0200'
check 1 "stride00.onnx: metadata key 'stride' is 0" -- "$D" --weights "$tmp/stride00.onnx" \
  --source "$tmp/one.png" "${ANY[@]}" --nosave
bytes "$onnx" "$tmp/stridex.onnx" '\x06stride\x12\x0232' '\x06stride\x12\x023x'
check 1 "stridex.onnx: metadata key 'stride' is '3x', not a whole number" -- "$D" \
  --weights "$tmp/stridex.onnx" --source "$tmp/one.png" "${ANY[@]}" --nosave

# --- class names become folders only inside --project ------------------------------------------
"$TOOL" dataset "$tmp/esc" 4 2
sed -i 's|names: \[a, b, c\]|names: [aaaaaaaaaaaaa, "../../../../x", ".."]|' "$tmp/esc/data.yaml"
check 0 "Results saved to" -- "$T" --data "$tmp/esc/data.yaml" "${TINY[@]}" --name esc
esc=$tmp/runs/esc/weights/best.pt
mkdir -p "$tmp/p/q"
check 0 "Results saved to" -- "$D" --weights "$esc" --source "$tmp/one.png" --conf-thres 0 \
  --max-det 30 --imgsz 64 --device cpu --save-crop --project "$tmp/p/q" --name crops --nosave
outside=$(find "$tmp" -name 'one*.jpg' -path '*crops*' ! -path "$tmp/p/q/*" | head -3)
[ -z "$outside" ] || { echo "FAIL: crops written outside --project: $outside"; fails=$((fails + 1)); }
[ -z "$(find "$tmp" -maxdepth 3 -name x ! -path "$tmp/p/q/*")" ] || { echo "FAIL: a folder 'x' outside --project"; fails=$((fails + 1)); }
find "$tmp/p/q/crops/crops" -name 'one*.jpg' | grep -q . || { echo "FAIL: no crops saved"; fails=$((fails + 1)); }
# The same class name from an exported file's metadata (a name of the same length, edited in).
check 0 "export success" -- "$E" --weights "$esc" --include onnx --imgsz 64
bytes "$tmp/runs/esc/weights/best.onnx" "$tmp/esc.onnx" "aaaaaaaaaaaaa" "../../../../y"
check 0 "Results saved to" -- "$D" --weights "$tmp/esc.onnx" --source "$tmp/one.png" --conf-thres 0 \
  --max-det 30 --imgsz 64 --save-crop --project "$tmp/p/q" --name crops2 --nosave
[ -z "$(find "$tmp" -maxdepth 3 -name y ! -path "$tmp/p/q/*")" ] || { echo "FAIL: a folder 'y' outside --project"; fails=$((fails + 1)); }

# --- detect: one output name per source -----------------------------------------------------------
mkdir "$tmp/same"
for ext in jpg png bmp; do "$TOOL" image "$tmp/same/a.$ext"; done
check 0 "3 labels saved" -- "$D" --weights "$best" --source "$tmp/same" "${ANY[@]}" --save-txt --name same
grep -qF "a.png as a_png.png" <<<"$LAST_OUT" || { echo "FAIL: the renaming is not said"; fails=$((fails + 1)); }
for f in a.txt a_jpg.txt a_png.txt; do
  [ -s "$tmp/out/same/labels/$f" ] || { echo "FAIL: no labels/$f"; fails=$((fails + 1)); }
done
# A folder holding a symlink to itself: skipped with a warning, the rest detected.
ln -s loop "$tmp/same/loop"
check 0 "loop (" -- "$D" --weights "$best" --source "$tmp/same" "${ANY[@]}" --nosave
rm "$tmp/same/loop"

mkdir "$tmp/v"
if "$TOOL" video "$tmp/v/a.avi" 6 64 48; then
  "$TOOL" video "$tmp/v/a.mp4" 5 96 64
  check 0 "Results saved to" -- "$D" --weights "$best" --source "$tmp/v" "${ANY[@]}" --name vids
  for f in a.mp4:6 a_mp4.mp4:5; do
    check 0 "video 1/1 (${f#*:}/${f#*:})" -- "$D" --weights "$best" --source "$tmp/out/vids/${f%%:*}" \
      "${ANY[@]}" --nosave
  done
  # A video shorter than --vid-stride: the flag is named, not the file blamed.
  check 1 "fewer than --vid-stride 1000" -- "$D" --weights "$best" --source "$tmp/v/a.avi" \
    "${ANY[@]}" --nosave --vid-stride 1000
  # SIGINT while the video of a file source is written: the video is finished and readable.
  "$TOOL" video "$tmp/long.avi" 3000 64 48
  "$D" --weights "$best" --source "$tmp/long.avi" "${ANY[@]}" --name sigint >"$tmp/sigint.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do grep -q "(20/3000)" "$tmp/sigint.log" 2>/dev/null && break; sleep 0.1; done
  kill -INT $pid
  status=0
  wait $pid || status=$?
  if [ "$status" -ne 1 ] || ! grep -qF "SIGINT: detect stopped after" "$tmp/sigint.log"; then
    echo "FAIL: detect after SIGINT: status $status"; tail -3 "$tmp/sigint.log"; fails=$((fails + 1))
  fi
  check 0 "Results saved to" -- "$D" --weights "$best" --source "$tmp/out/sigint/long.mp4" "${ANY[@]}" --nosave
  # A file size limit while writing the video: the unreadable file is reported, exit 1.
  status=0
  out=$(bash -c 'trap "" XFSZ; ulimit -f 8; exec "$@"' _ "$D" --weights "$best" --source "$tmp/long.avi" \
    "${ANY[@]}" --name limited 2>&1) || status=$?
  if [ "$status" -ne 1 ] || ! grep -qF "was not written completely" <<<"$out"; then
    echo "FAIL: detect under a file size limit: status $status"; tail -3 <<<"$out"; fails=$((fails + 1))
  fi
else
  echo "no video support in this build: the video cases are skipped"
fi

# --- val stopped: the folder says it is partial ------------------------------------------------
"$TOOL" dataset "$tmp/big" 2 300
"$V" --weights "$best" --data "$tmp/big/data.yaml" --imgsz 64 --project "$tmp/out" --name stopped \
  >"$tmp/val.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do [ -f "$tmp/out/stopped/INCOMPLETE.txt" ] && break; sleep 0.05; done
kill -TERM $pid
wait $pid || true
[ -f "$tmp/out/stopped/INCOMPLETE.txt" ] || { echo "FAIL: a stopped val left no INCOMPLETE.txt"; fails=$((fails + 1)); }

# --- the run lock: taken before the folder is touched ------------------------------------------
"$T" --data "$tmp/d/data.yaml" "${TINY[@]}" --epochs 30 --name locked --exist-ok >"$tmp/lock1.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do [ -f "$tmp/runs/locked/.lock" ] && break; sleep 0.05; done
check 1 "is in use: process $pid" -- "$T" --data "$tmp/d/data.yaml" "${TINY[@]}" --name locked --exist-ok
kill -TERM $pid
wait $pid || true
[ ! -e "$tmp/runs/locked/.lock" ] || { echo "FAIL: the stopped run left its .lock"; fails=$((fails + 1)); }

# --- evolution stopped by SIGTERM: the printed way on works ------------------------------------
EVO=(--data "$tmp/d/data.yaml" --cfg yolov5n.yaml --imgsz 64 --epochs 4 --batch-size 2 --workers 0
     --noplots --noautoanchor --device cpu --project "$tmp/evo")
"$T" "${EVO[@]}" --evolve 3 >"$tmp/evo.log" 2>&1 &
pid=$!
for _ in $(seq 1 2400); do grep -q "Evolve generation 2" "$tmp/evo.log" 2>/dev/null && break; sleep 0.1; done
sleep 0.5
grep -q "Evolve generation 2" "$tmp/evo.log" || { echo "FAIL: evolution never reached generation 2"; tail -5 "$tmp/evo.log"; exit 1; }
kill -TERM $pid
status=0
wait $pid || status=$?
hint=$(grep -o "continue it with the same command and .*" "$tmp/evo.log" | sed 's/continue it with the same command and //')
if [ "$status" -ne 1 ] || [ -z "$hint" ]; then
  echo "FAIL: evolution after SIGTERM: status $status"; tail -3 "$tmp/evo.log"; fails=$((fails + 1))
fi
lacks_in() { ! grep -qF -- "$1" "$2" || { echo "FAIL: $2 contains '$1'"; fails=$((fails + 1)); }; }
lacks_in "resume with --resume" "$tmp/evo.log"
if [ -f "$tmp/evo/exp/weights/last.pt" ]; then
  check 2 "continue the evolution instead" -- "$T" --resume "$tmp/evo/exp/weights/last.pt"
fi
done=$(grep -o "holds the [0-9]* finished" "$tmp/evo.log" | grep -o "[0-9]*")
rows=$(($(wc -l <"$tmp/evo/exp/evolve.csv") - 1))
[ "$rows" -eq "${done:--1}" ] || { echo "FAIL: evolve.csv has $rows rows, the message says $done"; fails=$((fails + 1)); }
# One generation more than that, through the printed flags (--evolve N becomes 1 to save time).
# shellcheck disable=SC2086
check 0 "Continuing evolution from $tmp/evo/exp/evolve.csv ($done generations)" -- "$T" "${EVO[@]}" \
  $(sed 's/--evolve [0-9]*/--evolve 1/' <<<"$hint")
rows=$(($(wc -l <"$tmp/evo/exp/evolve.csv") - 1))
[ "$rows" -eq $((done + 1)) ] || { echo "FAIL: evolve.csv has $rows rows after continuing, want $((done + 1))"; fails=$((fails + 1)); }

# --- numbers, folders, environment --------------------------------------------------------------
check 2 "--imgsz: must be between 1 and 8192" -- "$V" --weights "$best" --data "$tmp/d/data.yaml" --imgsz 2147483647
check 2 "--imgsz: must be between 1 and 8192" -- "$D" --weights "$best" --source "$tmp/one.png" --imgsz 60000
check 2 "--imgsz: must be between 1 and 8192" -- "$E" --weights "$best" --imgsz 65536
check 0 "output shape (1000000, 252, 8)" -- "$E" --weights "$best" --include torchscript --imgsz 64 \
  --batch-size 1000000
check 2 "--batch-size 1000000: a fixed-size ONNX file holds the grid and anchors" -- "$E" \
  --weights "$best" --include onnx --imgsz 64 --batch-size 1000000
lacks "libprotobuf"
: >"$tmp/afile"
check 2 "--project: cannot create the folder '$tmp/afile': '$tmp/afile' is a file, not a folder" -- \
  "$T" --data "$tmp/d/data.yaml" "${TINY[@]}" --project "$tmp/afile"
check 2 "is a file, not a folder" -- "$V" --weights "$best" --data "$tmp/d/data.yaml" --imgsz 64 --project "$tmp/afile"
check 2 "is a file, not a folder" -- "$D" --weights "$best" --source "$tmp/one.png" --project "$tmp/afile"
# A --project this user may not write (as root: run as user nobody, as test_disk_full does).
as=()
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null &&
  setpriv --reuid=65534 --regid=65534 --clear-groups "$D" --help >/dev/null 2>&1; then
  as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  chmod 755 "$tmp"
fi
if [ "$(id -u)" -ne 0 ] || ((${#as[@]})); then
  mkdir "$tmp/ro"
  chmod 555 "$tmp/ro"
  check 2 "--project: cannot create the folder '$tmp/ro/sub': '$tmp/ro' cannot be written (Permission denied)" \
    -- "${as[@]}" "$D" --weights "$best" --source "$tmp/one.png" --imgsz 64 --project "$tmp/ro/sub"
  check 2 "'$tmp/ro' cannot be written" -- "${as[@]}" "$V" --weights "$best" --data "$tmp/d/data.yaml" \
    --imgsz 64 --project "$tmp/ro/sub"
else
  echo "unwritable --project: not checked (as root, and user nobody cannot run $D through setpriv)"
fi
check 2 "YOLO_ROOT=/nonexistent has no configs/models/" -- env YOLO_ROOT=/nonexistent "$T" --cfg yolov5n.yaml \
  --data "$tmp/d/data.yaml" --imgsz 64 --epochs 1 --device cpu --project "$tmp/runs"
cp "$best" "$tmp/"$'forged\nWARNING: fake.pt'
check 0 "export success" -- "$E" --weights "$tmp/"$'forged\nWARNING: fake.pt' --include onnx --imgsz 64
grep -q '^WARNING: fake' <<<"$LAST_OUT" && { echo "FAIL: a weights name forged a line in export"; fails=$((fails + 1)); }
port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
check 1 "MASTER_ADDR=nonexistent.invalid does not resolve" -- env RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 \
  MASTER_ADDR=nonexistent.invalid MASTER_PORT="$port" "$T" --data "$tmp/d/data.yaml" "${TINY[@]}" --dist-timeout 3
lacks "Exception raised from"
lacks "frame #"
check 1 "nothing accepted a connection at 127.0.0.1:$port" -- env RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 \
  MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" "$T" --data "$tmp/d/data.yaml" "${TINY[@]}" --dist-timeout 3
lacks "Exception raised from"
lacks "frame #"
lacks "not a rendezvous store"
finish
