#!/usr/bin/env bash
# Runs the executables as a user would and checks exit statuses (0 ok, 2 usage, 1 failure) and
# that each message names the flag at fault.
set -u
BIN=${1:?usage: test_exit_codes.sh BIN_DIR}
fails=0
check() {  # check EXPECTED_STATUS EXPECTED_TEXT -- command...
  local want=$1 text=$2
  shift 3
  local out status
  out=$("$@" 2>&1)
  status=$?
  if [ "$status" -ne "$want" ] || ! grep -qF -- "$text" <<<"$out"; then
    echo "FAIL: $* -> status $status (want $want), output lacks '$text':"
    echo "$out" | tail -5
    fails=$((fails + 1))
  else
    echo "ok: $* -> $status"
  fi
}
T="$BIN/train"
check 0 "--weights" -- "$T" --help
check 2 "--epochs" -- "$T" --epochs -3
check 2 "--batch-size" -- "$T" --batch-size 0
check 2 "--imgsz" -- "$T" --imgsz 0
check 2 "--optimizer" -- "$T" --optimizer Lion
check 2 "bogus" -- "$T" --bogus
check 2 "--cfg" -- "$T" --cfg no_such_model.yaml --device cpu
check 2 "--data" -- "$T" --cfg yolov5n.yaml --data no_such_data.yaml --device cpu
check 2 "--weights" -- "$T" --cfg yolov5n.yaml --weights no_such.pt --device cpu
check 2 "--device" -- "$T" --cfg yolov5n.yaml --device 7
check 2 "--device" -- "$T" --cfg yolov5n.yaml --device gpu
check 2 "--quad: needs --augment-device cpu" -- "$T" --cfg yolov5n.yaml --device cpu --quad --augment-device cuda
check 2 "--name: must be one folder name" -- "$T" --name ..
check 2 "--augment-device" -- "$T" --augment-device tpu
check 2 "--augment-device cuda" -- "$T" --cfg yolov5n.yaml --device cpu --augment-device cuda
check 0 "--conf-thres" -- "$BIN/val" --help
check 2 "bogus" -- "$BIN/val" --bogus
check 0 "--source" -- "$BIN/detect" --help
check 2 "bogus" -- "$BIN/detect" --bogus
echo "cli exit codes: $fails failed"
[ "$fails" -eq 0 ]
