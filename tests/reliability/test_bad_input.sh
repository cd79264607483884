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
check 0 "random.jpg" -- "$T" --data "$mixed/data.yaml" "${TINY[@]}" --name mixed
for f in zero.jpg cut.jpg; do grep -qF "$f" <<<"$LAST_OUT" || { echo "FAIL: no warning for $f"; fails=$((fails + 1)); }; done
grep -qF "FFD9" <<<"$LAST_OUT" || { echo "FAIL: truncated JPEG not called truncated"; fails=$((fails + 1)); }
lacks "png_named.jpg"
lacks "empty_label"
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
sed 's/\[-1, 1, SPPF, \[1024, 5\]\]/[-1, 1, SPPF, [1024, 5, 7]]/' \
  "$YOLO_ROOT/configs/models/yolov5n.yaml" >"$m/args.yaml"
line=$(grep -n "SPPF" "$YOLO_ROOT/configs/models/yolov5n.yaml" | grep -v '^[0-9]*:#' | cut -d: -f1 | tail -1)
check 1 "unknown.yaml:$line: unknown module 'SPPX'" -- "$T" --data "$mixed/data.yaml" "${TINY[@]}" --cfg "$m/unknown.yaml"
check 1 "args.yaml:$line: SPPF takes 1 to 2 arguments, got 3" -- "$T" --data "$mixed/data.yaml" "${TINY[@]}" --cfg "$m/args.yaml"

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
check 0 "--classes 99: the model has 3 classes" -- "$BIN/detect" --weights "$weights" --source "$mixed/images/val" --project "$tmp/det" --classes 99 --nosave
# Freezing every layer leaves nothing to train: said before training, naming the flag.
check 2 "--freeze 99 freezes every layer" -- "$T" --data "$mixed/data.yaml" "${TINY[@]}" --freeze 99
# detect on a folder holding an undecodable image: an error naming it (YOLOv5: "Image Not Found").
mkdir -p "$tmp/src"
cp "$mixed/images/val/"*.png "$tmp/src/"
cp "$tr/random.jpg" "$tmp/src/"
check 1 "random.jpg" -- "$BIN/detect" --weights "$weights" --source "$tmp/src" --imgsz 64 --project "$tmp/det"
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
# A negative optimizer setting in a hyp file names the file, line and key.
sed 's/^lr0: .*/lr0: -5/' "$YOLO_ROOT/hyp/hyp.scratch-low.yaml" >"$tmp/lr0.yaml"
lr0_line=$(grep -n '^lr0:' "$tmp/lr0.yaml" | cut -d: -f1)
check 1 "lr0.yaml:$lr0_line: 'lr0' must be >= 0, got -5" -- "$T" --data "$mixed/data.yaml" "${TINY[@]}" --hyp "$tmp/lr0.yaml"
finish
