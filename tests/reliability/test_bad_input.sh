#!/usr/bin/env bash
# Bad input through the real executables: each case must end with exit status 1 (bad file) or 2
# (bad flag), never a signal or a hang, and the message must name the file, line or flag. Bad
# images and labels inside a dataset are skipped with a warning naming each file (as YOLOv5).
set -euo pipefail
source "$(dirname "$0")/lib.sh" "$@"
cd "$tmp"
T="$BIN/train"

# --- images and labels: one run over a dataset mixing good and bad files --------------------
mixed="$tmp/mixed"
"$TOOL" dataset "$mixed" 4 2
tr=$mixed/images/train
lb=$mixed/labels/train
head -c 3000 /dev/urandom >"$tr/random.jpg"
: >"$tr/zero.jpg"
"$TOOL" image "$tmp/whole.jpg"
head -c -2 "$tmp/whole.jpg" >"$tr/cut.jpg"  # decodes, but lacks the FFD9 end marker
"$TOOL" image "$tmp/png.png"
mv "$tmp/png.png" "$tr/png_named.jpg"  # a valid image whatever its name
for f in random zero cut png_named; do echo "0 0.5 0.5 0.2 0.2" >"$lb/$f.txt"; done
declare -A bad_labels=(
  [cols4]="0 0.5 0.5 0.2"
  [cols6]="0 0.5 0.5 0.2 0.2 0.1"
  [word]="0 0.5 abc 0.2 0.2"
  [nan]="0 nan 0.5 0.2 0.2"
  [inf]="0 0.5 0.5 inf 0.2"
  [negative]="0 0.5 -0.1 0.2 0.2"
  [over_one]="0 0.5 1.5 0.2 0.2"
  [class_id]="3 0.5 0.5 0.2 0.2"
  [escape]=$'0 0.5 \e[2J\e]0;pwned\a 0.2 0.2'
)
for name in "${!bad_labels[@]}"; do
  "$TOOL" image "$tr/$name.png"
  printf '%s\n' "${bad_labels[$name]}" >"$lb/$name.txt"
done
"$TOOL" image "$tr/empty_label.png"
: >"$lb/empty_label.txt"
# A label file starting with a UTF-8 byte-order mark reads as written.
"$TOOL" image "$tr/bom.png"
printf '\xEF\xBB\xBF0 0.5 0.5 0.2 0.2\n' >"$lb/bom.txt"
# A file name holding a newline cannot forge an output line: it is shown as \n.
head -c 3000 /dev/urandom >"$tr/"$'forged\nWARNING: fake.jpg'
# Nor can class names holding one (the per-class table at the end of training).
sed -i 's/names: \[a, b, c\]/names: ["a\\nFORGED CLASS LINE", "b\\nFORGED CLASS LINE", "c\\nFORGED CLASS LINE"]/' "$mixed/data.yaml"
grep -qF 'FORGED' "$mixed/data.yaml" || { echo "FAIL: could not set a class name"; exit 1; }
check 0 "random.jpg" -- "$T" --data "$mixed/data.yaml" "${TINY[@]}" --name mixed
for f in zero.jpg cut.jpg; do grep -qF "$f" <<<"$LAST_OUT" || { echo "FAIL: no warning for $f"; fails=$((fails + 1)); }; done
grep -qF "FFD9" <<<"$LAST_OUT" || { echo "FAIL: truncated JPEG not called truncated"; fails=$((fails + 1)); }
lacks "png_named.jpg"
lacks "empty_label"
lacks "bom.txt"
grep -q '^WARNING: fake.jpg' <<<"$LAST_OUT" && { echo "FAIL: a file name forged a line"; fails=$((fails + 1)); }
grep -qF 'forged\nWARNING: fake.jpg' <<<"$LAST_OUT" || { echo "FAIL: the newline in a file name is not shown as \\n"; fails=$((fails + 1)); }
grep -q '^FORGED CLASS LINE' <<<"$LAST_OUT" && { echo "FAIL: a class name forged a line"; fails=$((fails + 1)); }
grep -qF '\nFORGED CLASS LINE' <<<"$LAST_OUT" || { echo "FAIL: the class name's newline is not shown as \\n"; fails=$((fails + 1)); }
lacks "results.png"  # --noplots: the last lines name only what was written
for name in "${!bad_labels[@]}"; do
  grep -qF "labels/train/$name.txt:1:" <<<"$LAST_OUT" ||
    { echo "FAIL: no warning naming labels/train/$name.txt:1"; fails=$((fails + 1)); }
