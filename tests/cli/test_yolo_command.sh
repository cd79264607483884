#!/usr/bin/env bash
# The yolo program as an Ultralytics user types it, on tiny data: train into runs/detect/train
# (then train2) with args.yaml, val, predict and export from it; weights by name fetched from a
# loopback server (tests/lib/asset_server.py) into the cache and read from it the second time; an
# unreachable mirror fails in one line naming the URL and the path; refusals exit 2. Every
# download but the loopback one is pointed at a closed port, so nothing here needs a network.
# Usage: test_yolo_command.sh BIN_DIR SOURCE_DIR
set -euo pipefail
BIN=${1:?usage: test_yolo_command.sh BIN_DIR SOURCE_DIR}
SRC=${2:?usage: test_yolo_command.sh BIN_DIR SOURCE_DIR}
source "$SRC/tests/lib/common.sh"
start_train_test yolo_command
export OMP_NUM_THREADS=1
export YOLO_WEIGHTS_URL=http://127.0.0.1:9 YOLO_WEIGHTS_DIR=$tmp/cache YOLO_DOWNLOAD_ATTEMPTS=1
export http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9

train_args=(model=yolov5n.yaml data="$tmp/data.yaml" epochs=1 imgsz=64 batch=16 workers=0
  device=cpu plots=False lr0=0.005)
"$BIN/yolo" train "${train_args[@]}" >"$tmp/log" 2>&1 || fail "yolo train"
run=$tmp/runs/detect/train
[[ -f $run/weights/best.pt ]] || fail "yolo train wrote no runs/detect/train/weights/best.pt"
grep -q "^mode: train$" "$run/args.yaml" && grep -q "^epochs: 1$" "$run/args.yaml" &&
  grep -q "^model: yolov5n.yaml$" "$run/args.yaml" || fail "args.yaml: $(cat "$run/args.yaml")"
grep -q "^optimizer: auto$" "$run/opt.yaml" || fail "not Ultralytics' optimizer=auto"
grep -q "^Next: .*/yolo val model=runs/detect/train/weights/best.pt imgsz=64$" "$tmp/log" ||
  fail "the closing lines do not give the yolo commands: $(grep -A2 '^Next:' "$tmp/log")"
grep -q "^lr0: 0.005$" "$run/hyp.yaml" || fail "lr0=0.005 is not the run's: $(grep lr0 "$run/hyp.yaml")"
"$BIN/yolo" detect train "${train_args[@]}" epochs=1 >"$tmp/log2" 2>&1 &&
  fail "a key given twice was accepted"
"$BIN/yolo" detect train "${train_args[@]/epochs=1/epochs=2}" >"$tmp/log" 2>&1 ||
  fail "second yolo train"
[[ -f $tmp/runs/detect/train2/weights/last.pt ]] || fail "the second run is not runs/detect/train2"
echo "yolo train: runs/detect/train and train2, args.yaml"

best=$run/weights/best.pt
"$BIN/yolo" val model="$best" imgsz=64 device=cpu >"$tmp/log" 2>&1 || fail "yolo val"
grep -q " all " "$tmp/log" || fail "yolo val printed no metrics"
[[ -d $tmp/runs/detect/val ]] || fail "yolo val did not write runs/detect/val"
"$BIN/yolo" predict model="$best" source="$tmp/shapes/images/val" imgsz=64 device=cpu \
  save_txt conf=0.001 >"$tmp/log" 2>&1 || fail "yolo predict"
ls "$tmp/runs/detect/predict/labels/"*.txt >/dev/null 2>&1 || fail "yolo predict saved no labels"
"$BIN/yolo" export model="$best" format=onnx imgsz=64 >"$tmp/log" 2>&1 || fail "yolo export"
[[ -f $run/weights/best.onnx ]] || fail "yolo export wrote no best.onnx"
echo "yolo val, predict, export: read the run"

expect_usage() {  # expect_usage MESSAGE ARGS...: yolo ARGS exits 2 printing MESSAGE
  local want=$1 rc
  shift
  set +e
  "$BIN/yolo" "$@" >"$tmp/log" 2>&1
  rc=$?
  set -e
  [[ $rc == 2 ]] || fail "yolo $* exited $rc: $(cat "$tmp/log")"
  grep -qF "$want" "$tmp/log" || fail "yolo $*: no '$want' in $(cat "$tmp/log")"
}
expect_usage "did you mean 'epochs'?" train epoch=3
expect_usage "detects objects only" segment train model=yolo11n-seg.pt
expect_usage "amp: an Ultralytics setting" train amp=False
expect_usage "source: applies to yolo predict, not train" train source=x
"$BIN/yolo" help >"$tmp/log" || fail "yolo help exited $?"
grep -q "close_mosaic *--close-mosaic" "$tmp/log" || fail "yolo help lists no keys"
echo "refusals: exit 2 naming the key"

# Weights by name from a mirror: downloaded once into the cache, then read from it.
mkdir -p "$tmp/www"
cp "$best" "$tmp/www/yolov5n.pt"
python3 "$SRC/tests/lib/asset_server.py" "$tmp/www" --port-file "$tmp/port" --log "$tmp/requests" &
server=$!
for _ in $(seq 100); do [[ -s $tmp/port ]] && break; sleep 0.1; done
[[ -s $tmp/port ]] || fail "the loopback server did not start"
mirror=http://127.0.0.1:$(cat "$tmp/port")/files
if ! YOLO_WEIGHTS_URL=$mirror "$BIN/yolo" predict model=yolov5n.pt \
  source="$tmp/shapes/images/val" imgsz=64 device=cpu >"$tmp/log" 2>&1; then
  grep -q "this build has no libcurl" "$tmp/log" || fail "yolo predict model=yolov5n.pt from the mirror"
  echo "SKIP weights by name: this build has no libcurl"
  echo "PASS yolo_command"
  exit 0
fi
grep -q "Downloading $mirror/yolov5n.pt" "$tmp/log" || fail "no download of yolov5n.pt"
cmp -s "$tmp/cache/yolov5n.pt" "$best" || fail "the cached yolov5n.pt differs from the served file"
YOLO_WEIGHTS_URL=$mirror "$BIN/detect" --weights yolov5n.pt --source "$tmp/shapes/images/val" \
  --imgsz 64 --device cpu --project "$tmp/det" >"$tmp/log" 2>&1 || fail "detect --weights yolov5n.pt"
grep -q "weights: yolov5n.pt from $tmp/cache/yolov5n.pt" "$tmp/log" || fail "the cache was not used"
[[ $(wc -l <"$tmp/requests") == 1 ]] || fail "the cached weights were fetched again: $(cat "$tmp/requests")"
kill "$server" && wait "$server" 2>/dev/null || true
echo "weights by name: fetched once from the mirror, then from the cache"

# An unreachable mirror: exit 1, one line naming the URL and where to put the file.
set +e
"$BIN/yolo" val model=yolov8n.pt data="$tmp/data.yaml" imgsz=64 >"$tmp/log" 2>&1
rc=$?
set -e
[[ $rc == 1 ]] || fail "an unreachable mirror exited $rc: $(cat "$tmp/log")"
grep -q "http://127.0.0.1:9/yolov8n.pt.*put it at $tmp/cache/yolov8n.pt" "$tmp/log" ||
  fail "the failure does not name the URL and the path: $(cat "$tmp/log")"
[[ ! -e $tmp/cache/yolov8n.pt ]] || fail "a failed download left yolov8n.pt in the cache"

echo "PASS yolo_command"