done
grep -qF "nc=3" <<<"$LAST_OUT" || { echo "FAIL: class id message lacks nc=3"; fails=$((fails + 1)); }
# A label's terminal escape sequences are shown, not sent to the terminal.
lacks $'\e'
grep -qF '\x1b[2J\x1b]0;pwned\x07' <<<"$LAST_OUT" ||
  { echo "FAIL: the escape label's bytes are not shown as \\xNN"; fails=$((fails + 1)); }
weights="$tmp/runs/mixed/weights/best.pt"
[ -f "$weights" ] || { echo "FAIL: the mixed run wrote no best.pt"; exit 1; }

# A damaged label cache is rebuilt, not trusted.
head -c 200 /dev/urandom >"$mixed/labels/val.cache"
check 0 "Scanned labels for $mixed/labels/val.cache" -- "$BIN/val" --weights "$weights" --imgsz 64 --workers 0 --noplots --project "$tmp/val"

# Nothing usable: every image corrupt; labels/ missing altogether.
allbad="$tmp/allbad"
"$TOOL" dataset "$allbad" 2 2
for f in "$allbad"/images/train/*.png; do : >"$f"; done
check 1 "no usable images" -- "$T" --data "$allbad/data.yaml" "${TINY[@]}"
nolabels="$tmp/nolabels"
"$TOOL" dataset "$nolabels" 2 2
rm -r "$nolabels/labels"
check 1 "no labels found" -- "$T" --data "$nolabels/data.yaml" "${TINY[@]}"
lacks "not writable"  # a missing labels/ folder is not a permissions problem

# --- dataset YAML ------------------------------------------------------------------------
y="$tmp/yaml"
mkdir -p "$y"
good_root=$mixed
printf 'path: %s\nval: images/val\nnames: [a, b, c]\n' "$good_root" >"$y/no_train.yaml"
printf 'path: %s\ntrain: images/train\nnames: [a, b, c]\n' "$good_root" >"$y/no_val.yaml"
printf 'path: %s\ntrain: images/train\nval: images/val\n' "$good_root" >"$y/no_names.yaml"
printf 'path: %s\ntrain: images/train\nval: images/val\nnc: 4\nnames: [a, b, c]\n' "$good_root" >"$y/nc.yaml"
printf 'path: %s/nowhere\ntrain: images/train\nval: images/val\nnames: [a, b, c]\n' "$tmp" >"$y/missing.yaml"
printf 'path: %s\ntrain: images/train\nval: [images/val\nnames: [a, b, c]\n' "$good_root" >"$y/syntax.yaml"
check 1 "'train'" -- "$T" --data "$y/no_train.yaml" "${TINY[@]}"
check 1 "'val'" -- "$T" --data "$y/no_val.yaml" "${TINY[@]}"
check 1 "'names'" -- "$T" --data "$y/no_names.yaml" "${TINY[@]}"
printf 'path: %s\ntrain: images/train\nval: images/val\nnames: abc\n' "$good_root" >"$y/names_scalar.yaml"
check 1 "names_scalar.yaml:4: 'names' must be a list of class names or a {id: name} map, got 'abc'" -- "$T" --data "$y/names_scalar.yaml" "${TINY[@]}"
check 1 "nc.yaml:4" -- "$T" --data "$y/nc.yaml" "${TINY[@]}"
check 1 "$tmp/nowhere/images/train" -- "$T" --data "$y/missing.yaml" "${TINY[@]}"
check 1 "syntax.yaml:4:6: YAML syntax error" -- "$T" --data "$y/syntax.yaml" "${TINY[@]}"
check 1 "syntax.yaml" -- "$BIN/val" --weights "$weights" --data "$y/syntax.yaml" --imgsz 64

# --- model YAML ---------------------------------------------------------------------------
m="$tmp/models"
mkdir -p "$m"
sed 's/\[-1, 1, SPPF, \[1024, 5\]\]/[-1, 1, SPPX, [1024, 5]]/' \
  "$YOLO_ROOT/configs/models/yolov5n.yaml" >"$m/unknown.yaml"
sed 's/\[-1, 1, SPPF, \[1024, 5\]\]/[-1, 1, SPPF, [1024, 5, 3, True, 7]]/' \
  "$YOLO_ROOT/configs/models/yolov5n.yaml" >"$m/args.yaml"
line=$(grep -n "SPPF" "$YOLO_ROOT/configs/models/yolov5n.yaml" | grep -v '^[0-9]*:#' | cut -d: -f1 | tail -1)
check 1 "unknown.yaml:$line: unknown module 'SPPX'" -- "$T" --data "$mixed/data.yaml" "${TINY[@]}" --cfg "$m/unknown.yaml"
check 1 "args.yaml:$line: SPPF takes 1 to 4 arguments, got 5" -- "$T" --data "$mixed/data.yaml" "${TINY[@]}" --cfg "$m/args.yaml"

# --- weights and checkpoints ----------------------------------------------------------------
check 1 "another architecture" -- "$T" --data "$mixed/data.yaml" "${TINY[@]}" --cfg yolov5s.yaml --weights "$weights"
check 1 "pass the matching --cfg" -- "$BIN/val" --weights "$weights" --cfg yolov5s.yaml --imgsz 64 --workers 0 --noplots
echo "not a checkpoint" >"$tmp/text.pt"
head -c $(($(stat -c %s "$weights") - 100)) "$weights" >"$tmp/truncated.pt"
"$TOOL" pickle "$tmp/newer.pt" newer
"$TOOL" pickle "$tmp/code.pt" os-system "touch $tmp/pwned"
for app in val detect; do
  src=()
  [ "$app" = detect ] && src=(--source "$mixed/images/val" --project "$tmp/det")
  check 1 "text.pt: not a weights file: not a zip-format" -- "$BIN/$app" --weights "$tmp/text.pt" --cfg yolov5n.yaml --data "$mixed/data.yaml" "${src[@]}"
  check 1 "truncated.pt" -- "$BIN/$app" --weights "$tmp/truncated.pt" --cfg yolov5n.yaml --data "$mixed/data.yaml" "${src[@]}"
  check 1 "newer" -- "$BIN/$app" --weights "$tmp/newer.pt" --cfg yolov5n.yaml --data "$mixed/data.yaml" "${src[@]}"
  check 1 "os.system" -- "$BIN/$app" --weights "$tmp/code.pt" --cfg yolov5n.yaml --data "$mixed/data.yaml" "${src[@]}"
done
[ ! -e "$tmp/pwned" ] || { echo "FAIL: a checkpoint ran code"; fails=$((fails + 1)); }
# A real checkpoint cut at many lengths: each a clear refusal (an ASan build once caught
# LibTorch's in-memory zip reader reading past the buffer on the 5000-byte cut).
size=$(stat -c %s "$weights")
for n in 4 100 1000 4096 5000 20000 100000 $((size / 2)) $((size - 22)) $((size - 1)); do
  head -c "$n" "$weights" >"$tmp/cut.pt"
  check 1 "cut.pt: cannot read the checkpoint" -- "$TOOL" check "$tmp/cut.pt"
done

# --resume of a truncated last.pt in an otherwise intact run dir.
cp -r "$tmp/runs/mixed" "$tmp/runs/cut"
head -c 5000 "$weights" >"$tmp/runs/cut/weights/last.pt"
check 1 "$tmp/runs/cut/weights/last.pt" -- "$T" --resume "$tmp/runs/cut/weights/last.pt"

# --- flags ----------------------------------------------------------------------------------
for app in val detect; do
  src=()
  [ "$app" = detect ] && src=(--source "$mixed/images/val" --project "$tmp/det")
  check 2 "--imgsz" -- "$BIN/$app" --weights "$weights" --imgsz 0 "${src[@]}"
  check 2 "--device" -- "$BIN/$app" --weights "$weights" --device 7 "${src[@]}"
done
check 2 "--source" -- "$BIN/detect" --weights "$weights" --source "$tmp/no_such_dir" --imgsz 64
# A folder or a FIFO where a file belongs is called that, not "not found".
mkfifo "$tmp/fifo.yaml"
check 2 "--weights: '$mixed/images' is a folder" -- "$BIN/val" --weights "$mixed/images" --data "$mixed/data.yaml"
check 2 "--hyp: '$tmp/fifo.yaml' is not a regular file" -- "$T" --data "$mixed/data.yaml" "${TINY[@]}" --hyp "$tmp/fifo.yaml"
check 2 "--data: must not be empty" -- "$T" --data '' "${TINY[@]}"
# --name stays inside --project.
check 2 "--name: must be one folder name inside --project" -- "$BIN/detect" --weights "$weights" --source "$mixed/images/val" --project "$tmp/det" --name ../../escaped
check 2 "--name: must be one folder name inside --project" -- "$BIN/val" --weights "$weights" --project "$tmp/val" --name ..
[ ! -e "$tmp/escaped" ] || { echo "FAIL: detect --name ../../escaped wrote outside --project"; fails=$((fails + 1)); }
# A class the model does not have: a warning, not silence.
check 2 "--classes 99: the model has 3 classes" -- "$BIN/detect" --weights "$weights" --source "$mixed/images/val" --project "$tmp/det" --classes 99 --nosave
# Freezing every layer leaves nothing to train: said before training, naming the flag.
check 2 "--freeze 99 freezes every layer" -- "$T" --data "$mixed/data.yaml" "${TINY[@]}" --freeze 99
# detect on a folder holding an undecodable image: an error naming it (YOLOv5: "Image Not Found").
mkdir -p "$tmp/src"
cp "$mixed/images/val/"*.png "$tmp/src/"
cp "$tr/random.jpg" "$tmp/src/"
echo notes >"$tmp/src/notes.txt"
echo photo >"$tmp/src/photo.heic"
check 1 "random.jpg" -- "$BIN/detect" --weights "$weights" --source "$tmp/src" --imgsz 64 --project "$tmp/det"
# Files that are neither images nor videos are counted and named in one line.
grep -qF "2 file(s) at '$tmp/src' skipped, neither image nor video by their names: notes.txt, photo.heic" <<<"$LAST_OUT" ||
  { echo "FAIL: the skipped files are not named"; fails=$((fails + 1)); }
# A file that is no image, whatever its name, is called that (not a stale label cache).
mkdir -p "$tmp/clip"
head -c 3000 /dev/urandom >"$tmp/clip/clip.mp4"
check 1 "clip.mp4" -- "$BIN/detect" --weights "$weights" --source "$tmp/clip/clip.mp4" --imgsz 64 --project "$tmp/det"
lacks "label cache"
check 2 "--imgsz: 99999999999 is out of range" -- "$T" --data "$mixed/data.yaml" "${TINY[@]}" --imgsz 99999999999
# DDP without the other rank: one line saying whom it waits for, then at the timeout the missing
# rank and the fix, no library stack trace.
port=$((20000 + RANDOM % 20000))
check 1 "rank 1 of WORLD_SIZE=2 did not join" -- env LOCAL_RANK=0 RANK=0 WORLD_SIZE=2 \
  MASTER_PORT=$port "$T" --data "$mixed/data.yaml" "${TINY[@]}" --dist-timeout 3
grep -qF "waiting at 127.0.0.1:$port for rank 1" <<<"$LAST_OUT" ||
  { echo "FAIL: no line saying whom rank 0 waits for"; fails=$((fails + 1)); }
lacks "frame #"
# A rank whose MASTER_PORT is held by a program that accepts and never answers: at --dist-timeout
# one message naming the address, no stack frames (the store's own handshake has no deadline).
if command -v python3 >/dev/null; then
  silent_port=$((20000 + RANDOM % 20000))
  python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
print("listening", flush=True)
conns = []
while True: conns.append(s.accept())' "$silent_port" >"$tmp/silent.log" 2>&1 &
  silent_pid=$!
  cleanup_hooks+=("kill $silent_pid 2>/dev/null")
  for _ in $(seq 50); do grep -q listening "$tmp/silent.log" && break; sleep 0.1; done
  started=$(date +%s)
  check 1 "cannot reach the rendezvous store at 127.0.0.1:$silent_port (no answer within --dist-timeout (3 s)" -- \
    env LOCAL_RANK=1 RANK=1 WORLD_SIZE=2 MASTER_PORT=$silent_port "$T" --data "$mixed/data.yaml" "${TINY[@]}" --dist-timeout 3
  lacks "frame #"
  took=$(($(date +%s) - started))
  [ "$took" -le 30 ] || { echo "FAIL: the silent store took $took s to give up (--dist-timeout 3)"; fails=$((fails + 1)); }
else
  echo "silent rendezvous port: not checked (no python3 to hold the port)"
fi
# A partial torchrun environment is refused before anything starts, naming what is missing.
check 2 "a partial distributed environment: WORLD_SIZE is set but RANK and LOCAL_RANK are not" -- \
  env WORLD_SIZE=2 "$T" --data "$mixed/data.yaml" "${TINY[@]}"
check 2 "RANK is set but WORLD_SIZE and LOCAL_RANK are not" -- env RANK=1 "$T" --data "$mixed/data.yaml" "${TINY[@]}"
# A run folder is locked while a process trains in it: an --exist-ok start into it and a resume
# of it (given as the run folder) are refused naming the holder's pid.
"$T" --data "$mixed/data.yaml" "${TINY[@]}" --epochs 500 --name locked >"$tmp/locked.log" 2>&1 &
holder=$!
cleanup_hooks+=("kill -9 $holder 2>/dev/null")
run="$tmp/runs/locked"
for _ in $(seq 600); do [ -f "$run/weights/last.pt" ] && break; sleep 0.1; done
check 1 "the run folder $run is in use: process $holder is training in it" -- \
  "$T" --data "$mixed/data.yaml" "${TINY[@]}" --name locked --exist-ok
check 1 "the run folder $run is in use: process $holder" -- "$T" --resume "$run"
kill -9 "$holder"
wait "$holder" 2>/dev/null || true
# The resumed run's opt.yaml is checked as the flags are, and its errors name the file, line and
# key (exit 1: a bad file, not a bad flag).
cp "$run/opt.yaml" "$tmp/opt.good"
echo "bogus_key: 1" >>"$run/opt.yaml"
check 1 "$run/opt.yaml:$(wc -l <"$run/opt.yaml"): unknown key 'bogus_key'" -- "$T" --resume "$run"
sed 's/^epochs: .*/epochs: -1/' "$tmp/opt.good" >"$run/opt.yaml"
check 1 "key 'epochs': must be >= 1" -- "$T" --resume "$run"
sed 's|^data: .*|data: moved/data.yaml|' "$tmp/opt.good" >"$run/opt.yaml"
check 1 "$run/opt.yaml: key 'data': file 'moved/data.yaml' not found" -- "$T" --resume "$run"
grep -q "^data: /" "$tmp/opt.good" || { echo "FAIL: opt.yaml records data relative: $(grep ^data: "$tmp/opt.good")"; fails=$((fails + 1)); }
check 2 "--resume: '$tmp/runs' is a folder with no weights/last.pt" -- "$T" --resume "$tmp/runs"
# A model YAML scaled past any memory names the file, line and key.
sed 's/^width_multiple: .*/width_multiple: 1000/' "$YOLO_ROOT/configs/models/yolov5n.yaml" >"$tmp/wide.yaml"
check 1 "wide.yaml:$(grep -n '^width_multiple' "$tmp/wide.yaml" | cut -d: -f1): width_multiple 1000 is out of range" -- \
  "$T" --data "$mixed/data.yaml" "${TINY[@]}" --cfg "$tmp/wide.yaml"
# A zip member that would inflate past what its file can hold (a zip bomb) is refused unread.
if command -v python3 >/dev/null; then
  python3 -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    with z.open("archive/data.pkl", "w") as f:
        for _ in range(256): f.write(bytes(1 << 20))' "$tmp/bomb.pt"
  check 1 "bomb.pt: refused: its zip member 'archive/data.pkl' would inflate to 268435456 bytes" -- \
    "$BIN/val" --weights "$tmp/bomb.pt" --data "$mixed/data.yaml" --imgsz 64
else
  echo "zip bomb: not checked (no python3 to write one)"
fi
# A negative optimizer setting in a hyp file names the file, line and key.
sed 's/^lr0: .*/lr0: -5/' "$YOLO_ROOT/hyp/hyp.scratch-low.yaml" >"$tmp/lr0.yaml"
lr0_line=$(grep -n '^lr0:' "$tmp/lr0.yaml" | cut -d: -f1)
check 1 "lr0.yaml:$lr0_line: 'lr0' must be >= 0, got -5" -- "$T" --data "$mixed/data.yaml" "${TINY[@]}" --hyp "$tmp/lr0.yaml"
finish
